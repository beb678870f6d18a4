/* Lookups: the nearest-time binary search over consume-queue units (spec §10.3) and the walk of one
 * index file's slot chain (spec §5.8). Twins: store/kernel/lookup.py.
 *
 * Both read mapped files the caller holds; neither keeps a pointer past the call. Where the Python
 * path would raise (a probe or an entry outside its buffer) they answer NotImplemented ("ask") and
 * the caller runs the twin, which raises the Python path's own error at the same step.
 */

#include "kernel.h"

#define CQ_UNIT_BYTES 20

/* getattr(obj, name, None) without raising and clearing an AttributeError (which cost a time lookup
 * ~0.9 us): 1 with *out a new reference, 0 when there is none, -1 with an exception. */
#if PY_VERSION_HEX >= 0x030D0000
#define optional_attr PyObject_GetOptionalAttr
#else
#define optional_attr _PyObject_LookupAttr
#endif
#define INDEX_HEADER_BYTES 40
#define INDEX_SLOT_BYTES 4
#define INDEX_ENTRY_BYTES 20
/* STORETIMESTAMP's position in a record with an IPv4 / IPv6 born host (store.codec.message). */
#define STORE_TS_V4 56
#define STORE_TS_V6 68

/* One commit-log segment as the store-time reader of store.lookups sees it, fetched once per call. */
typedef struct {
    Py_ssize_t index;          /* position in `files`; -1: none held */
    int usable;                /* 0: every probe in it goes to the Python reader */
    int64_t from, limit;       /* file_from_offset, read_position */
    Py_buffer view;
} segment;

static void segment_release(segment *s)
{
    if (s->index >= 0 && s->usable)
        PyBuffer_Release(&s->view);
    s->index = -1;
    s->usable = 0;
    s->from = s->limit = 0;
}

/* An argument as a long long: 0, or 1 for anything else (not an int, or past int64: the caller
 * asks the twin), -1 on error. `small`: within +-2^62 too (so sums of two cannot wrap). */
static int int_arg(PyObject *obj, long long *out, int small)
{
    if (!PyLong_Check(obj))
        return 1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || (small && (v < -(1LL << 62) || v > (1LL << 62))))
        return 1;
    *out = v;
    return 0;
}

/* The segment attribute names, interned once (PyObject_GetAttrString made a new str per lookup,
 * four per segment a search loads). */
static PyObject *n_destroyed, *n_from, *n_read_position, *n_buffer;
/* and cq_nearest_queue's */
static PyObject *n_mapped_files, *n_files, *n_min_logic, *n_cl_min, *n_segments, *n_full_segments,
                *n_acquire, *n_release;

static int intern_segment_names(void)
{
    if (n_segments != NULL)
        return 0;
    if ((n_destroyed = PyUnicode_InternFromString("destroyed")) == NULL
            || (n_from = PyUnicode_InternFromString("file_from_offset")) == NULL
            || (n_read_position = PyUnicode_InternFromString("read_position")) == NULL
            || (n_buffer = PyUnicode_InternFromString("buffer")) == NULL
            || (n_mapped_files = PyUnicode_InternFromString("mapped_files")) == NULL
            || (n_files = PyUnicode_InternFromString("files")) == NULL
            || (n_min_logic = PyUnicode_InternFromString("min_logic_offset")) == NULL
            || (n_cl_min = PyUnicode_InternFromString("commit_log_min_offset")) == NULL
            || (n_full_segments = PyUnicode_InternFromString("full_segments")) == NULL
            || (n_acquire = PyUnicode_InternFromString("acquire")) == NULL
            || (n_release = PyUnicode_InternFromString("release")) == NULL
            || (n_segments = PyUnicode_InternFromString("segments")) == NULL)
        return -1;
    return 0;
}

static int64_t attr_int64(PyObject *obj, PyObject *name, int *ok)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) {
        *ok = -1;
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : 0;
    if (!PyLong_Check(value) || overflow)
        *ok = 0;
    Py_DECREF(value);
    return v;
}

/* Fetch segment `index` of `files` into `s`: -1 with an exception, else 0 (s->usable says whether
 * it can be read here). Mirrors the reader's checks: not destroyed, a buffer, read_position inside
 * it.
 *
 * `known` (NULL, or the reader's `full_segments` list, None for a segment not seen full) remembers
 * (file_from_offset, buffer) of each segment seen full (read_position = segment_bytes), so that
 * later searches read only `destroyed` of it: in the perf of a time lookup, the read_position
 * property (a Python frame), `file_from_offset` and the `buffer` property of the ~3-5 segments a
 * search loads cost as much as its probes. Sound because the reader belongs to one segment list
 * of a writable store, where a full segment's offset, map and bytes never change (only recovery,
 * before the store opens, cuts a segment; a read-only store, which follows a writer that may
 * recover, gets no cache). */
