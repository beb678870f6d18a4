/* Dispatch from scan rows without the interpreter: tagsCodes of records, and index entries put into
 * an index file's map (spec §4.3, §5.5). Both loops touch no Python object and run with the GIL
 * released, on buffers held through Py_buffer (a held export keeps an mmap from being closed or
 * resized, a bytearray or numpy array from being resized, until the call returns). Python twins:
 * store/kernel/dispatch_twins.py. */

#include "kernel.h"

#define TAGS_CODE_ASK INT64_MIN

const char rmq_tags_codes_doc[] = (
"tags_codes(buf, rows, out) -> asked\n\n"
"The tagsCode of each scan row of `buf` into the int64 array `out` (one per row): Java\n"
"String.hashCode of the TAGS value sign-extended, 0 without TAGS. A value that is not ASCII gets\n"
"TAGS_CODE_ASK (INT64_MIN; the caller decodes it the Python way); returns how many did.");

PyObject *rmq_tags_codes(PyObject *self, PyObject *args)
{
    Py_buffer buf, rows, out;
    if (!PyArg_ParseTuple(args, "y*y*w*:tags_codes", &buf, &rows, &out))
        return NULL;
    PyObject *result = NULL;
    if (rows.len % (SCAN_FIELDS * 8) || ((uintptr_t)rows.buf & 7) || ((uintptr_t)out.buf & 7) ||
        out.len != rows.len / SCAN_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "rows and out must be aligned int64 arrays, one out per row");
        goto done;
    }
    const unsigned char *b = buf.buf;
    const int64_t *row = rows.buf;
    int64_t *codes = out.buf;
    Py_ssize_t n = rows.len / (SCAN_FIELDS * 8), asked = 0, bad = 0;
    KERNEL_RELEASE_IF(n)
    for (Py_ssize_t i = 0; i < n; i++, row += SCAN_FIELDS) {
        int64_t pos = row[F_TAGS_POS], len = row[F_TAGS_LEN];
        if (pos < 0) {
            codes[i] = 0;
            continue;
        }
        /* Lengths left, not `pos + len`: a forged row must not wrap past the check. */
        if (len < 0 || pos > buf.len || len > buf.len - pos) {
            bad = 1;
            break;
        }
        uint32_t h = 0;
        int64_t k = 0;
        for (; k < len && b[pos + k] < 0x80; k++)
            h = 31 * h + b[pos + k];
        if (k < len) {
            codes[i] = TAGS_CODE_ASK;
            asked++;
        } else {
            codes[i] = (int32_t)h;
        }
    }
    KERNEL_ACQUIRE
    if (bad)
        PyErr_SetString(PyExc_ValueError, "a row points outside the buffer");
    else
        result = PyLong_FromSsize_t(asked);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out);
    return result;
}


const char rmq_index_put_doc[] = (
"index_put(map, max_hash_slot_num, max_index_num, index_count, begin_timestamp, key_hashes,\n"
"          phy_offsets, store_timestamps) -> (count, new_chains)\n\n"
"IndexFile.put_keys without numpy: insert the keys (int64 arrays of equal length, dispatch order)\n"
"into the index file mapped by `map` as that many putKey calls would (spec §5.5): entry\n"
"(keyHash, phyOffset, timeDiff, prevIndex) at entry number index_count, index_count + 1, ..., the\n"
"slot pointed at it. Stops when the file is full (max_index_num entries). timeDiff is taken against\n"
"`begin_timestamp` for the first key and, in a fresh file (index_count <= 1), against the first\n"
"key's store time for the others. Writes no header. Returns the keys inserted and how many found\n"
"their slot empty.");

