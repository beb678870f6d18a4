/* query_keys: a whole key query (store.lookups.query_message's index rounds and record reads) in one
 * call. Twin: store/kernel/query.py (query_keys_py), which says the rules step by step.
 *
 * Per round (at most 3): the index files newest first, as IndexService.queryOffset (4.9.7): the
 * newest file gives the result's last update time and phy offset; a file whose time range meets
 * [begin_ms, round_end] is walked (the slot chain of lookup.c's index_select); the walk stops after
 * a file that begins before begin_ms or once max_num offsets are held (a read-only file's header is
 * re-read first, with its own refresh()). The offsets, sorted, are read
 * and decoded (lookup.c's read_message) from the commit log's segment that holds them. A round
 * without any offset ends the query; so does one that read a record, or whose first record was
 * stored before begin_ms; otherwise the next round ends at the first record's store time.
 *
 * It answers NotImplemented ("ask the twin", which starts over) wherever the Python path would raise
 * or decide something this does not model: a closed index file, a slot or entry outside the map,
 * a header field or a segment's offset or size past +-2**62, a record read_message asks about. It
 * holds no buffer while Python code runs (a read-only file's refresh(), a segment's properties, a
 * non-ASCII record's properties). The index entry and the records are requested from memory a
 * step ahead (query_hints.c), which changes no answer.
 */

#include "kernel.h"

#define HEADER_BYTES 40
#define SLOT_BYTES 4
#define ENTRY_BYTES 20
#define MAX_WALK (1 << 20)          /* max_num above this: the twin answers */
#define ASK RMQ_QUERY_ASK
#define ASK_KEY 2                   /* carries_key's "ask" (1 there is "carries") */

static PyObject *s_read_only, *s_map, *s_slots, *s_max_index, *s_count, *s_begin, *s_end,
    *s_end_phy, *s_files, *s_file_size, *s_from, *s_destroyed, *s_buffer,
    *s_store_timestamp, *s_refresh, *s_topic, *s_properties, *s_uniq_key, *s_keys,
    *s_write_buffer, *s_committed, *s_wrote;

static int intern_names(void)
{
    if (s_keys != NULL)
        return 0;
#define I(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    I(s_read_only, "read_only"); I(s_map, "_map"); I(s_slots, "max_hash_slot_num");
    I(s_max_index, "max_index_num"); I(s_count, "index_count"); I(s_begin, "begin_timestamp");
    I(s_end, "end_timestamp"); I(s_end_phy, "end_phy_offset"); I(s_files, "files");
    I(s_file_size, "file_size_bytes"); I(s_from, "file_from_offset"); I(s_destroyed, "destroyed");
    I(s_buffer, "_map"); I(s_write_buffer, "write_buffer");
    I(s_committed, "committed_position"); I(s_wrote, "wrote_position");
    I(s_store_timestamp, "store_timestamp"); I(s_refresh, "refresh");
    I(s_topic, "topic"); I(s_properties, "properties"); I(s_uniq_key, "UNIQ_KEY");
    I(s_keys, "KEYS");
#undef I
    return 0;
}

/* obj.name as an int64 within +-2**62: 0, ASK (not an int, or outside), -1 with an exception. */
static int attr_small(PyObject *obj, PyObject *name, int64_t *out)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int got = ASK;
    if (PyLong_Check(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred())
            got = -1;
        else if (!overflow && v >= -(1LL << 62) && v <= (1LL << 62)) {
            *out = v;
            got = 0;
        }
    }
    Py_DECREF(value);
    return got;
}

/* One index file's chain walk (lookup.c's index_select, into an array). 0, or ASK. */
static int walk(const unsigned char *p, Py_ssize_t len, int64_t key_hash, int64_t slots,
                int64_t max_index, int64_t index_count, int64_t begin_timestamp, int64_t max_num,
                int64_t begin_ms, int64_t end_ms, int64_t *out, Py_ssize_t *n)
{
    int64_t slot_pos = HEADER_BYTES + (key_hash % slots) * SLOT_BYTES;
    int64_t entries_pos = HEADER_BYTES + slots * SLOT_BYTES;
    if (slot_pos > len - SLOT_BYTES)
        return ASK;
    int64_t entry = get32(p + slot_pos);
    if (entry <= 0 || entry > index_count || index_count <= 1)
        return 0;
    int64_t steps = index_count < max_index ? index_count : max_index;   /* lookup.c's index_select */
    for (int64_t step = 0; step < steps; step++) {
        if (*n >= max_num || entry >= max_index)
            return 0;
        int64_t position = entries_pos + entry * ENTRY_BYTES;
        if (position > len - ENTRY_BYTES)
            return ASK;
        const unsigned char *e = p + position;
        int32_t read_hash = get32(e), time_diff_s = get32(e + 12), prev = get32(e + 16);
        if (time_diff_s < 0)
            return 0;
        int64_t time_ms = begin_timestamp + (int64_t)time_diff_s * 1000;
        if (read_hash == key_hash && begin_ms <= time_ms && time_ms <= end_ms)
            out[(*n)++] = get64(e + 4);
        if (prev <= 0 || prev > index_count || prev == entry || time_ms < begin_ms)
            return 0;
        entry = prev;
    }
    return 0;
}

