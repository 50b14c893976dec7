/* The k-quants' per-32 scales without a loop per sub-block: Q4_K/Q5_K's 12 packed bytes of 6-bit
 * scales and mins unpacked four at a time in 32-bit words, and (AVX2) the broadcasts the dots
 * multiply with, by byte shuffles. Shared by the one-row dots (dot_kquants.c), the 4-row dots
 * (dot_multi.c) and the tiled matmul's decoder (gemm_decode.c). */
#ifndef EMBER_KSCALES_H
#define EMBER_KSCALES_H

#include <stdint.h>
#include <string.h>

#include "simd.h"

/* bytes of u[0], u[1]: the 8 scales; of u[2], u[3]: the 8 mins (each 0..63). Scale j < 4 is the
 * low 6 bits of byte j, min j < 4 of byte j + 4; for j >= 4 the low (scale) or high (min) nibble
 * of byte j + 4 and the top 2 bits of byte j - 4 (scale) or j (min). */
static inline void em_k4_scales(const uint8_t *packed, uint32_t u[4]) {
    uint32_t w[3];
    memcpy(w, packed, 12);
    u[3] = ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4);
    u[2] = w[1] & 0x3f3f3f3fu;
    u[1] = (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4);
    u[0] = w[0] & 0x3f3f3f3fu;
}

#ifdef EM_AVX2
/* the 8 scales as int16, repeated in both 128-bit halves (for em_k4_scale) */
static inline __m256i em_k4_scale_table(const uint32_t u[4]) {
    const __m128i s = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[1], (int)u[0]));
    return _mm256_broadcastsi128_si256(s);
}

/* scale j in all 16 int16 lanes */
static inline __m256i em_k4_scale(__m256i table, int j) {
    return _mm256_shuffle_epi8(table, _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8))));
}

/* the 8 mins as int32 lanes (0 in their high int16, for madd with int32 pair sums) */
static inline __m256i em_k4_mins(const uint32_t u[4]) {
    return _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)u[3], (int)u[2]));
}

/* Q6_K's 16 signed scales as int16, for em_q6_scale: scales 0-7 in both 128-bit halves (t[0])
 * and scales 8-15 in both (t[1]) */
static inline void em_q6_scale_table(__m128i sc, __m256i t[2]) {
    const __m256i s16 = _mm256_cvtepi8_epi16(sc);
    t[0] = _mm256_permute2x128_si256(s16, s16, 0x00);
    t[1] = _mm256_permute2x128_si256(s16, s16, 0x11);
}

/* Q6_K: int16 lanes 0-7 = sc[2j], 8-15 = sc[2j + 1] (one byte shuffle of the table) */
static inline __m256i em_q6_scale(const __m256i t[2], int j) {
    const int lo = 2 * (2 * j % 8), hi = lo + 2; /* byte offsets of the two int16 in a half */
    const __m256i pick = _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                                          lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, hi, hi + 1,
                                          hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi,
                                          hi + 1, hi, hi + 1, hi, hi + 1);
    return _mm256_shuffle_epi8(t[j >= 4], pick);
}

/* Q4_K/Q5_K: the 32 codes of sub-block 2c (*lo) and of 2c + 1 (*hi) from the 32 bytes at
 * qs + 32c, Q5_K's (five) fifth bits from hb (the block's 32 bytes of qh; bit 2c, 2c + 1) */
static inline void em_k45_codes(const uint8_t *qs, __m256i hb, int c, int five, __m256i *lo,
                                __m256i *hi) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), one8 = _mm256_set1_epi8(1);
    const __m256i q4 = em_load32(qs + 32 * c);
    *lo = _mm256_and_si256(q4, low4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
    if (five) {
        const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), one8);
        const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), one8);
        *lo = _mm256_or_si256(*lo, _mm256_slli_epi16(h0, 4));
        *hi = _mm256_or_si256(*hi, _mm256_slli_epi16(h1, 4));
    }
}

/* Q6_K: half n's codes (0..63, stored + 32), values 128n + 32s .. + 31 in q[s] */
static inline void em_q6_codes(const uint8_t *ql, const uint8_t *qh, int n, __m256i q[4]) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
    const __m256i l0 = em_load32(ql + 64 * n), l1 = em_load32(ql + 64 * n + 32);
    const __m256i h = em_load32(qh + 32 * n);
    const __m256i lows[4] = {_mm256_and_si256(l0, low4), _mm256_and_si256(l1, low4),
                             _mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                             _mm256_and_si256(_mm256_srli_epi16(l1, 4), low4)};
    for (int s = 0; s < 4; s++) {
        const __m256i hs = _mm256_and_si256(_mm256_srli_epi16(h, 2 * s), three);
        q[s] = _mm256_or_si256(lows[s], _mm256_slli_epi16(hs, 4));
    }
}

/* Q6_K's exact block sum: the lanes of sum(sc q x) less 32 x the 16 signed scales times the
 * activations' 16 code sums bs (the codes are stored + 32), summed */
static inline int em_q6_sum(__m256i sumi, __m128i sc, const int16_t *bs) {
    const __m256i corr = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), em_load32(bs));
    return em_hsum_i32(_mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5)));
}

/* Q4_K/Q5_K: one block's two fused steps at once, lane 0 acc = fma(d dx, S, acc) and lane 1
 * mins = fma(-(dmin dx), C, mins), for S and C the exact sums of s's and c's lanes (f16 d and
 * dmin at dd; the tiled matmul takes the same steps in its lanes: gemm_tile.c) */
static inline __m128 em_k45_step(__m128 acc, const uint8_t *dd, float dx, __m256i s, __m256i c) {
    const __m256i h = _mm256_hadd_epi32(s, c); /* s01 s23 c01 c23 | s45 s67 c45 c67 */
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_hadd_epi32(q, q); /* S C S C */
    int32_t both;
    memcpy(&both, dd, 4);
    const __m128 scale = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(both)), /* d dmin 0 0 */
                                    _mm_setr_ps(dx, -dx, 0.0f, 0.0f));
    return _mm_fmadd_ps(scale, _mm_cvtepi32_ps(q), acc);
}

/* the two sums of em_k45_step's lanes, joined */
static inline float em_k45_total(__m128 acc) {
    return _mm_cvtss_f32(acc) + _mm_cvtss_f32(_mm_shuffle_ps(acc, acc, 1));
}
#endif

#endif
