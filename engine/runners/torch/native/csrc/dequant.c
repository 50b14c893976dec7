/* GGUF rows -> float32, with the float operations in the order of gguf.quants' reference
 * dequantizers (so results are bit-identical; this file is compiled without FMA contraction).
 * Block layouts: see dot_legacy.c and dot_kquants.c. */
#include <omp.h>
#include <string.h>

#include "ember_native.h"

static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return em_fp16_to_fp32(h);
}

/* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 */
static void row_legacy(int32_t type, const uint8_t *row, float *out, int32_t cols) {
    for (int32_t b = 0; b < cols / 32; b++) {
        float *y = out + 32 * b;
        if (type == EM_Q8_0) {
            const uint8_t *p = row + 34 * b;
            const float d = f16(p);
            for (int j = 0; j < 32; j++) y[j] = d * (float)((const int8_t *)(p + 2))[j];
            continue;
        }
        const int has_min = type == EM_Q4_1 || type == EM_Q5_1;
        const int has_qh = type == EM_Q5_0 || type == EM_Q5_1;
        const int bytes = type == EM_Q4_0 ? 18 : type == EM_Q4_1 ? 20 : type == EM_Q5_0 ? 22 : 24;
        const uint8_t *p = row + bytes * b;
        const float d = f16(p), m = has_min ? f16(p + 2) : 0.0f;
        const uint8_t *qh = p + (has_min ? 4 : 2), *qs = qh + (has_qh ? 4 : 0);
        uint32_t h = 0;
        if (has_qh) memcpy(&h, qh, 4);
        for (int j = 0; j < 16; j++) {
            int q0 = (qs[j] & 0x0f) | (has_qh ? (int)((h >> j) & 1) << 4 : 0);
            int q1 = (qs[j] >> 4) | (has_qh ? (int)((h >> (j + 16)) & 1) << 4 : 0);
            if (has_min) {
                y[j] = d * (float)q0 + m, y[j + 16] = d * (float)q1 + m;
            } else {
                const int off = has_qh ? 16 : 8;
                y[j] = d * (float)(q0 - off), y[j + 16] = d * (float)(q1 - off);
            }
        }
    }
}

static inline void scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63, *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void row_k45(const uint8_t *row, float *out, int32_t cols, int five) {
    const int bytes = five ? 176 : 144;
    for (int32_t b = 0; b < cols / 256; b++) {
        const uint8_t *p = row + bytes * b, *qh = p + 16, *qs = p + (five ? 48 : 16);
        const float d = f16(p), dmin = f16(p + 2);
        for (int s = 0; s < 8; s++) {
            int sc, mn;
            scale_min(s, p + 4, &sc, &mn);
            const float dl = d * (float)sc, ml = dmin * (float)mn;
            const int c = s / 2, shift = (s & 1) * 4;
            float *y = out + 256 * b + 32 * s;
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * c + l] >> shift) & 0x0f;
                if (five) q |= ((qh[l] >> s) & 1) << 4;
                y[l] = dl * (float)q - ml;
            }
        }
    }
}

static void row_q6_k(const uint8_t *row, float *out, int32_t cols) {
    for (int32_t b = 0; b < cols / 256; b++) {
        const uint8_t *p = row + 210 * b, *ql = p, *qh = p + 128;
        const int8_t *sc = (const int8_t *)(p + 192);
        const float d = f16(p + 208);
        for (int n = 0; n < 2; n++) {
            for (int s = 0; s < 4; s++) {
                /* 16 values share a scale: one straight loop each, which the compiler vectorizes
                 * (the per-value scale index and nibble choice kept it scalar: 5x slower) */
                const uint8_t *lo = ql + 64 * n + 32 * (s & 1), *hi = qh + 32 * n;
                const int lo_shift = s >= 2 ? 4 : 0, hi_shift = 2 * s;
                float *y = out + 256 * b + 128 * n + 32 * s;
                for (int half = 0; half < 2; half++) {
                    const float dl = d * (float)sc[8 * n + 2 * s + half];
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        int q = ((lo[l] >> lo_shift) & 0x0f) | (((hi[l] >> hi_shift) & 3) << 4);
                        y[l] = dl * (float)(q - 32);
                    }
                }
            }
        }
    }
}

void em_dequant_row(int32_t type, const uint8_t *row, float *out, int32_t cols) {
    switch (type) {
    case EM_F32: memcpy(out, row, sizeof(float) * (size_t)cols); return;
    case EM_F16:
        for (int32_t j = 0; j < cols; j++) out[j] = f16(row + 2 * j);
        return;
    case EM_BF16:
        for (int32_t j = 0; j < cols; j++) {
            uint32_t bits = (uint32_t)(row[2 * j] | (row[2 * j + 1] << 8)) << 16;
            memcpy(out + j, &bits, 4);
        }
        return;
    case EM_Q4_K: row_k45(row, out, cols, 0); return;
    case EM_Q5_K: row_k45(row, out, cols, 1); return;
    case EM_Q6_K: row_q6_k(row, out, cols); return;
    default: row_legacy(type, row, out, cols); return;
    }
}

