/* put_fast: MessageStore.put_message's common case (4.9 style, no commit service, no dispatch
 * requests, a topic already validated, a record that fits the last segment) in one call: the
 * refusal checks, the born-time clock, encode_put, the put lock (taken only with the GIL held; a
 * busy one waited for by giving the GIL up, a few times), the store-time clock kept
 * non-decreasing, the placement of the record (offsets and store time patched, the bytes after the
 * first 8 copied first, TOTALSIZE and magic last), the segment's wrote_position, the queue offset
 * table, last_store_timestamp, and the PutMessageResult (built in its slots, as result.c builds
 * GetMessageResult); then, lock released, a queue's first put notes it in topics.json
 * (store._note_topic, as _acknowledge). Under SYNC_FLUSH the caller then waits for the group commit
 * (StoreServices.await_flush).
 *
 * Anything else answers before anything is written, None (no clock read yet) or the born time it
 * read, and the caller runs the Python path (MessageStore.put_message's own code, with that born
 * time), which gives every refusal its status and sentence. Every
 * piece of mutable state is read on each call (the segment list, the last segment, the flags); the
 * state tuple holds only objects a store keeps for its lifetime. Twin: store/kernel/put_fast.py. */

#include "kernel.h"
#include <sched.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

#define N_PUT_FIELDS 9
#define PUT_LOCK_YIELDS 64       /* GIL hand-offs to wait for a busy put lock (see below) */
static const char *const put_fields[N_PUT_FIELDS] = {
    "status", "wrote_offset", "wrote_bytes", "msg_id", "queue_offset", "store_timestamp",
    "message_count", "msg_ids", "error",
};
static PyTypeObject *put_cls;
static Py_ssize_t put_offset[N_PUT_FIELDS];

static PyObject *s_closed, *s_read_only, *s_broker_role, *s_disk_full, *s_commit_service,
    *s_encode_batch, *s_make_requests, *s_clock_ms, *s_last_ts, *s_files,
    *s_wrote_position, *s_file_size, *s_file_from, *s_write_buffer, *s_buffer, *s_queue_offsets,
    *s_prefix, *s_acquire, *s_release, *s_slave, *s_note_topic, *s_pwrite_records, *s_sync_fd;

static int intern_names(void)
{
    if (s_note_topic != NULL)
        return 0;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(s_closed, "closed"); INTERN(s_read_only, "read_only"); INTERN(s_broker_role, "broker_role");
    INTERN(s_disk_full, "disk_full"); INTERN(s_commit_service, "commit_service");
    INTERN(s_encode_batch, "_encode_batch");
    INTERN(s_make_requests, "make_dispatch_requests"); INTERN(s_clock_ms, "clock_ms");
    INTERN(s_last_ts, "last_store_timestamp"); INTERN(s_files, "files");
    INTERN(s_wrote_position, "wrote_position"); INTERN(s_file_size, "file_size_bytes");
    INTERN(s_file_from, "file_from_offset"); INTERN(s_write_buffer, "write_buffer");
    INTERN(s_buffer, "buffer"); INTERN(s_queue_offsets, "queue_offsets");
    INTERN(s_prefix, "_msg_id_prefix"); INTERN(s_acquire, "acquire"); INTERN(s_release, "release");
    INTERN(s_slave, "SLAVE"); INTERN(s_note_topic, "_note_topic");
    INTERN(s_pwrite_records, "pwrite_records"); INTERN(s_sync_fd, "_sync_fd");
#undef INTERN
    return 0;
}

static int learn_put(PyObject *cls)
{
    if ((PyTypeObject *)cls == put_cls)
        return 0;
    Py_ssize_t offsets[N_PUT_FIELDS];
    if (!PyType_Check(cls) || ((PyTypeObject *)cls)->tp_alloc != PyType_GenericAlloc ||
        ((PyTypeObject *)cls)->tp_itemsize != 0 ||
        rmq_slot_offsets(cls, put_fields, N_PUT_FIELDS, offsets) < 0) {
        PyErr_SetString(PyExc_TypeError,
                        "put_fast: the result class must be a slots class with PutMessageResult's fields");
        return -1;
    }
    memcpy(put_offset, offsets, sizeof offsets);
    Py_INCREF(cls);
    Py_XSETREF(put_cls, (PyTypeObject *)cls);
    return 0;
}

