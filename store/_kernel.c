/*
 * store._kernel: the hottest loops of the store, compiled.
 *
 * Three functions, each with a pure-Python twin in store/kernel.py that gives the same answers
 * (tests/test_kernel.py runs both on the same inputs):
 *
 *   encode_record(...)          one commit-log record (spec §2.1) with its BODYCRC, as a bytearray
 *   scan(buf, start, limit, check_crc, out)
 *                               walk records from `start` the way `checkMessageAndReturnSize` does,
 *                               writing one row of SCAN_FIELDS int64s per record into `out`
 *   java_hashes(texts)          Java String.hashCode of each str, as native int32s (bytes)
 *
 * The CRC is zlib's CRC-32 (what java.util.zip.CRC32 and RocketMQ's UtilAll.crc32 compute): the system
 * zlib's crc32() found with dlopen at import, else slicing-by-8 tables built at import. Nothing here keeps a pointer past the call that got it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <dlfcn.h>

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define MAGIC_BLANK ((int32_t)0xCBD43194)
#define SYSFLAG_BORNHOST_V6 0x10
#define SYSFLAG_STOREHOST_V6 0x20

/* Row layout written by scan(); store/kernel.py names the same columns in the same order. */
enum {
    F_POS, F_SIZE, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_PHY_OFFSET, F_SYS_FLAG, F_BORN_TS,
    F_STORE_TS, F_PREPARED, F_BODY_POS, F_BODY_LEN, F_TOPIC_POS, F_TOPIC_LEN, F_PROPS_POS,
    F_PROPS_LEN, F_TAGS_POS, F_TAGS_LEN, F_KEYS_POS, F_KEYS_LEN, F_UNIQ_POS, F_UNIQ_LEN,
    F_DELAY_POS, F_DELAY_LEN, F_VERSION, F_BODY_CRC, SCAN_FIELDS
};

/* Why scan() stopped. */
enum { STOP_END = 0, STOP_BLANK = 1, STOP_INVALID = 2, STOP_FULL = 3 };

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* zlib's crc32 (braided; about 30% faster than slicing-by-8 here), found at import in the system's
 * libz.so.1 with dlopen, so that building needs no zlib header; slicing-by-8 when it is absent. */
typedef unsigned long (*zlib_crc32_fn)(unsigned long, const unsigned char *, unsigned int);
static zlib_crc32_fn zlib_crc32;

static void crc_find_zlib(void)
{
    void *handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL)
        zlib_crc32 = (zlib_crc32_fn)dlsym(handle, "crc32");
}

static uint32_t crc32_bytes(const unsigned char *p, Py_ssize_t n)
{
    if (zlib_crc32 != NULL) {
        unsigned long c = 0;
        while (n > 0) {
            unsigned int chunk = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (unsigned int)n;
            c = zlib_crc32(c, p, chunk);
            p += chunk;
            n -= chunk;
        }
        return (uint32_t)c;
    }
    uint32_t c = 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 7)) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if PY_BIG_ENDIAN
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline void put32(unsigned char *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = u >> 24; p[1] = u >> 16; p[2] = u >> 8; p[3] = u;
}

static inline void put64(unsigned char *p, int64_t v)
{
    put32(p, (int32_t)((uint64_t)v >> 32));
    put32(p + 4, (int32_t)(uint32_t)v);
}

static inline int32_t get32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t get64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)get32(p) << 32) | (uint32_t)get32(p + 4));
}

