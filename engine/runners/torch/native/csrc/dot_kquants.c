/* Dot products of one weight row in a k-quant format (Q4_K, Q5_K, Q6_K) with one q8_K
 * activation row (256-value blocks, one float scale, sums of codes per 16).
 *
 * Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}: 8 sub-blocks of 32 with 6-bit (sc, mn),
 *   w = d sc q - dmin mn, q in 0..15; bytes 32c..32c+31 of qs hold sub-block 2c in their low
 *   nibbles and sub-block 2c + 1 in their high nibbles.
 * Q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: as Q4_K with a fifth bit, bit 2c
 *   (low nibble) or 2c + 1 (high nibble) of qh[l] for weight l of its sub-block.
 * Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: w = d sc[i / 16] (q - 32), q in 0..63;
 *   per 128-weight half n, weight 128n + 32s + l (s = 0..3) takes nibble (s >= 2) of
 *   ql[64n + 32 (s & 1) + l] and bits 2s, 2s + 1 of qh[32n + l].
 */
#include "ember_native.h"
#include "kscales.h"
#include "simd.h"

#define ACT256(a, m) ((a)->q256 + (size_t)(m) * (a)->k)
#define D256(a, m) ((a)->d256 + (size_t)(m) * ((a)->k / 256))
#define BSUM(a, m) ((a)->bsum256 + (size_t)(m) * ((a)->k / 16))

static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return em_fp16_to_fp32(h);
}

/* the 6-bit scale and min of sub-block j from the 12 packed bytes */
static inline void scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63, *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K and Q5_K (five): per block the exact integers S = sum(sc q x) and C = the mins'
 * correction (sum of mn_j (bs[2j] + bs[2j + 1])), then d and dmin times them, in two sums
 * joined at the end (as llama.cpp's dot keeps the scales' and the mins' parts apart). AVX2:
 * fused steps, acc = fma(d dx, S, acc), mins = fma(-(dmin dx), C, mins), the order the tiled
 * matmul (gemm_tile.c) runs per weight row in its lanes. */
static inline float dot_k45(const uint8_t *w, const em_act *a, int32_t m, int bytes, int five) {
    const int nb = a->k / 256;
    const int8_t *x = ACT256(a, m);
    const float *dx = D256(a, m);
    const int16_t *bs = BSUM(a, m);
#ifdef EM_AVX2
    __m128 acc = _mm_setzero_ps(); /* lane 0: the scales' sum, lane 1: the mins' */
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b, *qh = p + 16, *qs = p + (five ? 48 : 16);
        const int8_t *xb = x + 256 * b;
        uint32_t u[4];
        em_k4_scales(p + 4, u);
        const __m256i table = em_k4_scale_table(u);
        __m256i sumi = _mm256_setzero_si256();
        const __m256i hb = five ? em_load32(qh) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            em_k45_codes(qs, hb, c, five, &lo, &hi);
            const __m256i plo = em_dot_u8_pairs(lo, em_load32(xb + 64 * c));
            const __m256i phi = em_dot_u8_pairs(hi, em_load32(xb + 64 * c + 32));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, em_k4_scale(table, 2 * c)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, em_k4_scale(table, 2 * c + 1)));
        }
        const __m256i pairs = _mm256_madd_epi16(em_load32(bs + 16 * b), _mm256_set1_epi16(1));
        const __m256i mins = _mm256_madd_epi16(em_k4_mins(u), pairs); /* mins < 64 */
        acc = em_k45_step(acc, p, dx[b], sumi, mins);
    }
    return em_k45_total(acc);
#else
    float acc = 0.0f, mins = 0.0f;
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b, *qh = p + 16, *qs = p + (five ? 48 : 16);
        const int8_t *xb = x + 256 * b;
        const int16_t *bsb = bs + 16 * b;
        int sc[8], mn[8], summ = 0;
        for (int j = 0; j < 8; j++) {
            scale_min(j, p + 4, &sc[j], &mn[j]);
            summ += mn[j] * (bsb[2 * j] + bsb[2 * j + 1]);
        }
        int sumi = 0;
#if defined(EM_NEON)
        const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1);
        const uint8x16_t h0 = vld1q_u8(five ? qh : qs), h1 = vld1q_u8(five ? qh + 16 : qs);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t a0 = vld1q_u8(qs + 32 * c), a1 = vld1q_u8(qs + 32 * c + 16);
            uint8x16_t lo0 = vandq_u8(a0, m4), lo1 = vandq_u8(a1, m4);
            uint8x16_t hi0 = vshrq_n_u8(a0, 4), hi1 = vshrq_n_u8(a1, 4);
            if (five) { /* bit 2c (low nibbles) and 2c + 1 (high) of qh[l] become bit 4 */
                const int8x16_t s0 = vdupq_n_s8((int8_t)(-2 * c)), s1 = vdupq_n_s8((int8_t)(-2 * c - 1));
                lo0 = vorrq_u8(lo0, vshlq_n_u8(vandq_u8(vshlq_u8(h0, s0), one), 4));
                lo1 = vorrq_u8(lo1, vshlq_n_u8(vandq_u8(vshlq_u8(h1, s0), one), 4));
                hi0 = vorrq_u8(hi0, vshlq_n_u8(vandq_u8(vshlq_u8(h0, s1), one), 4));
                hi1 = vorrq_u8(hi1, vshlq_n_u8(vandq_u8(vshlq_u8(h1, s1), one), 4));
            }
            sumi += sc[2 * c] * em_ndot32(lo0, lo1, xb + 64 * c) +
                    sc[2 * c + 1] * em_ndot32(hi0, hi1, xb + 64 * c + 32);
        }