PyObject *rmq_index_put(PyObject *self, PyObject *args)
{
    Py_buffer map, hashes, phys, times;
    Py_ssize_t slot_num, max_index_num, index_count;
    long long begin_timestamp;
    if (!PyArg_ParseTuple(args, "w*nnnLy*y*y*:index_put", &map, &slot_num, &max_index_num,
                          &index_count, &begin_timestamp, &hashes, &phys, &times))
        return NULL;
    PyObject *result = NULL;
    if (hashes.len % 8 || phys.len != hashes.len || times.len != hashes.len ||
        ((uintptr_t)hashes.buf & 7) || ((uintptr_t)phys.buf & 7) || ((uintptr_t)times.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "key_hashes, phy_offsets and store_timestamps must be "
                        "aligned int64 arrays of one length");
        goto done;
    }
    /* The file's layout must fit the map: 40-byte header, 4-byte slots, 20-byte entries. */
    if (slot_num <= 0 || max_index_num <= 1 || index_count < 0 || index_count > max_index_num ||
        slot_num > (PY_SSIZE_T_MAX - 40) / 4 ||
        max_index_num > (PY_SSIZE_T_MAX - 40 - 4 * slot_num) / 20 ||
        map.len < 40 + 4 * slot_num + 20 * max_index_num) {
        PyErr_SetString(PyExc_ValueError, "the index layout does not fit the map");
        goto done;
    }
    unsigned char *m = map.buf, *slots = m + 40, *entries = m + 40 + 4 * slot_num;
    const int64_t *key_hash = hashes.buf, *phy = phys.buf, *ts = times.buf;
    Py_ssize_t n = hashes.len / 8, room = max_index_num - index_count;
    Py_ssize_t count = n < room ? n : room, new_chains = 0, bad = 0;
    KERNEL_RELEASE_IF(count)
    for (Py_ssize_t i = 0; i < count; i++) {
        if (key_hash[i] < 0 || key_hash[i] > INT32_MAX) {
            bad = 1;
            break;
        }
    }
    int fresh = index_count <= 1;
    for (Py_ssize_t i = 0; i < count && !bad; i++) {
        int64_t entry = index_count + i;
        unsigned char *slot = slots + 4 * (key_hash[i] % slot_num);
        int64_t prev = get32(slot);
        if (prev <= 0 || prev > entry)
            prev = 0;
        if (prev == 0)
            new_chains++;
        int64_t begin = (i == 0 || !fresh) ? begin_timestamp : ts[0];
        int64_t diff = 0;
        if (begin > 0) {
            /* Java: (storeTimestamp - begin) / 1000 truncates toward zero; then clamped. */
            int64_t delta = (int64_t)((uint64_t)ts[i] - (uint64_t)begin);
            diff = delta / 1000;
            if (diff < 0)
                diff = 0;
            if (diff > INT32_MAX)
                diff = INT32_MAX;
        }
        unsigned char *e = entries + 20 * entry;
        put32(e, (int32_t)key_hash[i]);
        put64(e + 4, phy[i]);
        put32(e + 12, (int32_t)diff);
        put32(e + 16, (int32_t)prev);
        /* The entry before the slot that points at it, for the compiler and the CPU too: a query in
         * another thread (which reads the map without this call's GIL) that follows the slot finds
         * the entry whole, as with putKey's writes. */
        __atomic_thread_fence(__ATOMIC_RELEASE);
        put32(slot, (int32_t)entry);
    }
    KERNEL_ACQUIRE
    if (bad)
        PyErr_SetString(PyExc_ValueError, "a key hash is outside 0..2^31-1");
    else
        result = Py_BuildValue("nn", count, new_chains);
done:
    PyBuffer_Release(&map);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&phys);
    PyBuffer_Release(&times);
    return result;
}


const char rmq_unit_runs_doc[] = (
"unit_runs(buf, rows, out_runs, out_units, out_queue_offsets) -> runs\n\n"
"Group the scan `rows` of `buf` (records that get a consume-queue unit) by queue, (TOPIC bytes,\n"
"queue id), in order of first appearance, and write their 20-byte units (phyOffset, size, tagsCode,\n"
"big-endian) into `out_units` queue after queue, rows in log order inside a queue, with their queue\n"
"offsets (int64 out_queue_offsets, same order). Per queue one row of RUN_FIELDS int64s in out_runs:\n"
"first row, last row, first unit, units, 1 when its queue offsets follow each other, and the number\n"
"of the first queue with the same TOPIC bytes (its own number for a topic's first). Returns the\n"
"number of queues, or -1 when a TAGS value is not ASCII (nothing useful written: the caller decodes\n"
"the Python way).");

#define RUN_FIELDS 6