static int segment_load(segment *s, PyObject *files, Py_ssize_t index, PyObject *known,
                        int64_t segment_bytes)
{
    segment_release(s);
    s->index = index;
    PyObject *mapped = PyList_GET_ITEM(files, index);
    PyObject *destroyed = PyObject_GetAttr(mapped, n_destroyed);
    if (destroyed == NULL)
        return -1;
    int is_destroyed = PyObject_IsTrue(destroyed);
    Py_DECREF(destroyed);
    if (is_destroyed < 0)
        return -1;
    if (is_destroyed)
        return 0;
    PyObject *buffer;
    if (known != NULL && index >= PyList_GET_SIZE(known))
        known = NULL;
    PyObject *entry = known != NULL ? PyList_GET_ITEM(known, index) : NULL;
    long long entry_from = -1;
    if (entry != NULL && PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 2
            && PyLong_CheckExact(PyTuple_GET_ITEM(entry, 0))) {
        int overflow = 0;
        entry_from = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(entry, 0), &overflow);
        if (overflow || entry_from < 0)
            entry_from = -1;
    }
    if (entry_from >= 0) {
        s->from = entry_from;
        s->limit = segment_bytes;
        buffer = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
    } else {
        int ok = 1;
        s->from = attr_int64(mapped, n_from, &ok);
        if (ok > 0)
            s->limit = attr_int64(mapped, n_read_position, &ok);
        if (ok < 0)
            return -1;
        if (ok == 0)
            return 0;
        buffer = PyObject_GetAttr(mapped, n_buffer);
        if (buffer == NULL)
            return -1;
        if (known != NULL && s->limit == segment_bytes && s->from >= 0) {
            PyObject *seen = Py_BuildValue("(LO)", (long long)s->from, buffer);
            if (seen == NULL) {
                Py_DECREF(buffer);
                return -1;
            }
            PyList_SetItem(known, index, seen);      /* steals `seen`, drops the old item */
        }
    }
    if (PyObject_GetBuffer(buffer, &s->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(buffer);
        PyErr_Clear();             /* not a buffer (a closed map): the Python reader decides */
        return 0;
    }
    Py_DECREF(buffer);
    if (s->limit < 0 || s->limit > s->view.len) {
        PyBuffer_Release(&s->view);
        return 0;
    }
    s->usable = 1;
    return 0;
}

/* The commit log a search reads store times from: the reader's segments `files[:count]` (the
 * first at first_from, segment_bytes each), the reader itself for anything else, and the segments
 * the search has fetched, direct-mapped by index (a search probes ~log2(n) records, spread over a
 * few segments at first). */
#define SEGMENT_CACHE 8
typedef struct {
    segment slot[SEGMENT_CACHE];
    PyObject *files, *reader;  /* borrowed */
    int64_t count, first_from, segment_bytes;
    PyObject *known;           /* the reader's full_segments list (see segment_load), or NULL */
} store_times;

static void cache_release(store_times *c)
{
    for (int k = 0; k < SEGMENT_CACHE; k++)
        segment_release(&c->slot[k]);
}

/* Start reading store times for a search: -1 with an exception, else 0 (close it with
 * store_times_close). */
static int store_times_open(store_times *c, PyObject *files, int64_t count, int64_t first_from,
                            int64_t segment_bytes, PyObject *reader)
{
    c->files = files;
    c->reader = reader;
    c->count = count;
    c->first_from = first_from;
    c->segment_bytes = segment_bytes;
    for (int k = 0; k < SEGMENT_CACHE; k++) {
        c->slot[k].index = -1;
        c->slot[k].usable = 0;
        c->slot[k].from = c->slot[k].limit = 0;
    }
    /* the reader's memory of full segments, when it has one for these `count` */
    if (optional_attr(reader, n_full_segments, &c->known) < 0)
        return -1;
    if (c->known != NULL && (!PyList_CheckExact(c->known) || PyList_GET_SIZE(c->known) < count))
        Py_CLEAR(c->known);
    return 0;
}

static void store_times_close(store_times *c)
{
    cache_release(c);
    Py_CLEAR(c->known);
}

/* The store time of the record at phy_offset: 1 with *out set (-1 below the commit log, as the
 * reader answers), 0 when the Python reader said None, -1 with an exception. */
