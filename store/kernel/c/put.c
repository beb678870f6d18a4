/* encode_put: store.commitlog.put_path.encode_for_put for the common case, in one call. */

#include "kernel.h"

static PyObject *s_topic, *s_body, *s_queue_id, *s_tags, *s_keys, *s_properties, *s_flag,
    *s_sys_flag, *s_born_timestamp, *s_born_host, *s_prepared, *s_TAGS, *s_KEYS, *s_UNIQ_KEY,
    *s_DELAY, *s_default_host;

#define MAX_FAST_PROPERTIES 64

/* The attribute and property names, interned once. */
int rmq_put_init(void)
{
    struct { PyObject **slot; const char *text; } strings[] = {
        {&s_topic, "topic"}, {&s_body, "body"}, {&s_queue_id, "queue_id"}, {&s_tags, "tags"},
        {&s_keys, "keys"}, {&s_properties, "properties"}, {&s_flag, "flag"},
        {&s_sys_flag, "sys_flag"}, {&s_born_timestamp, "born_timestamp"},
        {&s_born_host, "born_host"}, {&s_prepared, "prepared_transaction_offset"}, {&s_TAGS, "TAGS"}, {&s_KEYS, "KEYS"},
        {&s_UNIQ_KEY, "UNIQ_KEY"}, {&s_DELAY, "DELAY"}, {&s_default_host, "127.0.0.1:0"},
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        *strings[i].slot = PyUnicode_InternFromString(strings[i].text);
        if (*strings[i].slot == NULL)
            return -1;
    }
    return 0;
}

/* The message class whose fields are read at their slots (store.api.Message), and where. A class
 * qualifies when its own __slots__ are exactly the 11 fields, in order, each a plain member, and
 * getattr on its instances is the generic one: a slot read then gives what getattr gives (the
 * member descriptor is the first thing the lookup finds, in the class's own dict). Any other
 * class, a subclass included, is read by getattr. */
static const char *const message_fields[11] = {
    "topic", "body", "queue_id", "tags", "keys", "properties", "flag", "sys_flag",
    "born_timestamp", "born_host", "prepared_transaction_offset",
};
static PyTypeObject *message_cls;
static unsigned int message_version;     /* its type version tag when learnt: a change relearns */
static Py_ssize_t message_offset[11];

/* 1 when messages of `type` are read at their slots (learnt now, replacing an earlier class, or
 * before and the class unchanged since), 0 otherwise. No exception either way. */
static int slot_readable(PyTypeObject *type)
{
    if (type == message_cls && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) &&
        type->tp_version_tag == message_version)
        return 1;
    Py_ssize_t offsets[11];
    if (type->tp_getattro != PyObject_GenericGetAttr ||
        rmq_slot_offsets((PyObject *)type, message_fields, 11, offsets) < 0)
        return 0;
    /* A lookup on the class gives it a version tag (CPython renews it on any change to the class
     * or its bases); without one, every call checks the class again. */
    PyObject *member = PyObject_GetAttr((PyObject *)type, s_topic);
    if (member == NULL)
        PyErr_Clear();
    Py_XDECREF(member);
    memcpy(message_offset, offsets, sizeof offsets);
    Py_INCREF(type);
    Py_XSETREF(message_cls, type);
    message_version = (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? type->tp_version_tag : 0;
    return 1;
}

/* A str with neither separator (\x01 when `name`, always \x02); -1 on error. */
static int clean_text(PyObject *text, int name)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND) {
        /* One pass over the bytes, eight at a time: a word with no byte below 3 (the common case)
         * needs no closer look ((x - 0x03..) & ~x & 0x80.. is nonzero iff some byte is < 3). */
        const unsigned char *p = PyUnicode_1BYTE_DATA(text);
        const uint64_t threes = 0x0303030303030303ULL, highs = 0x8080808080808080ULL;
        Py_ssize_t i = 0;
        for (; i + 8 <= len; i += 8) {
            uint64_t x;
            memcpy(&x, p + i, 8);
            if (((x - threes) & ~x & highs) == 0)
                continue;
            for (int k = 0; k < 8; k++)
                if (p[i + k] == 0x02 || (name && p[i + k] == 0x01))
                    return 0;
        }
        for (; i < len; i++)
            if (p[i] == 0x02 || (name && p[i] == 0x01))
                return 0;
        return 1;
    }
    if (PyUnicode_FindChar(text, 0x02, 0, len, 1) != -1)
        return 0;
    if (name && PyUnicode_FindChar(text, 0x01, 0, len, 1) != -1)
        return 0;
    return 1;
}

