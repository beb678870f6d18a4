/* decode_columns: the pipeline's commit-log columns of many scan rows in one call (spec §2,
 * store.pipeline.commitlog_decoder). Every variable-length column comes back Arrow-style, as int32
 * offsets (one row per record + 1) and one value buffer; the properties map as per-record entry
 * offsets into name and value buffers. The sizing pass (GIL held) checks every row against `buf` and
 * allocates the outputs; the fill pass touches no Python object and runs with the GIL released, on
 * `buf` and `rows` held through Py_buffer and bytearrays no other code has seen yet. Python twin:
 * store/kernel/columns.py (same answers, same refusals). */

#include "kernel.h"

enum { S_BORN, S_STORE, S_MSGID, S_BODY, S_TOPIC, S_PROPS, S_TAGS, S_KEYS, S_UNIQ, S_MAP, N_SLOTS };
#define D_NAMES 9            /* data buffers: the slots before S_MAP, then map names and values */
#define D_VALUES 10
#define N_DATA 11
#define W_RECONSUME (1 << 10)
#define W_TAGS_CODE (1 << 11)
#define W_ALL ((1 << 12) - 1)
#define F_TAGS_ASK (1 << 11)  /* flags: a TAGS value is not ASCII or a topic is SCHEDULE_TOPIC_XXXX */
#define HOST_V4_MAX 26        /* 255.255.255.255:4294967295 */
#define HOST_V6_MAX 52        /* [ffff:...:ffff]:4294967295 */
#define TAGS_ASK INT64_MIN

/* 1 when p[0:n] is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
 * as Arrow's string validation and Python's strict decoder judge it; 2 when it is all ASCII. */
int utf8_ok(const unsigned char *p, Py_ssize_t n)
{
    /* All ASCII (nearly every topic, key and PROPERTIES): eight bytes a load, four loads a step,
     * the tail as the last eight bytes (overlapping), no branch per word. */
    uint64_t high = 0, w0, w1, w2, w3;
    Py_ssize_t i = 0;
    if (n >= 8) {
        for (; n - i >= 32; i += 32) {
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + i + 8, 8);
            memcpy(&w2, p + i + 16, 8);
            memcpy(&w3, p + i + 24, 8);
            high |= w0 | w1 | w2 | w3;
        }
        for (; n - i >= 8; i += 8) {
            memcpy(&w0, p + i, 8);
            high |= w0;
        }
        memcpy(&w0, p + n - 8, 8);
        high |= w0;
    } else {
        for (; i < n; i++)
            high |= p[i];
    }
    if (!(high & 0x8080808080808080ULL))
        return 2;
    i = 0;
    int ascii = 2;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        ascii = 1;
        Py_ssize_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else
            return 0;
        if (n - i - 1 < need)
            return 0;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return 0;
        for (Py_ssize_t k = 2; k <= need; k++)
            if ((p[i + k] & 0xC0) != 0x80)
                return 0;
        i += need + 1;
    }
    return ascii;
}

static unsigned char *put_decimal(unsigned char *o, uint32_t v)
{
    char tmp[10];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *o++ = (unsigned char)tmp[--k];
    return o;
}

/* `a.b.c.d:port` or `[x:x:x:x:x:x:x:x]:port` (store.pipeline.hosts): bytes written. */
static Py_ssize_t host_text(unsigned char *o, const unsigned char *h, int v6)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char *start = o;
    if (!v6) {
        for (int k = 0; k < 4; k++) {
            if (k)
                *o++ = '.';
            o = put_decimal(o, h[k]);
        }
    } else {
        *o++ = '[';
        for (int g = 0; g < 8; g++) {
            unsigned v = ((unsigned)h[2 * g] << 8) | h[2 * g + 1];
            if (g)
                *o++ = ':';
            int shift = 12;
            while (shift > 0 && (v >> shift) == 0)
                shift -= 4;
            for (; shift >= 0; shift -= 4)
                *o++ = (unsigned char)hex[(v >> shift) & 0xF];
        }
        *o++ = ']';
    }
    *o++ = ':';
    o = put_decimal(o, (uint32_t)get32(h + (v6 ? 16 : 4)));
    return o - start;
}