/* ---------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(encode_record_doc,
"encode_record(topic, queue_id, flag, sys_flag, queue_offset, phy_offset, born_timestamp,\n"
"              born_host, store_timestamp, store_host, reconsume_times, prepared_offset,\n"
"              body, properties, version) -> bytearray\n\n"
"One record, fields as given (hosts already encoded: 8 or 20 bytes; sys_flag must already carry\n"
"the matching IPv6 bits). 32-bit fields out of range raise OverflowError.");

static PyObject *encode_record(PyObject *self, PyObject *args)
{
    const char *topic, *born, *store;
    Py_ssize_t topic_len, born_len, store_len;
    int queue_id, flag, sys_flag, reconsume, version;
    long long queue_offset, phy_offset, born_ts, store_ts, prepared;
    Py_buffer body, props;
    if (!PyArg_ParseTuple(args, "y#iiiLLLy#Ly#iLy*y*i:encode_record", &topic, &topic_len,
                          &queue_id, &flag, &sys_flag, &queue_offset, &phy_offset, &born_ts,
                          &born, &born_len, &store_ts, &store, &store_len, &reconsume, &prepared,
                          &body, &props, &version))
        return NULL;
    PyObject *result = NULL;
    if ((born_len != 8 && born_len != 20) || (store_len != 8 && store_len != 20) ||
        (version != 1 && version != 2)) {
        PyErr_SetString(PyExc_ValueError, "hosts are 8 or 20 bytes and the version is 1 or 2");
        goto done;
    }
    Py_ssize_t total = 72 + born_len + store_len + body.len + version + topic_len + 2 + props.len;
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "TOTALSIZE does not fit a signed 32-bit field");
        goto done;
    }
    result = PyByteArray_FromStringAndSize(NULL, total);
    if (result == NULL)
        goto done;
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(result);
    put32(p, (int32_t)total);
    put32(p + 4, version == 2 ? MAGIC_V2 : MAGIC_V1);
    put32(p + 8, (int32_t)(crc32_bytes(body.buf, body.len) & 0x7FFFFFFF));
    put32(p + 12, queue_id);
    put32(p + 16, flag);
    put64(p + 20, queue_offset);
    put64(p + 28, phy_offset);
    put32(p + 36, sys_flag);
    put64(p + 40, born_ts);
    unsigned char *q = p + 48;
    memcpy(q, born, born_len);
    q += born_len;
    put64(q, store_ts);
    q += 8;
    memcpy(q, store, store_len);
    q += store_len;
    put32(q, reconsume);
    put64(q + 4, prepared);
    put32(q + 12, (int32_t)body.len);
    q += 16;
    memcpy(q, body.buf, body.len);
    q += body.len;
    if (version == 2) {
        q[0] = (unsigned char)(topic_len >> 8);
        q[1] = (unsigned char)topic_len;
        q += 2;
    } else {
        *q++ = (unsigned char)topic_len;
    }
    memcpy(q, topic, topic_len);
    q += topic_len;
    q[0] = (unsigned char)(props.len >> 8);
    q[1] = (unsigned char)props.len;
    memcpy(q + 2, props.buf, props.len);
done:
    PyBuffer_Release(&body);
    PyBuffer_Release(&props);
    return result;
}

/* ---------------------------------------------------------------------------------------------- */

/* Last occurrence of a property `name` in a PROPERTIES field, as decode_properties keeps it:
 * entries split on \x02, name before the first \x01, both name and value non-empty. */
static void find_properties(const unsigned char *p, Py_ssize_t n, int64_t *row)
{
    row[F_TAGS_POS] = row[F_KEYS_POS] = row[F_UNIQ_POS] = row[F_DELAY_POS] = -1;
    row[F_TAGS_LEN] = row[F_KEYS_LEN] = row[F_UNIQ_LEN] = row[F_DELAY_LEN] = 0;
    Py_ssize_t start = 0;
    while (start <= n) {
        const unsigned char *end_ptr = memchr(p + start, 0x02, n - start);
        Py_ssize_t end = end_ptr ? end_ptr - p : n;
        const unsigned char *sep_ptr = memchr(p + start, 0x01, end - start);
        if (sep_ptr) {
            Py_ssize_t sep = sep_ptr - p;
            Py_ssize_t name_len = sep - start, value_pos = sep + 1, value_len = end - sep - 1;
            if (name_len > 0 && value_len > 0) {
                int field = -1;
                const unsigned char *name = p + start;
                if (name_len == 4 && memcmp(name, "TAGS", 4) == 0)
                    field = F_TAGS_POS;
                else if (name_len == 4 && memcmp(name, "KEYS", 4) == 0)
                    field = F_KEYS_POS;
                else if (name_len == 8 && memcmp(name, "UNIQ_KEY", 8) == 0)
                    field = F_UNIQ_POS;
                else if (name_len == 5 && memcmp(name, "DELAY", 5) == 0)
                    field = F_DELAY_POS;
                if (field >= 0) {
                    row[field] = value_pos;
                    row[field + 1] = value_len;
                }
            }
        }
        start = end + 1;
    }
}

