/* decode_records: a pull's records -> MessageRecord objects in one call (store.codec.message).
 *
 * The fast path decodes a well-formed record exactly as `decode_message(raw)` does (same field
 * checks as `field_layout`, same values, same types) and builds the object by writing its slots
 * directly (the class is checked to be a plain slots class with MessageRecord's fields, in order).
 * Anything else is handed to the caller's Python functions, so that every answer and every refusal
 * is theirs by construction:
 *   - a record that is not a buffer, is torn, has an unknown magic, a negative TOPIC LENGTH or a
 *     TOTALSIZE that differs from its fields: `decode_one(record)` (it decodes or raises);
 *   - PROPERTIES that are not pure ASCII: `decode_properties(bytes)` (U+FFFD replacement rules);
 *   - a host field not seen recently: `host_to_string(bytes)` (then cached).
 * Topics are decoded with the "replace" error handler, like `bytes.decode("utf-8", "replace")`.
 *
 * Small caches keep the str of recent hosts, topics and property names (they repeat on every
 * message): bounded tables of at most 64-byte keys, holding one reference each for the process's life.
 */

#include "kernel.h"
#include <structmember.h>

#define N_FIELDS 18
static const char *const field_names[N_FIELDS] = {
    "store_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "commit_log_offset",
    "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
    "prepared_transaction_offset", "body", "topic", "properties", "properties_raw",
};

static PyTypeObject *layout_cls;            /* the class whose slot offsets are below (a reference) */
static Py_ssize_t slot_offset[N_FIELDS];

#define KEY_MAX 64
typedef struct {
    Py_ssize_t len;
    unsigned char key[KEY_MAX];
    PyObject *value;
} cache_entry;
#define HOST_SLOTS 16
#define TEXT_SLOTS 256
static cache_entry host_cache[HOST_SLOTS], text_cache[TEXT_SLOTS];

/* FNV-1a over 8-byte words, the length in the last one, then a 64-bit finalizer (a slot index). */
static uint32_t key_hash(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 0xcbf29ce484222325ull, word;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&word, p + i, 8);
        h = (h ^ word) * 0x100000001b3ull;
    }
    word = 0;
    for (Py_ssize_t j = 0; i + j < n; j++)
        word |= (uint64_t)p[i + j] << (8 * j);
    h = (h ^ word ^ ((uint64_t)n << 56)) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* The cached value for the key, or NULL (the caller makes one and calls cache_put). */
static PyObject *cache_get(cache_entry *table, int slots, const unsigned char *p, Py_ssize_t n,
                           cache_entry **slot)
{
    cache_entry *e = &table[key_hash(p, n) & (uint32_t)(slots - 1)];
    *slot = e;
    if (e->value != NULL && e->len == n && memcmp(e->key, p, (size_t)n) == 0) {
        Py_INCREF(e->value);
        return e->value;
    }
    return NULL;
}

static void cache_put(cache_entry *e, const unsigned char *p, Py_ssize_t n, PyObject *value)
{
    PyObject *old = e->value;
    memcpy(e->key, p, (size_t)n);
    e->len = n;
    Py_INCREF(value);
    e->value = value;
    Py_XDECREF(old);
}

static const char layout_error[] =
    "decode_records: cls must be a slots class with MessageRecord's fields";

/* The offsets of `cls`'s slots when its __slots__ are exactly `names`, in order, each a writable
 * object member; 0, or -1 (no exception set) for any other class. Shared with result.c. */
int rmq_slot_offsets(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets)
{
    if (!PyType_Check(cls))
        return -1;
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *slots = PyDict_GetItemString(type->tp_dict, "__slots__");   /* borrowed */
    if (slots == NULL || !PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != n)
        return -1;
    for (int i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(slots, i);
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, names[i]) != 0)
            return -1;
        PyObject *descr = PyDict_GetItem(type->tp_dict, name);              /* borrowed */
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type))
            return -1;
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY))
            return -1;
        offsets[i] = member->offset;
    }
    return 0;
}

/* Check `cls` (MessageRecord) once and remember where its slots are (only once it passed: a class
 * refused after another was learnt leaves that one's offsets whole). */
static int learn_layout(PyObject *cls)
{
    if ((PyTypeObject *)cls == layout_cls)
        return 0;
    Py_ssize_t offsets[N_FIELDS];
    if (rmq_slot_offsets(cls, field_names, N_FIELDS, offsets) < 0) {
        PyErr_SetString(PyExc_TypeError, layout_error);
        return -1;
    }
    memcpy(slot_offset, offsets, sizeof offsets);
    Py_INCREF(cls);
    Py_XSETREF(layout_cls, (PyTypeObject *)cls);
    return 0;
}

int rmq_is_ascii(const unsigned char *p, Py_ssize_t n)
{
    uint64_t any = 0, word;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&word, p + i, 8);
        any |= word;
    }
    for (; i < n; i++)
        any |= p[i];
    return (any & 0x8080808080808080ull) == 0;
}