static Py_ssize_t msg_id_text(unsigned char *o, const unsigned char *host, int v6, int64_t phy)
{
    static const char hex[] = "0123456789ABCDEF";
    Py_ssize_t w = v6 ? 20 : 8, k = 0;
    for (Py_ssize_t i = 0; i < w; i++) {
        o[k++] = (unsigned char)hex[host[i] >> 4];
        o[k++] = (unsigned char)hex[host[i] & 0xF];
    }
    uint64_t u = (uint64_t)phy;
    for (int shift = 60; shift >= 0; shift -= 4)
        o[k++] = (unsigned char)hex[(u >> shift) & 0xF];
    return k;
}

/* One span of a row inside buf: 0 when it is not (a negative or too long position or length). */
static int span_ok(int64_t pos, int64_t n, Py_ssize_t len)
{
    return pos >= 0 && n >= 0 && pos <= len && n <= len - pos;
}

/* Whether row r's spans are inside buf (len bytes); if so the bytes each output takes for it in
 * `add` (exact, or the text bound of hosts; the map's names and values: at most its properties) and
 * the map entries it can give at most (3 bytes and a separator each) in add[N_DATA]. */
static inline int row_needs(const int64_t *r, Py_ssize_t len, int64_t add[N_DATA + 1])
{
    int64_t bw = (r[F_SYS_FLAG] & SYSFLAG_BORNHOST_V6) ? 20 : 8;
    int64_t sw = (r[F_SYS_FLAG] & SYSFLAG_STOREHOST_V6) ? 20 : 8;
    int ok = span_ok(r[F_POS], 56 + bw + sw, len) && r[F_BODY_POS] >= 16 &&
             span_ok(r[F_BODY_POS] - 16, 4, len) && span_ok(r[F_BODY_POS], r[F_BODY_LEN], len) &&
             span_ok(r[F_TOPIC_POS], r[F_TOPIC_LEN], len) && span_ok(r[F_PROPS_POS], r[F_PROPS_LEN], len);
    for (int f = F_TAGS_POS; ok && f <= F_UNIQ_POS; f += 2)
        ok = r[f] < 0 || span_ok(r[f], r[f + 1], len);
    if (!ok)
        return 0;
    add[S_BORN] = bw == 20 ? HOST_V6_MAX : HOST_V4_MAX;
    add[S_STORE] = sw == 20 ? HOST_V6_MAX : HOST_V4_MAX;
    add[S_MSGID] = sw == 20 ? 56 : 32;
    add[S_BODY] = r[F_BODY_LEN];
    add[S_TOPIC] = r[F_TOPIC_LEN];
    add[S_PROPS] = add[D_NAMES] = add[D_VALUES] = r[F_PROPS_LEN];
    add[S_TAGS] = r[F_TAGS_POS] >= 0 ? r[F_TAGS_LEN] : 0;
    add[S_KEYS] = r[F_KEYS_POS] >= 0 ? r[F_KEYS_LEN] : 0;
    add[S_UNIQ] = r[F_UNIQ_POS] >= 0 ? r[F_UNIQ_LEN] : 0;
    add[N_DATA] = (r[F_PROPS_LEN] + 1) / 4;
    return 1;
}

static int wants_data(int want, int d)
{
    return (want & (1 << (d < S_MAP ? d : S_MAP))) != 0;
}

