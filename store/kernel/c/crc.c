/* zlib's CRC-32, what java.util.zip.CRC32 and RocketMQ's UtilAll.crc32 compute. */

#include <dlfcn.h>
#include <stdlib.h>

#include "kernel.h"

static uint32_t crc_table[8][256];

static void crc_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* zlib's crc32 (braided; about 30% faster than slicing-by-8 here), found at import in the system's
 * libz.so.1 with dlopen, so that building needs no zlib header; slicing-by-8 when it is absent. */
typedef unsigned long (*zlib_crc32_fn)(unsigned long, const unsigned char *, unsigned int);
static zlib_crc32_fn zlib_crc32;

static void crc_find_zlib(void)
{
#ifdef RMQ_CRC_NO_ZLIB
    /* The sanitized fuzz build (tests/kernel_fuzz/build.py): every byte CRC'd is read by instrumented
     * code here, so a CRC over a range past the buffer is reported, not read silently by libz. */
    return;
#endif
    void *handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL)
        zlib_crc32 = (zlib_crc32_fn)dlsym(handle, "crc32");
}

static int clmul;                       /* crc_clmul.c's folding can run here */

uint32_t crc32_bytes(const unsigned char *p, Py_ssize_t n)
{
    uint32_t head = 0;                  /* the CRC of the whole 16-byte blocks crc_clmul.c took */
    if (clmul) {
        Py_ssize_t done = rmq_crc_clmul(p, n, &head);
        p += done;
        n -= done;
    }
    if (zlib_crc32 != NULL) {
        unsigned long c = head;
        while (n > 0) {
            unsigned int chunk = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (unsigned int)n;
            c = zlib_crc32(c, p, chunk);
            p += chunk;
            n -= chunk;
        }
        return (uint32_t)c;
    }
    uint32_t c = ~head;
    while (n && ((uintptr_t)p & 7)) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if PY_BIG_ENDIAN
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

void rmq_crc_init(void)
{
    crc_tables();
    crc_find_zlib();
    clmul = rmq_crc_clmul_available() && getenv("RMQ_CRC_NO_CLMUL") == NULL;
}

const char *rmq_crc_name(void)
{
    if (clmul)
        return zlib_crc32 ? "pclmul+zlib" : "pclmul+slicing-by-8";
    return zlib_crc32 ? "zlib" : "slicing-by-8";
}
