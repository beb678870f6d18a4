/* span_groups: the distinct byte spans (with an int64 tag) of a buffer, numbered as numpy's unique
 * numbers them, for store.kernel.scan_groups (queues of scan rows: topic bytes + queue id) and
 * store.check.columns (TAGS values). The twins there pack each span zero-padded to the widest, its
 * length as >i4 and the tag as >i8, and call np.unique(..., return_index=True, return_inverse=True):
 * a sort of n rows of that width. Here: one hash pass over the rows, then a sort of the distinct
 * groups alone, compared the way the packed bytes compare. */

#include "kernel.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *b;
    const int64_t *pos, *len, *tag;     /* tag NULL: every tag is 0 */
    const int64_t *first;               /* a group's first row */
} group_keys;

static uint64_t tag_of(const group_keys *k, int64_t row)
{
    return k->tag ? (uint64_t)k->tag[row] : 0;
}

/* -1/0/1 as the packed rows of rows a and b compare bytewise: the bytes zero-padded to a common
 * width, then the length (big-endian; lengths are >= 0), then the tag (big-endian, so unsigned). */
static int compare_rows(const group_keys *k, int64_t a, int64_t b)
{
    int64_t la = k->len[a], lb = k->len[b], m = la < lb ? la : lb;
    const unsigned char *pa = k->b + k->pos[a], *pb = k->b + k->pos[b];
    int c = m ? memcmp(pa, pb, (size_t)m) : 0;
    if (c != 0)
        return c < 0 ? -1 : 1;
    if (la != lb) {
        /* The longer one's rest against the other's zero padding. */
        const unsigned char *rest = la > lb ? pa : pb;
        for (int64_t i = m; i < (la > lb ? la : lb); i++)
            if (rest[i] != 0)
                return la > lb ? 1 : -1;
        return la < lb ? -1 : 1;
    }
    uint64_t ta = tag_of(k, a), tb = tag_of(k, b);
    return ta < tb ? -1 : ta > tb ? 1 : 0;
}

static int same_key(const group_keys *k, int64_t a, int64_t b)
{
    return k->len[a] == k->len[b] && tag_of(k, a) == tag_of(k, b) &&
           memcmp(k->b + k->pos[a], k->b + k->pos[b], (size_t)k->len[a]) == 0;
}

static uint64_t hash_row(const group_keys *k, int64_t row)
{
    uint64_t h = fnv1a(FNV_OFFSET ^ (uint64_t)k->len[row] ^ (tag_of(k, row) * 0x9E3779B97F4A7C15ULL),
                       k->b + k->pos[row], k->len[row]);
    return h ^ (h >> 29);
}

/* Groups in `order` sorted by their first rows' keys (a merge sort: stable, no recursion). */
static void sort_groups(const group_keys *k, int64_t *order, int64_t *scratch, int64_t count)
{
    for (int64_t width = 1; width < count; width *= 2) {
        for (int64_t lo = 0; lo < count; lo += 2 * width) {
            int64_t mid = lo + width < count ? lo + width : count;
            int64_t hi = lo + 2 * width < count ? lo + 2 * width : count;
            int64_t i = lo, j = mid, out = lo;
            while (i < mid && j < hi)
                scratch[out++] = compare_rows(k, k->first[order[j]], k->first[order[i]]) < 0
                                     ? order[j++] : order[i++];
            while (i < mid)
                scratch[out++] = order[i++];
            while (j < hi)
                scratch[out++] = order[j++];
        }
        memcpy(order, scratch, (size_t)count * sizeof *order);
    }
}

