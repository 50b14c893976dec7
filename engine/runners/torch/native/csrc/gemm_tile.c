/* The tiled matmul's micro-kernels: NR decoded weight rows x NT activation rows (gemm.h).
 *
 * AVX2 (and the AVX-512 build, EVEX-encoded): each 32 codes of a weight row are loaded once
 * and multiplied with the NT activation rows' 32 codes (maddubs: u8 x s8 -> int16 pairs), the
 * pair sums weighted by their integer scales (madd) into one int32 accumulator per (row,
 * token); per block the float steps of the one-row dots (dot_kquants.c, dot_legacy.c), in the
 * same order, so the results are theirs bit for bit. NEON and portable C: per (row, token)
 * the exact integer sums of their one-row dots and the same scalar float steps.
 */
#include "gemm.h"
#include "simd.h"

#define ALWAYS static inline __attribute__((always_inline))
#define ROW(p, r, n) ((p) + (int64_t)(r) * (n))

#ifdef EM_AVX2
/* sum of |w| x sign(x, w) over each 4 bytes (= w . x per 4; |w| <= 128, so no saturation) */
ALWAYS __m256i dot_mag(__m256i mag, __m256i sx) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), mag, sx);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), mag, sx);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(mag, sx), _mm256_set1_epi16(1));
#endif
}

/* sum[r][j] = the block's 8 int32 lanes of sum over s of madd(maddubs(codes, x), scales), for 32
 * values per s (lane i holds pairs 2i, 2i + 1 of each group). Exact integers, so any grouping
 * gives the same lanes: AVX-512 takes two groups per instruction (s in the low half, s + 1 in
 * the high one, added at the end) and, with VNNI, madd + add as one vpdpwssd. */
ALWAYS void super_sums(const em_gtile *t, int32_t r0, const em_act *a, int32_t t0, int32_t b,
                       __m256i sum[2][4], const int NR, const int NT) {
    const int32_t k = t->k;
#if defined(__AVX512BW__)
    __m512i wide[2][4];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NT; j++) wide[r][j] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int s = 0; s < 8; s += 2) {
        for (int r = 0; r < NR; r++) {
            const __m512i w = _mm512_loadu_si512(ROW(t->q, r0 + r, k) + 256 * b + 32 * s);
            const __m512i sc = _mm512_loadu_si512(ROW(t->sc, r0 + r, k / 2) + 128 * b + 16 * s);
            for (int j = 0; j < NT; j++) {
                const __m512i x = _mm512_loadu_si512(ROW(a->q256, t0 + j, k) + 256 * b + 32 * s);
#if defined(__AVX512VNNI__)
                wide[r][j] = _mm512_dpwssd_epi32(wide[r][j], _mm512_maddubs_epi16(w, x), sc);
#else
                wide[r][j] = _mm512_add_epi32(wide[r][j],
                                              _mm512_madd_epi16(_mm512_maddubs_epi16(w, x), sc));
#endif
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NT; j++)
            sum[r][j] = _mm256_add_epi32(_mm512_castsi512_si256(wide[r][j]),
                                         _mm512_extracti64x4_epi64(wide[r][j], 1));
#else
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NT; j++) sum[r][j] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int s = 0; s < 8; s++) {
        for (int r = 0; r < NR; r++) {
            const __m256i w = em_load32(ROW(t->q, r0 + r, k) + 256 * b + 32 * s);
            const __m256i sc = em_load32(ROW(t->sc, r0 + r, k / 2) + 128 * b + 16 * s);
            for (int j = 0; j < NT; j++) {
                const __m256i x = em_load32(ROW(a->q256, t0 + j, k) + 256 * b + 32 * s);
                sum[r][j] = _mm256_add_epi32(
                    sum[r][j], _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), sc));
            }
        }
    }
#endif
}