PyObject *rmq_unit_runs(PyObject *self, PyObject *args)
{
    Py_buffer buf, rows, runs, units, offsets;
    if (!PyArg_ParseTuple(args, "y*y*w*w*w*:unit_runs", &buf, &rows, &runs, &units, &offsets))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = rows.len / (SCAN_FIELDS * 8);
    int64_t *group_of = NULL, *table = NULL, *fill = NULL;
    if (rows.len % (SCAN_FIELDS * 8) || ((uintptr_t)rows.buf & 7) || ((uintptr_t)runs.buf & 7) ||
        ((uintptr_t)offsets.buf & 7) || runs.len != n * RUN_FIELDS * 8 || units.len != n * 20 ||
        offsets.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "rows, out_runs, out_units and out_queue_offsets must be "
                        "aligned arrays sized for the rows");
        goto done;
    }
    Py_ssize_t table_size = 16;
    while (table_size < 2 * n)
        table_size *= 2;
    group_of = PyMem_RawMalloc(sizeof(int64_t) * (n ? n : 1));
    fill = PyMem_RawMalloc(sizeof(int64_t) * (n ? n : 1));
    table = PyMem_RawMalloc(sizeof(int64_t) * table_size);
    if (group_of == NULL || fill == NULL || table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *b = buf.buf;
    const int64_t *row = rows.buf;
    int64_t *run = runs.buf, *queue_offsets = offsets.buf;
    unsigned char *out = units.buf;
    Py_ssize_t groups = 0;
    int answer = 0;                              /* 0, -1 (not ASCII) or -3 (out of range) */
    KERNEL_RELEASE_IF(n)
    for (Py_ssize_t k = 0; k < table_size; k++)
        table[k] = -1;
    for (Py_ssize_t i = 0; i < n && answer == 0; i++) {
        const int64_t *r = row + i * SCAN_FIELDS;
        int64_t tp = r[F_TOPIC_POS], tl = r[F_TOPIC_LEN], gp = r[F_TAGS_POS], gl = r[F_TAGS_LEN];
        /* Lengths left, not `pos + len`: a forged row must not wrap past the check. */
        if (tp < 0 || tl < 0 || tp > buf.len || tl > buf.len - tp ||
            (gp >= 0 && (gl < 0 || gp > buf.len || gl > buf.len - gp))) {
            answer = -3;
            break;
        }
        for (int64_t k = 0; gp >= 0 && k < gl; k++)
            if (b[gp + k] >= 0x80)
                answer = -1;
        if (answer)
            break;
        uint64_t h = fnv1a(FNV_OFFSET ^ (uint64_t)r[F_QUEUE_ID], b + tp, tl);
        Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)(table_size - 1));
        for (;;) {                                   /* bounded: the table is never full */
            int64_t g = table[slot];
            if (g < 0) {
                table[slot] = groups;
                int64_t *gr = run + groups * RUN_FIELDS;
                gr[0] = gr[1] = i;
                gr[2] = 0;
                gr[3] = 0;
                gr[4] = 1;
                gr[5] = groups;              /* its topic's first queue: set below */
                group_of[i] = groups++;
                break;
            }
            const int64_t *first = row + run[g * RUN_FIELDS] * SCAN_FIELDS;
            if (first[F_QUEUE_ID] == r[F_QUEUE_ID] && first[F_TOPIC_LEN] == tl &&
                memcmp(b + first[F_TOPIC_POS], b + tp, (size_t)tl) == 0) {
                int64_t *gr = run + g * RUN_FIELDS;
                const int64_t *last = row + gr[1] * SCAN_FIELDS;
                if ((uint64_t)r[F_QUEUE_OFFSET] != (uint64_t)last[F_QUEUE_OFFSET] + 1)
                    gr[4] = 0;
                gr[1] = i;
                group_of[i] = g;
                break;
            }
            slot = (slot + 1) & (table_size - 1);
        }
        run[group_of[i] * RUN_FIELDS + 3]++;
    }
    if (answer == 0) {
        /* Each queue's topic: the first queue with the same TOPIC bytes, through the table again
         * (keyed on the bytes alone; groups <= n, so it is never full). */
        for (Py_ssize_t k = 0; k < table_size; k++)
            table[k] = -1;
        for (Py_ssize_t g = 0; g < groups; g++) {
            const int64_t *r = row + run[g * RUN_FIELDS] * SCAN_FIELDS;
            int64_t tp = r[F_TOPIC_POS], tl = r[F_TOPIC_LEN];
            uint64_t h = fnv1a(FNV_OFFSET, b + tp, tl);
            Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)(table_size - 1));
            for (;;) {
                int64_t seen = table[slot];
                if (seen < 0) {
                    table[slot] = g;
                    break;
                }
                const int64_t *first = row + run[seen * RUN_FIELDS] * SCAN_FIELDS;
                if (first[F_TOPIC_LEN] == tl && memcmp(b + first[F_TOPIC_POS], b + tp, (size_t)tl) == 0) {
                    run[g * RUN_FIELDS + 5] = seen;
                    break;
                }
                slot = (slot + 1) & (table_size - 1);
            }
        }
        Py_ssize_t start = 0;
        for (Py_ssize_t g = 0; g < groups; g++) {
            run[g * RUN_FIELDS + 2] = start;
            fill[g] = start;
            start += run[g * RUN_FIELDS + 3];
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            const int64_t *r = row + i * SCAN_FIELDS;
            int64_t at = fill[group_of[i]]++;
            uint32_t h = 0;
            for (int64_t k = 0; r[F_TAGS_POS] >= 0 && k < r[F_TAGS_LEN]; k++)
                h = 31 * h + b[r[F_TAGS_POS] + k];
            unsigned char *u = out + 20 * at;
            put64(u, r[F_PHY_OFFSET]);
            put32(u + 8, (int32_t)r[F_SIZE]);
            put64(u + 12, r[F_TAGS_POS] >= 0 ? (int64_t)(int32_t)h : 0);
            queue_offsets[at] = r[F_QUEUE_OFFSET];
        }
    }
    KERNEL_ACQUIRE
    if (answer == -3)
        PyErr_SetString(PyExc_ValueError, "a row points outside the buffer");
    else
        result = PyLong_FromSsize_t(answer == 0 ? groups : -1);
done:
    PyMem_RawFree(group_of);
    PyMem_RawFree(fill);
    PyMem_RawFree(table);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&runs);
    PyBuffer_Release(&units);
    PyBuffer_Release(&offsets);
    return result;
}