static PyObject *ascii_str(const unsigned char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

/* A str of ASCII or UTF-8 ("replace") bytes, through the text cache when short. */
static PyObject *cached_text(const unsigned char *p, Py_ssize_t n, int ascii)
{
    cache_entry *slot = NULL;
    if (n <= KEY_MAX) {
        PyObject *hit = cache_get(text_cache, TEXT_SLOTS, p, n, &slot);
        if (hit != NULL)
            return hit;
    }
    PyObject *s = ascii ? ascii_str(p, n) : PyUnicode_DecodeUTF8((const char *)p, n, "replace");
    if (s != NULL && slot != NULL)
        cache_put(slot, p, n, s);
    return s;
}

static PyObject *host_text(const unsigned char *p, Py_ssize_t n, PyObject *host_to_string)
{
    cache_entry *slot;
    PyObject *hit = cache_get(host_cache, HOST_SLOTS, p, n, &slot);
    if (hit != NULL)
        return hit;
    PyObject *field = PyBytes_FromStringAndSize((const char *)p, n);
    if (field == NULL)
        return NULL;
    PyObject *s = PyObject_CallOneArg(host_to_string, field);
    Py_DECREF(field);
    if (s != NULL && PyUnicode_CheckExact(s))
        cache_put(slot, p, n, s);      /* only a plain str is shared between records */
    return s;
}

/* `decode_properties` of ASCII bytes: split on \x02; a segment of 3+ characters whose first \x01
 * is neither its first nor its last character is name -> value; later names overwrite. Names come
 * from a small cache of recent ones (lookup.c's read_message uses it too). */
PyObject *rmq_ascii_properties(const unsigned char *p, Py_ssize_t n)
{
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    Py_ssize_t start = 0;
    while (start <= n) {
        const unsigned char *stop = memchr(p + start, 0x02, (size_t)(n - start));
        Py_ssize_t end = stop ? stop - p : n;
        Py_ssize_t len = end - start;
        if (len >= 3) {
            const unsigned char *sep = memchr(p + start, 0x01, (size_t)len);
            Py_ssize_t at = sep ? sep - (p + start) : -1;
            if (at > 0 && at < len - 1) {
                PyObject *name = cached_text(p + start, at, 1);
                PyObject *value = name ? ascii_str(p + start + at + 1, len - at - 1) : NULL;
                if (value == NULL || PyDict_SetItem(dict, name, value) < 0) {
                    Py_XDECREF(name);
                    Py_XDECREF(value);
                    Py_DECREF(dict);
                    return NULL;
                }
                Py_DECREF(name);
                Py_DECREF(value);
            }
        }
        start = end + 1;
    }
    return dict;
}

typedef rmq_decoder fallbacks;

void rmq_decoder_clear(rmq_decoder *d)
{
    for (int k = 0; k < RMQ_MEMO_FIELDS; k++)
        Py_CLEAR(d->memo[k]);
}

/* The int `v` of memo field k: the last record's object when it had the same value. */
static PyObject *memo_long(fallbacks *fb, int k, int64_t v)
{
    if (fb->memo[k] != NULL && fb->memo_value[k] == v) {
        Py_INCREF(fb->memo[k]);
        return fb->memo[k];
    }
    PyObject *o = PyLong_FromLongLong(v);
    if (o != NULL) {
        Py_XSETREF(fb->memo[k], o);
        Py_INCREF(o);
        fb->memo_value[k] = v;
    }
    return o;
}

/* The record in `buf` as a new object of the learnt class; NULL with an exception; Py_None (a new
 * reference) when the fast path does not apply (then `decode_one` decides). */
static PyObject *decode_fast(const unsigned char *buf, Py_ssize_t len, fallbacks *fb)
{
    if (len < 40)
        Py_RETURN_NONE;
    int32_t total_size = get32(buf), magic = get32(buf + 4);
    int version = magic == MAGIC_V1 ? 1 : magic == MAGIC_V2 ? 2 : 0;
    if (version == 0 || total_size > len)
        Py_RETURN_NONE;
    int32_t sys_flag = get32(buf + 36);
    Py_ssize_t b = (sys_flag & SYSFLAG_BORNHOST_V6) ? 20 : 8;
    Py_ssize_t s = (sys_flag & SYSFLAG_STOREHOST_V6) ? 20 : 8;
    Py_ssize_t body_length_at = 68 + b + s;
    if (body_length_at + 4 > len)
        Py_RETURN_NONE;
    int32_t n32 = get32(buf + body_length_at);
    Py_ssize_t body_at = body_length_at + 4, n = n32 > 0 ? n32 : 0;
    if (n > len - body_at || version > len - body_at - n)
        Py_RETURN_NONE;
    Py_ssize_t topic_length_at = body_at + n;
    Py_ssize_t t = version == 1 ? (int8_t)buf[topic_length_at]
                                : (int16_t)(((uint16_t)buf[topic_length_at] << 8) | buf[topic_length_at + 1]);
    if (t < 0)
        Py_RETURN_NONE;
    Py_ssize_t topic_at = topic_length_at + version;
    if (t + 2 > len - topic_at)
        Py_RETURN_NONE;
    Py_ssize_t properties_at = topic_at + t + 2;
    int16_t p16 = (int16_t)(((uint16_t)buf[properties_at - 2] << 8) | buf[properties_at - 1]);
    Py_ssize_t p = p16 > 0 ? p16 : 0;
    if (p > len - properties_at || properties_at + p != total_size)
        Py_RETURN_NONE;

    PyObject *v[N_FIELDS] = {NULL};
    const unsigned char *after_born = buf + 48 + b;
    v[0] = memo_long(fb, 0, total_size);
    v[1] = memo_long(fb, 1, magic);
    v[2] = memo_long(fb, 2, get32(buf + 8));
    v[3] = PyLong_FromLong(get32(buf + 12));
    v[4] = PyLong_FromLong(get32(buf + 16));
    v[5] = PyLong_FromLongLong(get64(buf + 20));
    v[6] = PyLong_FromLongLong(get64(buf + 28));
    v[7] = PyLong_FromLong(sys_flag);
    v[8] = memo_long(fb, 3, get64(buf + 40));
    v[9] = host_text(buf + 48, b, fb->host_to_string);
    v[10] = memo_long(fb, 4, get64(after_born));
    v[11] = host_text(after_born + 8, s, fb->host_to_string);
    v[12] = PyLong_FromLong(get32(after_born + 8 + s));
    v[13] = PyLong_FromLongLong(get64(after_born + 12 + s));
    v[14] = PyBytes_FromStringAndSize((const char *)buf + body_at, n);
    v[15] = cached_text(buf + topic_at, t, rmq_is_ascii(buf + topic_at, t));
    v[17] = PyBytes_FromStringAndSize((const char *)buf + properties_at, p);
    if (p == 0)
        v[16] = PyDict_New();
    else if (rmq_is_ascii(buf + properties_at, p))
        v[16] = rmq_ascii_properties(buf + properties_at, p);
    else if (v[17] != NULL)
        v[16] = PyObject_CallOneArg(fb->decode_properties, v[17]);
    PyObject *record = NULL;
    for (int i = 0; i < N_FIELDS; i++)
        if (v[i] == NULL)
            goto fail;
    record = layout_cls->tp_alloc(layout_cls, 0);
    if (record == NULL)
        goto fail;
    for (int i = 0; i < N_FIELDS; i++)
        *(PyObject **)((char *)record + slot_offset[i]) = v[i];     /* steals */
    return record;
fail:
    for (int i = 0; i < N_FIELDS; i++)
        Py_XDECREF(v[i]);
    return NULL;
}

int rmq_decoders_check(PyObject *cls)
{
    return learn_layout(cls);
}

PyObject *rmq_decode_at(const unsigned char *buf, Py_ssize_t len, rmq_decoder *fb)
{
    PyObject *decoded = decode_fast(buf, len, fb);
    if (decoded != Py_None)
        return decoded;
    Py_DECREF(decoded);
    PyObject *raw = PyBytes_FromStringAndSize((const char *)buf, len);
    if (raw == NULL)
        return NULL;
    decoded = PyObject_CallOneArg(fb->decode_one, raw);
    Py_DECREF(raw);
    return decoded;
}

const char rmq_decode_records_doc[] = (
"decode_records(records, cls, decode_one, decode_properties, host_to_string) -> list\n\n"
"[decode_one(r) for r in records] (store.codec.message.decode_message), built in one call: a\n"
"well-formed record is decoded here into a `cls` (MessageRecord), anything else by decode_one.");

PyObject *rmq_decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_records takes 5 arguments");
        return NULL;
    }
    PyObject *records = args[0];
    fallbacks fb = {args[2], args[3], args[4], {0}, {NULL}};
    if (!PyList_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "decode_records takes a list of records");
        return NULL;
    }
    if (learn_layout(args[1]) < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(records);
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count && i < PyList_GET_SIZE(records); i++) {
        PyObject *raw = PyList_GET_ITEM(records, i);
        PyObject *decoded = Py_None;
        Py_buffer view;
        if (PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE) == 0) {
            decoded = decode_fast(view.buf, view.len, &fb);
            PyBuffer_Release(&view);
            if (decoded == NULL)
                goto fail;
        } else {
            PyErr_Clear();
            Py_INCREF(decoded);
        }
        if (decoded == Py_None) {
            Py_DECREF(decoded);
            Py_INCREF(raw);             /* decode_one may run code that changes the list */
            decoded = PyObject_CallOneArg(fb.decode_one, raw);
            Py_DECREF(raw);
            if (decoded == NULL)
                goto fail;
        }
        PyList_SET_ITEM(out, i, decoded);
    }
    if (PyList_GET_SIZE(records) < count) {
        PyErr_SetString(PyExc_RuntimeError, "decode_records: the list shrank while decoding");
        goto fail;
    }
    rmq_decoder_clear(&fb);
    return out;
fail:
    rmq_decoder_clear(&fb);
    Py_DECREF(out);
    return NULL;
}