/* 1 when obj.name is true, 0 when false, -1 on error. */
static int attr_true(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

/* obj.name as an int64 (error: -1 with an exception; the caller checks PyErr_Occurred). */
static long long attr_ll(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    long long v = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return v;
}

/* [SYNC_FLUSH] The descriptor the segment's records go in by (MappedFile.pwrite_records: its held
 * sync descriptor), -1 to write through the map, -2 to decline (the flag on, the descriptor
 * closed), -3 with an exception set. A stand-in without the attribute writes through the map. */
static int append_descriptor(PyObject *mapped)
{
    PyObject *flag = PyObject_GetAttr(mapped, s_pwrite_records);
    if (flag == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -3;
        PyErr_Clear();
        return -1;
    }
    int on = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    if (on <= 0)
        return on < 0 ? -3 : -1;
    long long fd = attr_ll(mapped, s_sync_fd);
    if (fd == -1 && PyErr_Occurred())
        return -3;
    return fd < 0 || fd > INT32_MAX ? -2 : (int)fd;
}

/* pwrite(2) all of [data, data + n) at `offset`, again after a short write; 0, or -1 with OSError
 * set (a write of no bytes is EIO). */
static int pwrite_all(int fd, const unsigned char *data, Py_ssize_t n, long long offset)
{
    while (n > 0) {
        ssize_t done = pwrite(fd, data, (size_t)n, (off_t)offset);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            if (done == 0)
                errno = EIO;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        data += done;
        n -= done;
        offset += done;
    }
    return 0;
}

/* store.clock_ms() or commit_log.clock_ms(): the system clock read here when it is the default
 * (time.time_ns() // 1_000_000: CLOCK_REALTIME, as time.time_ns reads it), else called. */
static PyObject *read_clock(PyObject *owner, PyObject *default_clock)
{
    PyObject *clock = PyObject_GetAttr(owner, s_clock_ms);
    if (clock == NULL)
        return NULL;
    PyObject *now;
    if (clock == default_clock) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        now = PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    } else {
        now = PyObject_CallNoArgs(clock);
    }
    Py_DECREF(clock);
    return now;
}

/* _acknowledge's first step: a queue not yet in topics.json (store._noted_queues) is noted there by
 * store._note_topic(topic, queue_id), after the append, with the put lock released. */
