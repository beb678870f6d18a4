/* cq_keys: the RocksDB consume queue's keys of a dispatch pass in one call, for
 * store.consumequeue.rocksdb.value_runs (a pass over thousands of queues, nearly every run one unit).
 *
 * RocketMQ 5.x RocksDBConsumeQueueTable.buildCQKeyByteBuffer and RocksDBConsumeQueueOffsetTable's
 * buildOffsetKeyByteBuffer lay the keys out as (store.codec.rocksdb_cq):
 *   unit key:  topic head | queueId (>i4) | CTRL_1 | cqOffset (>i8)
 *   max key:   topic head | "max" | CTRL_1 | queueId (>i4)
 * where the topic head is topic length (>i4) | CTRL_1 | topic UTF-8 | CTRL_1. The heads are the
 * caller's (a dict topic -> head, filled through `head_of` for a topic it lacks), so the layout of
 * the head stays in one place, the codec. Twin: store/kernel/cq_keys.py. */

#include "kernel.h"

#define CTRL_1 0x01

/* The `at`-th int64 (native order) of a buffer of any alignment. */
static inline int64_t native64(const unsigned char *buf, Py_ssize_t at)
{
    int64_t value;
    memcpy(&value, buf + 8 * at, sizeof value);
    return value;
}

const char rmq_cq_keys_doc[] = (
"cq_keys(queues, lengths, offsets, heads, head_of) -> (unit_keys, max_keys)\n\n"
"The RocksDB consume queue's keys of a dispatch pass: queues, a list of (topic str, queue id int)\n"
"runs; lengths, int64 units per run (>= 1); offsets, int64 queue offsets of every unit, run after\n"
"run. heads: dict topic -> its key head (bytes); a topic missing there gets head_of(topic), stored.\n"
"unit_keys: head + >i4 queue id + 0x01 + >i8 offset per unit; max_keys: head + b'max\\x01' + >i4\n"
"queue id per run. TypeError for a run that is not a (str, int) tuple or a head that is not bytes,\n"
"OverflowError for a queue id outside int32, ValueError when lengths and offsets do not agree.");

static int run_queue(PyObject *queue, PyObject **topic, int32_t *queue_id)
{
    if (!PyTuple_CheckExact(queue) || PyTuple_GET_SIZE(queue) != 2 ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(queue, 0)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(queue, 1))) {
        PyErr_SetString(PyExc_TypeError, "cq_keys: every queue must be a (str, int) tuple");
        return -1;
    }
    int overflow = 0;
    long long id = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(queue, 1), &overflow);
    if (overflow || id < INT32_MIN || id > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "cq_keys: a queue id does not fit in int32");
        return -1;
    }
    *topic = PyTuple_GET_ITEM(queue, 0);
    *queue_id = (int32_t)id;
    return 0;
}

/* The head of `topic` (a borrowed reference, kept alive by `heads`), looked up or made. */
static PyObject *head_for(PyObject *heads, PyObject *head_of, PyObject *topic)
{
    PyObject *head = PyDict_GetItemWithError(heads, topic);
    if (head == NULL) {
        if (PyErr_Occurred())
            return NULL;
        PyObject *made = PyObject_CallOneArg(head_of, topic);
        if (made == NULL)
            return NULL;
        if (!PyBytes_CheckExact(made)) {
            Py_DECREF(made);
            PyErr_SetString(PyExc_TypeError, "cq_keys: head_of must return bytes");
            return NULL;
        }
        int failed = PyDict_SetItem(heads, topic, made);
        Py_DECREF(made);
        if (failed < 0)
            return NULL;
        head = PyDict_GetItemWithError(heads, topic);
        if (head == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "cq_keys: heads lost a head it was given");
            return NULL;
        }
    }
    if (!PyBytes_CheckExact(head)) {
        PyErr_SetString(PyExc_TypeError, "cq_keys: every head must be bytes");
        return NULL;
    }
    return head;
}

