/* prefault: madvise(MADV_POPULATE_WRITE) over the whole pages of [start, start+length) of a writable
 * mmap.mmap, with the GIL released, so that a background thread (store/services/prefault.py) takes
 * the page faults (and the kernel's zeroing of a sparse file's new pages) that the put thread would
 * otherwise take on its first write to each page. Only a hint: the bytes are not changed.
 *
 * The range is clipped to the map and shrunk to whole pages (start rounded up, end rounded down; an
 * mmap's data starts on a page). Answer: the bytes advised (0 when no whole page is in the range).
 * A failing madvise raises OSError from errno (EINVAL on kernels before 5.14, which lack the
 * option). Twin: store/kernel/prefault.py (mmap.madvise, with the GIL held). */

#include "kernel.h"
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23      /* Linux 5.14 */
#endif

static PyObject *mmap_type;

/* mmap.mmap itself: the module's attribute, or, when a test has replaced it with a subclass
 * (tests/power_loss_model.py records flushes that way), the class it derives from. */
static int resolve_mmap_type(void)
{
    PyObject *module = PyImport_ImportModule("mmap");
    if (module == NULL)
        return -1;
    PyObject *found = PyObject_GetAttrString(module, "mmap");
    Py_DECREF(module);
    if (found == NULL)
        return -1;
    if (!PyType_Check(found)) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_TypeError, "mmap.mmap is not a type");
        return -1;
    }
    PyTypeObject *type = (PyTypeObject *)found;
    while (type != NULL && strcmp(type->tp_name, "mmap.mmap") != 0)
        type = type->tp_base;
    if (type == NULL) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_TypeError, "mmap.mmap is not a map type");
        return -1;
    }
    Py_INCREF(type);
    Py_DECREF(found);
    mmap_type = (PyObject *)type;
    return 0;
}

/* args[0] an mmap.mmap (TypeError naming `what` otherwise), args[1] and args[2] index-sized ints
 * (OverflowError past them): prefault's and sync_range's first checks, in their order. */
static int map_and_offsets(PyObject *const *args, const char *what, Py_ssize_t *first,
                           Py_ssize_t *second)
{
    if (mmap_type == NULL && resolve_mmap_type() < 0)
        return -1;
    if (!PyObject_TypeCheck(args[0], (PyTypeObject *)mmap_type)) {
        PyErr_Format(PyExc_TypeError, "%s: the map must be an mmap.mmap", what);
        return -1;
    }
    *first = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (*first == -1 && PyErr_Occurred())
        return -1;
    *second = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (*second == -1 && PyErr_Occurred())
        return -1;
    return 0;
}

const char rmq_prefault_doc[] = (
"prefault(map, start, length) -> int\n\n"
"madvise(MADV_POPULATE_WRITE) over the whole pages of [start, start+length) of a writable mmap.mmap\n"
"(clipped to it), the GIL released; the bytes advised. OSError when madvise fails.");

PyObject *rmq_prefault(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "prefault(map, start, length)");
        return NULL;
    }
    Py_ssize_t start, length;
    if (map_and_offsets(args, "prefault", &start, &length) < 0)
        return NULL;
    if (start < 0 || length < 0) {
        PyErr_SetString(PyExc_ValueError, "prefault: start and length must be >= 0");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    long page = sysconf(_SC_PAGESIZE);
    Py_ssize_t end = length > view.len - start ? view.len : start + length;   /* no wrap */
    Py_ssize_t first = start > view.len ? view.len : start;
    if (first % page)
        first += page - first % page;
    end -= end % page;
    Py_ssize_t advised = end > first ? end - first : 0;
    int failed = 0, error = 0;
    if (advised > 0) {
        char *base = (char *)view.buf;
        Py_BEGIN_ALLOW_THREADS
        failed = madvise(base + first, (size_t)advised, MADV_POPULATE_WRITE) != 0;
        error = errno;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (failed) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(advised);
}

/* sync_range: write [start, end) of a writable mmap.mmap to disk, msync(MS_SYNC) from start's page,
 * after (when `drop`) dropping this process's mappings of the whole pages below end's page
 * (madvise(MADV_DONTNEED): a shared map keeps the bytes in the page cache, dirty ones dirty). Only
 * for a shared map (ACCESS_WRITE or ACCESS_DEFAULT): on a copy-on-write one (ACCESS_COPY) it would
 * discard the private changes, and the caller, who knows how it mapped, says so by `drop`.
 *
 * Why: a sync cleans each dirty page it writes, and a page still mapped writable is first made
 * read-only in every process that maps it, one TLB shootdown apiece (an interrupt to every other
 * core running a thread of the process). That was nearly all of the commit log's async flush
 * CPU (1.2-2.0 us a put in a 200,000-put run), and the put and reput threads were interrupted on
 * the other core (docs/performance.md, sixteenth session). One madvise over the range flushes the
 * TLB once; the last, partly written page stays mapped (the writer is in it). Only
 * [start's page, end) is written, not every dirty page of the file as fdatasync does (the zero
 * pages the prefault service keeps populated ahead of the writer among them, which it would then
 * fault back in). Readers of the map fault the dropped pages back in (read-only, from the page
 * cache).
 *
 * Answer: the bytes synced, end minus start's page. ValueError unless 0 <= start <= end <= the
 * map's size; OSError from a failing madvise or msync. Twin: store/kernel/prefault.py. */

#ifndef MADV_DONTNEED
#define MADV_DONTNEED 4
#endif

const char rmq_sync_range_doc[] = (
"sync_range(map, start, end, drop) -> int\n\n"
"msync(MS_SYNC) [start rounded down to a page, end) of a writable mmap.mmap, after (when drop,\n"
"for a shared map only) madvise(MADV_DONTNEED) of its whole pages below end's page (one TLB flush\n"
"instead of one per page the sync cleans); the GIL released. The bytes synced. OSError when a\n"
"call fails.");

PyObject *rmq_sync_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "sync_range(map, start, end, drop)");
        return NULL;
    }
    Py_ssize_t start, end;
    if (map_and_offsets(args, "sync_range", &start, &end) < 0)
        return NULL;
    int drop = PyObject_IsTrue(args[3]);
    if (drop < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (start < 0 || end < start || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "sync_range: need 0 <= start <= end <= the map's size");
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    Py_ssize_t first = start - start % page, full = end - end % page;
    int failed = 0, error = 0;
    if (end > first) {
        char *base = (char *)view.buf;
        Py_BEGIN_ALLOW_THREADS
        if (drop && full > first &&
            madvise(base + first, (size_t)(full - first), MADV_DONTNEED) != 0)
            failed = 1;
        else if (msync(base + first, (size_t)(end - first), MS_SYNC) != 0)
            failed = 1;
        error = errno;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (failed) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(end > first ? end - first : 0);
}