static int note_queue(PyObject *store, PyObject *noted, PyObject *encoded)
{
    PyObject *topic = PyTuple_GET_ITEM(encoded, 1), *queue_id = PyTuple_GET_ITEM(encoded, 2);
    PyObject *queues = PyDict_GetItemWithError(noted, topic);
    if (queues == NULL && PyErr_Occurred())
        return -1;
    int flag = queues != NULL && PyAnySet_CheckExact(queues) ? PySet_Contains(queues, queue_id) : 0;
    if (flag != 0)
        return flag < 0 ? -1 : 0;
    PyObject *done = PyObject_CallMethodObjArgs(store, s_note_topic, topic, queue_id, NULL);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

const char rmq_put_fast_doc[] = (
"put_fast(store, message, state[, born]) -> PutMessageResult | int | None\n\n"
"MessageStore.put_message's common case in one call (see c/put_fast.c). state: (commit_log,\n"
"services, cleanup, config, mapped_files, put_lock, kernel_context, noted_queues,\n"
"PutMessageResult, PUT_OK, default_clock, encode_batch). When a step is not the common case,\n"
"nothing is written and the answer is None (no clock read yet) or the born time it read (the\n"
"Python path puts with it). born: the time an earlier try answered, used instead of the clock.");

#define N_STATE 12

PyObject *rmq_put_fast(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 4 || !PyTuple_CheckExact(args[2]) ||
        PyTuple_GET_SIZE(args[2]) != N_STATE || (nargs == 4 && !PyLong_CheckExact(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "put_fast(store, message, state (12-tuple)[, born (int)])");
        return NULL;
    }
    if (intern_names() < 0)
        return NULL;
    PyObject *store = args[0], *message = args[1], *state = args[2];
    PyObject *commit_log = PyTuple_GET_ITEM(state, 0), *services = PyTuple_GET_ITEM(state, 1),
             *cleanup = PyTuple_GET_ITEM(state, 2), *config = PyTuple_GET_ITEM(state, 3),
             *mapped_files = PyTuple_GET_ITEM(state, 4), *lock = PyTuple_GET_ITEM(state, 5),
             *context = PyTuple_GET_ITEM(state, 6), *noted = PyTuple_GET_ITEM(state, 7),
             *result_cls = PyTuple_GET_ITEM(state, 8), *put_ok = PyTuple_GET_ITEM(state, 9),
             *default_clock = PyTuple_GET_ITEM(state, 10), *encoder = PyTuple_GET_ITEM(state, 11);
    if (!PyDict_CheckExact(noted) || !PyTuple_CheckExact(context)) {
        PyErr_SetString(PyExc_TypeError, "put_fast: state[7] must be a dict, state[6] a tuple");
        return NULL;
    }
    if (learn_put(result_cls) < 0)
        return NULL;

    /* _refuse_writes' conditions and the put path's choices: any of them, the Python path. */
    int flag;
    if ((flag = attr_true(store, s_closed)) != 0 || (flag = attr_true(store, s_read_only)) != 0 ||
        (flag = attr_true(cleanup, s_disk_full)) != 0 ||
        (flag = attr_true(commit_log, s_make_requests)) != 0)
        return flag < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *value = PyObject_GetAttr(config, s_broker_role);
    if (value == NULL)
        return NULL;
    flag = PyObject_RichCompareBool(value, s_slave, Py_EQ);
    Py_DECREF(value);
    if (flag != 0)
        return flag < 0 ? NULL : Py_NewRef(Py_None);
    if ((value = PyObject_GetAttr(services, s_commit_service)) == NULL)
        return NULL;
    Py_DECREF(value);
    if (value != Py_None)
        return Py_NewRef(Py_None);
    if ((value = PyObject_GetAttr(store, s_encode_batch)) == NULL)
        return NULL;
    Py_DECREF(value);
    if (value != encoder)
        return Py_NewRef(Py_None);

    /* A born time given: the one a first try read (the caller validated the topic in between). */
    PyObject *born = nargs == 4 ? Py_NewRef(args[3]) : read_clock(store, default_clock);
    if (born == NULL)
        return NULL;
    PyObject *call_args[3] = {message, context, born};
    PyObject *encoded = rmq_encode_put(self, call_args, 3);
    if (encoded == NULL) {
        Py_DECREF(born);
        return NULL;
    }
    if (encoded == Py_None) {
        Py_DECREF(encoded);
        return born;                      /* the Python path encodes with the time read here */
    }
    PyObject *record = PyTuple_GET_ITEM(encoded, 0), *result = NULL, *key = NULL;
    PyObject *queue_offset_o = NULL, *phy_o = NULL, *ts_o = NULL, *wrote_o = NULL, *next_o = NULL;
    PyObject *msg_id = NULL, *ids = NULL, *mapped = NULL, *target = NULL, *table = NULL;
    Py_buffer view = {0};
    int locked = 0;
    Py_ssize_t size = PyByteArray_GET_SIZE(record);
    long long segment_size = PyLong_AsLongLong(PyTuple_GET_ITEM(context, 6));
    long sys_flag = PyLong_AsLong(PyTuple_GET_ITEM(encoded, 3));
    long ts_position = PyLong_AsLong(PyTuple_GET_ITEM(encoded, 7));
    if (PyErr_Occurred())
        goto error;
    if (size + 8 > segment_size || ts_position < 36 || ts_position > size - 8)
        goto decline;                     /* RecordTooLargeForSegment: the Python path says it */
    int kind = sys_flag & 0x0C;
    int queued = kind != 0x04 && kind != 0x0C;

    /* The put lock, taken only while the GIL is held. When it is busy, its holder is a put on the
     * Python path (this path holds it only with the GIL), which needs the GIL to go on: give the
     * GIL up for a moment and try again, up to PUT_LOCK_YIELDS times, then the Python path waits.
     * Declining at once made a convoy of several producers: the Python path's blocking acquire
     * takes the lock, then waits for the GIL with it held, so the next producer's try fails too
     * and takes the Python path (4 producers: 14,070 of 80,000 puts, 259 -> 58 k msg/s). */
    for (int tries = 0;; tries++) {
        PyObject *got = PyObject_CallMethodOneArg(lock, s_acquire, Py_False);
        if (got == NULL)
            goto error;
        locked = got == Py_True;
        Py_DECREF(got);
        if (locked)
            break;
        if (tries == PUT_LOCK_YIELDS)
            goto decline;
        Py_BEGIN_ALLOW_THREADS
        sched_yield();
        Py_END_ALLOW_THREADS
    }
    PyObject *files = PyObject_GetAttr(mapped_files, s_files);
    if (files == NULL)
        goto error;
    if (PyList_CheckExact(files) && PyList_GET_SIZE(files) > 0) {
        mapped = PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1);
        Py_INCREF(mapped);
    }
    Py_DECREF(files);
    if (mapped == NULL)
        goto decline;                     /* no segment yet: the Python path creates it */
    long long position = attr_ll(mapped, s_wrote_position);
    long long file_size = position == -1 && PyErr_Occurred() ? -1 : attr_ll(mapped, s_file_size);
    long long file_from = file_size == -1 && PyErr_Occurred() ? -1 : attr_ll(mapped, s_file_from);
    if (PyErr_Occurred())
        goto error;
    /* Compared so that nothing wraps, whatever the segment's fields hold. */
    if (position < 0 || file_size < position || size + 8 > file_size - position)
        goto decline;                     /* a roll (BLANK, next segment): the Python path */
    if (file_from < 0 || position > INT64_MAX - file_from)
        goto decline;
    if ((table = PyObject_GetAttr(commit_log, s_queue_offsets)) == NULL)
        goto error;
    if (!PyDict_CheckExact(table))
        goto decline;
    key = PyTuple_Pack(2, PyTuple_GET_ITEM(encoded, 1), PyTuple_GET_ITEM(encoded, 2));
    if (key == NULL)
        goto error;
    long long queue_offset = 0;
    if (queued) {
        PyObject *current = PyDict_GetItemWithError(table, key);
        if (current == NULL && PyErr_Occurred())
            goto error;
        if (current != NULL && (queue_offset = PyLong_AsLongLong(current)) == -1 && PyErr_Occurred())
            goto error;
    }
    long long phy = file_from + position;
    if (queue_offset < 0 || queue_offset == INT64_MAX)
        goto decline;
    if ((target = PyObject_GetAttr(mapped, s_write_buffer)) == NULL)
        goto error;
    if (target == Py_None) {
        Py_DECREF(target);
        if ((target = PyObject_GetAttr(mapped, s_buffer)) == NULL)
            goto error;
    }
    if (PyObject_GetBuffer(target, &view, PyBUF_WRITABLE) < 0)
        goto error;
    if (position > view.len || size > view.len - position)
        goto decline;
    /* [SYNC_FLUSH] The record goes in by pwrite(2) through the segment's held descriptor: no page
     * of the map is then writable, so a group commit's sync has no mapping to write-protect (one
     * TLB shootdown per page) and the next put no page to fault back in (docs/performance.md,
     * sixteenth session). The descriptor is read and written with the GIL held throughout, so no
     * close() (Python) comes between; the store also closes the commit log under the put lock. */
    int append_fd = append_descriptor(mapped);
    if (append_fd == -3)
        goto error;
    if (append_fd == -2)
        goto decline;
    /* Every object the answer needs, before anything is written. */
    PyObject *prefix = PyObject_GetAttr(commit_log, s_prefix);
    if (prefix == NULL)
        goto error;
    if (!PyUnicode_CheckExact(prefix) || PyUnicode_MAX_CHAR_VALUE(prefix) > 127) {
        Py_DECREF(prefix);
        goto decline;
    }
    Py_ssize_t prefix_len = PyUnicode_GET_LENGTH(prefix);
    msg_id = PyUnicode_New(prefix_len + 16, 127);
    if (msg_id == NULL) {
        Py_DECREF(prefix);
        goto error;
    }
    static const char hex[] = "0123456789ABCDEF";
    unsigned char *text = PyUnicode_1BYTE_DATA(msg_id);
    memcpy(text, PyUnicode_1BYTE_DATA(prefix), prefix_len);
    Py_DECREF(prefix);
    for (int k = 0; k < 16; k++)
        text[prefix_len + k] = hex[((uint64_t)phy >> (60 - 4 * k)) & 0xF];
    /* The store time last: no decline after it, so a clock is read as often as the Python path
     * reads it (a test's ticking clock gives both paths the same times). */
    PyObject *now = read_clock(commit_log, default_clock);
    if (now == NULL)
        goto error;
    long long store_ts = PyLong_AsLongLong(now);
    Py_DECREF(now);
    long long last_ts = store_ts == -1 && PyErr_Occurred() ? 0 : attr_ll(commit_log, s_last_ts);
    if (PyErr_Occurred())
        goto error;
    if (store_ts < last_ts)
        store_ts = last_ts;               /* keep store times non-decreasing */
    if ((ids = PyTuple_Pack(1, msg_id)) == NULL || (queue_offset_o = PyLong_FromLongLong(queue_offset)) == NULL ||
        (phy_o = PyLong_FromLongLong(phy)) == NULL || (ts_o = PyLong_FromLongLong(store_ts)) == NULL ||
        (wrote_o = PyLong_FromLongLong(position + size)) == NULL ||
        (next_o = PyLong_FromLongLong(queue_offset + 1)) == NULL)
        goto error;
    if ((result = put_cls->tp_alloc(put_cls, 0)) == NULL)
        goto error;

    unsigned char *src = (unsigned char *)PyByteArray_AS_STRING(record);
    put64(src + 20, queued ? queue_offset : 0);
    put64(src + 28, phy);
    put64(src + ts_position, store_ts);
    if (append_fd >= 0) {
        /* Size and magic last, as through the map: a write cut short leaves no header. Nothing
         * has moved yet, so an error leaves the store as it was (bytes past wrote_position). */
        if (pwrite_all(append_fd, src + 8, size - 8, position + 8) < 0 ||
            pwrite_all(append_fd, src, 8, position) < 0) {
            Py_CLEAR(result);
            goto error;
        }
    } else {
        unsigned char *t = (unsigned char *)view.buf + position;
        memmove(t + 8, src + 8, size - 8);
        memmove(t, src, 8);
    }
    if (PyObject_SetAttr(mapped, s_wrote_position, wrote_o) < 0 ||
        (queued && PyDict_SetItem(table, key, next_o) < 0) ||
        PyObject_SetAttr(commit_log, s_last_ts, ts_o) < 0) {
        Py_CLEAR(result);
        goto error;
    }
    PyObject *values[N_PUT_FIELDS] = {put_ok, phy_o, NULL, msg_id, queue_offset_o, ts_o, NULL, ids,
                                      Py_None};
    values[2] = PyLong_FromSsize_t(size);
    values[6] = PyLong_FromLong(1);
    if (values[2] == NULL || values[6] == NULL) {
        Py_XDECREF(values[2]);
        Py_XDECREF(values[6]);
        Py_CLEAR(result);
        goto error;
    }
    for (int i = 0; i < N_PUT_FIELDS; i++) {
        if (i != 2 && i != 6)
            Py_INCREF(values[i]);
        *(PyObject **)((char *)result + put_offset[i]) = values[i];
    }
    goto done;

decline:
    result = Py_NewRef(born);             /* the Python path puts with the born time read here */
    goto done;
error:
    result = NULL;
done:
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    if (locked) {
        /* Release even after an error, keeping that error. */
        PyObject *type, *value_e, *trace;
        PyErr_Fetch(&type, &value_e, &trace);
        PyObject *released = PyObject_CallMethodNoArgs(lock, s_release);
        if (released == NULL) {
            Py_XDECREF(type); Py_XDECREF(value_e); Py_XDECREF(trace);
            Py_CLEAR(result);
        } else {
            Py_DECREF(released);
            PyErr_Restore(type, value_e, trace);
        }
    }
    if (result != NULL && Py_TYPE(result) == put_cls && note_queue(store, noted, encoded) < 0)
        Py_CLEAR(result);                 /* written, as the Python path's _acknowledge raising */
    Py_XDECREF(target);
    Py_XDECREF(mapped);
    Py_XDECREF(table);
    Py_XDECREF(key);
    Py_XDECREF(queue_offset_o);
    Py_XDECREF(phy_o);
    Py_XDECREF(ts_o);
    Py_XDECREF(wrote_o);
    Py_XDECREF(next_o);
    Py_XDECREF(msg_id);
    Py_XDECREF(ids);
    Py_DECREF(encoded);
    Py_DECREF(born);
    return result;
}