/* Two exact strs equal (PEP 393: equal text has the same kind); no error possible. */
static int same_text(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == (int)PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * kind) == 0;
}

/* java.util.HashMap's table size after putting keys with these spread hashes (see
 * store.codec.properties._final_capacity). */
static uint32_t final_capacity(const uint32_t *spread, int count, uint32_t capacity)
{
    int counts[MAX_FAST_PROPERTIES * 4];        /* 64 names never grow a table past 128 */
    for (uint32_t b = 0; b < capacity; b++)
        counts[b] = 0;
    for (int size = 1; size <= count; size++) {
        int grew = 0;
        uint32_t bucket = spread[size - 1] & (capacity - 1);
        int chain = counts[bucket]++;
        if (chain >= 8 && capacity < 64) {
            capacity *= 2;
            grew = 1;
        }
        if ((uint32_t)size > capacity * 3 / 4) {
            capacity *= 2;
            grew = 1;
        }
        if (grew) {
            for (uint32_t b = 0; b < capacity; b++)
                counts[b] = 0;
            for (int k = 0; k < size; k++)
                counts[spread[k] & (capacity - 1)]++;
        }
    }
    return capacity;
}

const char rmq_encode_put_doc[] = (
"encode_put(message, context, now_ms) -> tuple | None\n\n"
"store.commitlog.put_path.encode_for_put for the common case: (record, topic, queue_id, sys_flag,\n"
"tags_code, keys, uniq_key, store_timestamp_position). None when anything is unusual (a new\n"
"topic, a DELAY, a bad or odd field, an oversized record, the [5.x] property CRC on: context[7])\n"
": the Python path then decides,\n"
"with RocketMQ's status and a sentence.");

/* encode_put's context (an 8-tuple: the caller checked it), parsed: 0; 1 when it declines every
 * message (the [5.x] property CRC on); -1 with an exception. Each conversion is checked before
 * the next: PyObject_IsTrue must not run with an error set. */
int rmq_put_context(PyObject *context, rmq_put_ctx *c)
{
    c->valid_topics = PyTuple_GET_ITEM(context, 0);
    c->host_fields = PyTuple_GET_ITEM(context, 1);
    c->store_host = PyTuple_GET_ITEM(context, 2);
    c->max_message_size = PyLong_AsLongLong(PyTuple_GET_ITEM(context, 3));
    if (c->max_message_size == -1 && PyErr_Occurred())
        return -1;
    if ((c->style_49 = PyObject_IsTrue(PyTuple_GET_ITEM(context, 4))) < 0)
        return -1;
    if ((c->allow_v2 = PyObject_IsTrue(PyTuple_GET_ITEM(context, 5))) < 0)
        return -1;
    c->segment_size = PyLong_AsLongLong(PyTuple_GET_ITEM(context, 6));
    if (c->segment_size == -1 && PyErr_Occurred())
        return -1;
    /* [5.x] enabledAppendPropCRC: the CRC is sealed in the lock after the 20 reserved bytes; this
     * encoder does not reserve them, so it declines and the Python path encodes. */
    int append_prop_crc = PyObject_IsTrue(PyTuple_GET_ITEM(context, 7));
    if (append_prop_crc < 0)
        return -1;
    if (append_prop_crc)
        return 1;
    if (!PyAnySet_Check(c->valid_topics) || !PyDict_Check(c->host_fields) ||
            !PyBytes_Check(c->store_host)) {
        PyErr_SetString(PyExc_TypeError, "context: (set, dict, bytes, int, bool, bool, int, bool)");
        return -1;
    }
    return 0;
}