PyDoc_STRVAR(scan_doc,
"scan(buf, start, limit, check_crc, out) -> (count, stop_position, stop_kind, stop_size)\n\n"
"Walk records of `buf` from `start`, reading nothing at or past `limit`, as RocketMQ's\n"
"checkMessageAndReturnSize does (spec §2.7). Each whole record fills one row of SCAN_FIELDS\n"
"int64s in the writable buffer `out` (positions are relative to `buf`). Stops at `limit`\n"
"(STOP_END), a BLANK (STOP_BLANK), an invalid record (STOP_INVALID: stop_size is -1 for a torn\n"
"record, unknown magic or CRC mismatch, else TOTALSIZE for a length mismatch) or when `out` is\n"
"full (STOP_FULL). Property values are located, not decoded.");

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer buf, out;
    Py_ssize_t start, limit;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*nnpw*:scan", &buf, &start, &limit, &check_crc, &out))
        return NULL;
    PyObject *result = NULL;
    if (out.len % (SCAN_FIELDS * 8) != 0 || ((uintptr_t)out.buf & 7) != 0) {
        PyErr_SetString(PyExc_ValueError, "out must be an aligned whole number of rows");
        goto done;
    }
    const unsigned char *b = buf.buf;
    Py_ssize_t end = limit < buf.len ? limit : buf.len;
    Py_ssize_t capacity = out.len / (SCAN_FIELDS * 8), count = 0, pos = start, stop_size = 0;
    int stop = STOP_END;
    int64_t *row = out.buf;
    if (start < 0) {
        stop = STOP_INVALID;
        stop_size = -1;
        goto finished;
    }
    while (1) {
        if (pos + 8 > end) {
            /* Nothing more to read: at the limit it is the end; a few bytes short is torn. */
            stop = pos >= end ? STOP_END : STOP_INVALID;
            stop_size = -1;
            break;
        }
        int32_t total = get32(b + pos), magic = get32(b + pos + 4);
        if (magic == MAGIC_BLANK) {
            stop = STOP_BLANK;
            break;
        }
        if (count == capacity) {
            stop = STOP_FULL;
            break;
        }
        int version = magic == MAGIC_V1 ? 1 : magic == MAGIC_V2 ? 2 : 0;
        stop = STOP_INVALID;
        stop_size = -1;
        if (version == 0 || total > end - pos || pos + 40 > end)
            break;
        int32_t sys_flag = get32(b + pos + 36);
        Py_ssize_t born_len = (sys_flag & SYSFLAG_BORNHOST_V6) ? 20 : 8;
        Py_ssize_t store_len = (sys_flag & SYSFLAG_STOREHOST_V6) ? 20 : 8;
        Py_ssize_t body_len_pos = pos + 68 + born_len + store_len;
        if (body_len_pos + 4 > end)
            break;
        int32_t n = get32(b + body_len_pos);
        Py_ssize_t body_len = n > 0 ? n : 0;
        Py_ssize_t topic_len_pos = body_len_pos + 4 + body_len;
        if (topic_len_pos + version > end)
            break;
        Py_ssize_t topic_len = version == 1 ? (int8_t)b[topic_len_pos]
                                            : (int16_t)((b[topic_len_pos] << 8) | b[topic_len_pos + 1]);
        if (topic_len < 0)
            break;
        Py_ssize_t topic_pos = topic_len_pos + version;
        Py_ssize_t props_pos = topic_pos + topic_len + 2;
        if (props_pos > end)
            break;
        int16_t pl = (int16_t)((b[props_pos - 2] << 8) | b[props_pos - 1]);
        Py_ssize_t props_len = pl > 0 ? pl : 0;
        if (props_pos + props_len > end)
            break;
        int32_t body_crc = get32(b + pos + 8);
        if (check_crc && body_len &&
            (int32_t)(crc32_bytes(b + body_len_pos + 4, body_len) & 0x7FFFFFFF) != body_crc)
            break;
        if (props_pos + props_len - pos != total) {
            stop_size = total > 0 ? total : -1;
            break;
        }
        row[F_POS] = pos;
        row[F_SIZE] = total;
        row[F_QUEUE_ID] = get32(b + pos + 12);
        row[F_FLAG] = get32(b + pos + 16);
        row[F_QUEUE_OFFSET] = get64(b + pos + 20);
        row[F_PHY_OFFSET] = get64(b + pos + 28);
        row[F_SYS_FLAG] = sys_flag;
        row[F_BORN_TS] = get64(b + pos + 40);
        row[F_STORE_TS] = get64(b + pos + 48 + born_len);
        row[F_PREPARED] = get64(b + body_len_pos - 8);
        row[F_BODY_POS] = body_len_pos + 4;
        row[F_BODY_LEN] = body_len;
        row[F_TOPIC_POS] = topic_pos;
        row[F_TOPIC_LEN] = topic_len;
        row[F_PROPS_POS] = props_pos;
        row[F_PROPS_LEN] = props_len;
        find_properties(b + props_pos, props_len, row);
        if (row[F_TAGS_POS] >= 0) row[F_TAGS_POS] += props_pos;
        if (row[F_KEYS_POS] >= 0) row[F_KEYS_POS] += props_pos;
        if (row[F_UNIQ_POS] >= 0) row[F_UNIQ_POS] += props_pos;
        if (row[F_DELAY_POS] >= 0) row[F_DELAY_POS] += props_pos;
        row[F_VERSION] = version;
        row[F_BODY_CRC] = body_crc;
        row += SCAN_FIELDS;
        count++;
        pos += total;
        stop = STOP_END;
        stop_size = 0;
    }
