/* GroupCommit: SYNC_FLUSH's group commit with the syncs and the wake-ups outside the GIL.
 *
 * RocketMQ's CommitLog.GroupCommitService: producers append, then wait until the commit log is flushed
 * past their record; one thread syncs everything appended so far (a group) and releases every producer
 * the sync covered. store/services/flush.py's GroupCommitService drives this object from its thread:
 *
 *   run(fd, limit, idle_ms, tick_ms)  the flusher's loop, the GIL released throughout: while producers
 *                                     wait, fdatasync(fd) (the segment being written; a dup of it is
 *                                     used), then `flushed` = the highest offset awaited when the sync
 *                                     began, and post each covered producer's semaphore. Returns
 *                                     (reason, flushed, syncs) when nobody waited for idle_ms (IDLE), a
 *                                     producer waits past `limit` (LIMIT: the segment rolled; Python
 *                                     flushes both segments, then release()), tick_ms passed (TICK:
 *                                     Python moves its pointers and the checkpoint), poke() was called
 *                                     with nobody waiting (IDLE) or halt()/stop() (HALTED).
 *   wait(offset, timeout_ms) -> bool  a producer: True once `flushed` >= offset; it sleeps on a
 *                                     semaphore of its own, the GIL released; False on timeout or stop.
 *   release(flushed)                  Python flushed up to `flushed` itself: release those it covers.
 *   poke() / halt() / stop()          flush soon (a put that does not wait) / return from run / a
 *                                     simulated crash: waiters give up (False) and later ones too.
 *   GroupCommit(sync=None)            sync: called with the fd instead of fdatasync, the GIL taken
 *                                     for it (tests hold and record syncs with it).
 *   keep_history(n) / take_history()  the last n syncs' (sync_ns, gap_ns, released, bytes), for
 *                                     bench/sync_probe.py (none kept by default).
 *
 * Why in C: with the flusher a Python thread, each sync ended with the thread waiting for the GIL behind
 * the producers the previous sync released (their appends), then waking the covered producers one lock
 * at a time under it: a group-commit cycle at 32 producers was 1.45 ms for 20.8 messages, the sync
 * 0.41 ms of it (docs/performance.md, tenth session). Here the sync and the wake-ups never wait for the
 * GIL, so the released producers' appends overlap the next sync.
 *
 * Soundness: a producer adds itself (under `mu`) only after its record is in the map, so a sync that
 * starts after the flusher read the highest offset awaited (under `mu`) covers every waiter up to it;
 * fdatasync writes back the page-cache pages a shared mapping dirtied. Waiters live on their producers'
 * stacks: the flusher posts them under `mu` and unlinks them, and a producer that times out takes `mu`
 * before it returns, so no post reaches a dead frame. `flushed` only grows; it is read without `mu`
 * (an atomic load) on the producer's fast path.
 *
 * Twin: store/kernel/group_commit.py (threading primitives; the GIL held but for the fdatasync). */

#include "kernel.h"
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>

enum { GC_IDLE = 0, GC_LIMIT = 1, GC_TICK = 2, GC_HALTED = 3 };

typedef struct gc_waiter {
    int64_t offset;
    sem_t sem;
    struct gc_waiter *next;
} gc_waiter;

typedef struct {
    int64_t sync_ns, gap_ns, released, bytes;
} gc_record;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t wake;        /* the flusher sleeps on it while nobody waits */
    gc_waiter *waiters;         /* offsets not yet flushed, newest first */
    int64_t flushed;            /* grows only; atomic loads outside mu */
    int64_t syncs;              /* fdatasyncs run() made */
    int idle, poked, halted, stopped, running;
    int ready;                  /* mu and wake initialized */
    PyObject *sync;             /* called with the fd instead of fdatasync (tests hold syncs), or NULL */
    gc_record *history;         /* keep_history(n): the last n syncs, a ring (NULL: none kept) */
    long history_cap, history_next, history_len;
    int64_t last_sync_end;      /* ns, for the gap between syncs */
} GroupCommit;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec at_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

