/* pull_unfiltered: an unfiltered pull's window planned, sliced and checked in one call.
 *
 * The common pull of store/commitlog/read_path.py's get_message (no tag filter, a window of at most
 * 64 units): `_plan_unfiltered` (store/commitlog/read_plan.py) on the units, the taken records sliced
 * from one segment (`_slice_records`), and, for units not written by this process's dispatch, the
 * last-line check that each record is the unit's (`_carries`: QUEUEID, QUEUEOFFSET, TOPIC). It has
 * no Python twin of its own: it answers None whenever it is not sure to give the Python path's
 * answer (a plan that needs the general scan, a record outside the segment's readable part or of
 * size <= 0, a record that fails the check, an int past int64), and then the Python path runs as
 * if this did not exist (tests/test_kernel_pull.py compares the two on every outcome).
 *
 * Its check is never laxer than `_carries`: a record passes only when it is at least 88 bytes (the
 * header `_carries` unpacks), carries the queue id and offset, and its TOPIC LENGTH and TOPIC, read
 * at their positions within the record, are the pulled topic's.
 */

#include "kernel.h"

#define UNIT_SIZE 20
#define MAX_UNITS 64

enum { FORM_BYTES = 0, FORM_VIEW = 1, FORM_DECODED = 2 };

static int as_int64(PyObject *o, int64_t *out)
{
    if (!PyLong_Check(o))
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    *out = v;
    return 0;
}

/* How many units `_plan_unfiltered` takes, or -1 (None). */
static Py_ssize_t plan(const int64_t *phys, const int32_t *sizes, Py_ssize_t count,
                       const int64_t *a)
{
    int64_t max_msg_nums = a[0], mem_bytes = a[1], mem_count = a[2], disk_bytes = a[3],
            disk_count = a[4], commit_log_max = a[6], in_memory = a[7];
    int has_max_total = a[8];
    int64_t low = phys[0], high = phys[0];
    for (Py_ssize_t i = 1; i < count; i++) {
        if (phys[i] < low)
            low = phys[i];
        if (phys[i] > high)
            high = phys[i];
    }
    int64_t limit_bytes, limit_count;
    if ((__int128)commit_log_max - low <= in_memory) {
        limit_bytes = mem_bytes;
        limit_count = mem_count;
    } else if ((__int128)commit_log_max - high > in_memory) {
        limit_bytes = disk_bytes;
        limit_count = disk_count;
    } else {
        return -1;
    }
    if (has_max_total && a[5] < limit_bytes)
        limit_bytes = a[5];
    int64_t wanted = limit_count < max_msg_nums ? limit_count : max_msg_nums;
    Py_ssize_t taken = count;
    if (wanted < taken)
        taken = wanted > 1 ? (Py_ssize_t)wanted : 1;
    if (taken > 1) {
        int64_t total = 0;
        for (Py_ssize_t i = 0; i < taken; i++) {
            if (sizes[i] <= 0)
                return -1;
            total += sizes[i];
        }
        if (total > limit_bytes)
            return -1;
    }
    return taken;
}

/* 1 if the record rec[0:len] is the unit's (queue id, queue offset, topic when given). */
static int carries(const unsigned char *rec, Py_ssize_t len, int32_t queue_id, int64_t queue_offset,
                   const unsigned char *topic, Py_ssize_t topic_len)
{
    if (len < 88 || get32(rec + 12) != queue_id || get64(rec + 20) != queue_offset)
        return 0;
    if (topic == NULL)
        return 1;
    int32_t magic = get32(rec + 4), sys_flag = get32(rec + 36);
    Py_ssize_t width = magic == MAGIC_V2 ? 2 : 1;
    Py_ssize_t at = 68 + ((sys_flag & SYSFLAG_BORNHOST_V6) ? 20 : 8) +
        ((sys_flag & SYSFLAG_STOREHOST_V6) ? 20 : 8);
    if (at + 4 > len)
        return 0;
    int32_t body = get32(rec + at);
    at += 4;
    if (body > 0 && body > len - at)
        return 0;
    at += body > 0 ? body : 0;
    if (width > len - at)
        return 0;
    Py_ssize_t t = width == 1 ? (int8_t)rec[at] : (int16_t)(((uint16_t)rec[at] << 8) | rec[at + 1]);
    at += width;
    return t == topic_len && t <= len - at && memcmp(rec + at, topic, (size_t)t) == 0;
}

