/*
 * The compiled kernel's shared declarations: the .c files of store/kernel/c build store.kernel._kernel.
 *
 * | file      | what                                                                          |
 * |-----------|-------------------------------------------------------------------------------|
 * | crc.c     | zlib's CRC-32 (the system libz found with dlopen, else slicing-by-8 tables)   |
 * | crc_clmul.c| crc32: the same CRC-32 by carry-less multiplication (PCLMULQDQ), 16-byte blocks |
 * | record.c  | encode_record: one commit-log record; place: copy it into a segment            |
 * | put.c     | encode_put: store.commitlog.put_path.encode_for_put's common case in one call            |
 * | put_batch.c | encode_batch, place_batch: a put's records encoded in one call, placed with offsets and msgIds in one |
 * | scan.c    | scan: walk records like checkMessageAndReturnSize, one int64 row per record    |
 * | hash.c    | java_hashes, index_hashes: Java String.hashCode of strings / of index keys     |
 * | lookup.c  | cq_search_nearest, index_select, read_message: time search over CQ units; an  |
 * |           | index chain walk; one record read and decoded for query_message               |
 * | decode.c  | decode_records: a pull's records -> MessageRecords in one call                 |
 * | pull.c    | pull_unfiltered: plan, slice and check an unfiltered pull's window in one call |
 * | pull_window.c | pull_window: a mapped consume queue's window and the commit-log segment found, then pull_unfiltered |
 * | result.c  | found_result: a pull's GetMessageResult built without its __init__ frame       |
 * | dispatch.c| tags_codes, unit_runs, index_put: tagsCodes and consume-queue units of scan rows |
 * |           | grouped by queue, index entries into an index file's map                      |
 * | columns.c | decode_columns: the pipeline's columns of many scan rows, Arrow-style buffers;  |
 * |           | walk_headers: record starts by TOTALSIZE alone (the pipeline's split planning)  |
 * | fixed.c   | fixed_columns: the pipeline's fixed-width columns of scan rows in one pass      |
 * | views.c   | view_columns: the pipeline's byte and text columns as Arrow views into the map   |
 * | query.c   | query_keys: a key query's index rounds and record reads in one call       |
 * | query_message.c | query_message: query_keys under the index lock, its result object built |
 * | query_hints.c | prefetches of a key query's slot, index entry and records (no answer depends on them) |
 * | put_fast.c| put_fast: a single put's common case (checks, encode, lock, place, result) in one |
 * | prefault.c| prefault: madvise(MADV_POPULATE_WRITE) ahead of the writer in a map; sync_range: |
 * |           | msync of a written range after one MADV_DONTNEED of its whole pages; GIL released |
 * | group_commit.c | GroupCommit: SYNC_FLUSH's group commit, its syncs and wake-ups outside the GIL |
 * | cq_keys.c | cq_keys: the RocksDB consume queue's unit and `max` keys of a dispatch pass in one call |
 * | groups.c  | span_groups: distinct byte spans (+ a tag) numbered in np.unique's order (queues, TAGS) |
 * | module.c  | the method table and module init                                              |
 *
 * Every function has a pure-Python twin in store/kernel/__init__.py that gives the same answers and
 * refuses the same inputs with the same exception and message (tests/test_kernel.py and
 * tests/test_kernel_bounds.py run both). Nothing here keeps a pointer past the call that got it. The
 * loops over many records (scan, index_hashes, tags_codes, unit_runs, index_put) may release the GIL: they touch
 * no Python object, only buffers held through Py_buffer (a held export keeps an mmap from being closed
 * or resized under them). They release it only for work worth a switch (KERNEL_RELEASE_IF, below).
 *
 * Bounds: every check compares a length with the bytes left (`n > len - pos`), after checking that
 * positions and lengths are not negative, never `pos + n > len`, which a caller's position near 2^63
 * or a forged length would wrap. Checks are per call or per record, never per byte.
 * tests/test_kernel_fuzz.py builds these files with ASan + UBSan and fuzzes them (tests/kernel_fuzz/).
 */