static int64_t load_flushed(GroupCommit *g)
{
    return __atomic_load_n(&g->flushed, __ATOMIC_ACQUIRE);
}

/* Under mu: flushed = max(flushed, to); post and unlink every waiter it covers. All at once: waking
 * them one at a time (each, once it has the GIL back, posting the next) made smaller groups and
 * 13.7-14.7 k msg/s at 32 producers against 24.8-25.8 k (hand runs, eleventh session). */
static long release_locked(GroupCommit *g, int64_t to)
{
    if (to > g->flushed)
        __atomic_store_n(&g->flushed, to, __ATOMIC_RELEASE);
    long released = 0;
    gc_waiter **link = &g->waiters;
    while (*link != NULL) {
        gc_waiter *w = *link;
        if (w->offset <= g->flushed) {
            *link = w->next;
            sem_post(&w->sem);
            released++;
        } else {
            link = &w->next;
        }
    }
    return released;
}

/* Under mu: unlink `w` from the waiters; 1 if it was there. */
static int unlink_waiter(GroupCommit *g, gc_waiter *w)
{
    for (gc_waiter **link = &g->waiters; *link != NULL; link = &(*link)->next) {
        if (*link == w) {
            *link = w->next;
            return 1;
        }
    }
    return 0;
}

static PyObject *gc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"sync", NULL};
    PyObject *sync = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$O:GroupCommit", names, &sync))
        return NULL;
    if (sync != Py_None && !PyCallable_Check(sync)) {
        PyErr_SetString(PyExc_TypeError, "GroupCommit: sync must be callable or None");
        return NULL;
    }
    GroupCommit *g = (GroupCommit *)type->tp_alloc(type, 0);
    if (g == NULL)
        return NULL;
    pthread_condattr_t attr;
    if (pthread_mutex_init(&g->mu, NULL) != 0 || pthread_condattr_init(&attr) != 0) {
        Py_DECREF(g);
        return PyErr_NoMemory();
    }
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int failed = pthread_cond_init(&g->wake, &attr) != 0;
    pthread_condattr_destroy(&attr);
    if (failed) {
        pthread_mutex_destroy(&g->mu);
        Py_DECREF(g);
        return PyErr_NoMemory();
    }
    g->ready = 1;
    g->sync = sync == Py_None ? NULL : Py_NewRef(sync);
    return (PyObject *)g;
}

static int gc_traverse(GroupCommit *g, visitproc visit, void *arg)
{
    Py_VISIT(g->sync);
    return 0;
}

static int gc_clear(GroupCommit *g)
{
    Py_CLEAR(g->sync);
    return 0;
}

static void gc_dealloc(GroupCommit *g)
{
    /* Nobody waits or runs here: wait() and run() hold a reference to the object. */
    PyObject_GC_UnTrack(g);
    gc_clear(g);
    PyMem_RawFree(g->history);
    if (g->ready) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->mu);
    }
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static int arg_int64(PyObject *value, const char *what, int64_t *out)
{
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "GroupCommit: %s must be >= 0", what);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