typedef struct {
    const unsigned char *b;
    const int64_t *rows;
    Py_ssize_t n;
    int want;
    int32_t *off;                   /* N_SLOTS x (n + 1) */
    unsigned char *data[N_DATA];
    int32_t *names_off, *values_off;
    int32_t *reconsume;
    int64_t *tags;
    Py_ssize_t len, cap[N_DATA + 1];   /* bytes of buf; room of each data buffer, then of entries */
    Py_ssize_t used[N_DATA], entries;
    int flags, changed;                /* changed: a row no longer fits what the sizing pass saw */
    const unsigned char *last_host[2]; /* put_host: the born and store host bytes of the last record */
    int last_v6[2];
} fill_state;

static inline void copy_value(fill_state *st, int slot, Py_ssize_t i, int64_t pos, int64_t len, int check)
{
    int32_t *off = st->off + (Py_ssize_t)slot * (st->n + 1);
    if (pos >= 0 && len > 0) {
        memcpy(st->data[slot] + st->used[slot], st->b + pos, (size_t)len);
        if (check && !(st->flags & (1 << slot)) && !utf8_ok(st->b + pos, len))
            st->flags |= 1 << slot;
        st->used[slot] += len;
    }
    off[i + 1] = (int32_t)st->used[slot];
}

/* The host text of slot S_BORN or S_STORE for record i. Hosts repeat (one store host, a few
 * producers): when the 8 or 20 bytes are the previous record's, its text is copied. */
static inline void put_host(fill_state *st, int slot, Py_ssize_t i, const unsigned char *host, int v6)
{
    int32_t *off = st->off + (Py_ssize_t)slot * (st->n + 1);
    unsigned char *o = st->data[slot] + st->used[slot];
    Py_ssize_t n;
    if (i > 0 && st->last_host[slot - S_BORN] != NULL && st->last_v6[slot - S_BORN] == v6 &&
        (v6 ? memcmp(st->last_host[slot - S_BORN], host, 20) : memcmp(st->last_host[slot - S_BORN], host, 8)) == 0) {
        n = off[i] - off[i - 1];
        memcpy(o, st->data[slot] + off[i - 1], (size_t)n);
    } else {
        n = host_text(o, host, v6);
    }
    st->last_host[slot - S_BORN] = host;
    st->last_v6[slot - S_BORN] = v6;
    st->used[slot] += n;
    off[i + 1] = (int32_t)st->used[slot];
}

