/* The tiled matmul's micro-kernels (gemm.h) and the loop over a decoded tile.
 *
 * AVX2 (and the AVX-512 build, EVEX-encoded), k-quants: 8 interleaved weight rows x 4
 * activation rows per call. One 32-byte load holds 4 values of each of the 8 rows; the
 * activation row's same 4 codes, broadcast, multiply it (maddubs: u8 x s8 -> int16 pair
 * sums), so lane r holds row r's sums. The 4 loads of 16 values that share a scale add in
 * int16 (Q6_K's larger codes: 2 at a time) before one madd with the scales into int32;
 * per 256-block the exact integers S (and C, the activations' code sums times the
 * multipliers) meet the float steps of the one-row dot (dot_kquants.c), in the same order,
 * so the results are its bit for bit.
 * AVX2, Q4_0/Q5_0/Q8_0: 2 row-major weight rows x 4 activation rows; each 32 codes of a row
 * loaded once, per block the one-row dot's (dot_legacy.c) 8 lanes and float steps.
 * NEON and portable C: per (row, token) the exact integer sums of their one-row dots and the
 * same scalar float steps.
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

/* acc + the int16 pairs p times the int16 scales s, summed in pairs (exact int32) */
ALWAYS __m256i madd_add(__m256i acc, __m256i p, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, p, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, p, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
}

ALWAYS __m256i bcast4(const void *p) { /* 4 bytes into every 32-bit lane */
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* group g's 8 rows (gemm.h) x activation rows t0 .. t0 + NT - 1: out[8 j + r] */
ALWAYS void group_tile(const em_gtile *t, int32_t g, const em_act *a, int32_t t0, float *out,
                       const int NT, const int q6) {
    const int32_t k = t->k, nb = k / 256;
    const uint8_t *q = t->q + (int64_t)g * 8 * k;
    const int16_t *sc = t->sc + (int64_t)g * k, *mv = t->mv + (int64_t)g * (k / 2);
    const float *dw = t->d + (int64_t)g * (k / 32), *dmw = t->dmin + (int64_t)g * (k / 32);
    __m256 acc[4], mins[4]; /* the scales' and the mins' sums (dot_kquants.c) */
    for (int j = 0; j < NT; j++) acc[j] = mins[j] = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; b++) {
        __m256i sum[4];
        for (int j = 0; j < NT; j++) sum[j] = _mm256_setzero_si256();
#pragma GCC unroll 1
        for (int gi = 0; gi < 16; gi++) { /* 16 values with one scale per row */
            const int32_t v0 = 256 * b + 16 * gi;
            const uint8_t *qg = q + 8 * v0;
            const __m256i s = em_load32(sc + 16 * (v0 / 16));
            for (int half = 0; half < (q6 ? 2 : 1); half++) {
                __m256i p[4];
                for (int c = 0; c < (q6 ? 2 : 4); c++) { /* 4 values of the 8 rows */
                    const int cc = (q6 ? 2 * half : 0) + c;
                    const __m256i w = em_load32(qg + 32 * cc);
                    for (int j = 0; j < NT; j++) {
                        const __m256i x = bcast4(a->q256 + (int64_t)(t0 + j) * k + v0 + 4 * cc);
                        const __m256i pr = _mm256_maddubs_epi16(w, x);
                        p[j] = c ? _mm256_add_epi16(p[j], pr) : pr;
                    }
                }
                for (int j = 0; j < NT; j++) sum[j] = madd_add(sum[j], p[j], s);
            }
        }
        const __m256 d = _mm256_loadu_ps(dw + 8 * b);
        for (int j = 0; j < NT; j++) {
            const int16_t *bs = a->bsum256 + (int64_t)(t0 + j) * (k / 16) + 16 * b;
            __m256i c = _mm256_setzero_si256(); /* C: per row, the multipliers x code sums */
            for (int i = 0; i < 8; i++) c = madd_add(c, em_load32(mv + 16 * (8 * b + i)), bcast4(bs + 2 * i));
            const __m256 dx = _mm256_set1_ps(a->d256[(int64_t)(t0 + j) * nb + b]);
            if (q6) { /* the codes' +32: S - 32 C, exact */
                const __m256i s32 = _mm256_sub_epi32(sum[j], _mm256_slli_epi32(c, 5));
                acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(s32), acc[j]);
            } else {
                const __m256 dmin = _mm256_loadu_ps(dmw + 8 * b);
                acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum[j]), acc[j]);
                mins[j] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(c), mins[j]);
            }
        }
    }
    for (int j = 0; j < NT; j++) _mm256_storeu_ps(out + 8 * j, _mm256_add_ps(acc[j], mins[j]));
}