static int store_time(store_times *c, int64_t phy_offset, int32_t size, int64_t *out)
{
    if (phy_offset < c->first_from) {
        *out = -1;
        return 1;
    }
    int64_t index = (phy_offset - c->first_from) / c->segment_bytes;
    int64_t segment_bytes = c->segment_bytes;
    if (index < c->count) {
        segment *s = &c->slot[index % SEGMENT_CACHE];
        if (s->index != index
                && segment_load(s, c->files, (Py_ssize_t)index, c->known, segment_bytes) < 0)
            return -1;
        int64_t position = phy_offset - s->from;
        if (s->usable && position >= 0 && position < segment_bytes && position <= s->limit - 40) {
            const unsigned char *p = s->view.buf;
            /* the store time's line (an IPv4 born host's place, the common case), fetched with the
             * SYSFLAG's when the two lie on different lines */
            __builtin_prefetch(p + position + STORE_TS_V4 + 7);
            position += (get32(p + position + 36) & SYSFLAG_BORNHOST_V6) ? STORE_TS_V6 : STORE_TS_V4;
            if (position <= s->limit - 8) {
                *out = get64(p + position);
                return 1;
            }
        }
    }
    /* Anything else: the reader itself (no buffer may be held while Python code runs). */
    cache_release(c);
    PyObject *answer = PyObject_CallFunction(c->reader, "LL", (long long)phy_offset,
                                             (long long)size);
    if (answer == NULL)
        return -1;
    if (answer == Py_None) {
        Py_DECREF(answer);
        return 0;
    }
    long long value = PyLong_AsLongLong(answer);
    Py_DECREF(answer);
    if (value == -1 && PyErr_Occurred())
        return -1;
    *out = value;
    return 1;
}

/* Where RocketMQ's probe loop over units [low, high] stopped: the exact hit (target), else the last
 * unit probed left and right of the time, with their store times (-1: none, or below min_phy). */
typedef struct {
    int64_t target, left, right, left_time, right_time;
} bisection;

/* The probe loop both searches share (getOffsetInQueueByTime's, 4.9.7 and 5.x alike) over units
 * u[0 .. len) between relative indexes low and high: 0 with *b filled, 1 when a store time could
 * not be read (None or negative), 2 to ask the twin (a probe outside the units), -1 with an
 * exception. */
static int bisect_units(const unsigned char *u, Py_ssize_t len, int64_t low, int64_t high,
                        int64_t timestamp_ms, int64_t min_phy, store_times *c, bisection *b)
{
    b->target = b->left = b->right = b->left_time = b->right_time = -1;
    int64_t last = len < 12 ? -1 : (len - 12) / CQ_UNIT_BYTES;     /* the last unit inside u */
    while (high >= low) {
        int64_t mid = (low >> 1) + (high >> 1) + (low & high & 1);   /* (low + high) // 2, no overflow */
        if (mid < 0 || mid > last)
            return 2;
        int64_t phy_offset = get64(u + mid * CQ_UNIT_BYTES);
        /* The next probe is one of two units: fetch both while this one's record is read (a probe
         * is two dependent cache misses, its unit then its record; this takes the unit's off the
         * chain). A prefetch never faults, and no answer depends on it. */
        int64_t before = mid - 1, after = mid + 1;
        int64_t next_low = (low >> 1) + (before >> 1) + (low & before & 1);
        int64_t next_high = (after >> 1) + (high >> 1) + (after & high & 1);
        if (next_low >= 0 && next_low <= last)
            __builtin_prefetch(u + next_low * CQ_UNIT_BYTES);
        if (next_high >= 0 && next_high <= last)
            __builtin_prefetch(u + next_high * CQ_UNIT_BYTES);
        if (phy_offset < min_phy) {
            low = mid + 1;
            b->left = mid;
            continue;
        }
        int64_t t;
        int got = store_time(c, phy_offset, get32(u + mid * CQ_UNIT_BYTES + 8), &t);
        if (got < 0)
            return -1;
        if (got == 0 || t < 0)
            return 1;
        if (t == timestamp_ms) {
            b->target = mid;
            return 0;
        }
        if (t > timestamp_ms) {
            high = mid - 1;
            b->right = mid;
            b->right_time = t;
        } else {
            low = mid + 1;
            b->left = mid;
            b->left_time = t;
        }
    }
    return 0;
}

/* The nearest search over units u[0 .. len) between relative indexes low and high: 0 with *answer
 * the index (-1: none qualified), 1 when a store time could not be read (the twin's None), 2 to ask
 * the twin (a probe outside the units), -1 with an exception. */
static int search_nearest(const unsigned char *u, Py_ssize_t len, int64_t low, int64_t high,
                          int64_t timestamp_ms, int64_t min_phy, PyObject *files, int64_t count,
                          int64_t first_from, int64_t segment_bytes, PyObject *reader,
                          int64_t *answer)
{
    store_times c;
    if (store_times_open(&c, files, count, first_from, segment_bytes, reader) < 0)
        return -1;
    bisection b;
    int status = bisect_units(u, len, low, high, timestamp_ms, min_phy, &c, &b);
    store_times_close(&c);
    if (status != 0)
        return status;
    if (b.target != -1)
        *answer = b.target;
    else if (b.left_time == -1)
        *answer = b.right;
    else if (b.right_time == -1)
        *answer = b.left;
    else {
        __int128 dl = (__int128)timestamp_ms - b.left_time, dr = (__int128)timestamp_ms - b.right_time;
        dl = dl < 0 ? -dl : dl;
        dr = dr < 0 ? -dr : dr;
        *answer = dl > dr ? b.right : b.left;
    }
    return 0;
}

/* The store time of unit i of u[0 .. len): 1 with *out, 0 when the reader said None, 2 to ask the
 * twin (the unit outside the buffer: the Python path raises there), -1 with an exception. */
