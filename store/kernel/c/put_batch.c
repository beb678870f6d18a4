/* encode_batch, place_batch: a batch put (or a single one) encoded in one call, then placed in its
 * segment with its offsets, store time and msgIds in one call under the put lock.
 *
 * encode_batch runs put.c's encoder (rmq_encode_one: encode_put's checks and bytes, the context
 * parsed once, each record written straight after the one before it) on each message and answers
 * only when every message takes that common path and the batch as a whole breaks none of
 * store.message_store.put_messages' rules (one topic and queue, no delayed or transactional
 * message in a batch of several, maxMessageSize for the batch, a segment big enough); otherwise
 * None, and the Python path decides with its own status and sentence. So the record bytes are
 * encode_put's, and every refusal stays the Python path's. */

#include "kernel.h"

/* Per record in the layout: TOTALSIZE and the store timestamp's position, as native int32s. */
#define LAYOUT_FIELDS 2

const char rmq_encode_batch_doc[] = (
"encode_batch(messages, context, now_ms) -> (records, layout, topic, queue_id, sys_flag, count) | None\n\n"
"encode_put on each message of a list, the records concatenated into one bytearray; `layout` holds\n"
"(size, store_timestamp_position) per record as native int32s. topic, queue_id and sys_flag are the\n"
"first record's. None when encode_put declines a message, or the batch has two topics or queues,\n"
"is delayed or transactional with more than one message, is over maxMessageSize (context[3]) with\n"
"more than one message, or needs more than a segment (context[6]): the Python path decides.");

PyObject *rmq_encode_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyTuple_CheckExact(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != 8) {
        PyErr_SetString(PyExc_TypeError, "encode_batch(messages (list), context (8-tuple), now_ms)");
        return NULL;
    }
    PyObject *messages = args[0], *context = args[1];
    Py_ssize_t count = PyList_GET_SIZE(messages);
    if (count == 0)
        Py_RETURN_NONE;                       /* "empty batch": the Python path says it */
    long long max_message_size = PyLong_AsLongLong(PyTuple_GET_ITEM(context, 3));
    if (max_message_size == -1 && PyErr_Occurred())
        return NULL;
    long long segment_size = PyLong_AsLongLong(PyTuple_GET_ITEM(context, 6));
    if (segment_size == -1 && PyErr_Occurred())
        return NULL;
    if (count > INT32_MAX / 128) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: too many messages");
        return NULL;
    }
    /* What encode_put would check first, on every message: the time, then the context (one
     * parse here, the same checks in the same order). */
    long long now_ms = PyLong_AsLongLong(args[2]);
    if (now_ms == -1 && PyErr_Occurred())
        return NULL;
    rmq_put_ctx ctx;
    int parsed = rmq_put_context(context, &ctx);
    if (parsed != 0)
        return parsed < 0 ? NULL : Py_NewRef(Py_None);

    /* A copy of the list: the attribute reads may run Python code that changes it. */
    PyObject *items = PyList_AsTuple(messages);
    if (items == NULL)
        return NULL;
    /* Each record is encoded straight after the one before it (no record object, no tuple per
     * message); the layout holds (size, store_timestamp_position) per record. */
    rmq_arena arena = {NULL, 0, 0};
    rmq_encoded first = {NULL, 0, 0, 0, 0};
    PyObject *layout = PyBytes_FromStringAndSize(
        NULL, count * LAYOUT_FIELDS * (Py_ssize_t)sizeof(int32_t));
    PyObject *records = NULL, *result = NULL, *queue_o = NULL, *flag_o = NULL;
    if (layout == NULL)
        goto error;
    int32_t *fields = (int32_t *)PyBytes_AS_STRING(layout);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        rmq_encoded info;
        PyObject *one = rmq_encode_one(PyTuple_GET_ITEM(items, i), &ctx, now_ms, &arena, &info);
        if (one == NULL)
            goto error;
        if (one == Py_None) {
            Py_DECREF(one);
            goto decline;
        }
        Py_DECREF(one);
        if (i == 0) {
            first = info;                       /* owns the topic */
            /* room for the rest at the first record's size (more is grown when needed), never
             * past a segment: a batch that needs more is declined below */
            Py_ssize_t want = info.size * count + info.size / 8 + 64;
            if (want > segment_size)
                want = (Py_ssize_t)segment_size;
            if (count > 1 && rmq_arena_reserve(&arena, want) < 0)
                goto error;
        } else {
            /* encode_put took the message's own topic (no DELAY) and queue id: compare them as
             * put_messages does. */
            int same_topic = PyUnicode_Compare(first.topic, info.topic);
            Py_DECREF(info.topic);
            if (same_topic == -1 && PyErr_Occurred())
                goto error;
            if (same_topic != 0 || info.queue_id != first.queue_id)
                goto decline;
        }
        if (count > 1 && (info.sys_flag & 0x0C) != 0)
            goto decline;                      /* "batches cannot be delayed or transactional" */
        fields[i * LAYOUT_FIELDS] = (int32_t)info.size;
        fields[i * LAYOUT_FIELDS + 1] = (int32_t)info.ts_position;
        total += info.size;                    /* each <= segment size: no overflow */
        if (total + 8 > segment_size)
            goto decline;                      /* RecordTooLargeForSegment: the Python path */
    }
    if (count > 1 && total > max_message_size)
        goto decline;
    records = PyByteArray_FromStringAndSize((const char *)arena.buf, total);
    queue_o = PyLong_FromLong(first.queue_id);
    flag_o = PyLong_FromLong(first.sys_flag);
    if (records == NULL || queue_o == NULL || flag_o == NULL)
        goto error;
    result = Py_BuildValue("(OOOOOn)", records, layout, first.topic, queue_o, flag_o, count);
    goto done;