#ifndef RMQ_KERNEL_H
#define RMQ_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Release the GIL around a loop of `work` records (or entries) only when there are at least
 * RELEASE_MIN_WORK of them. Taking the GIL back waits up to the switch interval while another thread
 * runs Python, as a producer putting in a loop does: 5 ms by default, 0.5 ms while the reput service
 * is busy (store/services/gil_handoff.py). Below ~1,000 records (0.1-0.5 ms of work) that wait costs
 * the dispatch more than running beside the producer gains; above it, the loop runs beside it. Single
 * puts, end to end: 16384 -> 222-226 k msg/s, 1024 -> 246-249 k, 256 -> 220-248 k (docs/performance.md,
 * ninth session). Pair with KERNEL_ACQUIRE in the same block. */
#define RELEASE_MIN_WORK 1024
#define KERNEL_RELEASE_IF(work) { PyThreadState *_kernel_save = \
        (work) >= RELEASE_MIN_WORK ? PyEval_SaveThread() : NULL;
#define KERNEL_ACQUIRE if (_kernel_save != NULL) PyEval_RestoreThread(_kernel_save); }
#include <string.h>

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define MAGIC_BLANK ((int32_t)0xCBD43194)
#define SYSFLAG_BORNHOST_V6 0x10
#define SYSFLAG_STOREHOST_V6 0x20
/* The longest TOPIC and PROPERTIES a record can hold: the reader takes their lengths as a signed
 * byte (v1 topic) or short (v2 topic, properties); spec §2.1. */
#define RMQ_MAX_TOPIC_V1 127
#define RMQ_MAX_TOPIC_V2 32767
#define RMQ_MAX_PROPERTIES 32767

/* Row layout written by scan(); store/kernel/__init__.py names the same columns in the same order. */
enum {
    F_POS, F_SIZE, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_PHY_OFFSET, F_SYS_FLAG, F_BORN_TS,
    F_STORE_TS, F_PREPARED, F_BODY_POS, F_BODY_LEN, F_TOPIC_POS, F_TOPIC_LEN, F_PROPS_POS,
    F_PROPS_LEN, F_TAGS_POS, F_TAGS_LEN, F_KEYS_POS, F_KEYS_LEN, F_UNIQ_POS, F_UNIQ_LEN,
    F_DELAY_POS, F_DELAY_LEN, F_VERSION, F_BODY_CRC, SCAN_FIELDS
};

/* Why scan() stopped. */
enum { STOP_END = 0, STOP_BLANK = 1, STOP_INVALID = 2, STOP_FULL = 3 };

static inline void put32(unsigned char *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = u >> 24; p[1] = u >> 16; p[2] = u >> 8; p[3] = u;
}

static inline void put64(unsigned char *p, int64_t v)
{
    put32(p, (int32_t)((uint64_t)v >> 32));
    put32(p + 4, (int32_t)(uint32_t)v);
}

static inline int32_t get32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t get64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)get32(p) << 32) | (uint32_t)get32(p + 4));
}