/* One round of IndexService.queryOffset over `files` (oldest first). 0, ASK, or -1 with an
 * exception; *last_ts / *last_phy set from the newest file when there is one. */
static int query_offsets(PyObject *files, int64_t key_hash, int64_t max_num, int64_t begin_ms,
                         int64_t end_ms, int64_t *out, Py_ssize_t *n, int64_t *last_ts,
                         int64_t *last_phy)
{
    *n = 0;
    Py_ssize_t last_position = PyList_GET_SIZE(files) - 1;
    for (Py_ssize_t position = last_position; position >= 0; position--) {
        if (position >= PyList_GET_SIZE(files))
            return ASK;                  /* the list changed under a property call */
        PyObject *index_file = PyList_GET_ITEM(files, position);
        Py_INCREF(index_file);
        int64_t v[7];                    /* slots, max_index, count, first, last, end_phy */
        int got = 0;
        PyObject *read_only = PyObject_GetAttr(index_file, s_read_only);
        if (read_only == NULL)
            got = -1;
        else {
            int truth = PyObject_IsTrue(read_only);
            Py_DECREF(read_only);
            got = truth < 0 ? -1 : 0;
            if (truth > 0) {             /* read-only: its header is re-read (it may raise) */
                PyObject *done = PyObject_CallMethodNoArgs(index_file, s_refresh);
                got = done == NULL ? -1 : 0;
                Py_XDECREF(done);
            }
        }
        PyObject *const names[6] = {s_slots, s_max_index, s_count, s_begin, s_end, s_end_phy};
        for (int k = 0; k < 6 && got == 0; k++)
            got = attr_small(index_file, names[k], &v[k]);
        if (got != 0) {
            Py_DECREF(index_file);
            return got;
        }
        int64_t slots = v[0], max_index = v[1], count = v[2], first = v[3], last = v[4];
        if (position == last_position) {
            *last_ts = last;
            *last_phy = v[5];
        }
        if ((begin_ms < first && end_ms > last) || (first <= begin_ms && begin_ms <= last)
                || (first <= end_ms && end_ms <= last)) {
            PyObject *map = PyObject_GetAttr(index_file, s_map);
            Py_buffer view;
            if (map == NULL)
                got = -1;
            else if (map == Py_None || slots <= 0 || slots > (1LL << 40))
                got = ASK;               /* closed: the twin raises StoreClosedError */
            else if (PyObject_GetBuffer(map, &view, PyBUF_SIMPLE) < 0) {
                PyErr_Clear();
                got = ASK;
            } else {
                got = walk(view.buf, view.len, key_hash, slots, max_index, count, first, max_num,
                           begin_ms, end_ms, out, n);
                PyBuffer_Release(&view);
            }
            Py_XDECREF(map);
        }
        Py_DECREF(index_file);
        if (got != 0)
            return got;
        if (first < begin_ms || *n >= max_num)
            break;
    }
    return 0;
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* 1 when segment `mapped` holds phy_offset (file_from_offset <= phy_offset < its end), 0 when
 * not, ASK or -1 as attr_small. */
static int holds(PyObject *mapped, int64_t phy_offset, int64_t *from_out)
{
    int64_t from = 0, size = 0;
    int got = attr_small(mapped, s_from, &from);
    *from_out = from;
    if (got == 0)
        got = attr_small(mapped, s_file_size, &size);
    if (got != 0)
        return got == ASK ? -2 : -1;
    return from <= phy_offset && phy_offset - from < size;
}

/* MappedFileQueue.find_file(phy_offset) over `segments` (its files): a new reference to the
 * segment (*from: its file_from_offset), Py_None when none holds it, or NULL with *got = ASK or -1. */
static PyObject *find_segment(PyObject *segments, int64_t segment_bytes, int64_t phy_offset, int *got,
                              int64_t *from)
{
    *got = 0;
    if (PyList_GET_SIZE(segments) == 0)
        return Py_NewRef(Py_None);
    int64_t first;
    if ((*got = attr_small(PyList_GET_ITEM(segments, 0), s_from, &first)) != 0)
        return NULL;
    int64_t delta = phy_offset - first;        /* both within +-2**62 */
    int64_t index = delta >= 0 ? delta / segment_bytes : -((-delta + segment_bytes - 1) / segment_bytes);
    /* the direct index, then (gaps in the file set) every file in order */
    for (Py_ssize_t k = -1; k < PyList_GET_SIZE(segments); k++) {
        if (k == -1 && (index < 0 || index >= PyList_GET_SIZE(segments)))
            continue;
        PyObject *candidate = Py_NewRef(PyList_GET_ITEM(segments, k == -1 ? index : k));
        int hit = holds(candidate, phy_offset, from);
        if (hit == 1)
            return candidate;
        Py_DECREF(candidate);
        if (hit < 0) {
            *got = hit == -2 ? ASK : -1;
            return NULL;
        }
    }
    return Py_NewRef(Py_None);
}

/* Read and decode the record at phy_offset (store.lookups' loop body, read_message's rules): a new
 * reference to the record, Py_None when it is skipped, NULL with *got = ASK or -1. */
static PyObject *read_one(PyObject *segments, int64_t segment_bytes, int64_t phy_offset,
                          rmq_decoder *decoder, int *got)
{
    int64_t from, limit;
    PyObject *mapped = find_segment(segments, segment_bytes, phy_offset, got, &from);
    if (mapped == NULL || mapped == Py_None)
        return mapped;
    PyObject *result = NULL, *buffer = NULL;
    PyObject *destroyed = PyObject_GetAttr(mapped, s_destroyed);
    int truth = destroyed == NULL ? -1 : PyObject_IsTrue(destroyed);
    Py_XDECREF(destroyed);
    if (truth != 0) {
        *got = truth < 0 ? -1 : 0;
        result = truth < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    buffer = PyObject_GetAttr(mapped, s_buffer);
    if (buffer == NULL) {
        *got = -1;
        goto done;
    }
    /* read_position without the property's call (MappedFileQueue.end_and_file does the same):
     * the committed position with a write buffer (the transient store pool), else the wrote one */
    PyObject *write_buffer = PyObject_GetAttr(mapped, s_write_buffer);
    if (write_buffer == NULL) {
        *got = -1;
        goto done;
    }
    PyObject *position_name = write_buffer != Py_None ? s_committed : s_wrote;
    Py_DECREF(write_buffer);
    if ((*got = attr_small(mapped, position_name, &limit)) != 0)
        goto done;
    Py_buffer view;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        *got = ASK;                            /* a closed map: the twin raises */
        goto done;
    }
    int64_t position = phy_offset - from;
    if (limit > view.len || limit < 0) {
        *got = ASK;                            /* the twin slices (and finds) what it can */
    } else if (position < 0 || position > limit - 8) {
        result = Py_NewRef(Py_None);
    } else {
        const unsigned char *p = (const unsigned char *)view.buf + position;
        int32_t size = get32(p), magic = get32(p + 4);
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size <= 0 || size > limit - position)
            result = Py_NewRef(Py_None);
        else                                   /* decode_message(buffer[position:position + size]) */
            result = rmq_decode_at(p, size, decoder);
        if (result == NULL)
            *got = -1;
    }
    PyBuffer_Release(&view);
done:
    Py_XDECREF(buffer);
    Py_DECREF(mapped);
    return result;
}

