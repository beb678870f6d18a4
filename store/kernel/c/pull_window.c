/* pull_window: an unfiltered pull's consume-queue window read from the queue's mapped segments and
 * the commit-log segment picked, then pull_unfiltered (pull.c), all in one call.
 *
 * What store/commitlog/read_fast.py did per pull in Python, on a mapped queue (the caller,
 * FileConsumeQueueStore.pull_direct, holds the store's lock and does the LRU touch): `MappedFileQueue.end_and_file` on the consume
 * queue's segments (their end, the segment holding the offset, its readable end and mapping),
 * `FileConsumeQueue.pull_window_untouched` (min and max offset, the units' bytes), `end_and_file`
 * again on the commit log's segments for the first unit's record, and the call of pull_unfiltered.
 * It reads the segments' attributes (file_from_offset, file_size_bytes, write_buffer,
 * committed_position, wrote_position, destroyed, _map) as those functions do and answers None
 * whenever anything is unusual (no segment, an offset outside [min, max), a segment destroyed or
 * not found by the index arithmetic, a last segment with nothing readable, an int past int64):
 * then the caller runs the full path from the start, so every status and refusal stays its own.
 * Its twin is store/kernel/pull_window.py (tests/test_kernel_pull_window.py compares them).
 */

#include "kernel.h"

#define CQ_UNIT 20
#define MAX_WINDOW 64

static PyObject *s_write_buffer, *s_committed, *s_wrote, *s_from, *s_size, *s_destroyed, *s_map;

static int intern_names(void)
{
    if (s_map != NULL)
        return 0;
    s_write_buffer = PyUnicode_InternFromString("write_buffer");
    s_committed = PyUnicode_InternFromString("committed_position");
    s_wrote = PyUnicode_InternFromString("wrote_position");
    s_from = PyUnicode_InternFromString("file_from_offset");
    s_size = PyUnicode_InternFromString("file_size_bytes");
    s_destroyed = PyUnicode_InternFromString("destroyed");
    PyObject *m = PyUnicode_InternFromString("_map");
    if (!s_write_buffer || !s_committed || !s_wrote || !s_from || !s_size || !s_destroyed || !m) {
        Py_XDECREF(m);
        return -1;
    }
    s_map = m;
    return 0;
}

/* obj.<name> as an int64; -1 (no exception left) when missing or not one. */
static int attr_int64(PyObject *obj, PyObject *name, int64_t *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    int ok = -1;
    if (PyLong_Check(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && !(x == -1 && PyErr_Occurred())) {
            *out = x;
            ok = 0;
        }
        PyErr_Clear();
    }
    Py_DECREF(v);
    return ok;
}