#define FILL_AHEAD 8
static void fill(fill_state *st)
{
    const unsigned char *b = st->b;
    int want = st->want;
    for (int s = 0; s < N_SLOTS; s++)
        if (want & (1 << s))
            st->off[(Py_ssize_t)s * (st->n + 1)] = 0;
    if (want & (1 << S_MAP)) {
        st->names_off[0] = 0;
        st->values_off[0] = 0;
    }
    int sparse = !(want & (1 << S_BODY));
    for (Py_ssize_t i = 0; i < st->n; i++) {
        /* A copy of the row, judged again: another thread may write the rows while the GIL is
         * released, and nothing below may then read or write out of bounds. */
        int64_t r[SCAN_FIELDS], add[N_DATA + 1];
        memcpy(r, st->rows + i * SCAN_FIELDS, sizeof r);
        int fits = row_needs(r, st->len, add);
        for (int d = 0; fits && d < N_DATA; d++)
            fits = !wants_data(want, d) || add[d] <= st->cap[d] - st->used[d];
        if (!fits || ((want & (1 << S_MAP)) && add[N_DATA] > st->cap[N_DATA] - st->entries)) {
            st->changed = 1;
            return;
        }
        if (sparse && i + FILL_AHEAD < st->n) {
            /* The records FILL_AHEAD rows on: their header, hosts and properties lines asked for
             * now (hints inside buf only, never a fault): each record's fields are otherwise one
             * memory latency apiece, the copies waiting on the reads. Not when the bodies are
             * copied: that copy streams through each record in order, and the hints only add
             * work (3-5 % slower with every column, one thread). */
            const int64_t *ahead = st->rows + (i + FILL_AHEAD) * SCAN_FIELDS;
            int64_t at = ahead[F_POS], props = ahead[F_PROPS_POS], props_len = ahead[F_PROPS_LEN];
            if (at >= 0 && at < st->len - 128) {
                __builtin_prefetch(b + at);
                __builtin_prefetch(b + at + 64);
            }
            if (props >= 0 && props_len >= 0 && props < st->len - props_len) {
                __builtin_prefetch(b + props);
                __builtin_prefetch(b + props + props_len - 1);
            }
        }
        int64_t pos = r[F_POS];
        int born_v6 = (r[F_SYS_FLAG] & SYSFLAG_BORNHOST_V6) != 0;
        int store_v6 = (r[F_SYS_FLAG] & SYSFLAG_STOREHOST_V6) != 0;
        const unsigned char *born = b + pos + 48, *store = b + pos + 56 + (born_v6 ? 20 : 8);
        if (want & (1 << S_BORN))
            put_host(st, S_BORN, i, born, born_v6);
        if (want & (1 << S_STORE))
            put_host(st, S_STORE, i, store, store_v6);
        if (want & (1 << S_MSGID)) {
            st->used[S_MSGID] += msg_id_text(st->data[S_MSGID] + st->used[S_MSGID], store, store_v6,
                                             r[F_PHY_OFFSET]);
            st->off[(Py_ssize_t)S_MSGID * (st->n + 1) + i + 1] = (int32_t)st->used[S_MSGID];
        }
        if (want & (1 << S_BODY))
            copy_value(st, S_BODY, i, r[F_BODY_POS], r[F_BODY_LEN], 0);
        if (want & (1 << S_TOPIC))
            copy_value(st, S_TOPIC, i, r[F_TOPIC_POS], r[F_TOPIC_LEN], 1);
        if (want & (1 << S_PROPS))
            copy_value(st, S_PROPS, i, r[F_PROPS_POS], r[F_PROPS_LEN], 0);
        if (want & (1 << S_TAGS))
            copy_value(st, S_TAGS, i, r[F_TAGS_POS], r[F_TAGS_LEN], 1);
        if (want & (1 << S_KEYS))
            copy_value(st, S_KEYS, i, r[F_KEYS_POS], r[F_KEYS_LEN], 1);
        if (want & (1 << S_UNIQ))
            copy_value(st, S_UNIQ, i, r[F_UNIQ_POS], r[F_UNIQ_LEN], 1);
        if (want & (1 << S_MAP)) {
            /* store.pipeline.properties_vec's rule: pieces split on \x02, the name before the first
             * \x01, neither empty; of a repeated name the last entry is kept, in its place. */
            const unsigned char *p = b + r[F_PROPS_POS];
            Py_ssize_t n = r[F_PROPS_LEN], start = 0, first = st->entries;
            /* Text of an all-ASCII PROPERTIES (the usual case) needs no UTF-8 check per entry. */
            int checked = (st->flags & (1 << S_MAP)) || utf8_ok(p, n) == 2;
            while (start <= n) {
                /* The piece's end (\x02 or the field's) and its first \x01, by memchr (SIMD). */
                const unsigned char *stop2 = memchr(p + start, 0x02, (size_t)(n - start));
                Py_ssize_t end = stop2 != NULL ? stop2 - p : n;
                const unsigned char *sep1 = memchr(p + start, 0x01, (size_t)(end - start));
                Py_ssize_t sep = sep1 != NULL ? sep1 - p : -1;
                if (sep > start && sep < end - 1) {
                    Py_ssize_t name_len = sep - start;
                    /* An earlier entry of this record with the same name is dropped (the map keeps
                     * the last one, in its place): remove it, moving the later entries down. */
                    for (Py_ssize_t e = first; e < st->entries; e++) {
                        Py_ssize_t ns = st->names_off[e], nl = st->names_off[e + 1] - ns;
                        if (nl == name_len && st->data[D_NAMES][ns] == p[start] &&
                            memcmp(st->data[D_NAMES] + ns, p + start, (size_t)nl) == 0) {
                            Py_ssize_t vs = st->values_off[e], vl = st->values_off[e + 1] - vs;
                            Py_ssize_t name_tail = st->used[D_NAMES] - (ns + nl);
                            Py_ssize_t value_tail = st->used[D_VALUES] - (vs + vl);
                            memmove(st->data[D_NAMES] + ns, st->data[D_NAMES] + ns + nl, (size_t)name_tail);
                            memmove(st->data[D_VALUES] + vs, st->data[D_VALUES] + vs + vl, (size_t)value_tail);
                            for (Py_ssize_t k = e; k < st->entries; k++) {
                                st->names_off[k] = st->names_off[k + 1] - (int32_t)nl;
                                st->values_off[k] = st->values_off[k + 1] - (int32_t)vl;
                            }
                            st->used[D_NAMES] -= nl;
                            st->used[D_VALUES] -= vl;
                            st->entries--;
                            break;                              /* names are unique so far */
                        }
                    }
                    Py_ssize_t value_len = end - sep - 1;
                    memcpy(st->data[D_NAMES] + st->used[D_NAMES], p + start, (size_t)name_len);
                    memcpy(st->data[D_VALUES] + st->used[D_VALUES], p + sep + 1, (size_t)value_len);
                    if (!checked && (!utf8_ok(p + start, name_len) || !utf8_ok(p + sep + 1, value_len))) {
                        st->flags |= 1 << S_MAP;
                        checked = 1;
                    }
                    st->used[D_NAMES] += name_len;
                    st->used[D_VALUES] += value_len;
                    st->entries++;
                    st->names_off[st->entries] = (int32_t)st->used[D_NAMES];
                    st->values_off[st->entries] = (int32_t)st->used[D_VALUES];
                }
                start = end + 1;
            }
            st->off[(Py_ssize_t)S_MAP * (st->n + 1) + i + 1] = (int32_t)st->entries;
        }
        if (want & W_RECONSUME)
            st->reconsume[i] = get32(b + r[F_BODY_POS] - 16);
        if (want & W_TAGS_CODE) {
            int64_t tp = r[F_TAGS_POS], tl = r[F_TAGS_LEN];
            if (r[F_TOPIC_LEN] == 19 && memcmp(b + r[F_TOPIC_POS], "SCHEDULE_TOPIC_XXXX", 19) == 0)
                st->flags |= F_TAGS_ASK;
            if (tp < 0) {
                st->tags[i] = 0;
            } else {
                uint32_t h = 0;
                int64_t k = 0;
                for (; k < tl && b[tp + k] < 0x80; k++)
                    h = 31 * h + b[tp + k];
                if (k < tl) {
                    st->tags[i] = TAGS_ASK;
                    st->flags |= F_TAGS_ASK;
                } else {
                    st->tags[i] = (int32_t)h;
                }
            }
        }
    }
}