/* key in keys.split(" ") for str keys and key, both not empty, without the list: an occurrence of
 * key between the start or a space and a space or the end (a key with a space is no token). 1, 0,
 * or -1 with an exception. */
static int among_tokens(PyObject *keys, PyObject *key)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(keys), key_length = PyUnicode_GET_LENGTH(key);
    Py_ssize_t space = PyUnicode_FindChar(key, ' ', 0, key_length, 1);
    if (space != -1)
        return space == -2 ? -1 : 0;
    int kind = PyUnicode_KIND(keys);
    const void *data = PyUnicode_DATA(keys);
    for (Py_ssize_t start = 0; start <= length - key_length;) {
        Py_ssize_t at = PyUnicode_Find(keys, key, start, length, 1);
        if (at < 0)
            return at == -1 ? 0 : -1;
        Py_ssize_t end = at + key_length;
        if ((at == 0 || PyUnicode_READ(kind, data, at - 1) == ' ')
                && (end == length || PyUnicode_READ(kind, data, end) == ' '))
            return 1;
        start = at + 1;
    }
    return 0;
}

/* 1 when the decoded record is of `topic` and carries `key` (store.lookups' check: key is its
 * UNIQ_KEY, or one of its KEYS split on " ", key not empty), 0 when not, -1 with an exception,
 * ASK_KEY for properties that are not a dict of str. */
