/* Java String.hashCode: of strings, and of the index keys of scanned records (spec §5.6). */

#include "kernel.h"

/* Java String.hashCode continued from h over the string's UTF-16 units (a character past U+FFFF is
 * a surrogate pair): the hash of a + b is rmq_java_hash_from(rmq_java_hash(a), b). */
uint32_t rmq_java_hash_from(uint32_t h, PyObject *text)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *s = data;
        for (Py_ssize_t k = 0; k < len; k++)
            h = 31 * h + s[k];
        return h;
    }
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

/* Java String.hashCode of the string. */
uint32_t rmq_java_hash(PyObject *text)
{
    return rmq_java_hash_from(0, text);
}

const char rmq_java_hashes_doc[] = (
"java_hashes(texts) -> bytes\n\n"
"Java String.hashCode of each str in the list, as native-endian int32 values.");

PyObject *rmq_java_hashes(PyObject *self, PyObject *arg)
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
        uint32_t h = rmq_java_hash(text);
        out[i] = (int32_t)h;
    }
    return result;
}


/* Java's String.hashCode step `h = 31 * h + c` over p[0..n), four characters a step (the powers of
 * 31 mod 2^32 make it the same value, with a quarter of the multiply chain). Returns -1 when a byte
 * is not ASCII, else 0. */
static inline int hash_ascii(const unsigned char *p, int64_t n, uint32_t *io)
{
    uint32_t h = *io;
    unsigned char high = 0;
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        high |= p[k] | p[k + 1] | p[k + 2] | p[k + 3];
        h = h * 923521u + p[k] * 29791u + p[k + 1] * 961u + p[k + 2] * 31u + p[k + 3];
    }
    for (; k < n; k++) {
        high |= p[k];
        h = 31 * h + p[k];
    }
    *io = h;
    return high >= 0x80 ? -1 : 0;
}


const char rmq_index_hashes_doc[] = (
"index_hashes(buf, rows, out_hashes, out_rows) -> count\n\n"
"The index keys of scan `rows` of `buf`, as buildIndex makes them (spec §5.6): for every record\n"
"that is not a ROLLBACK, `topic#UNIQ_KEY` then `topic#token` for each non-empty space-separated\n"
"token of KEYS. Writes the Java String.hashCode of each key (int64 out_hashes) and its row number\n"
"(int64 out_rows), in order. Returns -1 when a topic or key is not ASCII (the caller decodes those\n"
"the Python way) and -2 when the outputs are too small.");

PyObject *rmq_index_hashes(PyObject *self, PyObject *args)
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
    /* The answer without touching Python: the count, or -1 (not ASCII), -2 (full), -3 (a row out of
     * range); the GIL is released around a big loop (see kernel.h). */
    Py_ssize_t answer = 0;
    KERNEL_RELEASE_IF(n)
    for (Py_ssize_t i = 0; i < n && answer == 0; i++, row += SCAN_FIELDS) {
        if ((row[F_SYS_FLAG] & 0x0C) == 0x0C)
            continue;
        int64_t spans[2][2] = {{row[F_UNIQ_POS], row[F_UNIQ_LEN]}, {row[F_KEYS_POS], row[F_KEYS_LEN]}};
        if (spans[0][0] < 0 && spans[1][0] < 0)
            continue;
        int64_t tp = row[F_TOPIC_POS], tl = row[F_TOPIC_LEN];
        /* Lengths left, not `tp + tl`: a forged row must not wrap past the check. */
        if (tp < 0 || tl < 0 || tp > buf.len || tl > buf.len - tp) {
            answer = -3;
            break;
        }
        uint32_t prefix = 0;
        answer = hash_ascii(b + tp, tl, &prefix);
        prefix = 31 * prefix + '#';
        for (int s = 0; s < 2 && answer == 0; s++) {
            int64_t pos = spans[s][0], len = spans[s][1];
            if (pos < 0)
                continue;
            if (len < 0 || pos > buf.len || len > buf.len - pos) {
                answer = -3;
                break;
            }
            int64_t start = pos, end = pos + len;
            while (start < end && answer == 0) {
                int64_t stop = start;
                if (s == 1)                       /* KEYS: split on spaces, skip empty tokens */
                    while (stop < end && b[stop] != ' ')
                        stop++;
                else
                    stop = end;                   /* UNIQ_KEY: the whole value */
                if (stop > start) {
                    uint32_t h = prefix;
                    if ((answer = hash_ascii(b + start, stop - start, &h)) != 0)
                        break;
                    if (count == capacity) {
                        answer = -2;
                        break;
                    }
                    hashes[count] = (int32_t)h;
                    numbers[count++] = i;
                }
                start = stop + 1;
            }
        }
    }
    KERNEL_ACQUIRE
    if (answer == -3)
        PyErr_SetString(PyExc_ValueError, "a row points outside the buffer");
    else
        result = PyLong_FromSsize_t(answer == 0 ? count : answer);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out_h);
    PyBuffer_Release(&out_r);
    return result;
}