#else
        for (int c = 0; c < 4; c++) {
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                int q0 = qs[32 * c + l] & 0x0f, q1 = qs[32 * c + l] >> 4;
                if (five) {
                    q0 |= ((qh[l] >> (2 * c)) & 1) << 4;
                    q1 |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                s0 += q0 * xb[64 * c + l];
                s1 += q1 * xb[64 * c + 32 + l];
            }
            sumi += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
        }
#endif
        acc += f16(p) * dx[b] * (float)sumi;
        mins += f16(p + 2) * dx[b] * (float)summ;
    }
    return acc - mins;
#endif
}

float em_dot_q4_k(const uint8_t *w, const em_act *a, int32_t m) { return dot_k45(w, a, m, 144, 0); }
float em_dot_q5_k(const uint8_t *w, const em_act *a, int32_t m) { return dot_k45(w, a, m, 176, 1); }

float em_dot_q6_k(const uint8_t *w, const em_act *a, int32_t m) {
    const int nb = a->k / 256;
    const int8_t *x = ACT256(a, m);
    const float *dx = D256(a, m);
    const int16_t *bs = BSUM(a, m);
    float acc = 0.0f;
#ifndef EM_AVX2
    float corr = 0.0f;
#endif
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + 210 * b, *ql = p, *qh = p + 128;
        const int8_t *sc = (const int8_t *)(p + 192), *xb = x + 256 * b;
        const int16_t *bsb = bs + 16 * b;
        const float d = f16(p + 208) * dx[b];
#ifdef EM_AVX2
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)sc);
        __m256i table[2];
        em_q6_scale_table(sc8, table);
        __m256i sumi = _mm256_setzero_si256();
        for (int n = 0; n < 2; n++) {
            __m256i q[4];
            em_q6_codes(ql, qh, n, q);
            for (int s = 0; s < 4; s++) {
                __m256i pr = em_dot_u8_pairs(q[s], em_load32(xb + 128 * n + 32 * s));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pr, em_q6_scale(table, 4 * n + s)));
            }
        }
        /* the codes are stored + 32: S - 32 sum(sc bs), exact, then one fused step */
        acc = em_fma(d, (float)em_q6_sum(sumi, sc8, bsb), acc);
#else
        int sub = 0;
        for (int g = 0; g < 16; g++) sub += sc[g] * bsb[g];
        corr += d * (float)(32 * sub); /* the codes are stored + 32 */
#endif
#ifdef EM_AVX2
#elif defined(EM_NEON)
        int sumi = 0;
        const uint8x16_t m4 = vdupq_n_u8(0x0f), three = vdupq_n_u8(3);
        for (int n = 0; n < 2; n++) {
            for (int s = 0; s < 4; s++) {
                for (int half = 0; half < 2; half++) { /* 16 weights share a scale */
                    const uint8x16_t lv = vld1q_u8(ql + 64 * n + 32 * (s & 1) + 16 * half);
                    uint8x16_t hv = vld1q_u8(qh + 32 * n + 16 * half);
                    hv = vandq_u8(vshlq_u8(hv, vdupq_n_s8((int8_t)(-2 * s))), three);
                    const uint8x16_t q =
                        vorrq_u8(s >= 2 ? vshrq_n_u8(lv, 4) : vandq_u8(lv, m4), vshlq_n_u8(hv, 4));
                    const int8x16_t xv = vld1q_s8(xb + 128 * n + 32 * s + 16 * half);
                    sumi += sc[8 * n + 2 * s + half] *
                            vaddvq_s32(em_ndot16(vdupq_n_s32(0), vreinterpretq_s8_u8(q), xv));
                }
            }
        }
        acc += d * (float)sumi;
#else
        int sumi = 0;
        for (int n = 0; n < 2; n++) {
            for (int s = 0; s < 4; s++) {
                for (int l = 0; l < 32; l++) {
                    int lo = ql[64 * n + 32 * (s & 1) + l];
                    int q = (s >= 2 ? lo >> 4 : lo & 0x0f) | (((qh[32 * n + l] >> (2 * s)) & 3) << 4);
                    sumi += sc[8 * n + 2 * s + l / 16] * q * xb[128 * n + 32 * s + l];
                }
            }
        }
        acc += d * (float)sumi;
#endif
    }
#ifdef EM_AVX2
    return acc;
#else
    return acc - corr;
#endif
}