static int unit_time(const unsigned char *u, Py_ssize_t len, int64_t i, store_times *c,
                     int64_t *out)
{
    if (i < 0 || len < 12 || i > (len - 12) / CQ_UNIT_BYTES)
        return 2;
    return store_time(c, get64(u + i * CQ_UNIT_BYTES), get32(u + i * CQ_UNIT_BYTES + 8), out);
}

/* The end of the LOWER / UPPER search from where the probe loop stopped (time_search's
 * _boundary_end): from an exact hit, the first (LOWER) / last (UPPER) of the equal store times
 * inside the window; else the neighbour. Same returns as unit_time's errors (2, -1), else 0. */
static int boundary_end(const unsigned char *u, Py_ssize_t len, const bisection *b, int64_t floor,
                        int64_t ceiling, int64_t timestamp_ms, store_times *c, int upper,
                        int64_t base, int64_t *answer)
{
    if (b->target == -1) {
        int64_t found = upper ? b->left : b->right;
        *answer = found >= 0 ? base + found : (base - 1 > 0 ? base - 1 : 0);
        return 0;
    }
    int64_t target = b->target, step = upper ? 1 : -1, t;
    while (upper ? target + step <= ceiling : target + step >= floor) {
        int got = unit_time(u, len, target + step, c, &t);
        if (got != 1 && got != 0)
            return got;
        if (got == 0 || t != timestamp_ms)
            break;
        target += step;
    }
    *answer = base + target;
    return 0;
}

/* search_boundary's steps over store times `c` opened for it. */
static int boundary_search(const unsigned char *u, Py_ssize_t len, int64_t floor, int64_t ceiling,
                           int64_t timestamp_ms, int64_t min_phy, store_times *c, int upper,
                           int64_t base, int64_t all_later_lower, int64_t *answer)
{
    /* outside the window: after its last unit, or before its first */
    int64_t t;
    int got = unit_time(u, len, ceiling, c, &t);
    if (got != 1 && got != 0)
        return got;
    if (got == 1 && t < timestamp_ms) {
        *answer = upper ? base + ceiling : base + ceiling + 1;
        return 0;
    }
    got = unit_time(u, len, floor, c, &t);
    if (got != 1 && got != 0)
        return got;
    if (got == 1 && t > timestamp_ms) {
        *answer = upper ? 0 : all_later_lower;
        return 0;
    }
    bisection b;
    got = bisect_units(u, len, floor, ceiling, timestamp_ms, min_phy, c, &b);
    if (got == 1) {                    /* a store time not readable: RocketMQ answers 0 */
        *answer = 0;
        return 0;
    }
    if (got != 0)
        return got;
    return boundary_end(u, len, &b, floor, ceiling, timestamp_ms, c, upper, base, answer);
}

/* [5.x] store.consumequeue.time_search.search_boundary_units over u[0 .. len) (step for step, without
 * its memo, which only saves reads): 0 with *answer the queue offset, 2 to ask the twin, -1 with an
 * exception. */
static int search_boundary(const unsigned char *u, Py_ssize_t len, int64_t floor, int64_t ceiling,
                           int64_t timestamp_ms, int64_t min_phy, PyObject *files, int64_t count,
                           int64_t first_from, int64_t segment_bytes, PyObject *reader, int upper,
                           int64_t base, int64_t all_later_lower, int64_t *answer)
{
    store_times c;
    if (store_times_open(&c, files, count, first_from, segment_bytes, reader) < 0)
        return -1;
    int status = boundary_search(u, len, floor, ceiling, timestamp_ms, min_phy, &c, upper, base,
                                 all_later_lower, answer);
    store_times_close(&c);
    return status;
}

const char rmq_cq_search_boundary_doc[] = (
"cq_search_boundary(units, floor, ceiling, timestamp_ms, min_phy_offset, files, first_from,\n"
"                   segment_bytes, count, reader, upper, base, all_later_lower) -> int | NotImplemented\n\n"
"[5.x] store.consumequeue.time_search.search_boundary_units (LOWER, or UPPER when `upper` is true) with\n"
"store times read as cq_search_nearest reads them. NotImplemented: a unit outside `units`, an argument\n"
"that is not an int64, or floor .. all_later_lower past +-2**62 (the twin answers).");