/* Q4_K/Q5_K (q6 = 0) and Q6_K (q6 = 1) */
ALWAYS void super_tile(const em_gtile *t, int32_t r0, const em_act *a, int32_t t0, float *out,
                       const int NR, const int NT, const int q6) {
    const int32_t k = t->k, nb = k / 256;
    __m256 acc[2][4];
    __m256 corr = _mm256_setzero_ps(); /* Q6_K: lane 4r + j, (row r, token j) */
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NT; j++) acc[r][j] = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; b++) {
        __m256i sum[2][4];
        super_sums(t, r0, a, t0, b, sum, NR, NT);
        __m256i offs[8]; /* Q6_K: the scales x the activations' code sums, per (row, token) */
        float dd[8] = {0};
        for (int r = 0; r < NR; r++) {
            const __m256i mv = em_load32(ROW(t->mv, r0 + r, k / 16) + 16 * b);
            const float d = t->d[(int64_t)(r0 + r) * nb + b];
            const float dmin = q6 ? 0.0f : t->dmin[(int64_t)(r0 + r) * nb + b];
            for (int j = 0; j < NT; j++) {
                const __m256i lanes =
                    _mm256_madd_epi16(em_load32(ROW(a->bsum256, t0 + j, k / 16) + 16 * b), mv);
                const float dx = a->d256[(int64_t)(t0 + j) * nb + b];
                acc[r][j] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx),
                                            _mm256_cvtepi32_ps(sum[r][j]), acc[r][j]);
                if (q6)
                    offs[4 * r + j] = lanes, dd[4 * r + j] = d * dx;
                else
                    acc[r][j] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dx),
                                                 _mm256_cvtepi32_ps(lanes), acc[r][j]);
            }
        }
        if (q6) { /* the codes' +32, in float per block like the one-row dot: 8 sums at once */
            for (int i = 0; i < 8; i++)
                if (i % 4 >= NT || i / 4 >= NR) offs[i] = _mm256_setzero_si256();
            const __m256i c = _mm256_slli_epi32(em_hsums8_i32(offs), 5);
            corr = _mm256_add_ps(corr, _mm256_mul_ps(_mm256_loadu_ps(dd), _mm256_cvtepi32_ps(c)));
        }
    }
    float sub[8];
    _mm256_storeu_ps(sub, corr);
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NT; j++) out[r * NT + j] = em_hsum(acc[r][j]) - sub[4 * r + j];
}