finished:
    result = Py_BuildValue("nnin", count, pos, stop, stop_size);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    return result;
}

/* ---------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(java_hashes_doc,
"java_hashes(texts) -> bytes\n\n"
"Java String.hashCode of each str in the list, as native-endian int32 values.");

static PyObject *java_hashes(PyObject *self, PyObject *arg)
{
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "java_hashes takes a list of str");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(arg);
    PyObject *result = PyBytes_FromStringAndSize(NULL, count * 4);
    if (result == NULL)
        return NULL;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *text = PyList_GET_ITEM(arg, i);
        if (!PyUnicode_Check(text)) {
            Py_DECREF(result);
            PyErr_SetString(PyExc_TypeError, "java_hashes takes a list of str");
            return NULL;
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(text);
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        uint32_t h = 0;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *s = data;
            for (Py_ssize_t k = 0; k < len; k++)
                h = 31 * h + s[k];
        } else {
            for (Py_ssize_t k = 0; k < len; k++) {
                Py_UCS4 c = PyUnicode_READ(kind, data, k);
                if (c >= 0x10000) {         /* a surrogate pair in UTF-16 */
                    c -= 0x10000;
                    h = 31 * h + (0xD800 + (c >> 10));
                    h = 31 * h + (0xDC00 + (c & 0x3FF));
                } else {
                    h = 31 * h + c;
                }
            }
        }
        out[i] = (int32_t)h;
    }
    return result;
}


/* ---------------------------------------------------------------------------------------------- */
/* encode_put: store.put_path.encode_for_put for the common case, in one call.                      */

static PyObject *s_topic, *s_body, *s_queue_id, *s_tags, *s_keys, *s_properties, *s_flag,
    *s_sys_flag, *s_born_timestamp, *s_born_host, *s_TAGS, *s_KEYS, *s_UNIQ_KEY, *s_DELAY;