PyObject *rmq_encode_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* METH_FASTCALL and direct tuple reads: argument parsing was a tenth of a put. */
    if (nargs != 3 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != 8) {
        PyErr_SetString(PyExc_TypeError, "encode_put(message, context (8-tuple), now_ms)");
        return NULL;
    }
    long long now_ms = PyLong_AsLongLong(args[2]);
    if (now_ms == -1 && PyErr_Occurred())
        return NULL;
    rmq_put_ctx c;
    int parsed = rmq_put_context(args[1], &c);
    if (parsed != 0)
        return parsed < 0 ? NULL : Py_NewRef(Py_None);
    return rmq_encode_one(args[0], &c, now_ms, NULL, NULL);
}

/* Room for `cap` bytes in the arena (nothing when it has them): 0, or -1 with MemoryError. */
int rmq_arena_reserve(rmq_arena *arena, Py_ssize_t cap)
{
    if (cap <= arena->cap)
        return 0;
    unsigned char *grown = PyMem_Realloc(arena->buf, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    arena->buf = grown;
    arena->cap = cap;
    return 0;
}

/* encode_put of one message with its context parsed. With `arena` NULL: encode_put's answer (a
 * tuple, None, or NULL with an exception). With an arena: the record is appended to it and
 * `info` filled (topic a new reference), the answer Py_True; None or NULL as above, the arena as
 * it was. */
PyObject *rmq_encode_one(PyObject *message, const rmq_put_ctx *c, long long now_ms,
                         rmq_arena *arena, rmq_encoded *info)
{
    PyObject *valid_topics = c->valid_topics, *host_fields = c->host_fields,
             *store_host = c->store_host;
    long long max_message_size = c->max_message_size, segment_size = c->segment_size;
    int style_49 = c->style_49, allow_v2 = c->allow_v2;

    PyObject *fields[11] = {NULL};
    PyObject *names[MAX_FAST_PROPERTIES], *values[MAX_FAST_PROPERTIES];
    int count = 0;
    PyObject *keys_joined = NULL, *record = NULL, *result = NULL;
    PyObject *const attrs[11] = {s_topic, s_body, s_queue_id, s_tags, s_keys, s_properties, s_flag,
                                 s_sys_flag, s_born_timestamp, s_born_host, s_prepared};
    if (slot_readable(Py_TYPE(message))) {
        /* store.api.Message (slots): each field read at its slot, as its member descriptor reads
         * it; an unset slot takes getattr, which raises its AttributeError. */
        for (int i = 0; i < 11; i++) {
            PyObject *value = *(PyObject **)((char *)message + message_offset[i]);
            fields[i] = value != NULL ? Py_NewRef(value) : PyObject_GetAttr(message, attrs[i]);
            if (fields[i] == NULL)
                goto error;
        }
    } else {
        for (int i = 0; i < 11; i++) {
            fields[i] = PyObject_GetAttr(message, attrs[i]);
            if (fields[i] == NULL)
                goto error;
        }
    }
    PyObject *topic = fields[0], *body = fields[1], *queue_id_o = fields[2], *tags = fields[3],
             *keys = fields[4], *props = fields[5], *flag_o = fields[6], *sys_flag_o = fields[7],
             *born_ts_o = fields[8], *born_host = fields[9], *prepared_o = fields[10];

    if (!PyBytes_CheckExact(body) || !PyUnicode_CheckExact(topic) || !PyLong_CheckExact(queue_id_o) ||
        !PyLong_CheckExact(flag_o) || !PyLong_CheckExact(sys_flag_o) || !PyLong_CheckExact(prepared_o))
        goto fallback;
    int contains = PySet_Contains(valid_topics, topic);
    if (contains <= 0)
        goto error_or_fallback;
    int overflow;
    long queue_id = PyLong_AsLongAndOverflow(queue_id_o, &overflow);
    if (overflow || queue_id < 0 || queue_id > 65535)
        goto fallback;
    long flag = PyLong_AsLongAndOverflow(flag_o, &overflow);
    if (overflow || flag < INT32_MIN || flag > INT32_MAX)
        goto fallback;
    /* PREPARED TRANSACTION OFFSET, as given (a COMMIT / ROLLBACK names its PREPARED record). */
    long long prepared_offset = PyLong_AsLongLongAndOverflow(prepared_o, &overflow);
    if (overflow)
        goto fallback;
    long sys_flag = PyLong_AsLongAndOverflow(sys_flag_o, &overflow);
    if (overflow || sys_flag < INT32_MIN || sys_flag > INT32_MAX)
        goto fallback;
    if (PyBytes_GET_SIZE(body) > max_message_size)
        goto fallback;
    long long born_ts = now_ms;
    if (born_ts_o != Py_None) {
        if (!PyLong_CheckExact(born_ts_o))
            goto fallback;
        born_ts = PyLong_AsLongLongAndOverflow(born_ts_o, &overflow);
        if (overflow)
            goto fallback;
    }
    PyObject *born;
    if (born_host == Py_None || (PyUnicode_CheckExact(born_host) && PyUnicode_GET_LENGTH(born_host) == 0)) {
        born = PyDict_GetItemWithError(host_fields, s_default_host);
        if (born == NULL)
            PyErr_Clear();                         /* as PyDict_GetItemString: the Python path */
    } else if (PyUnicode_CheckExact(born_host))
        born = PyDict_GetItemWithError(host_fields, born_host);
    else
        goto fallback;
    if (born == NULL || !PyBytes_CheckExact(born))
        goto error_or_fallback;

    /* Properties in HashMap insertion order: TAGS, KEYS, then the user's (a user TAGS / KEYS
     * replaces the value in place). */
    int tags_at = -1, keys_at = -1;
    if (tags != Py_None) {
        if (!PyUnicode_CheckExact(tags))
            goto fallback;
        if (PyUnicode_GET_LENGTH(tags) > 0) {
            if (!clean_text(tags, 1))
                goto fallback;
            tags_at = count;
            names[count] = s_TAGS;
            values[count++] = tags;
        }
    }
    if (PyTuple_CheckExact(keys) || PyList_CheckExact(keys)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
        /* ASCII tokens (the common case) joined here; anything else by str.join below. */
        Py_ssize_t joined_len = 0, non_empty = 0;
        int ascii = 1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *token = PySequence_Fast_GET_ITEM(keys, i);
            if (!PyUnicode_CheckExact(token))
                goto fallback;
            Py_ssize_t len = PyUnicode_GET_LENGTH(token);
            if (len > 0) {
                ascii &= PyUnicode_IS_ASCII(token) ? 1 : 0;
                joined_len += len + (non_empty++ > 0);
            }
        }
        if (ascii && non_empty > 0) {
            keys_joined = PyUnicode_New(joined_len, 127);
            if (keys_joined == NULL)
                goto error;
            unsigned char *out = PyUnicode_1BYTE_DATA(keys_joined);
            for (Py_ssize_t i = 0, written = 0; i < n; i++) {
                PyObject *token = PySequence_Fast_GET_ITEM(keys, i);
                Py_ssize_t len = PyUnicode_GET_LENGTH(token);
                if (len == 0)
                    continue;
                if (written++ > 0)
                    *out++ = ' ';
                memcpy(out, PyUnicode_1BYTE_DATA(token), (size_t)len);
                out += len;
            }
        } else if (non_empty > 0) {
            PyObject *tokens = PyList_New(0);
            if (tokens == NULL)
                goto error;
            for (Py_ssize_t i = 0; i < n; i++) {       /* every token a str: checked above */
                PyObject *token = PySequence_Fast_GET_ITEM(keys, i);
                if (PyUnicode_GET_LENGTH(token) > 0 && PyList_Append(tokens, token) < 0) {
                    Py_DECREF(tokens);
                    goto error;
                }
            }
            PyObject *space = PyUnicode_FromString(" ");
            keys_joined = space ? PyUnicode_Join(space, tokens) : NULL;
            Py_XDECREF(space);
            Py_DECREF(tokens);
            if (PyErr_Occurred())
                goto error;
        }
    } else if (!PyUnicode_CheckExact(keys) || PyUnicode_GET_LENGTH(keys) > 0) {
        goto fallback;       /* a keys string (split on spaces) or anything else: the Python path */
    }
    if (keys_joined != NULL) {
        if (!clean_text(keys_joined, 1))
            goto fallback;
        keys_at = count;
        names[count] = s_KEYS;
        values[count++] = keys_joined;
    }
    if (props != Py_None) {
        if (!PyDict_CheckExact(props))
            goto fallback;
        Py_ssize_t pos = 0;
        PyObject *name, *value;
        while (PyDict_Next(props, &pos, &name, &value)) {
            if (!PyUnicode_CheckExact(name) || !PyUnicode_CheckExact(value) ||
                PyUnicode_GET_LENGTH(name) == 0 || !clean_text(name, 1) || !clean_text(value, 0))
                goto fallback;
            if (same_text(name, s_DELAY))
                goto fallback;                    /* delays move the message: the Python path */
            if (tags_at >= 0 && same_text(name, s_TAGS)) {
                values[tags_at] = value;
                continue;
            }
            if (keys_at >= 0 && same_text(name, s_KEYS)) {
                values[keys_at] = value;
                continue;
            }
            if (count == MAX_FAST_PROPERTIES)
                goto fallback;
            names[count] = name;
            values[count++] = value;
        }
        if (PyErr_Occurred())
            goto error;
    }

    /* HashMap iteration order: buckets ascending, insertion order inside a bucket. */
    uint32_t spread[MAX_FAST_PROPERTIES];
    int order[MAX_FAST_PROPERTIES];
    for (int i = 0; i < count; i++) {
        uint32_t h = rmq_java_hash(names[i]);
        spread[i] = h ^ (h >> 16);
        order[i] = i;
    }
    uint32_t mask = final_capacity(spread, count, 16) - 1;
    for (int i = 1; i < count; i++) {             /* stable insertion sort by bucket */
        int item = order[i], j = i - 1;
        while (j >= 0 && (spread[order[j]] & mask) > (spread[item] & mask)) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = item;
    }
    Py_ssize_t props_len = 0;
    const char *utf8_names[MAX_FAST_PROPERTIES], *utf8_values[MAX_FAST_PROPERTIES];
    Py_ssize_t name_lens[MAX_FAST_PROPERTIES], value_lens[MAX_FAST_PROPERTIES];
    for (int i = 0; i < count; i++) {
        utf8_names[i] = PyUnicode_AsUTF8AndSize(names[i], &name_lens[i]);
        utf8_values[i] = PyUnicode_AsUTF8AndSize(values[i], &value_lens[i]);
        if (utf8_names[i] == NULL || utf8_values[i] == NULL)
            goto fallback_clear;                   /* lone surrogates: the Python path decides */
        props_len += name_lens[i] + value_lens[i] + 2;
    }
    if (count > 0 && style_49)
        props_len -= 1;                            /* 4.9.7 drops the last separator */
    if (props_len > RMQ_MAX_PROPERTIES)
        goto fallback;

    Py_ssize_t topic_len;
    const char *topic_utf8 = PyUnicode_AsUTF8AndSize(topic, &topic_len);
    if (topic_utf8 == NULL)
        goto fallback_clear;
    int version = allow_v2 && topic_len > 127 ? 2 : 1;
    if (topic_len > (version == 1 ? RMQ_MAX_TOPIC_V1 : RMQ_MAX_TOPIC_V2))
        goto fallback;
    Py_ssize_t born_len = PyBytes_GET_SIZE(born), store_len = PyBytes_GET_SIZE(store_host);
    if ((born_len != 8 && born_len != 20) || (store_len != 8 && store_len != 20))
        goto fallback;
    sys_flag = (sys_flag & ~0x30L) | (born_len == 20 ? 0x10 : 0) | (store_len == 20 ? 0x20 : 0);
    /* Queue and physical offsets are 0 (set in the lock), reconsume times 0. */
    rmq_record layout = {
        .queue_id = (int32_t)queue_id, .flag = (int32_t)flag, .sys_flag = (int32_t)sys_flag,
        .born_timestamp = born_ts, .store_timestamp = now_ms, .prepared_offset = prepared_offset,
        .born_host = PyBytes_AS_STRING(born), .store_host = PyBytes_AS_STRING(store_host),
        .body = PyBytes_AS_STRING(body), .topic = topic_utf8,
        .born_host_len = born_len, .store_host_len = store_len, .body_len = PyBytes_GET_SIZE(body),
        .topic_len = topic_len, .properties_len = props_len, .version = version,
    };
    Py_ssize_t total = rmq_record_size(&layout);
    /* `total - 65536`, not `max_message_size + 65536`: a huge configured maximum must not overflow.
     * TOTALSIZE is a signed 32-bit field; total is small, so `total + 8` cannot overflow. */
    if (total > INT32_MAX || total - 65536 > max_message_size || total + 8 > segment_size)
        goto fallback;

    unsigned char *q;
    if (arena != NULL) {
        if (arena->len + total > arena->cap) {
            Py_ssize_t cap = arena->cap > 0 ? arena->cap * 2 : 4096;
            if (rmq_arena_reserve(arena, cap > arena->len + total ? cap : arena->len + total) < 0)
                goto error;
        }
        q = rmq_write_record(arena->buf + arena->len, &layout);
    } else {
        record = PyByteArray_FromStringAndSize(NULL, total);
        if (record == NULL)
            goto error;
        q = rmq_write_record((unsigned char *)PyByteArray_AS_STRING(record), &layout);
    }
    for (int k = 0; k < count; k++) {
        int i = order[k];
        memcpy(q, utf8_names[i], name_lens[i]);
        q += name_lens[i];
        *q++ = 0x01;
        memcpy(q, utf8_values[i], value_lens[i]);
        q += value_lens[i];
        if (k < count - 1 || !style_49)
            *q++ = 0x02;
    }

    if (arena != NULL) {                           /* encode_batch needs no more than this */
        arena->len += total;
        info->topic = Py_NewRef(topic);
        info->queue_id = queue_id;
        info->sys_flag = sys_flag;
        info->size = total;
        info->ts_position = 48 + (long)born_len;
        result = Py_NewRef(Py_True);
        goto done;
    }
    PyObject *final_tags = tags_at >= 0 ? values[tags_at] : NULL;
    PyObject *final_keys = keys_at >= 0 ? values[keys_at] : NULL;
    PyObject *uniq = NULL;
    for (int i = 0; i < count; i++) {
        if (same_text(names[i], s_UNIQ_KEY))
            uniq = values[i];
        else if (final_tags == NULL && same_text(names[i], s_TAGS))
            final_tags = values[i];
        else if (final_keys == NULL && same_text(names[i], s_KEYS))
            final_keys = values[i];
    }
    if (PyErr_Occurred())
        goto error;
    long long tags_code = final_tags && PyUnicode_GET_LENGTH(final_tags) ? (int32_t)rmq_java_hash(final_tags) : 0;
    result = PyTuple_New(8);
    if (result == NULL)
        goto error;
    PyObject *items[8] = {record, topic, PyLong_FromLong(queue_id), PyLong_FromLong(sys_flag),
                          PyLong_FromLongLong(tags_code),
                          final_keys ? final_keys : PyUnicode_New(0, 0), uniq ? uniq : Py_None,
                          PyLong_FromLong(48 + (long)born_len)};
    Py_INCREF(topic);
    if (final_keys)
        Py_INCREF(final_keys);
    Py_INCREF(items[6]);
    record = NULL;                                 /* the tuple owns it */
    for (int i = 0; i < 8; i++) {
        if (items[i] == NULL) {
            Py_DECREF(result);
            for (int k = i + 1; k < 8; k++)
                Py_XDECREF(items[k]);
            result = NULL;
            goto error;
        }
        PyTuple_SET_ITEM(result, i, items[i]);
    }
    goto done;

fallback_clear:
    PyErr_Clear();
fallback:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error_or_fallback:
    if (!PyErr_Occurred())
        goto fallback;
error:
    result = NULL;
done:
    Py_XDECREF(record);
    Py_XDECREF(keys_joined);
    for (int i = 0; i < 11; i++)
        Py_XDECREF(fields[i]);
    return result;
}