const char rmq_decode_columns_doc[] = (
"decode_columns(buf, rows, want, alloc) -> (offsets, data, names_offsets, values_offsets,\n"
"                                           reconsume, tags_codes, used, flags)\n\n"
"The pipeline's columns of the scan rows `rows` over `buf`, for the bits of `want`: slots 0-9\n"
"(born_host, store_host, msg_id, body, topic, properties_raw, tags, keys, uniq_key, properties\n"
"map), 1<<10 reconsume_times, 1<<11 tags_code. Every output is `alloc(size)` (a writable buffer of\n"
"at least `size` bytes, 8-byte aligned when not empty), asked in the order returned: `offsets`,\n"
"int32, 10 rows of len(rows)+1 (the map's row counts entries; unwanted rows zero); `data`, 11\n"
"buffers (slots 0-8, then map names and values) of which `used` (11 byte counts, then the map's\n"
"entry count) says how much is filled; the map's name and value offsets (entries + 1 int32 each);\n"
"int32 reconsume times; int64 tagsCodes (INT64_MIN: not ASCII). `flags`: bit s = slot s holds a\n"
"value that is not UTF-8; 1<<11 = a tagsCode the caller must compute (non-ASCII TAGS or a\n"
"SCHEDULE_TOPIC_XXXX record). Unwanted outputs are asked with size 0.");

