/* One commit-log record (spec §2.1): encode it, and copy it into a segment header last. */

#include "kernel.h"

Py_ssize_t rmq_record_size(const rmq_record *r)
{
    return 72 + r->born_host_len + r->store_host_len + r->body_len + r->version + r->topic_len + 2 +
           r->properties_len;
}

unsigned char *rmq_write_record(unsigned char *p, const rmq_record *r)
{
    put32(p, (int32_t)rmq_record_size(r));
    put32(p + 4, r->version == 2 ? MAGIC_V2 : MAGIC_V1);
    put32(p + 8, (int32_t)(crc32_bytes(r->body, r->body_len) & 0x7FFFFFFF));
    put32(p + 12, r->queue_id);
    put32(p + 16, r->flag);
    put64(p + 20, r->queue_offset);
    put64(p + 28, r->phy_offset);
    put32(p + 36, r->sys_flag);
    put64(p + 40, r->born_timestamp);
    unsigned char *q = p + 48;
    memcpy(q, r->born_host, r->born_host_len);
    q += r->born_host_len;
    put64(q, r->store_timestamp);
    q += 8;
    memcpy(q, r->store_host, r->store_host_len);
    q += r->store_host_len;
    put32(q, r->reconsume_times);
    put64(q + 4, r->prepared_offset);
    put32(q + 12, (int32_t)r->body_len);
    q += 16;
    memcpy(q, r->body, r->body_len);
    q += r->body_len;
    if (r->version == 2) {
        q[0] = (unsigned char)(r->topic_len >> 8);
        q[1] = (unsigned char)r->topic_len;
        q += 2;
    } else {
        *q++ = (unsigned char)r->topic_len;
    }
    memcpy(q, r->topic, r->topic_len);
    q += r->topic_len;
    q[0] = (unsigned char)(r->properties_len >> 8);
    q[1] = (unsigned char)r->properties_len;
    return q + 2;
}

const char rmq_encode_record_doc[] = (
"encode_record(topic, queue_id, flag, sys_flag, queue_offset, phy_offset, born_timestamp,\n"
"              born_host, store_timestamp, store_host, reconsume_times, prepared_offset,\n"
"              body, properties, version) -> bytearray\n\n"
"One record, fields as given (hosts already encoded: 8 or 20 bytes; sys_flag must already carry\n"
"the matching IPv6 bits). 32-bit fields out of range raise OverflowError; a topic longer than\n"
"127 bytes (v1) or 32,767 (v2), or properties longer than 32,767 bytes, raise ValueError.");

PyObject *rmq_encode_record(PyObject *self, PyObject *args)
{
    const char *topic, *born, *store;
    Py_ssize_t topic_len, born_len, store_len;
    int queue_id, flag, sys_flag, reconsume, version;
    long long queue_offset, phy_offset, born_ts, store_ts, prepared;
    Py_buffer body, props;
    if (!PyArg_ParseTuple(args, "y#iiiLLLy#Ly#iLy*y*i:encode_record", &topic, &topic_len,
                          &queue_id, &flag, &sys_flag, &queue_offset, &phy_offset, &born_ts,
                          &born, &born_len, &store_ts, &store, &store_len, &reconsume, &prepared,
                          &body, &props, &version))
        return NULL;
    PyObject *result = NULL;
    if ((born_len != 8 && born_len != 20) || (store_len != 8 && store_len != 20) ||
        (version != 1 && version != 2)) {
        PyErr_SetString(PyExc_ValueError, "hosts are 8 or 20 bytes and the version is 1 or 2");
        goto done;
    }
    /* The reader takes TOPICLENGTH as a signed byte (v1) or short (v2) and PROPERTIESLENGTH as a
     * signed short (spec §2.1): a longer field would be written truncated and never read back. */
    if (topic_len > (version == 1 ? RMQ_MAX_TOPIC_V1 : RMQ_MAX_TOPIC_V2)) {
        PyErr_Format(PyExc_ValueError, "topic of %zd bytes does not fit a v%d record", topic_len,
                     version);
        goto done;
    }
    if (props.len > RMQ_MAX_PROPERTIES) {
        PyErr_Format(PyExc_ValueError, "properties of %zd bytes exceed %d", props.len,
                     RMQ_MAX_PROPERTIES);
        goto done;
    }
    rmq_record record = {
        .queue_id = queue_id, .flag = flag, .sys_flag = sys_flag, .reconsume_times = reconsume,
        .queue_offset = queue_offset, .phy_offset = phy_offset, .born_timestamp = born_ts,
        .store_timestamp = store_ts, .prepared_offset = prepared,
        .born_host = born, .store_host = store, .body = body.buf, .topic = topic,
        .born_host_len = born_len, .store_host_len = store_len, .body_len = body.len,
        .topic_len = topic_len, .properties_len = props.len, .version = version,
    };
    Py_ssize_t total = rmq_record_size(&record);
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "TOTALSIZE does not fit a signed 32-bit field");
        goto done;
    }
    result = PyByteArray_FromStringAndSize(NULL, total);
    if (result == NULL)
        goto done;
    memcpy(rmq_write_record((unsigned char *)PyByteArray_AS_STRING(result), &record), props.buf,
           props.len);
done:
    PyBuffer_Release(&body);
    PyBuffer_Release(&props);
    return result;
}

const char rmq_place_doc[] = (
"place(target, position, record, queue_offset, phy_offset, timestamp_position, store_timestamp)\n\n"
"Copy an encoded record into `target` at `position` with its queue offset, physical offset and\n"
"store timestamp set there, TOTALSIZE and magic last (a reader never sees a half-written record\n"
"with a valid header). `record` itself is left as it was.");

PyObject *rmq_place(PyObject *self, PyObject *args)
{
    Py_buffer target, record;
    Py_ssize_t position, ts_position;
    long long queue_offset, phy_offset, store_ts;
    if (!PyArg_ParseTuple(args, "w*ny*LLnL:place", &target, &position, &record, &queue_offset,
                          &phy_offset, &ts_position, &store_ts))
        return NULL;
    PyObject *result = NULL;
    /* Lengths left, not `ts_position + 8`: a position near 2^63 must not wrap past the check. */
    if (position < 0 || record.len < 36 || ts_position < 36 || ts_position > record.len - 8 ||
        position > target.len - record.len) {
        PyErr_SetString(PyExc_ValueError, "the record does not fit the target at that position");
        goto done;
    }
    unsigned char *t = (unsigned char *)target.buf + position;
    /* memmove: `record` may be a view of `target` itself. */
    memmove(t + 8, (const unsigned char *)record.buf + 8, record.len - 8);
    put64(t + 20, queue_offset);
    put64(t + 28, phy_offset);
    put64(t + ts_position, store_ts);
    memmove(t, record.buf, 8);
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&target);
    PyBuffer_Release(&record);
    return result;
}

