/* fixed_columns: the pipeline's fixed-width commit-log columns of many scan rows in one pass
 * (store.pipeline.commitlog_decoder), each written into its block of one output buffer, ready to be
 * wrapped as Arrow arrays without a copy. Replaces a strided copy, a cast and an allocation per
 * column. Python twin: store/kernel/fixed.py (same answers, same refusals). */

#include "kernel.h"

#define FX_FIELD_MASK 0x3F   /* a code's scan-row field */
#define FX_INT32 0x40        /* the field's low 32 bits as int32 (numpy's astype(np.int32)) */
#define FX_MAGIC 0x80        /* MESSAGE_MAGIC_V2 where version == 2, else MESSAGE_MAGIC_V1 (int32) */
#define FX_BASED 0x81        /* the field plus `base` (int64, wrapping as numpy's int64 does) */
#define FX_CHUNK 256         /* rows per chunk (53 KB of rows) */

static Py_ssize_t fx_width(unsigned char code)
{
    if (code == FX_MAGIC)
        return 4;
    if (code == FX_BASED)
        return 8;
    if (code & 0x80)
        return 0;
    return (code & FX_FIELD_MASK) < SCAN_FIELDS ? ((code & FX_INT32) ? 4 : 8) : 0;
}

const char rmq_fixed_columns_doc[] = (
"fixed_columns(rows, base, codes, out) -> bytes_written\n\n"
"One column per byte of `codes` from the scan rows `rows` (int64, SCAN_FIELDS per row), written\n"
"to the writable, 8-byte aligned buffer `out` one after another, each block padded to a multiple\n"
"of 8 bytes. A code is a scan-row field f (int64 copy), f | 0x40 (its low 32 bits as int32),\n"
"0x80 (the record's magic from the version field, int32) or 0x81 (field `pos` + base, int64,\n"
"wrapping).");

PyObject *rmq_fixed_columns(PyObject *self, PyObject *args)
{
    Py_buffer rows, codes, out;
    long long base;
    if (!PyArg_ParseTuple(args, "y*Ly*w*:fixed_columns", &rows, &base, &codes, &out))
        return NULL;
    PyObject *result = NULL;
    if (rows.len % (SCAN_FIELDS * 8) || ((uintptr_t)rows.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "rows must be an aligned whole number of scan rows");
        goto done;
    }
    Py_ssize_t n = rows.len / (SCAN_FIELDS * 8), need = 0, k_count = codes.len;
    const unsigned char *code = codes.buf;
    for (Py_ssize_t k = 0; k < k_count; k++) {
        Py_ssize_t w = fx_width(code[k]);
        if (w == 0) {
            PyErr_SetString(PyExc_ValueError, "codes holds an unknown column code");
            goto done;
        }
        need += (w * n + 7) & ~(Py_ssize_t)7;    /* n < 2^60 (rows.len / 208): no overflow */
    }
    if (out.len < need || (need && ((uintptr_t)out.buf & 7))) {
        PyErr_SetString(PyExc_ValueError, "out must be an aligned buffer of the columns' size");
        goto done;
    }
    {
        const int64_t *all = rows.buf;
        unsigned char *o = out.buf;
        uint64_t ubase = (uint64_t)base;
        Py_BEGIN_ALLOW_THREADS                    /* no Python object below: see kernel.h */
        /* Rows in chunks that stay in L2 while every column takes its fields from them: a whole
         * batch's rows (6.8 MB for 32,768) read once per column would come from memory 13 times. */
        for (Py_ssize_t first = 0; first < n; first += FX_CHUNK) {
            Py_ssize_t count = n - first < FX_CHUNK ? n - first : FX_CHUNK;
            const int64_t *r = all + first * SCAN_FIELDS;
            unsigned char *block_at = o;
            for (Py_ssize_t k = 0; k < k_count; k++) {
                unsigned char c = code[k];
                Py_ssize_t w = fx_width(c), f = c & FX_FIELD_MASK;
                if (c == FX_MAGIC) {
                    int32_t *d = (int32_t *)block_at + first;
                    for (Py_ssize_t i = 0; i < count; i++)
                        d[i] = r[i * SCAN_FIELDS + F_VERSION] == 2 ? MAGIC_V2 : MAGIC_V1;
                } else if (c == FX_BASED) {
                    int64_t *d = (int64_t *)block_at + first;
                    for (Py_ssize_t i = 0; i < count; i++)
                        d[i] = (int64_t)((uint64_t)r[i * SCAN_FIELDS + F_POS] + ubase);
                } else if (c & FX_INT32) {
                    int32_t *d = (int32_t *)block_at + first;
                    for (Py_ssize_t i = 0; i < count; i++)
                        d[i] = (int32_t)(uint32_t)(uint64_t)r[i * SCAN_FIELDS + f];
                } else {
                    int64_t *d = (int64_t *)block_at + first;
                    for (Py_ssize_t i = 0; i < count; i++)
                        d[i] = r[i * SCAN_FIELDS + f];
                }
                block_at += (w * n + 7) & ~(Py_ssize_t)7;
            }
        }
        for (Py_ssize_t k = 0; k < k_count; k++) {   /* the padding too: nothing left unwritten */
            Py_ssize_t w = fx_width(code[k]), block = (w * n + 7) & ~(Py_ssize_t)7;
            memset(o + w * n, 0, (size_t)(block - w * n));
            o += block;
        }
        Py_END_ALLOW_THREADS
    }
    result = PyLong_FromSsize_t(need);
done:
    PyBuffer_Release(&rows);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&out);
    return result;
}