/* FNV-1a over `n` bytes from `h` (FNV_OFFSET, or a seed mixed into it): the kernel's hash tables. */
#define FNV_OFFSET 1469598103934665603ULL
static inline uint64_t fnv1a(uint64_t h, const unsigned char *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* record.c: the record layout of spec §2.1, written in one place. */
typedef struct {
    int32_t queue_id, flag, sys_flag, reconsume_times;
    int64_t queue_offset, phy_offset, born_timestamp, store_timestamp, prepared_offset;
    const void *born_host, *store_host, *body, *topic;   /* hosts: 8 or 20 bytes */
    Py_ssize_t born_host_len, store_host_len, body_len, topic_len, properties_len;
    int version;                                          /* 1 or 2 (2-byte topic length) */
} rmq_record;

/* TOTALSIZE of the record. */
Py_ssize_t rmq_record_size(const rmq_record *r);
/* Write every field but the PROPERTIES bytes (their length included) at `p`, BODYCRC computed;
 * returns where the PROPERTIES bytes go. */
unsigned char *rmq_write_record(unsigned char *p, const rmq_record *r);

/* crc.c */
void rmq_crc_init(void);
const char *rmq_crc_name(void);
uint32_t crc32_bytes(const unsigned char *p, Py_ssize_t n);
/* crc_clmul.c */
int crc_clmul_available(void);
uint32_t crc_clmul_blocks(uint32_t crc, const unsigned char *p, Py_ssize_t n);
extern const char rmq_crc32_doc[];
PyObject *rmq_crc32(PyObject *self, PyObject *arg);

/* hash.c */
uint32_t rmq_java_hash(PyObject *text);
uint32_t rmq_java_hash_from(uint32_t h, PyObject *text);

/* put.c */
int rmq_put_init(void);

/* decode.c, for pull.c: the Python functions of decode_records' arguments (decode_one,
 * decode_properties, host_to_string; borrowed) and, for one call, the int objects of the last
 * record's repeating fields (TOTALSIZE, MAGICCODE, BODYCRC, timestamps: owned, dropped by
 * rmq_decoder_clear). Check cls (0, or -1 with TypeError) with rmq_decoders_check first. */
#define RMQ_MEMO_FIELDS 5
typedef struct {
    PyObject *decode_one, *decode_properties, *host_to_string;
    int64_t memo_value[RMQ_MEMO_FIELDS];
    PyObject *memo[RMQ_MEMO_FIELDS];
} rmq_decoder;
int rmq_decoders_check(PyObject *cls);
/* The offsets of cls's slots when its __slots__ are exactly `names` (writable object members), in
 * order: 0, or -1 with no exception set (decode.c; result.c uses it too). */
int rmq_slot_offsets(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets);
void rmq_decoder_clear(rmq_decoder *d);
/* The record buf[0:len] decoded; when the fast path does not apply, decode_one(bytes) decides. */
PyObject *rmq_decode_at(const unsigned char *buf, Py_ssize_t len, rmq_decoder *d);

/* The module's methods and their docstrings. */
PyObject *rmq_encode_record(PyObject *self, PyObject *args);
PyObject *rmq_place(PyObject *self, PyObject *args);
PyObject *rmq_encode_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* put.c's encoder, shared with put_batch.c: the context parsed once, records appended to an
 * arena. */
typedef struct {
    PyObject *valid_topics, *host_fields, *store_host;       /* borrowed from the context tuple */
    long long max_message_size, segment_size;
    int style_49, allow_v2;
} rmq_put_ctx;
typedef struct { unsigned char *buf; Py_ssize_t len, cap; } rmq_arena;      /* PyMem_Malloc'd */
typedef struct {
    PyObject *topic;                                        /* a new reference */
    long queue_id, sys_flag, ts_position;
    Py_ssize_t size;
} rmq_encoded;
int rmq_put_context(PyObject *context, rmq_put_ctx *c);
int rmq_arena_reserve(rmq_arena *arena, Py_ssize_t cap);
PyObject *rmq_encode_one(PyObject *message, const rmq_put_ctx *c, long long now_ms,
                         rmq_arena *arena, rmq_encoded *info);
PyObject *rmq_scan(PyObject *self, PyObject *args);
PyObject *rmq_java_hashes(PyObject *self, PyObject *arg);
PyObject *rmq_index_hashes(PyObject *self, PyObject *args);
PyObject *rmq_cq_search_nearest(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *rmq_cq_nearest_queue(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *rmq_cq_nearest_in(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *rmq_cq_search_boundary(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *rmq_index_select(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *rmq_read_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_cq_search_nearest_doc[], rmq_cq_nearest_queue_doc[], rmq_cq_nearest_in_doc[],
    rmq_cq_search_boundary_doc[], rmq_index_select_doc[], rmq_read_message_doc[];
PyObject *rmq_decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* decode.c, shared with lookup.c: ASCII test and `decode_properties` of ASCII bytes */
int rmq_is_ascii(const unsigned char *p, Py_ssize_t n);
PyObject *rmq_ascii_properties(const unsigned char *p, Py_ssize_t n);
PyObject *rmq_pull_unfiltered(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_pull_unfiltered_doc[];
/* pull_window.c */
PyObject *rmq_pull_window(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_pull_window_doc[];
/* result.c */
PyObject *rmq_found_result(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_found_result_doc[];
/* query.c */
PyObject *rmq_query_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_query_keys_doc[];
#define RMQ_QUERY_ASK 1     /* rmq_query_run: the twin answers */
/* key_hash: rmq_query_key_hash(topic, key) when the caller has it, else -1 */
int rmq_query_run(PyObject *const *args, int64_t key_hash, PyObject **messages_out,
                  Py_ssize_t *hits_out, int64_t *last_ts_out, int64_t *last_phy_out);
int64_t rmq_query_key_hash(PyObject *topic, PyObject *key);
/* query_hints.c: prefetches only, no answer depends on them (see there) */
void rmq_hint_slot(PyObject *index_files, int64_t key_hash);
void rmq_hint_entry(PyObject *index_files, int64_t key_hash);
void rmq_hint_records(PyObject *segments, int64_t segment_bytes, const int64_t *offsets,
                      Py_ssize_t n);
/* groups.c */
extern const char rmq_span_groups_doc[];
PyObject *rmq_span_groups(PyObject *self, PyObject *args);

/* query_message.c */
PyObject *rmq_query_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_query_message_doc[];
extern const char rmq_decode_records_doc[];
PyObject *rmq_tags_codes(PyObject *self, PyObject *args);
PyObject *rmq_index_put(PyObject *self, PyObject *args);
PyObject *rmq_unit_runs(PyObject *self, PyObject *args);
extern const char rmq_tags_codes_doc[], rmq_index_put_doc[], rmq_unit_runs_doc[];
PyObject *rmq_decode_columns(PyObject *self, PyObject *args);     /* columns.c */
PyObject *rmq_walk_headers(PyObject *self, PyObject *args);
extern const char rmq_decode_columns_doc[], rmq_walk_headers_doc[];
/* 1 when p[0:n] is well-formed UTF-8 (Arrow's and Python's strict judgement), 2 when all ASCII */
int utf8_ok(const unsigned char *p, Py_ssize_t n);                 /* columns.c */
PyObject *rmq_view_columns(PyObject *self, PyObject *args);       /* views.c */
extern const char rmq_view_columns_doc[];
PyObject *rmq_fixed_columns(PyObject *self, PyObject *args);      /* fixed.c */
extern const char rmq_fixed_columns_doc[];
extern const char rmq_encode_record_doc[], rmq_place_doc[], rmq_encode_put_doc[], rmq_scan_doc[],
    rmq_java_hashes_doc[], rmq_index_hashes_doc[];

/* put_batch.c */
PyObject *rmq_encode_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *rmq_place_batch(PyObject *self, PyObject *args);
extern const char rmq_encode_batch_doc[], rmq_place_batch_doc[];
/* group_commit.c: adds the type GroupCommit and its GC_* reasons to the module. */
int rmq_group_commit_init(PyObject *module);

/* prefault.c */
PyObject *rmq_prefault(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_prefault_doc[];
PyObject *rmq_sync_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_sync_range_doc[];
PyObject *rmq_cq_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_cq_keys_doc[];

/* put_fast.c */
PyObject *rmq_put_fast(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char rmq_put_fast_doc[];

#endif