decline:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(records);
    Py_XDECREF(layout);
    Py_XDECREF(queue_o);
    Py_XDECREF(flag_o);
    Py_XDECREF(first.topic);
    PyMem_Free(arena.buf);
    Py_DECREF(items);
    return result;
}

const char rmq_place_batch_doc[] = (
"place_batch(target, position, records, layout, queue_offset, phy_offset, store_timestamp,\n"
"            queued, msg_id_prefix) -> tuple of msgIds\n\n"
"Copy encode_batch's records into `target` at `position`: record i gets QUEUEOFFSET queue_offset + i\n"
"(0 when not `queued`), PHYSICALOFFSET phy_offset + the sizes before it, and STORETIMESTAMP. The\n"
"records are patched in `records` too; the first record's TOTALSIZE and magic are written last, so a\n"
"reader or a crash sees the whole batch or none of it. msgIds: msg_id_prefix + %016X of each\n"
"record's physical offset. ValueError when the layout does not describe `records` or they do not\n"
"fit the target there.");

static const char HEX[] = "0123456789ABCDEF";
/* Copies this large release the GIL (a single put's record is copied with it held: the release and
 * the wait to get it back would cost more than the copy). */
#define PLACE_UNLOCKED_BYTES 8192

PyObject *rmq_place_batch(PyObject *self, PyObject *args)
{
    Py_buffer target, records, layout;
    Py_ssize_t position;
    long long queue_offset, phy_offset, store_ts;
    int queued;
    PyObject *prefix;
    if (!PyArg_ParseTuple(args, "w*nw*y*LLLpU:place_batch", &target, &position, &records, &layout,
                          &queue_offset, &phy_offset, &store_ts, &queued, &prefix))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t entry = LAYOUT_FIELDS * (Py_ssize_t)sizeof(int32_t);
    Py_ssize_t count = layout.len / entry;
    if (layout.len % entry != 0 || count == 0) {
        PyErr_SetString(PyExc_ValueError, "the layout does not describe the records");
        goto done;
    }
    /* Check every size and timestamp position against the records before writing anything. */
    const unsigned char *lay = layout.buf;
    Py_ssize_t sum = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t size, ts_position;
        memcpy(&size, lay + i * entry, sizeof size);
        memcpy(&ts_position, lay + i * entry + sizeof size, sizeof ts_position);
        if (size < 36 || size > records.len - sum || ts_position < 36 || ts_position > size - 8) {
            PyErr_SetString(PyExc_ValueError, "the layout does not describe the records");
            goto done;
        }
        sum += size;
    }
    if (sum != records.len) {
        PyErr_SetString(PyExc_ValueError, "the layout does not describe the records");
        goto done;
    }
    if (position < 0 || position > target.len || records.len > target.len - position) {
        PyErr_SetString(PyExc_ValueError, "the records do not fit the target at that position");
        goto done;
    }
    /* Offsets past 2^63 would wrap: refuse them (the put path never comes near). */
    if (phy_offset < 0 || phy_offset > INT64_MAX - records.len || queue_offset < 0 ||
        queue_offset > INT64_MAX - count) {
        PyErr_SetString(PyExc_ValueError, "offsets out of range");
        goto done;
    }
    Py_ssize_t prefix_len = PyUnicode_GET_LENGTH(prefix);
    if (PyUnicode_MAX_CHAR_VALUE(prefix) > 127) {
        PyErr_SetString(PyExc_ValueError, "the msgId prefix must be ASCII");
        goto done;
    }
    const char *prefix_text = PyUnicode_AsUTF8(prefix);
    if (prefix_text == NULL)
        goto done;
    PyObject *ids = PyTuple_New(count);
    if (ids == NULL)
        goto done;
    unsigned char *src = records.buf;
    Py_ssize_t cursor = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t size;
        memcpy(&size, lay + i * entry, sizeof size);
        int32_t ts_position;
        memcpy(&ts_position, lay + i * entry + sizeof size, sizeof ts_position);
        int64_t phy = phy_offset + cursor;
        put64(src + cursor + 20, queued ? queue_offset + i : 0);
        put64(src + cursor + 28, phy);
        put64(src + cursor + ts_position, store_ts);
        PyObject *id = PyUnicode_New(prefix_len + 16, 127);
        if (id == NULL) {
            Py_DECREF(ids);
            goto done;
        }
        unsigned char *text = PyUnicode_1BYTE_DATA(id);
        memcpy(text, prefix_text, prefix_len);
        for (int k = 0; k < 16; k++)
            text[prefix_len + k] = HEX[((uint64_t)phy >> (60 - 4 * k)) & 0xF];
        PyTuple_SET_ITEM(ids, i, id);
        cursor += size;
    }
    unsigned char *t = (unsigned char *)target.buf + position;
    /* memmove: `records` may be a view of `target` itself. A batch's copy (its first touches of the
     * segment's pages cost most) runs without the GIL, beside the dispatch thread: it touches only
     * the two buffers held above. */
    if (records.len >= PLACE_UNLOCKED_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        memmove(t + 8, src + 8, records.len - 8);
        memmove(t, src, 8);
        Py_END_ALLOW_THREADS
    } else {
        memmove(t + 8, src + 8, records.len - 8);
        memmove(t, src, 8);
    }
    result = ids;
done:
    PyBuffer_Release(&target);
    PyBuffer_Release(&records);
    PyBuffer_Release(&layout);
    return result;
}