static PyObject *gc_wait(GroupCommit *g, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wait(offset, timeout_ms)");
        return NULL;
    }
    int64_t offset, timeout_ms;
    if (arg_int64(args[0], "offset", &offset) < 0 || arg_int64(args[1], "timeout_ms", &timeout_ms) < 0)
        return NULL;
    if (load_flushed(g) >= offset)
        Py_RETURN_TRUE;
    gc_waiter w = {.offset = offset, .next = NULL};
    if (sem_init(&w.sem, 0, 0) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    int ok;
    Py_BEGIN_ALLOW_THREADS
    int64_t deadline = now_ns() + (timeout_ms > INT64_MAX / 2000000 ? INT64_MAX / 2 : timeout_ms * 1000000);
    pthread_mutex_lock(&g->mu);
    if (g->flushed >= offset || g->stopped) {
        ok = g->flushed >= offset;
        pthread_mutex_unlock(&g->mu);
    } else {
        w.next = g->waiters;
        g->waiters = &w;
        if (g->idle)
            pthread_cond_signal(&g->wake);
        pthread_mutex_unlock(&g->mu);
        for (;;) {
            struct timespec until = at_ns(deadline);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
            int r = sem_clockwait(&w.sem, CLOCK_MONOTONIC, &until);
#else
            struct timespec real;       /* no sem_clockwait: the wall clock's equivalent */
            clock_gettime(CLOCK_REALTIME, &real);
            int64_t left = deadline - now_ns();
            until = at_ns((int64_t)real.tv_sec * 1000000000 + real.tv_nsec + (left > 0 ? left : 0));
            int r = sem_timedwait(&w.sem, &until);
#endif
            if (r == 0 || errno != EINTR)
                break;
        }
        pthread_mutex_lock(&g->mu);
        /* Still linked: timed out before a post; unlink before this frame goes. */
        unlink_waiter(g, &w);
        ok = g->flushed >= offset;
        pthread_mutex_unlock(&g->mu);
    }
    Py_END_ALLOW_THREADS
    sem_destroy(&w.sem);
    return PyBool_FromLong(ok);
}

static PyObject *gc_run(GroupCommit *g, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "run(fd, limit, idle_ms, tick_ms)");
        return NULL;
    }
    int64_t fd, limit, idle_ms, tick_ms;
    if (arg_int64(args[0], "fd", &fd) < 0 || arg_int64(args[1], "limit", &limit) < 0 ||
            arg_int64(args[2], "idle_ms", &idle_ms) < 0 || arg_int64(args[3], "tick_ms", &tick_ms) < 0)
        return NULL;
    if (fd > INT32_MAX || idle_ms > 86400000 || tick_ms > 86400000) {
        PyErr_SetString(PyExc_ValueError, "GroupCommit.run: fd, idle_ms or tick_ms out of range");
        return NULL;
    }
    int own = dup((int)fd);     /* the caller may close its fd while this syncs */
    if (own < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    int reason = GC_HALTED, error = 0;
    int64_t syncs = 0, flushed;
    Py_BEGIN_ALLOW_THREADS
    int64_t start = now_ns();
    int64_t idle_until = start + idle_ms * 1000000, tick_until = start + tick_ms * 1000000;
    pthread_mutex_lock(&g->mu);
    g->running++;
    for (;;) {
        if (g->halted) {
            reason = GC_HALTED;
            break;
        }
        if (g->waiters == NULL) {
            int64_t now = now_ns();
            if (g->poked || now >= idle_until) {
                g->poked = 0;
                reason = GC_IDLE;
                break;
            }
            struct timespec until = at_ns(idle_until);
            g->idle = 1;
            pthread_cond_timedwait(&g->wake, &g->mu, &until);
            g->idle = 0;
            continue;
        }
        int64_t target = 0;
        for (gc_waiter *w = g->waiters; w != NULL; w = w->next)
            if (w->offset > target)
                target = w->offset;
        if (target > limit) {
            reason = GC_LIMIT;
            break;
        }
        int64_t before = g->flushed, sync_start = now_ns();
        pthread_mutex_unlock(&g->mu);
        int failed, saved = 0;
        if (g->sync != NULL) {      /* never takes the GIL with mu held */
            Py_BLOCK_THREADS
            PyObject *done = PyObject_CallFunction(g->sync, "i", own);
            failed = done == NULL;
            Py_XDECREF(done);
            Py_UNBLOCK_THREADS
            saved = -1;             /* the exception is set */
        } else {
            failed = fdatasync(own) != 0;
            saved = errno;
        }
        pthread_mutex_lock(&g->mu);
        if (failed) {
            error = saved;
            break;
        }
        syncs++;
        g->syncs++;
        int64_t now = now_ns();
        long released = release_locked(g, target);
        if (g->history != NULL) {
            gc_record *r = &g->history[g->history_next];
            r->sync_ns = now - sync_start;
            r->gap_ns = g->last_sync_end ? sync_start - g->last_sync_end : 0;
            r->released = released;
            r->bytes = target > before ? target - before : 0;
            g->history_next = (g->history_next + 1) % g->history_cap;
            if (g->history_len < g->history_cap)
                g->history_len++;
        }
        g->last_sync_end = now;
        idle_until = now + idle_ms * 1000000;
        if (now >= tick_until) {
            reason = GC_TICK;
            break;
        }
    }
    g->running--;
    flushed = g->flushed;
    pthread_mutex_unlock(&g->mu);
    close(own);
    Py_END_ALLOW_THREADS
    if (error == -1)
        return NULL;
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("(iLL)", reason, (long long)flushed, (long long)syncs);
}

