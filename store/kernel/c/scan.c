/* Walking commit-log records the way RocketMQ's checkMessageAndReturnSize does (spec §2.7). */

#include "kernel.h"

/* The first i' >= i below n with p[i'] <= 0x02 (a separator, or a zero byte), else n: eight bytes
 * at a time (the lowest byte the test flags is exact; a borrow can only flag bytes above it). */
static inline Py_ssize_t next_control(const unsigned char *p, Py_ssize_t i, Py_ssize_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        uint64_t hit = (w - 0x0303030303030303ULL) & ~w & 0x8080808080808080ULL;
        if (hit)
            return i + (__builtin_ctzll(hit) >> 3);
    }
#endif
    while (i < n && p[i] > 0x02)
        i++;
    return i;
}

/* Last occurrence of a property `name` in a PROPERTIES field, as decode_properties keeps it:
 * entries split on \x02, name before the first \x01, both name and value non-empty. */
static void find_properties(const unsigned char *p, Py_ssize_t n, int64_t *row)
{
    row[F_TAGS_POS] = row[F_KEYS_POS] = row[F_UNIQ_POS] = row[F_DELAY_POS] = -1;
    row[F_TAGS_LEN] = row[F_KEYS_LEN] = row[F_UNIQ_LEN] = row[F_DELAY_LEN] = 0;
    Py_ssize_t start = 0;
    while (start <= n) {
        /* One pass to the entry's end, noting its first \x01: two memchr calls per entry of a few
         * bytes cost more than the bytes (a third of the pipeline's decode, bench/decode_bench). */
        Py_ssize_t end = start, sep = -1;
        while ((end = next_control(p, end, n)) < n && p[end] != 0x02) {
            if (p[end] == 0x01 && sep < 0)
                sep = end;
            end++;
        }
        if (sep >= 0) {
            Py_ssize_t name_len = sep - start, value_pos = sep + 1, value_len = end - sep - 1;
            if (name_len > 0 && value_len > 0) {
                int field = -1;
                const unsigned char *name = p + start;
                if (name_len == 4 && memcmp(name, "TAGS", 4) == 0)
                    field = F_TAGS_POS;
                else if (name_len == 4 && memcmp(name, "KEYS", 4) == 0)
                    field = F_KEYS_POS;
                else if (name_len == 8 && memcmp(name, "UNIQ_KEY", 8) == 0)
                    field = F_UNIQ_POS;
                else if (name_len == 5 && memcmp(name, "DELAY", 5) == 0)
                    field = F_DELAY_POS;
                if (field >= 0) {
                    row[field] = value_pos;
                    row[field + 1] = value_len;
                }
            }
        }
        start = end + 1;
    }
}

/* The [5.x] forceVerifyPropCRC check (checkMessageAndReturnSize, store.codec.prop_crc): the last
 * `__CRC32#` property's value read right to left as Java int `e = e * 10 + (c - '0')`, compared with
 * the CRC of [props_end - total, props_end - 20). 1 = valid. A value with a non-ASCII byte answers 0
 * (Java works on its UTF-16 units): the caller's check_message decides such a record. */
static int property_crc_ok(const unsigned char *b, Py_ssize_t props_pos, Py_ssize_t props_len,
                           int32_t total)
{
    const unsigned char *p = b + props_pos;
    Py_ssize_t value_pos = -1, value_len = 0, start = 0;
    while (start <= props_len) {
        const unsigned char *end_ptr = memchr(p + start, 0x02, props_len - start);
        Py_ssize_t end = end_ptr ? end_ptr - p : props_len;
        const unsigned char *sep_ptr = memchr(p + start, 0x01, end - start);
        if (sep_ptr) {
            Py_ssize_t sep = sep_ptr - p;
            if (sep - start == 8 && end - sep - 1 > 0 && memcmp(p + start, "__CRC32#", 8) == 0) {
                value_pos = sep + 1;
                value_len = end - sep - 1;
            }
        }
        start = end + 1;
    }
    if (value_pos < 0)
        return 0;
    uint32_t expected = 0;
    for (Py_ssize_t i = value_pos + value_len - 1; i >= value_pos; i--) {
        if (p[i] >= 0x80)
            return 0;
        expected = expected * 10u + (uint32_t)((int32_t)p[i] - '0');
    }
    Py_ssize_t props_end = props_pos + props_len, crc_start = props_end - total;
    if ((int32_t)expected < 0 || total < 20 || crc_start < 0)
        return 0;
    return (int32_t)(crc32_bytes(b + crc_start, total - 20) & 0x7FFFFFFF) == (int32_t)expected;
}