static PyObject *key_of(PyObject *head, const unsigned char *tail, Py_ssize_t tail_len)
{
    Py_ssize_t head_len = PyBytes_GET_SIZE(head);
    if (head_len > PY_SSIZE_T_MAX - tail_len)
        return PyErr_NoMemory();
    PyObject *key = PyBytes_FromStringAndSize(NULL, head_len + tail_len);
    if (key == NULL)
        return NULL;
    char *out = PyBytes_AS_STRING(key);
    memcpy(out, PyBytes_AS_STRING(head), (size_t)head_len);
    memcpy(out + head_len, tail, (size_t)tail_len);
    return key;
}

PyObject *rmq_cq_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "cq_keys(queues, lengths, offsets, heads, head_of)");
        return NULL;
    }
    PyObject *queues = args[0], *heads = args[3], *head_of = args[4];
    if (!PyList_CheckExact(queues) || !PyDict_CheckExact(heads) || !PyCallable_Check(head_of)) {
        PyErr_SetString(PyExc_TypeError,
                        "cq_keys: queues must be a list, heads a dict and head_of callable");
        return NULL;
    }
    Py_buffer lengths, offsets;
    if (PyObject_GetBuffer(args[1], &lengths, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[2], &offsets, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&lengths);
        return NULL;
    }
    PyObject *unit_keys = NULL, *max_keys = NULL, *result = NULL;
    Py_ssize_t runs = PyList_GET_SIZE(queues);
    if (lengths.len != 8 * runs || offsets.len % 8) {
        PyErr_SetString(PyExc_ValueError,
                        "cq_keys: lengths must be int64, one per queue, and offsets int64");
        goto done;
    }
    const unsigned char *length_at = lengths.buf, *offset_at = offsets.buf;   /* any alignment */
    Py_ssize_t units = offsets.len / 8, total = 0;
    for (Py_ssize_t r = 0; r < runs; r++) {
        int64_t length = native64(length_at, r);
        if (length < 1 || length > units - total) {
            PyErr_SetString(PyExc_ValueError,
                            "cq_keys: every length must be >= 1 and together they must cover the offsets");
            goto done;
        }
        total += length;
    }
    if (total != units) {
        PyErr_SetString(PyExc_ValueError,
                        "cq_keys: every length must be >= 1 and together they must cover the offsets");
        goto done;
    }
    unit_keys = PyList_New(units);
    max_keys = PyList_New(runs);
    if (unit_keys == NULL || max_keys == NULL)
        goto done;
    Py_ssize_t unit = 0;
    for (Py_ssize_t r = 0; r < runs; r++) {
        PyObject *topic;
        int32_t queue_id;
        if (run_queue(PyList_GET_ITEM(queues, r), &topic, &queue_id) < 0)
            goto done;
        PyObject *head = head_for(heads, head_of, topic);
        if (head == NULL)
            goto done;
        Py_INCREF(head);        /* borrowed from heads: held while its keys are made */
        unsigned char tail[13];
        memcpy(tail, "max\x01", 4);
        put32(tail + 4, queue_id);
        PyObject *key = key_of(head, tail, 8);
        if (key == NULL) {
            Py_DECREF(head);
            goto done;
        }
        PyList_SET_ITEM(max_keys, r, key);
        put32(tail, queue_id);
        tail[4] = CTRL_1;
        for (int64_t n = native64(length_at, r); n > 0; n--, unit++) {
            put64(tail + 5, native64(offset_at, unit));
            key = key_of(head, tail, 13);
            if (key == NULL) {
                Py_DECREF(head);
                goto done;
            }
            PyList_SET_ITEM(unit_keys, unit, key);
        }
        Py_DECREF(head);
    }
    result = PyTuple_Pack(2, unit_keys, max_keys);
done:
    Py_XDECREF(unit_keys);
    Py_XDECREF(max_keys);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&offsets);
    return result;
}