PyObject *rmq_cq_search_boundary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "cq_search_boundary takes 13 arguments");
        return NULL;
    }
    if (intern_segment_names() < 0)
        return NULL;
    /* floor, ceiling, timestamp_ms, min_phy, first_from, segment_bytes, count, base, all_later_lower */
    static const int at[9] = {1, 2, 3, 4, 6, 7, 8, 11, 12};
    long long v[9];
    for (int k = 0; k < 9; k++) {
        int got = int_arg(args[at[k]], &v[k], k != 2 && k != 3);
        if (got < 0)
            return NULL;
        if (got > 0)
            Py_RETURN_NOTIMPLEMENTED;
    }
    int upper = PyObject_IsTrue(args[10]);
    if (upper < 0)
        return NULL;
    long long first_from = v[4], segment_bytes = v[5], count = v[6];
    PyObject *files = args[5];
    if (!PyList_Check(files) || segment_bytes <= 0 || first_from < 0 || count < 0
            || count > PyList_GET_SIZE(files))
        Py_RETURN_NOTIMPLEMENTED;
    Py_buffer units;
    if (PyObject_GetBuffer(args[0], &units, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    int64_t answer = 0;
    int status = search_boundary(units.buf, units.len, v[0], v[1], v[2], v[3], files, count,
                                 first_from, segment_bytes, args[9], upper, v[7], v[8], &answer);
    PyBuffer_Release(&units);
    if (status < 0)
        return NULL;
    if (status == 2)
        Py_RETURN_NOTIMPLEMENTED;
    return PyLong_FromLongLong(answer);
}

const char rmq_cq_search_nearest_doc[] = (
"cq_search_nearest(units, low, high, timestamp_ms, min_phy_offset, files, first_from, segment_bytes,\n"
"                  count, reader) -> int | None | NotImplemented\n\n"
"store.consumequeue.time_search.search_nearest_units (4.9.7 getOffsetInQueueByTime in one file) with\n"
"store times read from the commit log's segments `files` (MappedFile objects, the first starting at\n"
"first_from; the first `count` of them are used), the Python `reader(phy_offset, size)` for any\n"
"record it cannot read there. NotImplemented: a probe outside `units`, an argument that is not an\n"
"int64, or low, high, first_from, segment_bytes, count past +-2**62 (the twin answers).");

PyObject *rmq_cq_search_nearest(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "cq_search_nearest takes 10 arguments");
        return NULL;
    }
    if (intern_segment_names() < 0)
        return NULL;
    long long v[7];
    for (int k = 0; k < 7; k++) {
        /* timestamp_ms and min_phy_offset are only compared (distances in 128 bits) */
        int got = int_arg(args[k < 4 ? k + 1 : k + 2], &v[k], k != 2 && k != 3);
        if (got < 0)
            return NULL;
        if (got > 0)
            Py_RETURN_NOTIMPLEMENTED;
    }
    long long segment_bytes = v[5], count = v[6], first_from = v[4];
    PyObject *files = args[5];
    if (!PyList_Check(files) || segment_bytes <= 0 || first_from < 0 || count < 0
            || count > PyList_GET_SIZE(files))
        Py_RETURN_NOTIMPLEMENTED;
    Py_buffer units;
    if (PyObject_GetBuffer(args[0], &units, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    int64_t answer;
    int status = search_nearest(units.buf, units.len, v[0], v[1], v[2], v[3], files, count,
                                first_from, segment_bytes, args[9], &answer);
    PyBuffer_Release(&units);
    if (status < 0)
        return NULL;
    if (status == 2)
        Py_RETURN_NOTIMPLEMENTED;
    if (status == 1)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(answer);
}

/* An attribute as an int64 within +-2^62: 0, 1 to ask the twin (missing is an error), -1 on error. */
static int attr_small(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int got = int_arg(value, out, 1);
    Py_DECREF(value);
    return got;
}

const char rmq_cq_nearest_queue_doc[] = (
"cq_nearest_queue(queue, timestamp_ms, reader) -> int | NotImplemented\n\n"
"store.consumequeue.file.time_search.nearest_offset_by_time(queue, timestamp_ms, reader) for a file\n"
"consume queue (its mapped_files, min_logic_offset, commit_log_min_offset) of at most one file, the\n"
"units searched as cq_search_nearest does over `reader.segments`. NotImplemented: a queue of more\n"
"files (the file is chosen by its mtime), a reader without segments, an attribute that is not an\n"
"int64 within +-2**62, or anything cq_search_nearest asks about: the caller runs the Python path.");

/* cq_nearest_queue(queue, timestamp, reader): a new reference (an int or NotImplemented), NULL with
 * an exception. */
static PyObject *nearest_queue(PyObject *queue, PyObject *timestamp, PyObject *reader)
{
    long long timestamp_ms;
    int got = int_arg(timestamp, &timestamp_ms, 0);
    if (got != 0)
        return got < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    /* reader.segments: (files, first_from, segment_bytes, count), as cq_search_nearest takes them */
    PyObject *segments = NULL, *listing = NULL, *files = NULL, *mapped = NULL, *units = NULL;
    PyObject *result = NULL;
    if (optional_attr(reader, n_segments, &segments) < 0)
        return NULL;
    if (segments == NULL)          /* a reader of no segments: the Python path */
        Py_RETURN_NOTIMPLEMENTED;
    if (!PyTuple_Check(segments) || PyTuple_GET_SIZE(segments) != 4
            || !PyList_Check(PyTuple_GET_ITEM(segments, 0)))
        goto ask;
    long long seg[3];
    for (int k = 0; k < 3; k++) {
        got = int_arg(PyTuple_GET_ITEM(segments, k + 1), &seg[k], 1);
        if (got < 0)
            goto done;
        if (got > 0)
            goto ask;
    }
    long long first_from = seg[0], segment_bytes = seg[1], count = seg[2];
    PyObject *cl_files = PyTuple_GET_ITEM(segments, 0);
    if (segment_bytes <= 0 || first_from < 0 || count < 0 || count > PyList_GET_SIZE(cl_files))
        goto ask;
    if ((listing = PyObject_GetAttr(queue, n_mapped_files)) == NULL
            || (files = PyObject_GetAttr(listing, n_files)) == NULL)
        goto done;
    if (!PyList_Check(files))
        goto ask;
    if (PyList_GET_SIZE(files) == 0) {
        result = PyLong_FromLong(0);
        goto done;
    }
    if (PyList_GET_SIZE(files) != 1)
        goto ask;
    mapped = Py_NewRef(PyList_GET_ITEM(files, 0));
    long long read_position, from, min_logic, min_phy;
    if ((got = attr_small(mapped, n_read_position, &read_position)) != 0
            || (got = attr_small(mapped, n_from, &from)) != 0
            || (got = attr_small(queue, n_min_logic, &min_logic)) != 0
            || (got = attr_small(queue, n_cl_min, &min_phy)) != 0) {
        if (got < 0)
            goto done;
        goto ask;
    }
    if (read_position == 0) {
        result = PyLong_FromLong(0);
        goto done;
    }
    if (read_position < 0 || from < 0)
        goto ask;
    long long low_bytes = min_logic - from;
    if ((units = PyObject_GetAttr(mapped, n_buffer)) == NULL)
        goto done;
    Py_buffer view;
    if (PyObject_GetBuffer(units, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        goto ask;
    }
    int64_t index;
    int status = search_nearest(view.buf, view.len, low_bytes > 0 ? low_bytes / CQ_UNIT_BYTES : 0,
                                read_position / CQ_UNIT_BYTES - 1, timestamp_ms, min_phy, cl_files,
                                count, first_from, segment_bytes, reader, &index);
    PyBuffer_Release(&view);
    if (status < 0)
        goto done;
    if (status == 2)
        goto ask;
    if (status == 1)
        result = PyLong_FromLong(0);
    else if (index < 0)
        result = PyLong_FromLongLong((from - 1) / CQ_UNIT_BYTES);     /* Java's division */
    else
        result = PyLong_FromLongLong((from + index * CQ_UNIT_BYTES) / CQ_UNIT_BYTES);
    goto done;
ask:
    result = Py_NewRef(Py_NotImplemented);
done:
    Py_XDECREF(segments);
    Py_XDECREF(listing);
    Py_XDECREF(files);
    Py_XDECREF(mapped);
    Py_XDECREF(units);
    return result;
}

PyObject *rmq_cq_nearest_queue(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "cq_nearest_queue takes 3 arguments");
        return NULL;
    }
    if (intern_segment_names() < 0)
        return NULL;
    return nearest_queue(args[0], args[1], args[2]);
}

