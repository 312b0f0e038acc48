/* CRC-32 (zlib/gzip): reflected polynomial 0xEDB88320.
 *
 * Portable path: slicing-by-8 tables, byte-order independent.
 * x86 path: carry-less multiplication folding after Intel's "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ Instruction":
 * fold 4x128 bits per 64-byte block, fold the four lanes and any further
 * 16-byte blocks into one 128-bit lane, then reduce to 32 bits (Barrett).
 * The remaining < 16 bytes go through the tables. */
#include "_crc32.h"

#define RS_POLY 0xedb88320u

static uint32_t rs_table[8][256];

/* ---- portable slicing-by-8 ------------------------------------------- */

static void rs_build_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (RS_POLY & (0u - (c & 1)));
        rs_table[0][n] = c;
    }
    /* rs_table[k][n]: CRC of byte n followed by k zero bytes */
    for (int k = 1; k < 8; k++)
        for (int n = 0; n < 256; n++) {
            uint32_t c = rs_table[k - 1][n];
            rs_table[k][n] = (c >> 8) ^ rs_table[0][c & 0xff];
        }
}

static uint32_t rs_load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 |
           (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t rs_crc32_portable(uint32_t crc, const unsigned char *buf, size_t len)
{
    uint32_t c = ~crc;
    for (; len >= 8; buf += 8, len -= 8) {
        c ^= rs_load_le32(buf);
        c = rs_table[7][c & 0xff] ^ rs_table[6][(c >> 8) & 0xff] ^
            rs_table[5][(c >> 16) & 0xff] ^ rs_table[4][c >> 24] ^
            rs_table[3][buf[4]] ^ rs_table[2][buf[5]] ^
            rs_table[1][buf[6]] ^ rs_table[0][buf[7]];
    }
    while (len--)
        c = (c >> 8) ^ rs_table[0][(c ^ *buf++) & 0xff];
    return ~c;
}

/* ---- x86 PCLMULQDQ folding ------------------------------------------- */

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define RS_HAVE_X86 1
#include <immintrin.h>
#include <wmmintrin.h>

#define RS_TARGET __attribute__((target("pclmul,sse4.1")))

/* Reflected constants: Kn = bitreflect32(x^n mod P) << 1, P' = reflected P,
 * MU = reflected floor(x^64 / P). */
#define RS_K1 0x154442bd4ULL    /* x^(4*128+32): fold 512 bits, low qword */
#define RS_K2 0x1c6e41596ULL    /* x^(4*128-32): fold 512 bits, high qword */
#define RS_K3 0x1751997d0ULL    /* x^(128+32):   fold 128 bits, low qword */
#define RS_K4 0x0ccaa009eULL    /* x^(128-32):   fold 128 bits, high qword */
#define RS_K5 0x163cd6124ULL    /* x^64:         fold 96 -> 64 bits */
#define RS_PP 0x1db710641ULL    /* P' */
#define RS_MU 0x1f7011641ULL    /* MU */

static int rs_use_clmul;

/* Multiply both halves of x by the matching constant in k and add data. */
RS_TARGET static inline __m128i rs_fold(__m128i x, __m128i k, __m128i data)
{
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), data);
}

/* Reduce a 128-bit remainder to the 32-bit CRC state. */
RS_TARGET static uint32_t rs_reduce128(__m128i x)
{
    const __m128i mask32 = _mm_setr_epi32(-1, 0, 0, 0);
    const __m128i k4 = _mm_set_epi64x((long long)RS_K4, 0);
    const __m128i k5 = _mm_set_epi64x(0, (long long)RS_K5);
    const __m128i pmu = _mm_set_epi64x((long long)RS_MU, (long long)RS_PP);
    __m128i t;

    /* 128 -> 96 bits: low qword * K4, plus high qword (appends 32 zero bits) */
    x = _mm_xor_si128(_mm_clmulepi64_si128(x, k4, 0x10), _mm_srli_si128(x, 8));
    /* 96 -> 64 bits: low dword * K5, plus the upper 64 bits */
    x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, mask32), k5, 0x00),
                      _mm_srli_si128(x, 4));
    /* Barrett 64 -> 32 bits: t = (x mod x^32) * MU, then t * P' */
    t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), pmu, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), pmu, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t), 1);
}

/* CRC of len bytes, len a multiple of 16 and >= 64. */
RS_TARGET static uint32_t rs_crc32_clmul(uint32_t crc, const unsigned char *p,
                                         size_t len)
{
    const __m128i k12 = _mm_set_epi64x((long long)RS_K2, (long long)RS_K1);
    const __m128i k34 = _mm_set_epi64x((long long)RS_K4, (long long)RS_K3);
    const __m128i *v = (const __m128i *)(const void *)p;
    __m128i x0 = _mm_xor_si128(_mm_loadu_si128(v), _mm_cvtsi32_si128((int)~crc));
    __m128i x1 = _mm_loadu_si128(v + 1);
    __m128i x2 = _mm_loadu_si128(v + 2);
    __m128i x3 = _mm_loadu_si128(v + 3);

    /* 4 lanes of 128 bits, each folded 512 bits forward per 64-byte block */
    for (v += 4, len -= 64; len >= 64; v += 4, len -= 64) {
        x0 = rs_fold(x0, k12, _mm_loadu_si128(v));
        x1 = rs_fold(x1, k12, _mm_loadu_si128(v + 1));
        x2 = rs_fold(x2, k12, _mm_loadu_si128(v + 2));
        x3 = rs_fold(x3, k12, _mm_loadu_si128(v + 3));
    }
    /* merge the lanes, then fold remaining 16-byte blocks, 128 bits each */
    x0 = rs_fold(x0, k34, x1);
    x0 = rs_fold(x0, k34, x2);
    x0 = rs_fold(x0, k34, x3);
    for (; len >= 16; v++, len -= 16)
        x0 = rs_fold(x0, k34, _mm_loadu_si128(v));
    return ~rs_reduce128(x0);
}
#endif /* x86 */

/* ---- public entry points --------------------------------------------- */

int rs_crc32_init(void)
{
    rs_build_tables();
#ifdef RS_HAVE_X86
    __builtin_cpu_init();
    rs_use_clmul = __builtin_cpu_supports("pclmul") &&
                   __builtin_cpu_supports("sse4.1");
#endif
    return 0;
}

uint32_t rs_crc32(uint32_t crc, const unsigned char *buf, size_t len)
{
#ifdef RS_HAVE_X86
    if (rs_use_clmul && len >= 64) {
        size_t n = len & ~(size_t)15;
        crc = rs_crc32_clmul(crc, buf, n);
        buf += n;
        len -= n;
    }
#endif
    return rs_crc32_portable(crc, buf, len);
}