/* 1 when `view` is a 1-D memoryview of unsigned bytes with stride 1 and no suboffsets (what
 * memoryview(mmap) is): then view_slice_fast gives what slicing it gives. */
static int plain_bytes_view(PyObject *view)
{
    if (!PyMemoryView_Check(view))
        return 0;
    Py_buffer *b = PyMemoryView_GET_BUFFER(view);
    return b->ndim == 1 && b->itemsize == 1 && b->shape != NULL && b->strides != NULL
        && b->strides[0] == 1 && b->suboffsets == NULL && b->format != NULL
        && strcmp(b->format, "B") == 0;
}

/* view[start:stop] (0 <= start <= stop <= len(view)) for a plain_bytes_view: a new memoryview on
 * the same managed buffer (PyMemoryView_FromObject of a memoryview registers one), narrowed as
 * memoryview's own slicing does (buf moved by start, shape and len set to stop - start; stride 1,
 * so its contiguity flags stay those of `view`), without the two ints and the slice object a
 * subscript needs. tests/test_kernel_pull.py compares it with slicing. */
static PyObject *view_slice_fast(PyObject *view, Py_ssize_t start, Py_ssize_t stop)
{
    PyObject *item = PyMemoryView_FromObject(view);
    if (item == NULL)
        return NULL;
    Py_buffer *b = PyMemoryView_GET_BUFFER(item);
    b->buf = (char *)b->buf + start;
    b->shape[0] = stop - start;
    b->len = stop - start;
    return item;
}

static PyObject *view_slice(PyObject *view, Py_ssize_t start, Py_ssize_t stop)
{
    PyObject *a = PyLong_FromSsize_t(start), *b = PyLong_FromSsize_t(stop);
    PyObject *slice = (a && b) ? PySlice_New(a, b, NULL) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (slice == NULL)
        return NULL;
    PyObject *item = PyObject_GetItem(view, slice);
    Py_DECREF(slice);
    return item;
}

const char rmq_pull_unfiltered_doc[] = (
"pull_unfiltered(data, max_msg_nums, mem_bytes, mem_count, disk_bytes, disk_count, max_total,\n"
"                commit_log_max, in_memory_bytes, segment, base, readable, form, queue_id,\n"
"                first_offset, topic, decoders) -> (taken, last_phy, records) | None\n\n"
"read_path.get_message's unfiltered small-window pull: `_plan_unfiltered` on the units `data`, the\n"
"taken records of `segment` (a mapping starting at commit log offset `base`, `readable` bytes\n"
"readable) as bytes (form 0), memoryviews (1) or decoded by store.kernel.decode's rules with\n"
"`decoders` = (cls, decode_one, decode_properties, host_to_string) (2); queue_id None: trusted\n"
"units, else each record must carry queue_id, first_offset + its index and `topic` (bytes; None:\n"
"not checked). None: ask the Python path.");

