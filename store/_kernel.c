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
 * The CRC is zlib's CRC-32 (what java.util.zip.CRC32 and RocketMQ's UtilAll.crc32 compute), done
 * with slicing-by-8 tables built at import. Nothing here keeps a pointer past the call that got it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

static uint32_t crc32_bytes(const unsigned char *p, Py_ssize_t n)
{
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

static PyMethodDef methods[] = {
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
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "SCAN_FIELDS", SCAN_FIELDS) < 0 ||
        PyModule_AddIntConstant(m, "STOP_END", STOP_END) < 0 ||
        PyModule_AddIntConstant(m, "STOP_BLANK", STOP_BLANK) < 0 ||
        PyModule_AddIntConstant(m, "STOP_INVALID", STOP_INVALID) < 0 ||
        PyModule_AddIntConstant(m, "STOP_FULL", STOP_FULL) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