#define N_OUT (N_DATA + 5)

PyObject *rmq_decode_columns(PyObject *self, PyObject *args)
{
    Py_buffer buf, rows, views[N_OUT];
    int want, held = 0;
    PyObject *alloc, *objects[N_OUT] = {NULL};
    if (!PyArg_ParseTuple(args, "y*y*iO:decode_columns", &buf, &rows, &want, &alloc))
        return NULL;
    PyObject *result = NULL;
    if (rows.len % (SCAN_FIELDS * 8) || ((uintptr_t)rows.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "rows must be an aligned whole number of scan rows");
        goto done;
    }
    if (want < 0 || want > W_ALL) {
        PyErr_SetString(PyExc_ValueError, "want holds unknown column bits");
        goto done;
    }
    Py_ssize_t n = rows.len / (SCAN_FIELDS * 8), len = buf.len;
    const int64_t *r = rows.buf;
    /* Sizing: every row's spans inside buf, and each wanted column's bytes (exact, or a bound). */
    int64_t need[N_DATA] = {0}, entries = 0, add[N_DATA + 1];
    for (Py_ssize_t i = 0; i < n; i++, r += SCAN_FIELDS) {
        if (!row_needs(r, len, add)) {
            PyErr_SetString(PyExc_ValueError, "a row points outside the buffer");
            goto done;
        }
        /* Only wanted columns count; each sum is checked as it grows, so none can wrap. */
        for (int d = 0; d < N_DATA; d++) {
            if (!wants_data(want, d))
                continue;
            need[d] += add[d];
            if (need[d] > INT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "a column of the batch exceeds 2 GiB");
                goto done;
            }
        }
        if (want & (1 << S_MAP))
            entries += add[N_DATA];
    }
    /* The outputs, in the order returned: offsets, data[0..10], names/values offsets, reconsume, tags. */
    int map = (want & (1 << S_MAP)) != 0;
    Py_ssize_t sizes[N_OUT];
    sizes[0] = (Py_ssize_t)N_SLOTS * (n + 1) * 4;
    for (int d = 0; d < N_DATA; d++)
        sizes[1 + d] = wants_data(want, d) ? need[d] : 0;
    sizes[N_DATA + 1] = sizes[N_DATA + 2] = map ? (entries + 1) * 4 : 0;
    sizes[N_DATA + 3] = (want & W_RECONSUME) ? n * 4 : 0;
    sizes[N_DATA + 4] = (want & W_TAGS_CODE) ? n * 8 : 0;
    for (int k = 0; k < N_OUT; k++) {
        objects[k] = PyObject_CallFunction(alloc, "n", sizes[k]);
        if (objects[k] == NULL || PyObject_GetBuffer(objects[k], &views[k], PyBUF_WRITABLE) < 0)
            goto done;
        held++;
        if (views[k].len < sizes[k] || (sizes[k] && ((uintptr_t)views[k].buf & 7))) {
            PyErr_SetString(PyExc_ValueError, "alloc must give a writable, aligned buffer of the size asked");
            goto done;
        }
    }
    memset(views[0].buf, 0, (size_t)sizes[0]);
    fill_state st = {buf.buf, rows.buf, n, want, views[0].buf, {NULL}, views[N_DATA + 1].buf,
                     views[N_DATA + 2].buf, views[N_DATA + 3].buf, views[N_DATA + 4].buf, len,
                     {0}, {0}, 0, 0, 0, {NULL, NULL}, {0, 0}};
    for (int d = 0; d < N_DATA; d++) {
        st.data[d] = views[1 + d].buf;
        st.cap[d] = sizes[1 + d];
    }
    st.cap[N_DATA] = entries;
    Py_BEGIN_ALLOW_THREADS                        /* no Python object below: see kernel.h */
    fill(&st);
    Py_END_ALLOW_THREADS
    if (st.changed) {
        PyErr_SetString(PyExc_ValueError, "the rows changed during the call");
        goto done;
    }
    PyObject *data_tuple = PyTuple_New(N_DATA), *used = PyTuple_New(N_DATA + 1);
    if (data_tuple == NULL || used == NULL) {
        Py_XDECREF(data_tuple);
        Py_XDECREF(used);
        goto done;
    }
    for (int d = 0; d < N_DATA; d++) {
        PyTuple_SET_ITEM(data_tuple, d, objects[1 + d]);
        objects[1 + d] = NULL;
    }
    for (int d = 0; d <= N_DATA; d++) {
        PyObject *v = PyLong_FromSsize_t(d < N_DATA ? st.used[d] : st.entries);
        if (v == NULL) {
            Py_DECREF(data_tuple);
            Py_DECREF(used);
            goto done;
        }
        PyTuple_SET_ITEM(used, d, v);
    }
    result = Py_BuildValue("(ONOOOONi)", objects[0], data_tuple, objects[N_DATA + 1], objects[N_DATA + 2],
                           objects[N_DATA + 3], objects[N_DATA + 4], used, st.flags);
