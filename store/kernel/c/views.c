/* view_columns: the pipeline's byte and text columns of many scan rows as Arrow views into the
 * segment's map, nothing copied but values of up to 12 bytes (store.pipeline.columns_native.views).
 * Python twin: store/kernel/views.py (same answers, same refusals).
 *
 * A view is Arrow's BinaryView / StringView layout (arrow/cpp/src/arrow/util/binary_view_util.h,
 * "Variable-size Binary View Layout" of the Arrow columnar format): 16 bytes, little-endian,
 *   length <= 12: int32 length, the value's bytes, zeros;
 *   length  > 12: int32 length, the value's first 4 bytes, int32 buffer index, int32 offset.
 * Buffer k is the caller's slice buf[k << 30 : (k + 2) << 30], so a value at `pos` is buffer
 * pos >> 30 at offset pos & (2^30 - 1), and any value of at most 2^30 bytes lies inside it (a
 * segment past 2 GiB needs more than Arrow's int32 offsets into a single buffer). */

#include "kernel.h"

#define V_BODY 3             /* decode_columns' slot numbers (store.kernel.columns.SLOTS) */
#define V_UNIQ 8
#define V_TEXT ((1 << 4) | (1 << 6) | (1 << 7) | (1 << 8))   /* topic, tags, keys, uniq_key */
#define V_PROPERTY_VALUES ((1 << 6) | (1 << 7) | (1 << 8))
#define V_ALL (((1 << (V_UNIQ + 1)) - 1) & ~((1 << V_BODY) - 1))
#define VIEW_SHIFT 30
#define VIEW_MAX_LENGTH ((int64_t)1 << VIEW_SHIFT)
#define VIEW_AHEAD 8

static const int value_field[V_UNIQ + 1] = {
    0, 0, 0, F_BODY_POS, F_TOPIC_POS, F_PROPS_POS, F_TAGS_POS, F_KEYS_POS, F_UNIQ_POS};

static inline void put_le32(unsigned char *o, int32_t v)
{
    uint32_t u = (uint32_t)v;
    o[0] = (unsigned char)u;
    o[1] = (unsigned char)(u >> 8);
    o[2] = (unsigned char)(u >> 16);
    o[3] = (unsigned char)(u >> 24);
}

const char rmq_view_columns_doc[] = (
"view_columns(buf, rows, want, out) -> flags\n\n"
"Arrow BinaryView/StringView entries (16 bytes each) of the values the scan rows `rows` locate in\n"
"`buf`, for the slots of `want` among decode_columns' body (3), topic (4), properties_raw (5),\n"
"tags (6), keys (7) and uniq_key (8): len(rows) views per wanted slot, slot after slot in slot\n"
"order, into the writable buffer `out` (exactly that size). A value longer than 12 bytes points\n"
"at buffer pos >> 30, offset pos & (2**30 - 1) (the caller's slices buf[k << 30:(k + 2) << 30]).\n"
"An absent TAGS/KEYS/UNIQ_KEY (position < 0) is an empty view. `flags`: bit s = slot s holds a\n"
"value the caller must build the copying way (not UTF-8 in a text slot, or longer than 2**30).\n"
"Raises ValueError for a row pointing outside `buf`.");

PyObject *rmq_view_columns(PyObject *self, PyObject *args)
{
    Py_buffer buf, rows, out;
    int want;
    if (!PyArg_ParseTuple(args, "y*y*iw*:view_columns", &buf, &rows, &want, &out))
        return NULL;
    PyObject *result = NULL;
    if (rows.len % (SCAN_FIELDS * 8) || ((uintptr_t)rows.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "rows must be an aligned whole number of scan rows");
        goto done;
    }
    if (want < 0 || (want & ~V_ALL)) {
        PyErr_SetString(PyExc_ValueError, "want holds bits of no view column");
        goto done;
    }
    Py_ssize_t n = rows.len / (SCAN_FIELDS * 8), len = buf.len;
    int slots = __builtin_popcount((unsigned)want);
    if (out.len != (Py_ssize_t)slots * n * 16) {
        PyErr_SetString(PyExc_ValueError, "out must hold 16 bytes per row and wanted column");
        goto done;
    }
    const unsigned char *b = buf.buf;
    const int64_t *r = rows.buf;
    int flags = 0, outside = 0;
    KERNEL_RELEASE_IF(n)
    unsigned char *o = out.buf;
    int wanted[V_UNIQ + 1], k = 0;
    for (int s = V_BODY; s <= V_UNIQ; s++)
        if (want & (1 << s))
            wanted[k++] = s;
    /* Row by row (a record's values share its lines), the records VIEW_AHEAD rows on asked for
     * now: each record is otherwise a memory latency or two, the views waiting on the reads. */
    for (Py_ssize_t i = 0; i < n && !outside; i++) {
        if (i + VIEW_AHEAD < n) {
            const int64_t *ahead = r + (i + VIEW_AHEAD) * SCAN_FIELDS;
            int64_t body = ahead[F_BODY_POS], props = ahead[F_PROPS_POS];
            if (body >= 0 && body < len)
                __builtin_prefetch(b + body);
            if (props >= 0 && props < len)
                __builtin_prefetch(b + props);
        }
        /* TAGS, KEYS and UNIQ_KEY values lie inside PROPERTIES (the scan found them there): when
         * it is all ASCII (one check, eight bytes a step), so are they. */
        int64_t row[SCAN_FIELDS];       /* read once: another thread may write the rows meanwhile */
        memcpy(row, r + i * SCAN_FIELDS, sizeof row);
        int props_ascii = 0;
        if (want & V_PROPERTY_VALUES) {
            int64_t props = row[F_PROPS_POS], props_len = row[F_PROPS_LEN];
            if (props >= 0 && props_len >= 0 && props <= len && props_len <= len - props) {
                int64_t lo = props, hi = props + props_len;
                props_ascii = utf8_ok(b + props, props_len) == 2;
                for (int f = F_TAGS_POS; props_ascii && f <= F_UNIQ_POS; f += 2) {
                    int64_t at = row[f], n_at = row[f + 1];
                    props_ascii = at < 0 || (at >= lo && n_at >= 0 && n_at <= hi - at);
                }
            }
        }
        for (int j = 0; j < k; j++) {
            int s = wanted[j], field = value_field[s];
            unsigned char *v = o + ((Py_ssize_t)j * n + i) * 16;
            int64_t pos = row[field], length = row[field + 1];
            memset(v, 0, 16);
            if (pos < 0 && s >= 6)
                continue;                             /* an absent property value: null */
            if (pos < 0 || length < 0 || pos > len || length > len - pos) {
                outside = 1;
                break;
            }
            if (length > VIEW_MAX_LENGTH) {
                flags |= 1 << s;
                continue;
            }
            if (((V_TEXT >> s) & 1) && !(flags & (1 << s)) && !(s >= 6 && props_ascii)
                    && !utf8_ok(b + pos, length))
                flags |= 1 << s;
            put_le32(v, (int32_t)length);
            if (length <= 12) {
                memcpy(v + 4, b + pos, (size_t)length);
            } else {
                memcpy(v + 4, b + pos, 4);
                put_le32(v + 8, (int32_t)(pos >> VIEW_SHIFT));
                put_le32(v + 12, (int32_t)(pos & (VIEW_MAX_LENGTH - 1)));
            }
        }
    }
    KERNEL_ACQUIRE
    if (outside)
        PyErr_SetString(PyExc_ValueError, "a row points outside the buffer");
    else
        result = PyLong_FromLong(flags);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out);
    return result;
}