const char rmq_cq_nearest_in_doc[] = (
"cq_nearest_in(queues, lock, fallback, topic, queue_id, timestamp_ms, reader) -> int\n\n"
"A 4.9.7 time lookup in a file consume-queue store: 0 when queues (a dict) has no (topic, queue_id);\n"
"else, holding `lock` (its acquire() and release()), cq_nearest_queue(queue, timestamp_ms, reader),\n"
"or fallback(queue, timestamp_ms, reader) (the Python path) where that asks. One call where the store\n"
"made two Python frames and a `with` around the C.");

PyObject *rmq_cq_nearest_in(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "cq_nearest_in takes 7 arguments");
        return NULL;
    }
    if (intern_segment_names() < 0)
        return NULL;
    PyObject *queues = args[0], *lock = args[1], *fallback = args[2];
    if (!PyDict_Check(queues)) {
        PyErr_SetString(PyExc_TypeError, "cq_nearest_in: queues must be a dict");
        return NULL;
    }
    PyObject *key = PyTuple_Pack(2, args[3], args[4]);
    if (key == NULL)
        return NULL;
    PyObject *queue = PyDict_GetItemWithError(queues, key);     /* borrowed */
    Py_DECREF(key);
    if (queue == NULL)
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    Py_INCREF(queue);                  /* the dict may change while the lock is awaited */
    PyObject *held = PyObject_CallMethodNoArgs(lock, n_acquire);
    if (held == NULL) {
        Py_DECREF(queue);
        return NULL;
    }
    Py_DECREF(held);
    PyObject *answer = nearest_queue(queue, args[5], args[6]);
    if (answer == Py_NotImplemented) {
        Py_DECREF(answer);
        PyObject *call[3] = {queue, args[5], args[6]};
        answer = PyObject_Vectorcall(fallback, call, 3, NULL);
    }
    Py_DECREF(queue);
    /* release even with an exception pending (as a `with` block's exit does) */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *released = PyObject_CallMethodNoArgs(lock, n_release);
    if (released == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        Py_XDECREF(answer);
        return NULL;
    }
    Py_DECREF(released);
    PyErr_Restore(type, value, traceback);
    return answer;
}