static void group_call(const em_gtile *t, int32_t g, const em_act *a, int32_t t0, int32_t nt,
                       float *out) {
    const int q6 = t->kind == EM_G_Q6K;
    switch (nt + 4 * q6) {
    case 1: return group_tile(t, g, a, t0, out, 1, 0);
    case 2: return group_tile(t, g, a, t0, out, 2, 0);
    case 3: return group_tile(t, g, a, t0, out, 3, 0);
    case 4: return group_tile(t, g, a, t0, out, 4, 0);
    case 5: return group_tile(t, g, a, t0, out, 1, 1);
    case 6: return group_tile(t, g, a, t0, out, 2, 1);
    case 7: return group_tile(t, g, a, t0, out, 3, 1);
    default: return group_tile(t, g, a, t0, out, 4, 1);
    }
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

/* out[i nt + j] = row r0 + i . activation row t0 + j, for i < nr <= 2, j < nt <= 4 */
static void row_tile(const em_gtile *t, int32_t r0, int32_t nr, const em_act *a, int32_t t0,
                     int32_t nt, float *out) {
    if (nr == 2 && nt == 4) return b32_tile(t, r0, a, t0, out, 2, 4);
    if (nr == 1 && nt == 4) return b32_tile(t, r0, a, t0, out, 1, 4);
    for (int32_t r = 0; r < nr; r++)
        for (int32_t j = 0; j < nt; j++) b32_tile(t, r0 + r, a, t0 + j, out + r * nt + j, 1, 1);
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
    const int16_t *sc = ROW(t->sc, r, k / 16), *mv = ROW(t->mv, r, k / 16);
    const int8_t *x = ROW(a->q256, m, k);
    const int16_t *bs = ROW(a->bsum256, m, k / 16);
    float acc = 0.0f, mins = 0.0f;
    for (int32_t b = 0; b < nb; b++) {
        int sumi = 0, corr = 0;
        for (int g = 0; g < 16; g++) { /* 16 values share a scale */
            const int v = 256 * b + 16 * g;
            sumi += sc[v / 16] * dot_u(q + v, x + v, 16);
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

static void row_tile(const em_gtile *t, int32_t r0, int32_t nr, const em_act *a, int32_t t0,
                     int32_t nt, float *out) {
    for (int32_t r = 0; r < nr; r++)
        for (int32_t j = 0; j < nt; j++)
            out[r * nt + j] = t->kind == EM_G_B32 ? b32_one(t, r0 + r, a, t0 + j)
                                                  : super_one(t, r0 + r, a, t0 + j);
}
#endif

/* out[i][j] (strides: rs per row, ts per token) into y, bias added, columns mapped (gemm.h) */
static void put(float *y, int64_t ldy, int32_t p, const float *out, int32_t nr, int32_t nt,
                int rs, int ts, int64_t row, const int32_t *map, const float *bias) {
    for (int32_t i = 0; i < nr; i++) {
        const int64_t rr = row + i, col = map ? map[rr] : rr;
        for (int32_t j = 0; j < nt; j++) {
            const float v = out[i * rs + j * ts];
            y[(int64_t)(p + j) * ldy + col] = bias ? v + bias[rr] : v;
        }
    }
}

void em_gemm_times(const em_gtile *t, const em_act *a, int32_t p0, int32_t p1, float *y,
                   int64_t ldy, int64_t row0, const int32_t *map, const float *bias) {
    float out[4 * EM_GROUP_ROWS];
    for (int32_t p = p0; p < p1; p += 4) { /* the activation tile stays in L1 */
        const int32_t nt = p1 - p < 4 ? p1 - p : 4;
#ifdef EM_GEMM_GROUPS
        if (em_gemm_grouped(t->kind)) {
            for (int32_t g = 0; 8 * g < t->rows; g++) {
                group_call(t, g, a, p, nt, out);
                const int32_t nr = t->rows - 8 * g < 8 ? t->rows - 8 * g : 8;
                put(y, ldy, p, out, nr, nt, 1, 8, row0 + 8 * g, map, bias);
            }
            continue;
        }
#endif
        for (int32_t r = 0; r < t->rows; r += 2) {
            const int32_t nr = t->rows - r < 2 ? t->rows - r : 2;
            row_tile(t, r, nr, a, p, nt, out);
            put(y, ldy, p, out, nr, nt, nt, 1, row0 + r, map, bias);
        }
    }
}