done:
    for (int k = 0; k < held; k++)
        PyBuffer_Release(&views[k]);
    for (int k = 0; k < N_OUT; k++)
        Py_XDECREF(objects[k]);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&rows);
    return result;
}

const char rmq_walk_headers_doc[] = (
"walk_headers(buf, start, stop, out) -> (count, position, kind)\n\n"
"Follow TOTALSIZE from `start` (store.pipeline.commitlog_scan.walk_records): a record counts when\n"
"it starts before `stop`, its magic is a message magic, its size at least 91 and it fits in `buf`;\n"
"its start goes to the int64 array `out`. Stops with kind WALK_STOP (position >= stop, inside buf),\n"
"WALK_FILE (at or past the end of buf), WALK_BLANK, WALK_ZEROS (size and magic 0), WALK_INVALID\n"
"(anything else, a header cut by the end included) or WALK_FULL (out is full: call again from\n"
"position). Reads 8 bytes per record, nothing else.");

enum { WALK_STOP, WALK_FILE, WALK_BLANK, WALK_ZEROS, WALK_INVALID, WALK_FULL };

PyObject *rmq_walk_headers(PyObject *self, PyObject *args)
{
    Py_buffer buf, out;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "y*nnw*:walk_headers", &buf, &start, &stop, &out))
        return NULL;
    PyObject *result = NULL;
    if (out.len % 8 || ((uintptr_t)out.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "out must be an aligned int64 array");
        goto done;
    }
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "start must not be negative");
        goto done;
    }
    const unsigned char *b = buf.buf;
    int64_t *positions = out.buf;
    Py_ssize_t len = buf.len, capacity = out.len / 8, count = 0, pos = start;
    int kind;
    Py_BEGIN_ALLOW_THREADS                        /* no Python object below: see kernel.h */
    while (1) {
        if (pos >= stop) {
            kind = pos < len ? WALK_STOP : WALK_FILE;
            break;
        }
        if (pos > len - 8) {                      /* pos >= 0 and len >= 0: no overflow */
            kind = WALK_INVALID;
            break;
        }
        int32_t size = get32(b + pos), magic = get32(b + pos + 4);
        if ((magic == MAGIC_V1 || magic == MAGIC_V2) && size >= 91 && size <= len - pos) {
            if (count == capacity) {
                kind = WALK_FULL;
                break;
            }
            positions[count++] = pos;
            pos += size;
            continue;
        }
        kind = magic == MAGIC_BLANK ? WALK_BLANK : size == 0 && magic == 0 ? WALK_ZEROS : WALK_INVALID;
        break;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("nni", count, pos, kind);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    return result;
}