/* Q4_0/Q5_0/Q8_0 */
ALWAYS void b32_tile(const em_gtile *t, int32_t r0, const em_act *a, int32_t t0, float *out,
                     const int NR, const int NT) {
    const int32_t k = t->k, nb = k / 32;
    __m256 acc[2][4];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NT; j++) acc[r][j] = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; b++) {
        __m256 dx[4];
        for (int j = 0; j < NT; j++) dx[j] = _mm256_set1_ps(a->d32[(int64_t)(t0 + j) * nb + b]);
        for (int r = 0; r < NR; r++) {
            const __m256i mag = em_load32(ROW(t->q, r0 + r, k) + 32 * b);
            const __m256i w = em_load32(ROW(t->w, r0 + r, k) + 32 * b);
            const __m256 dw = _mm256_set1_ps(t->d[(int64_t)(r0 + r) * nb + b]);
            for (int j = 0; j < NT; j++) {
                const __m256i x = em_load32(ROW(a->q32, t0 + j, k) + 32 * b);
                const __m256i s = dot_mag(mag, _mm256_sign_epi8(x, w));
                acc[r][j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[j]), _mm256_cvtepi32_ps(s), acc[r][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NT; j++) out[r * NT + j] = em_hsum(acc[r][j]);
}

ALWAYS void tile(const em_gtile *t, int32_t r0, const em_act *a, int32_t t0, float *out,
                 const int NR, const int NT) {
    if (t->kind == EM_G_B32) b32_tile(t, r0, a, t0, out, NR, NT);
    else if (t->kind == EM_G_Q6K) super_tile(t, r0, a, t0, out, NR, NT, 1);
    else super_tile(t, r0, a, t0, out, NR, NT, 0);
}

void em_gemm_tile(const em_gtile *t, int32_t r0, int32_t nr, const em_act *a, int32_t t0,
                  int32_t nt, float *out) {
    if (nr == 2 && nt == 4) return tile(t, r0, a, t0, out, 2, 4);
    if (nr == 1 && nt == 4) return tile(t, r0, a, t0, out, 1, 4);
    for (int32_t r = 0; r < nr; r++)
        for (int32_t j = 0; j < nt; j++) tile(t, r0 + r, a, t0 + j, out + r * nt + j, 1, 1);
}

#else /* NEON and portable C: exact integer sums, then the one-row dots' scalar float steps */

/* sum of the products of n (a multiple of 16) codes: unsigned (u) or signed (s) weights */
static inline int dot_u(const uint8_t *q, const int8_t *x, int n) {
#ifdef EM_NEON
    int32x4_t s = vdupq_n_s32(0);
    for (int i = 0; i < n; i += 16) s = em_ndot16(s, vreinterpretq_s8_u8(vld1q_u8(q + i)), vld1q_s8(x + i));
    return vaddvq_s32(s);
#else
    int s = 0;
    for (int i = 0; i < n; i++) s += q[i] * x[i];
    return s;
#endif
}

static inline int dot_s(const int8_t *w, const int8_t *x, int n) {
#ifdef EM_NEON
    int32x4_t s = vdupq_n_s32(0);
    for (int i = 0; i < n; i += 16) s = em_ndot16(s, vld1q_s8(w + i), vld1q_s8(x + i));
    return vaddvq_s32(s);
#else
    int s = 0;
    for (int i = 0; i < n; i++) s += w[i] * x[i];
    return s;
#endif
}

static float super_one(const em_gtile *t, int32_t r, const em_act *a, int32_t m) {
    const int32_t k = t->k, nb = k / 256;
    const uint8_t *q = ROW(t->q, r, k);
    const int16_t *sc = ROW(t->sc, r, k / 2), *mv = ROW(t->mv, r, k / 16);
    const int8_t *x = ROW(a->q256, m, k);
    const int16_t *bs = ROW(a->bsum256, m, k / 16);
    float acc = 0.0f, mins = 0.0f;
    for (int32_t b = 0; b < nb; b++) {
        int sumi = 0, corr = 0;
        for (int g = 0; g < 16; g++) { /* 16 values share a scale */
            const int v = 256 * b + 16 * g;
            sumi += sc[v / 2] * dot_u(q + v, x + v, 16);
            corr += mv[16 * b + g] * bs[16 * b + g];
        }
        const float dx = a->d256[(int64_t)m * nb + b], d = t->d[(int64_t)r * nb + b];
        acc += d * dx * (float)sumi;
        if (t->kind == EM_G_Q6K) /* the codes' +32 */
            mins += d * dx * (float)(32 * corr);
        else
            mins += t->dmin[(int64_t)r * nb + b] * dx * (float)corr;
    }
    return acc - mins;
}

static float b32_one(const em_gtile *t, int32_t r, const em_act *a, int32_t m) {
    const int32_t k = t->k, nb = k / 32;
    const int8_t *w = ROW(t->w, r, k), *x = ROW(a->q32, m, k);
    float acc = 0.0f;
    for (int32_t b = 0; b < nb; b++)
        acc += t->d[(int64_t)r * nb + b] * a->d32[(int64_t)m * nb + b] *
               (float)dot_s(w + 32 * b, x + 32 * b, 32);
    return acc;
}

void em_gemm_tile(const em_gtile *t, int32_t r0, int32_t nr, const em_act *a, int32_t t0,
                  int32_t nt, float *out) {
    for (int32_t r = 0; r < nr; r++)
        for (int32_t j = 0; j < nt; j++)
            out[r * nt + j] = t->kind == EM_G_B32 ? b32_one(t, r0 + r, a, t0 + j)
                                                  : super_one(t, r0 + r, a, t0 + j);
}
#endif
