/* Dot products of one weight row in a 32-weight block format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
 * with one q8_0 activation row: per block d_w d_x sum(q_w q_x) (+ m_w s_x for the formats
 * with a min, s_x = d_x sum(q_x)).
 *
 * Blocks: Q4_0 {f16 d; u8 qs[16]} w = d (q - 8); Q4_1 {f16 d, m; u8 qs[16]} w = d q + m;
 * Q5_0 {f16 d; u32 qh; u8 qs[16]} w = d (q - 16); Q5_1 {f16 d, m; u32 qh; u8 qs[16]}
 * w = d q + m; Q8_0 {f16 d; i8 qs[32]} w = d q. Weight j < 16 is the low nibble of qs[j],
 * weight j + 16 its high nibble; bit j of qh is the fifth bit of weight j.
 */
#include "ember_native.h"
#include "simd.h"

#define ACT32(a, m) ((a)->q32 + (size_t)(m) * (a)->k)
#define D32(a, m) ((a)->d32 + (size_t)(m) * ((a)->k / 32))
#define S32(a, m) ((a)->s32 + (size_t)(m) * ((a)->k / 32))

static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return em_fp16_to_fp32(h);
}

/* the 32 codes of a block, 0..15 (nibbles) or 0..31 (with the fifth bits of qh) */
static inline void codes32(const uint8_t *qs, const uint8_t *qh, int *q) {
    uint32_t h = 0;
    if (qh) memcpy(&h, qh, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0f) | (qh ? (int)((h >> j) & 1) << 4 : 0);
        q[j + 16] = (qs[j] >> 4) | (qh ? (int)((h >> (j + 16)) & 1) << 4 : 0);
    }
}

static inline int sum_i8(const int *q, const int8_t *x, int offset) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += (q[j] - offset) * x[j];
    return s;
}

float em_dot_q8_0(const uint8_t *w, const em_act *a, int32_t m) {
    const int nb = a->k / 32;
    const int8_t *x = ACT32(a, m);
    const float *dx = D32(a, m);
#ifdef EM_AVX2
    /* one accumulator, block by block: the same order as dot_multi.c's 4-row kernel, so a
     * row's result does not depend on how many rows share the call */
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + 34 * b;
        __m256i s = em_dot_i8(em_load32(p + 2), em_load32(x + 32 * b));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(p) * dx[b]), _mm256_cvtepi32_ps(s), acc);
    }
    return em_hsum(acc);
#else
    float acc = 0.0f;
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + 34 * b;
        const int8_t *q = (const int8_t *)(p + 2);
#ifdef EM_NEON
        int32x4_t v = em_ndot16(vdupq_n_s32(0), vld1q_s8(q), vld1q_s8(x + 32 * b));
        const int s = vaddvq_s32(em_ndot16(v, vld1q_s8(q + 16), vld1q_s8(x + 32 * b + 16)));
#else
        int s = 0;
        for (int j = 0; j < 32; j++) s += q[j] * x[32 * b + j];
#endif
        acc += f16(p) * dx[b] * (float)s;
    }
    return acc;
#endif
}

/* Q4_0 (bytes 18, offset 8, no qh), Q5_0 (bytes 22, offset 16, qh at 2): the signed codes
 * (q - offset) times x, summed per 4 as exact integers like Q8_0's (so the tiled matmul,
 * gemm_tile.c, which sums the same lanes, gives the same floats) */
static inline float dot_sym(const uint8_t *w, const em_act *a, int32_t m, int bytes, int has_qh) {
    const int nb = a->k / 32, offset = has_qh ? 16 : 8, qs_at = has_qh ? 6 : 2;
    const int8_t *x = ACT32(a, m);
    const float *dx = D32(a, m);
#ifdef EM_AVX2
    __m256 acc = _mm256_setzero_ps();
    const __m256i five = _mm256_set1_epi8(0x10), off = _mm256_set1_epi8((char)offset);
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b;
        __m256i q = em_nibbles32(p + qs_at);
        if (has_qh) q = _mm256_or_si256(q, _mm256_and_si256(em_bits32(p + 2), five));
        __m256i s = em_dot_i8(_mm256_sub_epi8(q, off), em_load32(x + 32 * b));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(p) * dx[b]), _mm256_cvtepi32_ps(s), acc);
    }
    return em_hsum(acc);
#else
    float acc = 0.0f;
    int q[32];
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b;
        codes32(p + qs_at, has_qh ? p + 2 : NULL, q);
        acc += f16(p) * dx[b] * (float)sum_i8(q, x + 32 * b, offset);
    }
    return acc;
#endif
}

/* Q4_1 (bytes 20, no qh), Q5_1 (bytes 24, qh at 4): d and m at 0 and 2 */
static inline float dot_min(const uint8_t *w, const em_act *a, int32_t m, int bytes, int has_qh) {
    const int nb = a->k / 32, qs_at = has_qh ? 8 : 4;
    const int8_t *x = ACT32(a, m);
    const float *dx = D32(a, m), *sx = S32(a, m);
    float mins = 0.0f;
#ifdef EM_AVX2
    __m256 acc = _mm256_setzero_ps();
    const __m256i five = _mm256_set1_epi8(0x10), one = _mm256_set1_epi16(1);
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b;
        __m256i q = em_nibbles32(p + qs_at);
        if (has_qh) q = _mm256_or_si256(q, _mm256_and_si256(em_bits32(p + 4), five));
        __m256i s = _mm256_madd_epi16(em_dot_u8_pairs(q, em_load32(x + 32 * b)), one);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(p) * dx[b]), _mm256_cvtepi32_ps(s), acc);
        mins += f16(p + 2) * sx[b];
    }
    return em_hsum(acc) + mins;
#else
    float acc = 0.0f;
    int q[32];
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b;
        codes32(p + qs_at, has_qh ? p + 4 : NULL, q);
        acc += f16(p) * dx[b] * (float)sum_i8(q, x + 32 * b, 0);
        mins += f16(p + 2) * sx[b];
    }
    return acc + mins;
#endif
}

float em_dot_q4_0(const uint8_t *w, const em_act *a, int32_t m) { return dot_sym(w, a, m, 18, 0); }
float em_dot_q5_0(const uint8_t *w, const em_act *a, int32_t m) { return dot_sym(w, a, m, 22, 1); }
float em_dot_q4_1(const uint8_t *w, const em_act *a, int32_t m) { return dot_min(w, a, m, 20, 0); }
float em_dot_q5_1(const uint8_t *w, const em_act *a, int32_t m) { return dot_min(w, a, m, 24, 1); }