static int carries_key(PyObject *record, PyObject *topic, PyObject *key)
{
    PyObject *value = PyObject_GetAttr(record, s_topic);
    if (value == NULL)
        return -1;
    int same = PyObject_RichCompareBool(value, topic, Py_EQ);
    Py_DECREF(value);
    if (same <= 0)
        return same;
    PyObject *properties = PyObject_GetAttr(record, s_properties);
    if (properties == NULL)
        return -1;
    int answer = ASK_KEY;
    if (PyDict_CheckExact(properties)) {
        PyObject *uniq = PyDict_GetItemWithError(properties, s_uniq_key);    /* borrowed */
        answer = uniq == NULL ? (PyErr_Occurred() ? -1 : 0)
                              : PyObject_RichCompareBool(key, uniq, Py_EQ);
        if (answer == 0) {
            PyObject *keys = PyDict_GetItemWithError(properties, s_keys);
            if (keys == NULL)
                answer = PyErr_Occurred() ? -1 : 0;
            else if (!PyUnicode_CheckExact(keys) || !PyUnicode_CheckExact(key))
                answer = ASK_KEY;
            else if (PyUnicode_GET_LENGTH(keys) == 0 || PyUnicode_GET_LENGTH(key) == 0)
                answer = 0;
            else {
                answer = among_tokens(keys, key);
            }
        }
    }
    Py_DECREF(properties);
    return answer;
}

/* The hash of topic + "#" + key (IndexService.buildKey) as IndexFile stores it: abs(String.hashCode),
 * 0 for Integer.MIN_VALUE; the key string is not built. topic and key: exact str. */
int64_t rmq_query_key_hash(PyObject *topic, PyObject *key)
{
    int32_t h = (int32_t)rmq_java_hash_from(31 * rmq_java_hash(topic) + '#', key);
    if (h == INT32_MIN)
        return 0;
    return h < 0 ? -(int64_t)h : h;
}

const char rmq_query_keys_doc[] = (
"query_keys(index_files, topic, key, max_num, begin_ms, end_ms, mapped_files, decoders)\n"
"    -> (messages, hits, last_ts, last_phy) | NotImplemented\n\n"
"store.lookups.query_message's rounds in one call (store.kernel.query.query_keys_py): the index\n"
"files (IndexFile objects, oldest first) walked newest first for \"topic#key\" with at most max_num\n"
"hits in [begin_ms, end_ms], the hits read from the commit log's MappedFileQueue and decoded with\n"
"`decoders` = (cls, decode_one, decode_properties, host_to_string) as decode_records does; `messages`\n"
"are those of `topic` that carry `key`, `hits` how many were read. NotImplemented: the twin answers\n"
"(see c/query.c).");

/* query_keys' work for args = (index_files, topic, key, max_num, begin_ms, end_ms, mapped_files,
 * decoders): 0 with *messages (a new list), *hits, *last_ts, *last_phy set; RMQ_QUERY_ASK (the twin
 * answers); -1 with an exception. Shared with query_message.c. */
