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
    if (mmap_type == NULL) {
        PyObject *module = PyImport_ImportModule("mmap");
        if (module == NULL)
            return NULL;
        mmap_type = PyObject_GetAttrString(module, "mmap");
        Py_DECREF(module);
        if (mmap_type == NULL)
            return NULL;
    }
    if (!PyObject_TypeCheck(args[0], (PyTypeObject *)mmap_type)) {
        PyErr_SetString(PyExc_TypeError, "prefault: the map must be an mmap.mmap");
        return NULL;
    }
    Py_ssize_t start = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t length = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (length == -1 && PyErr_Occurred())
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