const char rmq_index_select_doc[] = (
"index_select(buf, key_hash, max_hash_slot_num, max_index_num, index_count, begin_timestamp,\n"
"             max_num, begin_ms, end_ms, result) -> None | NotImplemented\n\n"
"IndexFile.selectPhyOffset over the mapped index file `buf`: append the phy offsets of the chain's\n"
"entries with key_hash stored in [begin_ms, end_ms] to the list `result`, newest first, until it\n"
"holds max_num. NotImplemented: a slot or entry outside `buf`, an argument that is not an int64,\n"
"or key_hash .. begin_timestamp past +-2**62 (the twin answers).");

PyObject *rmq_index_select(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "index_select takes 10 arguments");
        return NULL;
    }
    long long v[8];
    for (int k = 0; k < 8; k++) {
        /* begin_ms, end_ms, max_num: only compared */
        int got = int_arg(args[k + 1], &v[k], k < 5);
        if (got < 0)
            return NULL;
        if (got > 0)
            Py_RETURN_NOTIMPLEMENTED;
    }
    long long key_hash = v[0], slots = v[1], max_index = v[2], index_count = v[3];
    long long begin_timestamp = v[4], max_num = v[5], begin_ms = v[6], end_ms = v[7];
    PyObject *result = args[9];
    if (!PyList_Check(result) || slots <= 0 || key_hash < 0 || slots > (1LL << 40))
        Py_RETURN_NOTIMPLEMENTED;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    const unsigned char *p = view.buf;
    Py_ssize_t len = view.len, start = PyList_GET_SIZE(result);
    long long slot_pos = INDEX_HEADER_BYTES + (key_hash % slots) * INDEX_SLOT_BYTES;
    long long entries_pos = INDEX_HEADER_BYTES + slots * INDEX_SLOT_BYTES;
    PyObject *answer = Py_None;
    if (slot_pos > len - INDEX_SLOT_BYTES) {
        answer = Py_NotImplemented;
        goto done;
    }
    long long entry = get32(p + slot_pos);
    if (entry <= 0 || entry > index_count || index_count <= 1)
        goto done;
    /* At most min(index_count, max_index) steps: a valid chain visits each entry once, and there
     * are no more entries than that; this also stops a corrupt cycle, whatever count the header
     * claims (IndexFile's load refuses a count past max_index, a caller of this may not have). */
    long long steps = index_count < max_index ? index_count : max_index;
    for (long long step = 0; step < steps; step++) {
        if (PyList_GET_SIZE(result) >= max_num)
            break;
        if (entry >= max_index)
            break;
        long long position = entries_pos + entry * INDEX_ENTRY_BYTES;
        if (position > len - INDEX_ENTRY_BYTES) {
            answer = Py_NotImplemented;
            break;
        }
        const unsigned char *e = p + position;
        int32_t read_hash = get32(e), time_diff_s = get32(e + 12), prev = get32(e + 16);
        int64_t read_phy = get64(e + 4);
        if (time_diff_s < 0)
            break;
        long long time_ms = begin_timestamp + (long long)time_diff_s * 1000;
        if (read_hash == key_hash && begin_ms <= time_ms && time_ms <= end_ms) {
            PyObject *phy = PyLong_FromLongLong(read_phy);
            if (phy == NULL || PyList_Append(result, phy) < 0) {
                Py_XDECREF(phy);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(phy);
        }
        if (prev <= 0 || prev > index_count || prev == entry || time_ms < begin_ms)
            break;
        entry = prev;
    }
done:
    PyBuffer_Release(&view);
    /* Asking the twin: it starts over, so what was appended goes. */
    if (answer == Py_NotImplemented && PyList_SetSlice(result, start, PY_SSIZE_T_MAX, NULL) < 0)
        return NULL;
    return Py_NewRef(answer);
}

/* -- one record, read and decoded (store.lookups._read_record + store.codec.message.decode_message) -- */

/* "a.b.c.d:port" / "[g:g:g:g:g:g:g:g]:port" of a host field, as msgid.host_to_string renders it. */
static PyObject *host_string(const unsigned char *p, int v6)
{
    char text[64];
    if (!v6) {
        snprintf(text, sizeof text, "%u.%u.%u.%u:%d", p[0], p[1], p[2], p[3], (int)get32(p + 4));
    } else {
        int n = snprintf(text, sizeof text, "[");
        for (int g = 0; g < 8; g++)
            n += snprintf(text + n, sizeof text - n, g ? ":%x" : "%x", (p[2 * g] << 8) | p[2 * g + 1]);
        snprintf(text + n, sizeof text - n, "]:%d", (int)get32(p + 16));
    }
    return PyUnicode_FromString(text);
}