PyObject *rmq_pull_unfiltered(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "pull_unfiltered takes 17 arguments");
        return NULL;
    }
    /* a: max_msg_nums, mem_bytes, mem_count, disk_bytes, disk_count, max_total, commit_log_max,
     * in_memory_bytes, has_max_total */
    int64_t a[9] = {0}, base, readable, form, queue_id = 0, first_offset = 0;
    static const int slots[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int k = 0; k < 8; k++) {
        if (k == 5 && args[6] == Py_None)
            continue;
        if (as_int64(args[slots[k]], &a[k]) < 0)
            Py_RETURN_NONE;
    }
    a[8] = args[6] != Py_None;
    int check = args[13] != Py_None;
    if (as_int64(args[10], &base) < 0 || as_int64(args[11], &readable) < 0 ||
        as_int64(args[12], &form) < 0 || form < FORM_BYTES || form > FORM_DECODED ||
        (check && (as_int64(args[13], &queue_id) < 0 || queue_id != (int32_t)queue_id ||
                   as_int64(args[14], &first_offset) < 0)) ||
        !PyBytes_Check(args[0]) || (args[15] != Py_None && !PyBytes_Check(args[15])))
        Py_RETURN_NONE;
    rmq_decoder decoder = {NULL, NULL, NULL, {0}, {NULL}};
    if (form == FORM_DECODED) {
        if (!PyTuple_Check(args[16]) || PyTuple_GET_SIZE(args[16]) != 4)
            Py_RETURN_NONE;
        if (rmq_decoders_check(PyTuple_GET_ITEM(args[16], 0)) < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        decoder.decode_one = PyTuple_GET_ITEM(args[16], 1);
        decoder.decode_properties = PyTuple_GET_ITEM(args[16], 2);
        decoder.host_to_string = PyTuple_GET_ITEM(args[16], 3);
    }
    Py_ssize_t data_len = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t count = data_len / UNIT_SIZE;
    if (count == 0 || count > MAX_UNITS || data_len % UNIT_SIZE)
        Py_RETURN_NONE;
    const unsigned char *units = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    int64_t phys[MAX_UNITS];
    int32_t sizes[MAX_UNITS];
    for (Py_ssize_t i = 0; i < count; i++) {
        phys[i] = get64(units + i * UNIT_SIZE);
        sizes[i] = get32(units + i * UNIT_SIZE + 8);
    }
    Py_ssize_t taken = plan(phys, sizes, count, a);
    if (taken < 0)
        Py_RETURN_NONE;
    if (check && first_offset > INT64_MAX - taken)
        Py_RETURN_NONE;

    Py_buffer segment;
    if (PyObject_GetBuffer(args[9], &segment, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const unsigned char *buf = segment.buf;
    const unsigned char *topic = NULL;
    Py_ssize_t topic_len = 0;
    if (args[15] != Py_None) {
        topic = (const unsigned char *)PyBytes_AS_STRING(args[15]);
        topic_len = PyBytes_GET_SIZE(args[15]);
    }
    PyObject *result = Py_None, *records = NULL, *view = NULL;
    Py_INCREF(result);
    if (readable < 0 || readable > segment.len)
        goto done;
    for (Py_ssize_t i = 0; i < taken; i++) {     /* every record readable and the unit's first */
        if (sizes[i] <= 0 || phys[i] < base || (__int128)phys[i] - base > readable - sizes[i])
            goto done;
        if (check && !carries(buf + (phys[i] - base), sizes[i], (int32_t)queue_id,
                              first_offset + i, topic, topic_len))
            goto done;
    }
    records = PyList_New(taken);
    if (records == NULL)
        goto fail;
    if (form == FORM_VIEW && (view = PyMemoryView_FromObject(args[9])) == NULL)
        goto fail;
    int fast_views = form == FORM_VIEW && plain_bytes_view(view);
    for (Py_ssize_t i = 0; i < taken; i++) {
        Py_ssize_t at = (Py_ssize_t)(phys[i] - base);
        PyObject *item;
        if (form == FORM_BYTES)
            item = PyBytes_FromStringAndSize((const char *)buf + at, sizes[i]);
        else if (form == FORM_VIEW)
            item = fast_views ? view_slice_fast(view, at, at + sizes[i])
                              : view_slice(view, at, at + sizes[i]);
        else
            item = rmq_decode_at(buf + at, sizes[i], &decoder);
        if (item == NULL)
            goto fail;
        PyList_SET_ITEM(records, i, item);
    }
    Py_DECREF(result);
    result = Py_BuildValue("(nLN)", taken, (long long)phys[taken - 1], records);
    records = NULL;
    goto done;
fail:
    Py_CLEAR(result);
done:
    rmq_decoder_clear(&decoder);
    Py_XDECREF(records);
    Py_XDECREF(view);
    PyBuffer_Release(&segment);
    return result;
}