#define MAX_FAST_PROPERTIES 64

/* Java String.hashCode over UTF-16 units. */
static uint32_t java_hash(PyObject *text)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    uint32_t h = 0;
    for (Py_ssize_t k = 0; k < len; k++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, k);
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    return h;
}

/* A str with neither separator (\x01 when `name`, always \x02); -1 on error. */
static int clean_text(PyObject *text, int name)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_FindChar(text, 0x02, 0, len, 1) != -1)
        return 0;
    if (name && PyUnicode_FindChar(text, 0x01, 0, len, 1) != -1)
        return 0;
    return 1;
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

PyDoc_STRVAR(encode_put_doc,
"encode_put(message, context, now_ms) -> tuple | None\n\n"
"store.put_path.encode_for_put for the common case: (record, topic, queue_id, sys_flag,\n"
"tags_code, keys, uniq_key, store_timestamp_position). None when anything is unusual (a new\n"
"topic, a DELAY, a bad or odd field, an oversized record...): the Python path then decides,\n"
"with RocketMQ's status and a sentence.");

static PyObject *encode_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* METH_FASTCALL and direct tuple reads: argument parsing was a tenth of a put. */
    if (nargs != 3 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != 7) {
        PyErr_SetString(PyExc_TypeError, "encode_put(message, context (7-tuple), now_ms)");
        return NULL;
    }
    PyObject *message = args[0], *context = args[1];
    long long now_ms = PyLong_AsLongLong(args[2]);
    if (now_ms == -1 && PyErr_Occurred())
        return NULL;
    PyObject *valid_topics = PyTuple_GET_ITEM(context, 0), *host_fields = PyTuple_GET_ITEM(context, 1),
             *store_host = PyTuple_GET_ITEM(context, 2);
    long long max_message_size = PyLong_AsLongLong(PyTuple_GET_ITEM(context, 3));
    int style_49 = PyObject_IsTrue(PyTuple_GET_ITEM(context, 4));
    int allow_v2 = PyObject_IsTrue(PyTuple_GET_ITEM(context, 5));
    long long segment_size = PyLong_AsLongLong(PyTuple_GET_ITEM(context, 6));
    if (PyErr_Occurred())
        return NULL;
    if (!PyAnySet_Check(valid_topics) || !PyDict_Check(host_fields) || !PyBytes_Check(store_host)) {
        PyErr_SetString(PyExc_TypeError, "context: (set, dict, bytes, int, bool, bool, int)");
        return NULL;
    }

    PyObject *fields[10] = {NULL};
    PyObject *names[MAX_FAST_PROPERTIES], *values[MAX_FAST_PROPERTIES];
    int count = 0;
    PyObject *keys_joined = NULL, *record = NULL, *result = NULL;
    PyObject *const attrs[10] = {s_topic, s_body, s_queue_id, s_tags, s_keys, s_properties, s_flag,
                                 s_sys_flag, s_born_timestamp, s_born_host};
    for (int i = 0; i < 10; i++) {
        fields[i] = PyObject_GetAttr(message, attrs[i]);
        if (fields[i] == NULL)
            goto error;
    }
    PyObject *topic = fields[0], *body = fields[1], *queue_id_o = fields[2], *tags = fields[3],
             *keys = fields[4], *props = fields[5], *flag_o = fields[6], *sys_flag_o = fields[7],
             *born_ts_o = fields[8], *born_host = fields[9];

    if (!PyBytes_CheckExact(body) || !PyUnicode_CheckExact(topic) || !PyLong_CheckExact(queue_id_o) ||
        !PyLong_CheckExact(flag_o) || !PyLong_CheckExact(sys_flag_o))
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
    if (born_host == Py_None || (PyUnicode_CheckExact(born_host) && PyUnicode_GET_LENGTH(born_host) == 0))
        born = PyDict_GetItemString(host_fields, "127.0.0.1:0");
    else if (PyUnicode_CheckExact(born_host))
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
        if (n > 0) {
            PyObject *tokens = PyList_New(0);
            if (tokens == NULL)
                goto error;
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *token = PySequence_Fast_GET_ITEM(keys, i);
                if (!PyUnicode_CheckExact(token)) {
                    Py_DECREF(tokens);
                    goto fallback;
                }
                if (PyUnicode_GET_LENGTH(token) > 0 && PyList_Append(tokens, token) < 0) {
                    Py_DECREF(tokens);
                    goto error;
                }
            }
            if (PyList_GET_SIZE(tokens) > 0) {
                PyObject *space = PyUnicode_FromString(" ");
                keys_joined = space ? PyUnicode_Join(space, tokens) : NULL;
                Py_XDECREF(space);
            }
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
            int eq_delay = PyUnicode_Compare(name, s_DELAY);
            if (eq_delay == 0)
                goto fallback;                    /* delays move the message: the Python path */
            if (tags_at >= 0 && PyUnicode_Compare(name, s_TAGS) == 0) {
                values[tags_at] = value;
                continue;
            }
            if (keys_at >= 0 && PyUnicode_Compare(name, s_KEYS) == 0) {
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
        uint32_t h = java_hash(names[i]);
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
    if (props_len > 32767)
        goto fallback;

    Py_ssize_t topic_len;
    const char *topic_utf8 = PyUnicode_AsUTF8AndSize(topic, &topic_len);
    if (topic_utf8 == NULL)
        goto fallback_clear;
    int version = allow_v2 && topic_len > 127 ? 2 : 1;
    if (topic_len > (version == 1 ? 127 : 32767))
        goto fallback;
    Py_ssize_t born_len = PyBytes_GET_SIZE(born), store_len = PyBytes_GET_SIZE(store_host);
    if ((born_len != 8 && born_len != 20) || (store_len != 8 && store_len != 20))
        goto fallback;
    sys_flag = (sys_flag & ~0x30L) | (born_len == 20 ? 0x10 : 0) | (store_len == 20 ? 0x20 : 0);
    Py_ssize_t body_len = PyBytes_GET_SIZE(body);
    Py_ssize_t total = 72 + born_len + store_len + body_len + version + topic_len + 2 + props_len;
    if (total > max_message_size + 65536 || total + 8 > segment_size)
        goto fallback;

    record = PyByteArray_FromStringAndSize(NULL, total);
    if (record == NULL)
        goto error;
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(record);
    const unsigned char *body_bytes = (const unsigned char *)PyBytes_AS_STRING(body);
    put32(p, (int32_t)total);
    put32(p + 4, version == 2 ? MAGIC_V2 : MAGIC_V1);
    put32(p + 8, (int32_t)(crc32_bytes(body_bytes, body_len) & 0x7FFFFFFF));
    put32(p + 12, (int32_t)queue_id);
    put32(p + 16, (int32_t)flag);
    memset(p + 20, 0, 16);                         /* queue and physical offsets: set in the lock */
    put32(p + 36, (int32_t)sys_flag);
    put64(p + 40, born_ts);
    unsigned char *q = p + 48;
    memcpy(q, PyBytes_AS_STRING(born), born_len);
    q += born_len;
    put64(q, now_ms);
    q += 8;
    memcpy(q, PyBytes_AS_STRING(store_host), store_len);
    q += store_len;
    memset(q, 0, 12);                              /* reconsume times, prepared offset */
    put32(q + 12, (int32_t)body_len);
    q += 16;
    memcpy(q, body_bytes, body_len);
    q += body_len;
    if (version == 2) {
        q[0] = (unsigned char)(topic_len >> 8);
        q[1] = (unsigned char)topic_len;
        q += 2;
    } else {
        *q++ = (unsigned char)topic_len;
    }
    memcpy(q, topic_utf8, topic_len);
    q += topic_len;
    q[0] = (unsigned char)(props_len >> 8);
    q[1] = (unsigned char)props_len;
    q += 2;
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

    PyObject *final_tags = tags_at >= 0 ? values[tags_at] : NULL;
    PyObject *final_keys = keys_at >= 0 ? values[keys_at] : NULL;
    PyObject *uniq = NULL;
    for (int i = 0; i < count; i++) {
        if (PyUnicode_Compare(names[i], s_UNIQ_KEY) == 0)
            uniq = values[i];
        else if (final_tags == NULL && PyUnicode_Compare(names[i], s_TAGS) == 0)
            final_tags = values[i];
        else if (final_keys == NULL && PyUnicode_Compare(names[i], s_KEYS) == 0)
            final_keys = values[i];
    }
    if (PyErr_Occurred())
        goto error;
    long long tags_code = final_tags && PyUnicode_GET_LENGTH(final_tags) ? (int32_t)java_hash(final_tags) : 0;
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
    for (int i = 0; i < 10; i++)
        Py_XDECREF(fields[i]);
    return result;
}