const char rmq_read_message_doc[] = (
"read_message(buffer, position, limit, record_type, decode_properties, decode_message)\n"
"    -> record | None | NotImplemented\n\n"
"The record at `position` of a commit-log segment readable up to `limit`, decoded: None where\n"
"store.lookups._read_record finds no record (the head or the record past the limit, not a message\n"
"magic, TOTALSIZE <= 0), else record_type(...) as store.codec.message.decode_message builds it\n"
"(non-ASCII PROPERTIES through decode_properties). NotImplemented where decode_message would\n"
"raise (a torn or inconsistent record) or an argument is not what it should be: the twin decodes.");

PyObject *rmq_read_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "read_message takes 6 arguments");
        return NULL;
    }
    long long position, limit;
    int got = int_arg(args[1], &position, 1);
    if (got == 0)
        got = int_arg(args[2], &limit, 1);
    if (got < 0)
        return NULL;
    if (got > 0)
        Py_RETURN_NOTIMPLEMENTED;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *result = Py_NotImplemented;
    Py_INCREF(result);
    const unsigned char *base = view.buf;
    if (limit > view.len || limit < 0)
        goto done;                                     /* the twin slices (and finds) what it can */
    if (position < 0 || position > limit - 8) {
        Py_SETREF(result, Py_NewRef(Py_None));
        goto done;
    }
    const unsigned char *p = base + position;
    int32_t size = get32(p), magic = get32(p + 4);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size <= 0 || size > limit - position) {
        Py_SETREF(result, Py_NewRef(Py_None));
        goto done;
    }
    /* decode_message(buffer[position:position + size]): every field inside `size` bytes */
    int version = magic == MAGIC_V2 ? 2 : 1;
    if (size < 40)
        goto done;
    int32_t sys_flag = get32(p + 36);
    int born = sys_flag & SYSFLAG_BORNHOST_V6 ? 20 : 8, store = sys_flag & SYSFLAG_STOREHOST_V6 ? 20 : 8;
    int64_t body_len_pos = 68 + born + store;
    if (body_len_pos + 4 > size)
        goto done;
    int64_t body_len = get32(p + body_len_pos);
    body_len = body_len > 0 ? body_len : 0;
    int64_t body_pos = body_len_pos + 4, topic_len_pos = body_pos + body_len;
    if (topic_len_pos + version > size)
        goto done;
    int64_t topic_len = version == 1 ? (int8_t)p[topic_len_pos]
                                     : (int16_t)(((unsigned)p[topic_len_pos] << 8) | p[topic_len_pos + 1]);
    if (topic_len < 0)
        goto done;
    int64_t topic_pos = topic_len_pos + version, props_pos = topic_pos + topic_len + 2;
    if (props_pos > size)
        goto done;
    int64_t props_len = (int16_t)(((unsigned)p[props_pos - 2] << 8) | p[props_pos - 1]);
    props_len = props_len > 0 ? props_len : 0;
    if (props_pos + props_len > size || props_pos + props_len != size)
        goto done;                                     /* torn, or TOTALSIZE differs: it raises */
    PyObject *fields[18] = {NULL};
    fields[0] = PyLong_FromLong(size);
    fields[1] = PyLong_FromLong(magic);
    fields[2] = PyLong_FromLong(get32(p + 8));
    fields[3] = PyLong_FromLong(get32(p + 12));
    fields[4] = PyLong_FromLong(get32(p + 16));
    fields[5] = PyLong_FromLongLong(get64(p + 20));
    fields[6] = PyLong_FromLongLong(get64(p + 28));
    fields[7] = PyLong_FromLong(sys_flag);
    fields[8] = PyLong_FromLongLong(get64(p + 40));
    fields[9] = host_string(p + 48, born == 20);
    fields[10] = PyLong_FromLongLong(get64(p + 48 + born));
    fields[11] = host_string(p + 56 + born, store == 20);
    fields[12] = PyLong_FromLong(get32(p + 56 + born + store));
    fields[13] = PyLong_FromLongLong(get64(p + 60 + born + store));
    fields[14] = PyBytes_FromStringAndSize((const char *)p + body_pos, body_len);
    fields[15] = PyUnicode_DecodeUTF8((const char *)p + topic_pos, topic_len, "replace");
    fields[17] = PyBytes_FromStringAndSize((const char *)p + props_pos, props_len);
    if (fields[17] != NULL) {
        if (props_len == 0)
            fields[16] = PyDict_New();
        else if (rmq_is_ascii(p + props_pos, props_len))
            fields[16] = rmq_ascii_properties(p + props_pos, props_len);
        else
            fields[16] = PyObject_CallOneArg(args[4], fields[17]);
    }
    int ok = 1;
    for (int k = 0; k < 18; k++)
        ok &= fields[k] != NULL;
    Py_CLEAR(result);
    if (ok)
        result = PyObject_Vectorcall(args[3], fields, 18, NULL);
    for (int k = 0; k < 18; k++)
        Py_XDECREF(fields[k]);
done:
    PyBuffer_Release(&view);
    return result;
}