void em_dequant_rows(const em_mat *w, int64_t row0, int64_t n_rows, float *out,
                     int32_t n_threads) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t r = 0; r < n_rows; r++)
        em_dequant_row(w->type, w->data + (row0 + r) * w->row_bytes, out + r * w->cols, w->cols);
}

/* bfloat16 of a float32, rounded to nearest even (torch's float32 -> bfloat16; no NaNs here) */
static inline uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
/* bf16_of on 16 lanes */
static inline void store_bf16x16(uint16_t *y, __m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd));
    _mm256_storeu_si256((__m256i *)y, _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
}

/* 16 small unsigned bytes -> float (exact) */
static inline __m512 floats_of(__m128i q) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)); }

/* Q4_K rows straight to bfloat16: row_k45's float operations per lane (a product, then a
 * difference; no FMA), so each value is row_k45's, rounded as bf16_of rounds it */
static void q4_k_bf16(const uint8_t *row, uint16_t *out, int32_t cols) {
    const __m128i low4 = _mm_set1_epi8(0x0f);
    for (int32_t b = 0; b < cols / 256; b++) {
        const uint8_t *p = row + 144 * b, *qs = p + 16;
        const float d = f16(p), dmin = f16(p + 2);
        for (int s = 0; s < 8; s++) {
            int sc, mn;
            scale_min(s, p + 4, &sc, &mn);
            const __m512 dl = _mm512_set1_ps(d * (float)sc), ml = _mm512_set1_ps(dmin * (float)mn);
            for (int h = 0; h < 2; h++) {
                __m128i q = _mm_loadu_si128((const __m128i *)(qs + 32 * (s / 2) + 16 * h));
                q = _mm_and_si128(s & 1 ? _mm_srli_epi16(q, 4) : q, low4);
                const __m512 y = _mm512_sub_ps(_mm512_mul_ps(dl, floats_of(q)), ml);
                store_bf16x16(out + 256 * b + 32 * s + 16 * h, y);
            }
        }
    }
}

/* Q6_K rows straight to bfloat16, row_q6_k's operations per lane */
static void q6_k_bf16(const uint8_t *row, uint16_t *out, int32_t cols) {
    const __m128i low4 = _mm_set1_epi8(0x0f), low2 = _mm_set1_epi8(3);
    const __m512i bias = _mm512_set1_epi32(32);
    for (int32_t b = 0; b < cols / 256; b++) {
        const uint8_t *p = row + 210 * b, *ql = p, *qh = p + 128;
        const int8_t *sc = (const int8_t *)(p + 192);
        const float d = f16(p + 208);
        for (int n = 0; n < 2; n++) {
            for (int s = 0; s < 4; s++) {
                const uint8_t *lo = ql + 64 * n + 32 * (s & 1), *hi = qh + 32 * n;
                for (int h = 0; h < 2; h++) {
                    __m128i l4 = _mm_loadu_si128((const __m128i *)(lo + 16 * h));
                    __m128i h2 = _mm_loadu_si128((const __m128i *)(hi + 16 * h));
                    l4 = _mm_and_si128(s >= 2 ? _mm_srli_epi16(l4, 4) : l4, low4);
                    h2 = _mm_slli_epi16(_mm_and_si128(_mm_srl_epi16(h2, _mm_cvtsi32_si128(2 * s)), low2), 4);
                    const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_or_si128(l4, h2)), bias);
                    const __m512 dl = _mm512_set1_ps(d * (float)sc[8 * n + 2 * s + h]);
                    store_bf16x16(out + 256 * b + 128 * n + 32 * s + 16 * h,
                                  _mm512_mul_ps(dl, _mm512_cvtepi32_ps(q)));
                }
            }
        }
    }
}
#endif

/* Rows as bfloat16 (the bf16 prefill path): each row dequantized to float32 as above, then
 * rounded (Q4_K and Q6_K straight to bfloat16 with AVX-512, the same values). `scratch` holds
 * one float32 row per thread (n_threads * cols floats). */
void em_dequant_rows_bf16(const em_mat *w, int64_t row0, int64_t n_rows, uint16_t *out,
                          float *scratch, int32_t n_threads) {
#pragma omp parallel num_threads(n_threads)
    {
        float *row = scratch + (int64_t)omp_get_thread_num() * w->cols;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) {
            const uint8_t *src = w->data + (row0 + r) * w->row_bytes;
            uint16_t *y = out + r * w->cols;
#if defined(__AVX512F__) && defined(__AVX512BW__)
            if (w->type == EM_Q4_K) {
                q4_k_bf16(src, y, w->cols);
                continue;
            }
            if (w->type == EM_Q6_K) {
                q6_k_bf16(src, y, w->cols);
                continue;
            }
#endif
            em_dequant_row(w->type, src, row, w->cols);
            for (int32_t j = 0; j < w->cols; j++) y[j] = bf16_of(row[j]);
        }
    }
}

void em_gather_rows(const em_mat *w, const int32_t *ids, int32_t n, float *out, float scale) {
    for (int32_t i = 0; i < n; i++) {
        float *y = out + (int64_t)i * w->cols;
        em_dequant_row(w->type, w->data + (int64_t)ids[i] * w->row_bytes, y, w->cols);
        if (scale != 1.0f)
            for (int32_t j = 0; j < w->cols; j++) y[j] *= scale;
    }
}