static PyObject *gc_release(GroupCommit *g, PyObject *arg)
{
    int64_t to;
    if (arg_int64(arg, "flushed", &to) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g->mu);
    release_locked(g, to);
    pthread_mutex_unlock(&g->mu);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* Set a flag under mu and wake the flusher. */
static PyObject *gc_flag(GroupCommit *g, int which)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g->mu);
    if (which == 0) {
        g->poked = 1;
    } else {
        g->halted = 1;
        if (which == 2) {       /* stop: every waiter gives up */
            g->stopped = 1;
            for (gc_waiter *w = g->waiters; w != NULL; w = w->next)
                sem_post(&w->sem);
            g->waiters = NULL;
        }
    }
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *gc_poke(GroupCommit *g, PyObject *unused) { return gc_flag(g, 0); }
static PyObject *gc_halt(GroupCommit *g, PyObject *unused) { return gc_flag(g, 1); }
static PyObject *gc_stop(GroupCommit *g, PyObject *unused) { return gc_flag(g, 2); }

static PyObject *gc_get_flushed(GroupCommit *g, void *unused)
{
    return PyLong_FromLongLong(load_flushed(g));
}

static PyObject *gc_get_syncs(GroupCommit *g, void *unused)
{
    pthread_mutex_lock(&g->mu);     /* short; never held across a blocking call */
    int64_t syncs = g->syncs;
    pthread_mutex_unlock(&g->mu);
    return PyLong_FromLongLong(syncs);
}

static PyObject *gc_keep_history(GroupCommit *g, PyObject *arg)
{
    long cap = PyLong_AsLong(arg);
    if (cap == -1 && PyErr_Occurred())
        return NULL;
    if (cap < 0 || cap > 1 << 22) {
        PyErr_SetString(PyExc_ValueError, "GroupCommit.keep_history: 0 to 4194304 syncs");
        return NULL;
    }
    gc_record *ring = cap ? PyMem_RawCalloc((size_t)cap, sizeof(gc_record)) : NULL;
    if (cap && ring == NULL)
        return PyErr_NoMemory();
    pthread_mutex_lock(&g->mu);     /* short; never held across a blocking call */
    gc_record *old = g->history;
    g->history = ring;
    g->history_cap = cap;
    g->history_next = g->history_len = 0;
    pthread_mutex_unlock(&g->mu);
    PyMem_RawFree(old);
    Py_RETURN_NONE;
}