/* MappedFile.read_position: committed_position with a write buffer, else wrote_position. */
static int read_position(PyObject *mapped, int64_t *out)
{
    PyObject *wb = PyObject_GetAttr(mapped, s_write_buffer);
    if (wb == NULL) {
        PyErr_Clear();
        return -1;
    }
    int with_buffer = wb != Py_None;
    Py_DECREF(wb);
    return attr_int64(mapped, with_buffer ? s_committed : s_wrote, out);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* end_and_file(offset) of a MappedFileQueue's `files` when it finds the segment by its index:
 * the queue's end, the segment (borrowed), its readable end. -1: ask the full path. */
static int locate(PyObject *files, int64_t file_size, int64_t offset, int64_t *end,
                  PyObject **segment, int64_t *readable, int64_t *base)
{
    if (!PyList_Check(files) || PyList_GET_SIZE(files) == 0 || file_size <= 0)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(files);
    PyObject *last = PyList_GET_ITEM(files, n - 1);
    int64_t position, last_from, first_from, start, size;
    if (read_position(last, &position) < 0 || position <= 0 ||
        attr_int64(last, s_from, &last_from) < 0 || last_from > INT64_MAX - position)
        return -1;
    *end = last_from + position;
    PyObject *first = PyList_GET_ITEM(files, 0);
    if (first == last)          /* one segment: its start is read already */
        first_from = last_from;
    else if (attr_int64(first, s_from, &first_from) < 0)
        return -1;
    __int128 delta = (__int128)offset - first_from;
    if (delta < 0 || delta / file_size >= n)
        return -1;
    PyObject *candidate = PyList_GET_ITEM(files, (Py_ssize_t)(delta / file_size));
    if (candidate == last)
        start = last_from;
    else if (candidate == first)
        start = first_from;
    else if (attr_int64(candidate, s_from, &start) < 0)
        return -1;
    if (attr_int64(candidate, s_size, &size) < 0 || offset < start || (__int128)offset >= (__int128)start + size)
        return -1;
    if (candidate == last)
        *readable = position;
    else if (read_position(candidate, readable) < 0)
        return -1;
    PyObject *destroyed = PyObject_GetAttr(candidate, s_destroyed);
    if (destroyed == NULL) {
        PyErr_Clear();
        return -1;
    }
    int gone = PyObject_IsTrue(destroyed);
    Py_DECREF(destroyed);
    if (gone != 0) {
        PyErr_Clear();
        return -1;
    }
    *segment = candidate;
    *base = start;
    return 0;
}

const char rmq_pull_window_doc[] = (
"pull_window(cq_files, cq_file_size, min_logic_offset, trusted_from, queue_offset, queue_id, topic,\n"
"            cl_files, cl_file_size, max_msg_nums, mem_bytes, mem_count, disk_bytes, disk_count,\n"
"            in_memory_bytes, form, decoders)\n"
"    -> (min_offset, max_offset, taken, last_phy, records, commit_log_max, checked) | None\n\n"
"An unfiltered pull of at most 63 messages from a mapped file consume queue (its segments\n"
"`cq_files`) through the commit log's segments `cl_files`: the window of max_msg_nums + 1 units\n"
"read as FileConsumeQueue.pull_window_untouched does, the first record's segment found as\n"
"MappedFileQueue.end_and_file does, then pull_unfiltered (records checked, with `topic` when not\n"
"decoded, when queue_offset < trusted_from: `checked`). None: ask the full path.");

PyObject *rmq_pull_window(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "pull_window takes 17 arguments");
        return NULL;
    }
    if (intern_names() < 0)
        return NULL;
    int64_t cq_file_size, min_logic, trusted_from, queue_offset, cl_file_size, max_msg_nums, form;
    int64_t v[6];
    for (int k = 0; k < 6; k++) {
        PyObject *o = args[k == 0 ? 1 : k == 1 ? 2 : k == 2 ? 3 : k == 3 ? 4 : k == 4 ? 8 : 9];
        if (!PyLong_Check(o))
            Py_RETURN_NONE;
        int overflow = 0;
        v[k] = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v[k] == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    cq_file_size = v[0]; min_logic = v[1]; trusted_from = v[2]; queue_offset = v[3];
    cl_file_size = v[4]; max_msg_nums = v[5];
    if (!PyLong_Check(args[15]))
        Py_RETURN_NONE;
    form = PyLong_AsLongLong(args[15]);
    if (form == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (max_msg_nums <= 0 || max_msg_nums >= MAX_WINDOW || queue_offset < 0 ||
        queue_offset > INT64_MAX / CQ_UNIT || min_logic < 0)
        Py_RETURN_NONE;
    int64_t cq_offset = queue_offset * CQ_UNIT, cq_end, cq_read, cq_base;
    PyObject *cq_segment;
    if (locate(args[0], cq_file_size, cq_offset, &cq_end, &cq_segment, &cq_read, &cq_base) < 0)
        Py_RETURN_NONE;
    int64_t min_offset = min_logic / CQ_UNIT, max_offset = floor_div(cq_end, CQ_UNIT);
    if (queue_offset < min_offset || queue_offset >= max_offset || cq_offset < min_logic)
        Py_RETURN_NONE;
    int64_t position = (int64_t)((__int128)cq_offset - cq_base);   /* < the segment's size */
    __int128 readable_bytes = (__int128)cq_read - position;
    if (readable_bytes < CQ_UNIT)         /* (cq_read - position) // 20 <= 0 */
        Py_RETURN_NONE;
    int64_t readable_units = (int64_t)(readable_bytes / CQ_UNIT);
    int64_t count = max_offset - queue_offset;
    if (max_msg_nums + 1 < count)
        count = max_msg_nums + 1;
    if (readable_units < count)
        count = readable_units;

    PyObject *cq_map = PyObject_GetAttr(cq_segment, s_map);
    if (cq_map == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer cq_view;
    if (PyObject_GetBuffer(cq_map, &cq_view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_DECREF(cq_map);
        Py_RETURN_NONE;
    }
    Py_DECREF(cq_map);
    PyObject *data = NULL;
    if (position <= cq_view.len && count * CQ_UNIT <= cq_view.len - position)
        data = PyBytes_FromStringAndSize((const char *)cq_view.buf + position, count * CQ_UNIT);
    else
        PyErr_Clear();
    PyBuffer_Release(&cq_view);
    if (data == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }

    int64_t first_phy = get64((const unsigned char *)PyBytes_AS_STRING(data));
    int64_t commit_log_max, cl_read, cl_base;
    PyObject *cl_segment, *cl_map = NULL, *result = NULL;
    PyObject *commit_log_max_obj = NULL, *readable_obj = NULL, *base_obj = NULL, *got = NULL;
    if (locate(args[7], cl_file_size, first_phy, &commit_log_max, &cl_segment, &cl_read,
               &cl_base) < 0)
        goto none;
    if ((cl_map = PyObject_GetAttr(cl_segment, s_map)) == NULL) {
        PyErr_Clear();
        goto none;
    }
    int checked = queue_offset < trusted_from;
    commit_log_max_obj = PyLong_FromLongLong(commit_log_max);
    readable_obj = PyLong_FromLongLong(cl_read);
    base_obj = PyLong_FromLongLong(cl_base);
    if (!commit_log_max_obj || !readable_obj || !base_obj)
        goto fail;
    PyObject *call[17] = {
        data, args[9], args[10], args[11], args[12], args[13], Py_None, commit_log_max_obj,
        args[14], cl_map, base_obj, readable_obj, args[15], checked ? args[5] : Py_None, args[4],
        (checked && form != 2) ? args[6] : Py_None, args[16]};
    got = rmq_pull_unfiltered(self, call, 17);
    if (got == NULL)
        goto fail;
    if (got == Py_None)
        goto none;
    result = Py_BuildValue("(LLOOOLO)", (long long)min_offset, (long long)max_offset,
                           PyTuple_GET_ITEM(got, 0), PyTuple_GET_ITEM(got, 1),
                           PyTuple_GET_ITEM(got, 2), (long long)commit_log_max,
                           checked ? Py_True : Py_False);
    goto done;
none:
    result = Py_None;
    Py_INCREF(result);
    goto done;
fail:
    result = NULL;
done:
    Py_XDECREF(got);
    Py_XDECREF(commit_log_max_obj);
    Py_XDECREF(readable_obj);
    Py_XDECREF(base_obj);
    Py_XDECREF(cl_map);
    Py_DECREF(data);
    return result;
}
