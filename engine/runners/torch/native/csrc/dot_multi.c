/* One weight row against 4 activation rows at once (batched decode, drafts, short chunks): each
 * block's codes are unpacked once and multiplied with the 4 rows while they are in registers.
 * Same math and order per row as the one-row dots (dot_legacy.c, dot_kquants.c). */
#include "ember_native.h"
#include "kscales.h"
#include "simd.h"

#ifdef EM_AVX2
#define NR 4

static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return em_fp16_to_fp32(h);
}

static void store(const __m256 *acc, float *out) {
    for (int r = 0; r < NR; r++) out[r] = em_hsum(acc[r]);
}

static void dot4_q8_0(const uint8_t *w, const em_act *a, int32_t m0, float *out) {
    const int nb = a->k / 32;
    __m256 acc[NR];
    for (int r = 0; r < NR; r++) acc[r] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + 34 * b;
        const __m256i q = em_load32(p + 2), aq = _mm256_sign_epi8(q, q);
        const float dw = f16(p);
        for (int r = 0; r < NR; r++) {
            const int32_t m = m0 + r;
            const __m256i x = em_load32(a->q32 + (size_t)m * a->k + 32 * b);
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(x, q)),
                                          _mm256_set1_epi16(1));
            const float d = dw * a->d32[(size_t)m * nb + b];
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s), acc[r]);
        }
    }
    store(acc, out);
}

/* Q4_0 / Q5_0: signed codes (q - offset), as Q8_0 */
static inline void dot4_sym(const uint8_t *w, const em_act *a, int32_t m0, float *out, int bytes,
                            int has_qh) {
    const int nb = a->k / 32, offset = has_qh ? 16 : 8, qs_at = has_qh ? 6 : 2;
    __m256 acc[NR];
    for (int r = 0; r < NR; r++) acc[r] = _mm256_setzero_ps();
    const __m256i five = _mm256_set1_epi8(0x10), off = _mm256_set1_epi8((char)offset);
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b;
        __m256i q = em_nibbles32(p + qs_at);
        if (has_qh) q = _mm256_or_si256(q, _mm256_and_si256(em_bits32(p + 2), five));
        q = _mm256_sub_epi8(q, off);
        const float dw = f16(p);
        for (int r = 0; r < NR; r++) {
            const size_t m = (size_t)(m0 + r);
            const __m256i x = em_load32(a->q32 + m * a->k + 32 * b);
            const __m256i s = em_dot_i8(q, x);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a->d32[m * nb + b]),
                                     _mm256_cvtepi32_ps(s), acc[r]);
        }
    }
    store(acc, out);
}

static void dot4_q4_0(const uint8_t *w, const em_act *a, int32_t m0, float *out) {
    dot4_sym(w, a, m0, out, 18, 0);
}
static void dot4_q5_0(const uint8_t *w, const em_act *a, int32_t m0, float *out) {
    dot4_sym(w, a, m0, out, 22, 1);
}

/* Q4_K / Q5_K against q8_K rows: per block exact S and C, then two fused sums (dot_kquants.c) */
static inline void dot4_k45(const uint8_t *w, const em_act *a, int32_t m0, float *out, int bytes,
                            int five) {
    const int nb = a->k / 256;
    __m128 acc[NR]; /* lane 0: the scales' sum, lane 1: the mins' (dot_kquants.c) */
    for (int r = 0; r < NR; r++) acc[r] = _mm_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + bytes * b, *qh = p + 16, *qs = p + (five ? 48 : 16);
        uint32_t u[4];
        em_k4_scales(p + 4, u);
        const __m256i table = em_k4_scale_table(u);
        __m256i sumi[NR];
        for (int r = 0; r < NR; r++) sumi[r] = _mm256_setzero_si256();
        const __m256i hb = five ? em_load32(qh) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            em_k45_codes(qs, hb, c, five, &lo, &hi);
            const __m256i s0 = em_k4_scale(table, 2 * c), s1 = em_k4_scale(table, 2 * c + 1);
            for (int r = 0; r < NR; r++) {
                const int8_t *xb = a->q256 + (size_t)(m0 + r) * a->k + 256 * b + 64 * c;
                __m256i pl = _mm256_maddubs_epi16(lo, em_load32(xb));
                __m256i ph = _mm256_maddubs_epi16(hi, em_load32(xb + 32));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(pl, s0));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(ph, s1));
            }
        }
        const __m256i mins = em_k4_mins(u);
        for (int r = 0; r < NR; r++) {
            const size_t m = (size_t)(m0 + r);
            const float dx = a->d256[m * nb + b];
            const __m256i pairs = _mm256_madd_epi16(
                em_load32(a->bsum256 + m * (a->k / 16) + 16 * b), _mm256_set1_epi16(1));
            acc[r] = em_k45_step(acc[r], p, dx, sumi[r], _mm256_madd_epi16(mins, pairs));
        }
    }
    for (int r = 0; r < NR; r++) out[r] = em_k45_total(acc[r]);
}

static void dot4_q4_k(const uint8_t *w, const em_act *a, int32_t m0, float *out) {
    dot4_k45(w, a, m0, out, 144, 0);
}
static void dot4_q5_k(const uint8_t *w, const em_act *a, int32_t m0, float *out) {
    dot4_k45(w, a, m0, out, 176, 1);
}

static void dot4_q6_k(const uint8_t *w, const em_act *a, int32_t m0, float *out) {
    const int nb = a->k / 256;
    float acc[NR] = {0};
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = w + 210 * b, *ql = p, *qh = p + 128;
        const int8_t *sc = (const int8_t *)(p + 192);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)sc);
        __m256i table[2];
        em_q6_scale_table(sc8, table);
        __m256i sumi[NR];
        for (int r = 0; r < NR; r++) sumi[r] = _mm256_setzero_si256();
        for (int n = 0; n < 2; n++) {
            __m256i q[4];
            em_q6_codes(ql, qh, n, q);
            for (int s = 0; s < 4; s++) {
                const __m256i qs = q[s];
                const __m256i scv = em_q6_scale(table, 4 * n + s);
                for (int r = 0; r < NR; r++) {
                    const int8_t *xb = a->q256 + (size_t)(m0 + r) * a->k + 256 * b + 128 * n + 32 * s;
                    __m256i pr = _mm256_maddubs_epi16(qs, em_load32(xb));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(pr, scv));
                }
            }
        }
        const float dw = f16(p + 208);
        for (int r = 0; r < NR; r++) {
            const size_t m = (size_t)(m0 + r);
            const float d = dw * a->d256[m * nb + b];
            const int16_t *bs = a->bsum256 + m * (a->k / 16) + 16 * b;
            /* the codes are stored + 32 (dot_kquants.c) */
            acc[r] = em_fma(d, (float)em_q6_sum(sumi[r], sc8, bs), acc[r]);
        }
    }
    for (int r = 0; r < NR; r++) out[r] = acc[r];
}
#endif

em_dot4_fn em_dot4_for(int32_t type) {
#ifdef EM_AVX2
    switch (type) {
    case EM_Q8_0: return dot4_q8_0;
    case EM_Q4_0: return dot4_q4_0;
    case EM_Q5_0: return dot4_q5_0;
    case EM_Q4_K: return dot4_q4_k;
    case EM_Q5_K: return dot4_q5_k;
    case EM_Q6_K: return dot4_q6_k;
    default: return NULL;
    }
#else
    (void)type;
    return NULL;
#endif
}