/* ---------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(place_doc,
"place(target, position, record, queue_offset, phy_offset, timestamp_position, store_timestamp)\n\n"
"Copy an encoded record into `target` at `position` with its queue offset, physical offset and\n"
"store timestamp set there, TOTALSIZE and magic last (a reader never sees a half-written record\n"
"with a valid header). `record` itself is left as it was.");

static PyObject *place(PyObject *self, PyObject *args)
{
    Py_buffer target, record;
    Py_ssize_t position, ts_position;
    long long queue_offset, phy_offset, store_ts;
    if (!PyArg_ParseTuple(args, "w*ny*LLnL:place", &target, &position, &record, &queue_offset,
                          &phy_offset, &ts_position, &store_ts))
        return NULL;
    PyObject *result = NULL;
    if (position < 0 || record.len < 36 || ts_position < 36 || ts_position + 8 > record.len ||
        position > target.len - record.len) {
        PyErr_SetString(PyExc_ValueError, "the record does not fit the target at that position");
        goto done;
    }
    unsigned char *t = (unsigned char *)target.buf + position;
    memcpy(t + 8, (const unsigned char *)record.buf + 8, record.len - 8);
    put64(t + 20, queue_offset);
    put64(t + 28, phy_offset);
    put64(t + ts_position, store_ts);
    memcpy(t, record.buf, 8);
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&target);
    PyBuffer_Release(&record);
    return result;
}

/* ---------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(index_hashes_doc,
"index_hashes(buf, rows, out_hashes, out_rows) -> count\n\n"
"The index keys of scan `rows` of `buf`, as buildIndex makes them (spec §5.6): for every record\n"
"that is not a ROLLBACK, `topic#UNIQ_KEY` then `topic#token` for each non-empty space-separated\n"
"token of KEYS. Writes the Java String.hashCode of each key (int64 out_hashes) and its row number\n"
"(int64 out_rows), in order. Returns -1 when a topic or key is not ASCII (the caller decodes those\n"
"the Python way) and -2 when the outputs are too small.");

static PyObject *index_hashes(PyObject *self, PyObject *args)
{
    Py_buffer buf, rows, out_h, out_r;
    if (!PyArg_ParseTuple(args, "y*y*w*w*:index_hashes", &buf, &rows, &out_h, &out_r))
        return NULL;
    PyObject *result = NULL;
    if (rows.len % (SCAN_FIELDS * 8) || out_h.len % 8 || out_r.len != out_h.len ||
        ((uintptr_t)rows.buf & 7) || ((uintptr_t)out_h.buf & 7) || ((uintptr_t)out_r.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "rows, out_hashes and out_rows must be aligned int64 arrays");
        goto done;
    }
    const unsigned char *b = buf.buf;
    const int64_t *row = rows.buf;
    Py_ssize_t n = rows.len / (SCAN_FIELDS * 8), capacity = out_h.len / 8, count = 0;
    int64_t *hashes = out_h.buf, *numbers = out_r.buf;
    for (Py_ssize_t i = 0; i < n; i++, row += SCAN_FIELDS) {
        if ((row[F_SYS_FLAG] & 0x0C) == 0x0C)
            continue;
        int64_t spans[2][2] = {{row[F_UNIQ_POS], row[F_UNIQ_LEN]}, {row[F_KEYS_POS], row[F_KEYS_LEN]}};
        if (spans[0][0] < 0 && spans[1][0] < 0)
            continue;
        int64_t tp = row[F_TOPIC_POS], tl = row[F_TOPIC_LEN];
        if (tp < 0 || tp + tl > buf.len)
            goto out_of_range;
        uint32_t prefix = 0;
        for (int64_t k = 0; k < tl; k++) {
            if (b[tp + k] >= 0x80)
                goto not_ascii;
            prefix = 31 * prefix + b[tp + k];
        }
        prefix = 31 * prefix + '#';
        for (int s = 0; s < 2; s++) {
            int64_t pos = spans[s][0], len = spans[s][1];
            if (pos < 0)
                continue;
            if (pos + len > buf.len)
                goto out_of_range;
            int64_t start = pos, end = pos + len;
            while (start < end) {
                int64_t stop = start;
                if (s == 1)                       /* KEYS: split on spaces, skip empty tokens */
                    while (stop < end && b[stop] != ' ')
                        stop++;
                else
                    stop = end;                   /* UNIQ_KEY: the whole value */
                if (stop > start) {
                    uint32_t h = prefix;
                    for (int64_t k = start; k < stop; k++) {
                        if (b[k] >= 0x80)
                            goto not_ascii;
                        h = 31 * h + b[k];
                    }
                    if (count == capacity) {
                        result = PyLong_FromLong(-2);
                        goto done;
                    }
                    hashes[count] = (int32_t)h;
                    numbers[count++] = i;
                }
                start = stop + 1;
            }
        }
    }
    result = PyLong_FromSsize_t(count);
    goto done;
