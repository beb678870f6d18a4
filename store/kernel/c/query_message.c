/* query_message: store.lookups.query_message's whole work after its argument checks in one call:
 * the index service's lock taken, its live file list read under it, query.c's rounds
 * (rmq_query_run) and the QueryMessageResult built, its fields set as its dataclass __init__ sets
 * them (object.__setattr__, in field order). Twin: store/kernel/query.py (query_message_py).
 *
 * NotImplemented ("ask the twin", which starts over under the lock taken again) wherever query_keys
 * asks, or when result_type is not a type. The lock is released on every way out, an exception
 * raised under it kept.
 */

#include "kernel.h"

static PyObject *s_lock, *s_live_files, *s_acquire, *s_release, *s_fields[5];

static int intern_names(void)
{
    if (s_fields[4] != NULL)
        return 0;
    const char *names[5] = {"messages", "index_last_update_timestamp",
                            "index_last_update_phy_offset", "truncated", "collisions_filtered"};
    if ((s_lock = PyUnicode_InternFromString("lock")) == NULL
            || (s_live_files = PyUnicode_InternFromString("live_files")) == NULL
            || (s_acquire = PyUnicode_InternFromString("acquire")) == NULL
            || (s_release = PyUnicode_InternFromString("release")) == NULL)
        return -1;
    for (int k = 0; k < 5; k++)
        if ((s_fields[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return -1;
    return 0;
}

/* object.__new__(result_type) with its five fields set: a new reference, or NULL. */
static PyObject *build_result(PyTypeObject *result_type, PyObject *messages, Py_ssize_t hits,
                              int64_t last_ts, int64_t last_phy, PyObject *truncate_at)
{
    PyObject *values[5] = {Py_NewRef(messages), PyLong_FromLongLong(last_ts),
                           PyLong_FromLongLong(last_phy), NULL,
                           PyLong_FromSsize_t(hits - PyList_GET_SIZE(messages))};
    PyObject *hit_count = PyLong_FromSsize_t(hits), *result = NULL;
    if (hit_count != NULL)                      /* truncated = hits >= max_num */
        values[3] = PyObject_RichCompare(hit_count, truncate_at, Py_GE);
    Py_XDECREF(hit_count);
    int ok = 1;
    for (int k = 0; k < 5; k++)
        ok &= values[k] != NULL;
    if (ok) {
        PyObject *empty = PyTuple_New(0);
        result = empty == NULL ? NULL : PyBaseObject_Type.tp_new(result_type, empty, NULL);
        Py_XDECREF(empty);
        for (int k = 0; k < 5 && result != NULL; k++)
            if (PyObject_GenericSetAttr(result, s_fields[k], values[k]) < 0)
                Py_CLEAR(result);
    }
    for (int k = 0; k < 5; k++)
        Py_XDECREF(values[k]);
    return result;
}

const char rmq_query_message_doc[] = (
"query_message(index_service, topic, key, max_num, begin_ms, end_ms, mapped_files, decoders,\n"
"              result_type, truncate_at) -> result_type instance | NotImplemented\n\n"
"With index_service.lock held: query_keys(index_service.live_files, topic, key, max_num, begin_ms,\n"
"end_ms, mapped_files, decoders); then result_type's fields messages, index_last_update_timestamp,\n"
"index_last_update_phy_offset, truncated (hits >= truncate_at) and collisions_filtered (hits -\n"
"len(messages)) set on object.__new__(result_type). NotImplemented: the twin answers\n"
"(store.kernel.query.query_message_py).");

PyObject *rmq_query_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "query_message takes 10 arguments");
        return NULL;
    }
    if (intern_names() < 0)
        return NULL;
    if (!PyType_Check(args[8]))
        Py_RETURN_NOTIMPLEMENTED;
    int64_t key_hash = -1;
    if (PyUnicode_CheckExact(args[1]) && PyUnicode_CheckExact(args[2])) {
        /* A hint (query_hints.c): the newest index file's slot for the key requested from memory
         * while the lock is taken. The file list read here, without the lock, only aims it. */
        key_hash = rmq_query_key_hash(args[1], args[2]);
        PyObject *unlocked_files = PyObject_GetAttr(args[0], s_live_files);
        if (unlocked_files == NULL)
            PyErr_Clear();             /* read again below, under the lock, where it raises */
        else {
            rmq_hint_slot(unlocked_files, key_hash);
            Py_DECREF(unlocked_files);
        }
    }
    PyObject *lock = PyObject_GetAttr(args[0], s_lock);
    if (lock == NULL)
        return NULL;
    PyObject *taken = PyObject_CallMethodNoArgs(lock, s_acquire);
    if (taken == NULL) {
        Py_DECREF(lock);
        return NULL;
    }
    Py_DECREF(taken);
    PyObject *messages = NULL, *result = NULL;
    Py_ssize_t hits = 0;
    int64_t last_ts = 0, last_phy = 0;
    int got = -1;
    PyObject *files = PyObject_GetAttr(args[0], s_live_files);
    if (files != NULL) {
        PyObject *query_args[8] = {files, args[1], args[2], args[3], args[4], args[5], args[6],
                                   args[7]};
        got = rmq_query_run(query_args, key_hash, &messages, &hits, &last_ts, &last_phy);
        Py_DECREF(files);
    }
    PyObject *type, *value, *traceback;        /* release, keeping what was raised */
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *released = PyObject_CallMethodNoArgs(lock, s_release);
    Py_DECREF(lock);
    if (released == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        Py_XDECREF(messages);
        return NULL;
    }
    Py_DECREF(released);
    PyErr_Restore(type, value, traceback);
    if (got != 0)
        return got == RMQ_QUERY_ASK ? Py_NewRef(Py_NotImplemented) : NULL;
    result = build_result((PyTypeObject *)args[8], messages, hits, last_ts, last_phy, args[9]);
    Py_DECREF(messages);
    return result;
}
