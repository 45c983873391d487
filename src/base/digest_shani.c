/* digest_shani.c: SHA-256 block compression with the x86 SHA extensions
 * (SHA-NI: sha256rnds2, sha256msg1, sha256msg2), written from the instruction
 * definitions in the Intel SDM and FIPS 180-4; compiled with -msha -mssse3
 * -msse4.1 and called only after digest.c has checked CPUID.
 *
 * The state lives in two registers as the instructions want it, ABEF and CDGH
 * (A in the high lane).  Message groups G_j = W[4j .. 4j+3] (big-endian words of
 * the block for j < 4), then the schedule four words at a time:
 *   G_j = msg2(msg1(G_{j-4}, G_{j-3}) + (W[4j-7 .. 4j-4] = alignr(G_{j-1}, G_{j-2}, 4)), G_{j-1})
 * which is W_t = s1(W_{t-2}) + W_{t-7} + s0(W_{t-15}) + W_{t-16}; each group does
 * four rounds, two per sha256rnds2 (the K-added words in the low 64 bits). */
#include <immintrin.h>

#include "digest_impl.h"

void digest_sha256_blocks_shani_impl(uint32_t h[8], const unsigned char *p, size_t n_blocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)h);      /* h0..h3 = A B C D */
    __m128i hgfe = _mm_loadu_si128((const __m128i *)(h + 4)); /* h4..h7 = E F G H */
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1), efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8), cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; n_blocks; n_blocks--, p += 64) {
        const __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i g[4];
#pragma GCC unroll 16 /* g[] in registers: no stores and reloads between rounds */
        for (int j = 0; j < 16; j++) {
            if (j < 4) {
                g[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bswap);
            } else {
                __m128i x = _mm_sha256msg1_epu32(g[j & 3], g[(j + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(g[(j + 3) & 3], g[(j + 2) & 3], 4));
                g[j & 3] = _mm_sha256msg2_epu32(x, g[(j + 3) & 3]);
            }
            __m128i wk = _mm_add_epi32(g[j & 3],
                                       _mm_loadu_si128((const __m128i *)(digest_k_impl + 4 * j)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B), dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(dchg, feba, 8));
}