not_ascii:
    result = PyLong_FromLong(-1);
    goto done;
out_of_range:
    PyErr_SetString(PyExc_ValueError, "a row points outside the buffer");
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out_h);
    PyBuffer_Release(&out_r);
    return result;
}

static PyMethodDef methods[] = {
    {"index_hashes", index_hashes, METH_VARARGS, index_hashes_doc},
    {"place", place, METH_VARARGS, place_doc},
    {"encode_put", (PyCFunction)(void (*)(void))encode_put, METH_FASTCALL, encode_put_doc},
    {"encode_record", encode_record, METH_VARARGS, encode_record_doc},
    {"scan", scan, METH_VARARGS, scan_doc},
    {"java_hashes", java_hashes, METH_O, java_hashes_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store._kernel",
    "Compiled hot loops of the store (see store/kernel.py for the pure-Python twins).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void)
{
    crc_init();
    crc_find_zlib();
    struct { PyObject **slot; const char *text; } strings[] = {
        {&s_topic, "topic"}, {&s_body, "body"}, {&s_queue_id, "queue_id"}, {&s_tags, "tags"},
        {&s_keys, "keys"}, {&s_properties, "properties"}, {&s_flag, "flag"},
        {&s_sys_flag, "sys_flag"}, {&s_born_timestamp, "born_timestamp"},
        {&s_born_host, "born_host"}, {&s_TAGS, "TAGS"}, {&s_KEYS, "KEYS"},
        {&s_UNIQ_KEY, "UNIQ_KEY"}, {&s_DELAY, "DELAY"},
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        *strings[i].slot = PyUnicode_InternFromString(strings[i].text);
        if (*strings[i].slot == NULL)
            return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "SCAN_FIELDS", SCAN_FIELDS) < 0 ||
        PyModule_AddIntConstant(m, "STOP_END", STOP_END) < 0 ||
        PyModule_AddIntConstant(m, "STOP_BLANK", STOP_BLANK) < 0 ||
        PyModule_AddIntConstant(m, "STOP_INVALID", STOP_INVALID) < 0 ||
        PyModule_AddIntConstant(m, "STOP_FULL", STOP_FULL) < 0 ||
        PyModule_AddStringConstant(m, "CRC", zlib_crc32 ? "zlib" : "slicing-by-8") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
