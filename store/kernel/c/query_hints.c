/* Memory hints for a key query (query.c, query_message.c): no answer depends on anything here.
 *
 * A key query is three dependent reads from memory the CPU rarely holds: the hash slot, the index
 * entry it names, the record that entry names (in a 1 M-message store each was a cache miss, and
 * most of the query's time in query.c itself). These functions ask for each of them a step early,
 * while the query still reads Python attributes, so that the misses overlap that work:
 *   - rmq_hint_slot: the newest index file's slot for the key (before the lock is taken);
 *   - rmq_hint_entry: that slot read (its buffer held), the entry it names requested;
 *   - rmq_hint_records: the first cache lines of the records at the walk's phy offsets.
 * Each reads plain attributes, holds a buffer only around its own reads, keeps no pointer, and
 * clears whatever failed (the query meets it again where it reads it, and raises or asks there).
 * A prefetch of an address outside every map cannot fault; the one load (rmq_hint_entry's slot) is
 * bounds-checked against the buffer it holds. No twin: these change no answer (the twin has nothing
 * to do); the fuzz targets query_keys and query_message run them.
 */

#include "kernel.h"

#define HEADER_BYTES 40
#define SLOT_BYTES 4
#define ENTRY_BYTES 20
#define RECORD_LINES 5              /* a 1 KiB message's head, body start and properties: ~5 lines */
#define RECORDS_HINTED 8            /* the first offsets of a round; the rest are read as they come */

static PyObject *s_slots, *s_map, *s_from;

static int intern_names(void)
{
    if (s_from != NULL)
        return 0;
    if ((s_slots = PyUnicode_InternFromString("max_hash_slot_num")) == NULL
            || (s_map = PyUnicode_InternFromString("_map")) == NULL
            || (s_from = PyUnicode_InternFromString("file_from_offset")) == NULL)
        return -1;
    return 0;
}

/* obj.name as an int64 in [low, high]: 1, else 0 (no exception left set). */
static int small_attr(PyObject *obj, PyObject *name, int64_t low, int64_t high, int64_t *out)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    int ok = 0;
    if (value != NULL && PyLong_CheckExact(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        ok = !overflow && v >= low && v <= high;
        *out = v;
    }
    Py_XDECREF(value);
    if (PyErr_Occurred())
        PyErr_Clear();
    return ok;
}

/* obj._map's buffer, held: 1 (release it with PyBuffer_Release), else 0 (no exception set). */
static int map_view(PyObject *obj, Py_buffer *view)
{
    PyObject *map = PyObject_GetAttr(obj, s_map);
    int ok = map != NULL && map != Py_None && PyObject_GetBuffer(map, view, PyBUF_SIMPLE) == 0;
    Py_XDECREF(map);
    if (PyErr_Occurred())
        PyErr_Clear();
    return ok;
}

/* The newest of `files` (a list of IndexFile, oldest first), a new reference, or NULL. */
static PyObject *newest_file(PyObject *files)
{
    if (!PyList_Check(files) || PyList_GET_SIZE(files) == 0)
        return NULL;
    return Py_NewRef(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1));
}

/* The newest index file's map, held in *view, its slot count and the position of key_hash's slot in
 * it: 1 (release the view), else 0 (nothing held, no exception left set). */
static int newest_slot(PyObject *files, int64_t key_hash, Py_buffer *view, int64_t *slots,
                       int64_t *slot_pos)
{
    PyObject *index_file = newest_file(files);
    int ok = 0;
    if (index_file != NULL && key_hash >= 0 && intern_names() == 0
            && small_attr(index_file, s_slots, 1, 1LL << 40, slots) && map_view(index_file, view)) {
        *slot_pos = HEADER_BYTES + (key_hash % *slots) * SLOT_BYTES;
        ok = *slot_pos <= view->len - SLOT_BYTES;
        if (!ok)
            PyBuffer_Release(view);
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_XDECREF(index_file);
    return ok;
}

void rmq_hint_slot(PyObject *files, int64_t key_hash)
{
    Py_buffer view;
    int64_t slots, slot_pos;
    if (newest_slot(files, key_hash, &view, &slots, &slot_pos)) {
        __builtin_prefetch((const char *)view.buf + slot_pos);
        PyBuffer_Release(&view);
    }
}

void rmq_hint_entry(PyObject *files, int64_t key_hash)
{
    Py_buffer view;
    int64_t slots, slot_pos;
    if (newest_slot(files, key_hash, &view, &slots, &slot_pos)) {
        const unsigned char *p = view.buf;
        int64_t entry = get32(p + slot_pos);
        int64_t position = HEADER_BYTES + slots * SLOT_BYTES + entry * ENTRY_BYTES;
        if (entry > 0 && position <= view.len - ENTRY_BYTES) {
            __builtin_prefetch(p + position);
            __builtin_prefetch(p + position + ENTRY_BYTES - 1);
        }
        PyBuffer_Release(&view);
    }
}

void rmq_hint_records(PyObject *segments, int64_t segment_bytes, const int64_t *offsets,
                      Py_ssize_t n)
{
    int64_t first;
    if (!PyList_Check(segments) || PyList_GET_SIZE(segments) == 0 || segment_bytes <= 0
            || intern_names() < 0) {
        PyErr_Clear();
        return;
    }
    PyObject *first_segment = Py_NewRef(PyList_GET_ITEM(segments, 0));
    int known = small_attr(first_segment, s_from, 0, 1LL << 62, &first);
    Py_DECREF(first_segment);
    if (!known)
        return;
    for (Py_ssize_t i = 0; i < n && i < RECORDS_HINTED; i++) {
        if (offsets[i] < first)     /* (any int64: subtracted only when it cannot overflow) */
            continue;
        int64_t delta = offsets[i] - first;
        if (delta / segment_bytes >= PyList_GET_SIZE(segments))
            continue;
        PyObject *mapped = Py_NewRef(PyList_GET_ITEM(segments, delta / segment_bytes));
        Py_buffer view;
        if (map_view(mapped, &view)) {
            /* a guess that segments are contiguous (as find_file's direct index guesses) */
            int64_t position = delta % segment_bytes;
            for (int line = 0; line < RECORD_LINES; line++)
                if (position + 64 * line < view.len)
                    __builtin_prefetch((const char *)view.buf + position + 64 * line);
            PyBuffer_Release(&view);
        }
        Py_DECREF(mapped);
    }
}