const char rmq_span_groups_doc[] = (
"span_groups(buf, positions, lengths, tags, inverse_out, first_out) -> count\n\n"
"The distinct (bytes, tag) of the spans buf[positions[i]:positions[i] + lengths[i]] (int64 arrays of\n"
"one length n; `tags` int64 of n, or empty: all 0), numbered as np.unique numbers the packed rows (the\n"
"bytes zero-padded to the widest, the length as >i4, the tag as >i8): first_out[g] is the first row of\n"
"group g, inverse_out[i] the group of row i (both int64 of n). Returns the count of groups; -3 when a\n"
"span is outside buf or has a negative length (the caller then packs the numpy way). GIL released.");

PyObject *rmq_span_groups(PyObject *self, PyObject *args)
{
    Py_buffer buf, pos, len, tag, inv, first;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*:span_groups", &buf, &pos, &len, &tag, &inv, &first))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = pos.len / 8;
    if (pos.len % 8 || len.len != pos.len || (tag.len != 0 && tag.len != pos.len) ||
        inv.len != pos.len || first.len != pos.len || ((uintptr_t)pos.buf & 7) ||
        ((uintptr_t)len.buf & 7) || ((uintptr_t)tag.buf & 7) || ((uintptr_t)inv.buf & 7) ||
        ((uintptr_t)first.buf & 7)) {
        PyErr_SetString(PyExc_ValueError,
                        "span_groups: positions, lengths, tags (or empty), inverse_out and first_out "
                        "must be aligned int64 arrays of one length");
        goto done;
    }
    int64_t capacity = 16;
    while (capacity < 2 * (int64_t)n)
        capacity *= 2;
    int64_t *slots = calloc((size_t)capacity, sizeof *slots);    /* group + 1; 0: empty */
    uint64_t *hashes = malloc((size_t)(n ? n : 1) * sizeof *hashes);
    int64_t *group_first = malloc((size_t)(n ? n : 1) * sizeof *group_first);
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    int64_t *scratch = malloc((size_t)(n ? n : 1) * sizeof *scratch);
    if (slots == NULL || hashes == NULL || group_first == NULL || order == NULL || scratch == NULL) {
        free(slots); free(hashes); free(group_first); free(order); free(scratch);
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *p = pos.buf, *l = len.buf;
    int64_t *inverse = inv.buf, *firsts = first.buf;
    group_keys keys = {buf.buf, p, l, tag.len ? tag.buf : NULL, group_first};
    int64_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        /* Lengths left, not `p + l`: a forged span must not wrap past the check. */
        if (p[i] < 0 || l[i] < 0 || p[i] > buf.len || l[i] > buf.len - p[i]) {
            count = -3;
            break;
        }
    }
    for (Py_ssize_t i = 0; i < n && count >= 0; i++) {
        uint64_t h = hash_row(&keys, i);
        int64_t at = (int64_t)(h & (uint64_t)(capacity - 1));
        for (;;) {
            int64_t g = slots[at] - 1;
            if (g < 0) {
                slots[at] = count + 1;
                hashes[count] = h;
                group_first[count] = i;
                inverse[i] = count++;
                break;
            }
            if (hashes[g] == h && same_key(&keys, group_first[g], i)) {
                inverse[i] = g;
                break;
            }
            at = (at + 1) & (capacity - 1);
        }
    }
    if (count > 0) {
        for (int64_t g = 0; g < count; g++)
            order[g] = g;
        sort_groups(&keys, order, scratch, count);
        int64_t *rank = scratch;                       /* reused: group -> its place in the order */
        for (int64_t r = 0; r < count; r++) {
            rank[order[r]] = r;
            firsts[r] = group_first[order[r]];
        }
        for (Py_ssize_t i = 0; i < n; i++)
            inverse[i] = rank[inverse[i]];
    }
    Py_END_ALLOW_THREADS
    free(slots); free(hashes); free(group_first); free(order); free(scratch);
    result = PyLong_FromLongLong(count);
done:
    PyBuffer_Release(&buf); PyBuffer_Release(&pos); PyBuffer_Release(&len); PyBuffer_Release(&tag);
    PyBuffer_Release(&inv); PyBuffer_Release(&first);
    return result;
}