const char rmq_scan_doc[] = (
"scan(buf, start, limit, check_crc, out) -> (count, stop_position, stop_kind, stop_size)\n\n"
"`check_crc`: 0 none, 1 BODYCRC, 2 the [5.x] `__CRC32#` record CRC (forceVerifyPropCRC).\n"
"Walk records of `buf` from `start`, reading nothing at or past `limit`, as RocketMQ's\n"
"checkMessageAndReturnSize does (spec §2.7). Each whole record fills one row of SCAN_FIELDS\n"
"int64s in the writable buffer `out` (positions are relative to `buf`). Stops at `limit`\n"
"(STOP_END), a BLANK (STOP_BLANK), an invalid record (STOP_INVALID: stop_size is -1 for a torn\n"
"record, unknown magic or CRC mismatch, else TOTALSIZE for a length mismatch) or when `out` is\n"
"full (STOP_FULL). Property values are located, not decoded.");

PyObject *rmq_scan(PyObject *self, PyObject *args)
{
    Py_buffer buf, out;
    Py_ssize_t start, limit;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*nniw*:scan", &buf, &start, &limit, &check_crc, &out))
        return NULL;
    PyObject *result = NULL;
    if (out.len % (SCAN_FIELDS * 8) != 0 || ((uintptr_t)out.buf & 7) != 0) {
        PyErr_SetString(PyExc_ValueError, "out must be an aligned whole number of rows");
        goto done;
    }
    const unsigned char *b = buf.buf;
    /* Every bound below compares a length with the bytes left, never `pos + n` with `end`: a start
     * near 2^63 (or a forged length) must not wrap past the check. A negative limit reads nothing. */
    Py_ssize_t end = limit < buf.len ? limit : buf.len;
    if (end < 0)
        end = 0;
    Py_ssize_t capacity = out.len / (SCAN_FIELDS * 8), count = 0, pos = start, stop_size = 0;
    int stop = STOP_END;
    int64_t *row = out.buf;
    if (start < 0) {
        stop = STOP_INVALID;
        stop_size = -1;
        goto finished;
    }
    /* A record's fixed fields alone take 91 bytes: (end - start) / 64 over-estimates its rows. */
    KERNEL_RELEASE_IF(capacity < (end - start) / 64 ? capacity : (end - start) / 64)
    while (1) {
        Py_ssize_t room = end - pos;              /* pos >= 0 and end >= 0: no overflow */
        if (room < 8) {
            /* Nothing more to read: at the limit it is the end; a few bytes short is torn. */
            stop = room <= 0 ? STOP_END : STOP_INVALID;
            stop_size = -1;
            break;
        }
        int32_t total = get32(b + pos), magic = get32(b + pos + 4);
        if (total > 0 && total <= room - 8) {
            /* Hints a record ahead (they never fault; no answer depends on them): the next
             * record's head was asked for one record ago, so its TOTALSIZE is read now to ask for
             * its tail (TOPIC, PROPERTIES: otherwise a memory latency per record, the loads after
             * BODY waiting on it) and the head of the one after. */
            Py_ssize_t next = pos + total;
            int32_t next_total = get32(b + next);
            if (next_total > 0 && next_total <= end - next) {
                Py_ssize_t tail = next + next_total;        /* <= end */
                __builtin_prefetch(b + tail - 1);
                if (next_total > 64)
                    __builtin_prefetch(b + tail - 65);
                if (end - tail > 64) {
                    __builtin_prefetch(b + tail);
                    __builtin_prefetch(b + tail + 64);
                }
            }
        }
        if (magic == MAGIC_BLANK) {
            stop = STOP_BLANK;
            break;
        }
        if (count == capacity) {
            stop = STOP_FULL;
            break;
        }
        int version = magic == MAGIC_V1 ? 1 : magic == MAGIC_V2 ? 2 : 0;
        stop = STOP_INVALID;
        stop_size = -1;
        if (version == 0 || total > room || room < 40)
            break;
        /* Offsets from pos below stay under 2^31 + 2^17 (int32 body length, int16 topic and
         * properties lengths), so `rel + n > room` cannot wrap either. */
        int32_t sys_flag = get32(b + pos + 36);
        Py_ssize_t born_len = (sys_flag & SYSFLAG_BORNHOST_V6) ? 20 : 8;
        Py_ssize_t store_len = (sys_flag & SYSFLAG_STOREHOST_V6) ? 20 : 8;
        Py_ssize_t body_len_rel = 68 + born_len + store_len;
        if (body_len_rel + 4 > room)
            break;
        Py_ssize_t body_len_pos = pos + body_len_rel;
        int32_t n = get32(b + body_len_pos);
        Py_ssize_t body_len = n > 0 ? n : 0;
        Py_ssize_t topic_len_rel = body_len_rel + 4 + body_len;
        if (topic_len_rel + version > room)
            break;
        Py_ssize_t topic_len_pos = pos + topic_len_rel;
        Py_ssize_t topic_len = version == 1 ? (int8_t)b[topic_len_pos]
                                            : (int16_t)((b[topic_len_pos] << 8) | b[topic_len_pos + 1]);
        if (topic_len < 0)
            break;
        Py_ssize_t props_rel = topic_len_rel + version + topic_len + 2;
        if (props_rel > room)
            break;
        Py_ssize_t topic_pos = topic_len_pos + version, props_pos = pos + props_rel;
        int16_t pl = (int16_t)((b[props_pos - 2] << 8) | b[props_pos - 1]);
        Py_ssize_t props_len = pl > 0 ? pl : 0;
        if (props_rel + props_len > room)
            break;
        int32_t body_crc = get32(b + pos + 8);
        if (check_crc && check_crc != 2 && body_len &&
            (int32_t)(crc32_bytes(b + body_len_pos + 4, body_len) & 0x7FFFFFFF) != body_crc)
            break;
        if (check_crc == 2 && !property_crc_ok(b, props_pos, props_len, total))
            break;
        if (props_rel + props_len != total) {
            stop_size = total > 0 ? total : -1;
            break;
        }
        row[F_POS] = pos;
        row[F_SIZE] = total;
        row[F_QUEUE_ID] = get32(b + pos + 12);
        row[F_FLAG] = get32(b + pos + 16);
        row[F_QUEUE_OFFSET] = get64(b + pos + 20);
        row[F_PHY_OFFSET] = get64(b + pos + 28);
        row[F_SYS_FLAG] = sys_flag;
        row[F_BORN_TS] = get64(b + pos + 40);
        row[F_STORE_TS] = get64(b + pos + 48 + born_len);
        row[F_PREPARED] = get64(b + body_len_pos - 8);
        row[F_BODY_POS] = body_len_pos + 4;
        row[F_BODY_LEN] = body_len;
        row[F_TOPIC_POS] = topic_pos;
        row[F_TOPIC_LEN] = topic_len;
        row[F_PROPS_POS] = props_pos;
        row[F_PROPS_LEN] = props_len;
        find_properties(b + props_pos, props_len, row);
        if (row[F_TAGS_POS] >= 0) row[F_TAGS_POS] += props_pos;
        if (row[F_KEYS_POS] >= 0) row[F_KEYS_POS] += props_pos;
        if (row[F_UNIQ_POS] >= 0) row[F_UNIQ_POS] += props_pos;
        if (row[F_DELAY_POS] >= 0) row[F_DELAY_POS] += props_pos;
        row[F_VERSION] = version;
        row[F_BODY_CRC] = body_crc;
        row += SCAN_FIELDS;
        count++;
        pos += total;
        stop = STOP_END;
        stop_size = 0;
    }
    KERNEL_ACQUIRE
finished:
    result = Py_BuildValue("nnin", count, pos, stop, stop_size);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    return result;
}