int rmq_query_run(PyObject *const *args, int64_t key_hash, PyObject **messages_out,
                  Py_ssize_t *hits_out, int64_t *last_ts_out, int64_t *last_phy_out)
{
    if (intern_names() < 0)
        return -1;
    PyObject *files = args[0], *topic = args[1], *key = args[2], *decoders = args[7];
    long long v[3];
    for (int k = 0; k < 3; k++) {
        if (!PyLong_Check(args[k + 3]))
            return ASK;
        int overflow = 0;
        v[k] = PyLong_AsLongLongAndOverflow(args[k + 3], &overflow);
        if (v[k] == -1 && PyErr_Occurred())
            return -1;
        if (overflow)
            return ASK;
    }
    int64_t max_num = v[0], begin_ms = v[1], end_ms = v[2];
    if (!PyList_Check(files) || !PyUnicode_CheckExact(topic) || !PyUnicode_CheckExact(key)
            || max_num > MAX_WALK || !PyTuple_Check(decoders) || PyTuple_GET_SIZE(decoders) != 4)
        return ASK;
    if (rmq_decoders_check(PyTuple_GET_ITEM(decoders, 0)) < 0) {
        PyErr_Clear();
        return ASK;
    }
    rmq_decoder decoder = {PyTuple_GET_ITEM(decoders, 1), PyTuple_GET_ITEM(decoders, 2),
                           PyTuple_GET_ITEM(decoders, 3), {0}, {NULL}};
    if (key_hash < 0)
        key_hash = rmq_query_key_hash(topic, key);
    /* the entry the newest file's slot names, requested while the attributes below are read (the
     * slot itself was requested before the lock by query_message, or misses here once) */
    rmq_hint_entry(files, key_hash);
    int64_t segment_bytes;
    int got = attr_small(args[6], s_file_size, &segment_bytes);
    if (got != 0)
        return got;
    PyObject *segments = PyObject_GetAttr(args[6], s_files);
    if (segments == NULL)
        return -1;
    if (!PyList_Check(segments) || segment_bytes <= 0) {
        Py_DECREF(segments);
        return ASK;
    }
    int64_t *offsets = PyMem_Malloc(sizeof(int64_t) * (size_t)(max_num > 0 ? max_num : 1));
    PyObject *hits = PyList_New(0), *messages = NULL;
    got = -1;
    if (offsets == NULL || hits == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t last_ts = 0, last_phy = 0, round_end = end_ms;
    for (int round = 0; round < 3; round++) {
        Py_ssize_t n = 0;
        got = query_offsets(files, key_hash, max_num, begin_ms, round_end, offsets, &n, &last_ts,
                            &last_phy);
        if (got != 0)
            goto done;
        if (n == 0)
            break;
        if (n > 1)
            qsort(offsets, (size_t)n, sizeof(int64_t), compare_int64);
        rmq_hint_records(segments, segment_bytes, offsets, n);     /* read below, in this order */
        int have_first = 0;
        int64_t first_time = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *record = read_one(segments, segment_bytes, offsets[i], &decoder, &got);
            if (record == NULL)
                goto done;
            if (record == Py_None) {
                Py_DECREF(record);
                continue;
            }
            if (!have_first) {
                got = attr_small(record, s_store_timestamp, &first_time);
                if (got != 0) {
                    Py_DECREF(record);
                    goto done;
                }
                have_first = 1;
            }
            int appended = PyList_Append(hits, record);
            Py_DECREF(record);
            if (appended < 0) {
                got = -1;
                goto done;
            }
        }
        if (PyList_GET_SIZE(hits) > 0 || !have_first || first_time < begin_ms)
            break;
        round_end = first_time;
    }
    /* A Java client drops hash collisions by checking the keys (store.lookups' check). */
    got = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(hits); i++) {
        PyObject *record = PyList_GET_ITEM(hits, i);
        int carries = carries_key(record, topic, key);
        if (carries != 0 && carries != 1) {
            got = carries == ASK_KEY ? ASK : -1;
            goto done;
        }
        if (messages == NULL && !carries) {            /* the first collision: the carriers so far */
            if ((messages = PyList_GetSlice(hits, 0, i)) == NULL)
                goto done;
        } else if (messages != NULL && carries && PyList_Append(messages, record) < 0) {
            goto done;
        }
    }
    if (messages == NULL)                              /* no collision: the hits are the messages */
        messages = Py_NewRef(hits);
    *messages_out = Py_NewRef(messages);
    *hits_out = PyList_GET_SIZE(hits);
    *last_ts_out = last_ts;
    *last_phy_out = last_phy;
    got = 0;
done:
    rmq_decoder_clear(&decoder);
    PyMem_Free(offsets);
    Py_XDECREF(hits);
    Py_XDECREF(messages);
    Py_DECREF(segments);
    return got;
}

PyObject *rmq_query_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "query_keys takes 8 arguments");
        return NULL;
    }
    PyObject *messages;
    Py_ssize_t hits;
    int64_t last_ts, last_phy;
    int got = rmq_query_run(args, -1, &messages, &hits, &last_ts, &last_phy);
    if (got != 0)
        return got == ASK ? Py_NewRef(Py_NotImplemented) : NULL;
    PyObject *result = Py_BuildValue("(OnLL)", messages, hits, (long long)last_ts,
                                     (long long)last_phy);
    Py_DECREF(messages);
    return result;
}