static PyObject *gc_take_history(GroupCommit *g, PyObject *unused)
{
    pthread_mutex_lock(&g->mu);
    long count = g->history_len, cap = g->history_cap, start = (g->history_next - count + cap) % (cap ? cap : 1);
    gc_record *copy = count ? PyMem_RawMalloc((size_t)count * sizeof(gc_record)) : NULL;
    if (copy != NULL) {
        for (long i = 0; i < count; i++)
            copy[i] = g->history[(start + i) % cap];
        g->history_len = 0;
    }
    pthread_mutex_unlock(&g->mu);
    if (count && copy == NULL)
        return PyErr_NoMemory();
    PyObject *list = PyList_New(count);
    for (long i = 0; list != NULL && i < count; i++) {
        PyObject *item = Py_BuildValue("(LLLL)", (long long)copy[i].sync_ns, (long long)copy[i].gap_ns,
                                       (long long)copy[i].released, (long long)copy[i].bytes);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    PyMem_RawFree(copy);
    return list;
}

static PyObject *gc_get_waiting(GroupCommit *g, void *unused)
{
    pthread_mutex_lock(&g->mu);
    long n = 0;
    for (gc_waiter *w = g->waiters; w != NULL; w = w->next)
        n++;
    pthread_mutex_unlock(&g->mu);
    return PyLong_FromLong(n);
}

static PyMethodDef gc_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))gc_wait, METH_FASTCALL,
     "wait(offset, timeout_ms) -> bool: sleep (the GIL released) until flushed >= offset; False on "
     "timeout or stop."},
    {"run", (PyCFunction)(void (*)(void))gc_run, METH_FASTCALL,
     "run(fd, limit, idle_ms, tick_ms) -> (reason, flushed, syncs): the flusher's loop, the GIL "
     "released (reasons IDLE, LIMIT, TICK, HALTED)."},
    {"release", (PyCFunction)gc_release, METH_O,
     "release(flushed): flushed = max(flushed, value); release the waiters it covers."},
    {"poke", (PyCFunction)gc_poke, METH_NOARGS, "poke(): run returns IDLE at once if nobody waits."},
    {"halt", (PyCFunction)gc_halt, METH_NOARGS, "halt(): run returns HALTED (and at once from now on)."},
    {"keep_history", (PyCFunction)gc_keep_history, METH_O,
     "keep_history(n): keep (sync_ns, gap_ns, released, bytes) of the last n syncs run() makes "
     "(0: none, the default); a diagnostic (bench/sync_probe.py)."},
    {"take_history", (PyCFunction)gc_take_history, METH_NOARGS,
     "take_history() -> list: the syncs kept, oldest first, and forget them."},
    {"stop", (PyCFunction)gc_stop, METH_NOARGS,
     "stop(): halt, and every waiter, now or later, gives up unless already flushed."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef gc_getset[] = {
    {"flushed", (getter)gc_get_flushed, NULL, "the offset every sync so far covers", NULL},
    {"syncs", (getter)gc_get_syncs, NULL, "fdatasyncs made by run()", NULL},
    {"waiting", (getter)gc_get_waiting, NULL, "producers waiting now", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject rmq_group_commit_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "store.kernel._kernel.GroupCommit",
    .tp_basicsize = sizeof(GroupCommit),
    .tp_dealloc = (destructor)gc_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)gc_traverse,
    .tp_clear = (inquiry)gc_clear,
    .tp_doc = "SYNC_FLUSH's group commit, the syncs and wake-ups outside the GIL (c/group_commit.c).",
    .tp_methods = gc_methods,
    .tp_getset = gc_getset,
    .tp_new = gc_new,
};

int rmq_group_commit_init(PyObject *module)
{
    if (PyType_Ready(&rmq_group_commit_type) < 0)
        return -1;
    Py_INCREF(&rmq_group_commit_type);
    if (PyModule_AddObject(module, "GroupCommit", (PyObject *)&rmq_group_commit_type) < 0) {
        Py_DECREF(&rmq_group_commit_type);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "GC_IDLE", GC_IDLE) < 0 ||
        PyModule_AddIntConstant(module, "GC_LIMIT", GC_LIMIT) < 0 ||
        PyModule_AddIntConstant(module, "GC_TICK", GC_TICK) < 0 ||
        PyModule_AddIntConstant(module, "GC_HALTED", GC_HALTED) < 0)
        return -1;
    return 0;
}
