/* GGUF weight rows -> the tiled matmul's decoded form (gemm.h): 8-bit codes, integer scales
 * per pair of values, float block scales. Plain loops the compiler vectorizes; a row block is
 * decoded once per call and then multiplied with every activation row, so this costs a few
 * percent of a prompt-sized product. Block layouts: dot_legacy.c, dot_kquants.c. */
#include <string.h>

#include "gemm.h"
#include "simd.h"

static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return em_fp16_to_fp32(h);
}

int em_gemm_kind(int32_t type) {
    switch (type) {
    case EM_Q4_K: case EM_Q5_K: return EM_G_K45;
    case EM_Q6_K: return EM_G_Q6K;
    case EM_Q4_0: case EM_Q5_0: case EM_Q8_0: return EM_G_B32;
    default: return EM_G_NONE;
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

/* Q4_K / Q5_K: codes 0..31, sc = the 6-bit scale of each 32, mv = its 6-bit min */
static void row_k45(const uint8_t *row, int32_t k, int five, uint8_t *q, int16_t *sc,
                    int16_t *mv, float *d, float *dmin) {
    const int bytes = five ? 176 : 144;
    for (int32_t b = 0; b < k / 256; b++) {
        const uint8_t *p = row + bytes * b, *qh = p + 16, *qs = p + (five ? 48 : 16);
        uint8_t *qb = q + 256 * b;
        d[b] = f16(p), dmin[b] = f16(p + 2);
#ifdef EM_AVX2
        const __m256i low4 = _mm256_set1_epi8(0x0f), one8 = _mm256_set1_epi8(1);
        const __m256i hb = five ? em_load32(qh) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i q4 = em_load32(qs + 32 * c);
            __m256i lo = _mm256_and_si256(q4, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
            if (five) {
                const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), one8);
                const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), one8);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(h0, 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(h1, 4));
            }
            _mm256_storeu_si256((__m256i *)(qb + 64 * c), lo);
            _mm256_storeu_si256((__m256i *)(qb + 64 * c + 32), hi);
        }
#else
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t v = qs[32 * c + l], h = five ? qh[l] : 0;
                qb[64 * c + l] = (uint8_t)((v & 0x0f) | (((h >> (2 * c)) & 1) << 4));
                qb[64 * c + 32 + l] = (uint8_t)((v >> 4) | (((h >> (2 * c + 1)) & 1) << 4));
            }
        }
#endif
        for (int j = 0; j < 8; j++) {
            int s, m;
            scale_min(j, p + 4, &s, &m);
            for (int i = 0; i < 16; i++) sc[128 * b + 16 * j + i] = (int16_t)s;
            mv[16 * b + 2 * j] = mv[16 * b + 2 * j + 1] = (int16_t)m;
        }
    }
}

/* Q6_K: codes 0..63 (stored + 32), sc = the signed scale of each 16, mv = sc (for the offset) */
static void row_q6k(const uint8_t *row, int32_t k, uint8_t *q, int16_t *sc, int16_t *mv,
                    float *d) {
    for (int32_t b = 0; b < k / 256; b++) {
        const uint8_t *p = row + 210 * b, *ql = p, *qh = p + 128;
        const int8_t *s = (const int8_t *)(p + 192);
        uint8_t *qb = q + 256 * b;
        d[b] = f16(p + 208);
#ifdef EM_AVX2
        const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
        for (int n = 0; n < 2; n++) {
            const __m256i l0 = em_load32(ql + 64 * n), l1 = em_load32(ql + 64 * n + 32);
            const __m256i h = em_load32(qh + 32 * n);
            const __m256i lows[4] = {
                _mm256_and_si256(l0, low4), _mm256_and_si256(l1, low4),
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                _mm256_and_si256(_mm256_srli_epi16(l1, 4), low4)};
            for (int t = 0; t < 4; t++) {
                const __m256i hs = _mm256_and_si256(_mm256_srli_epi16(h, 2 * t), three);
                _mm256_storeu_si256((__m256i *)(qb + 128 * n + 32 * t),
                                    _mm256_or_si256(lows[t], _mm256_slli_epi16(hs, 4)));
            }
        }
        for (int j = 0; j < 8; j++)
            _mm256_storeu_si256((__m256i *)(sc + 128 * b + 16 * j),
                                _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_set1_epi16(s[2 * j])),
                                                        _mm_set1_epi16(s[2 * j + 1]), 1));
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)s));
        _mm256_storeu_si256((__m256i *)(mv + 16 * b), s16);
#else
        for (int n = 0; n < 2; n++) {
            for (int t = 0; t < 4; t++) {
                for (int l = 0; l < 32; l++) {
                    const uint8_t lo = ql[64 * n + 32 * (t & 1) + l];
                    const uint8_t hi = (uint8_t)((qh[32 * n + l] >> (2 * t)) & 3);
                    qb[128 * n + 32 * t + l] =
                        (uint8_t)((t >= 2 ? lo >> 4 : lo & 0x0f) | (hi << 4));
                }
            }
        }
        for (int g = 0; g < 16; g++) {
            for (int i = 0; i < 8; i++) sc[128 * b + 8 * g + i] = s[g];
            mv[16 * b + g] = s[g];
        }
#endif
    }
}

/* Q4_0, Q5_0, Q8_0: signed codes (offset removed) and their magnitudes */
static void row_b32(int32_t type, const uint8_t *row, int32_t k, uint8_t *mag, int8_t *w,
                    float *d) {
    const int bytes = type == EM_Q8_0 ? 34 : type == EM_Q4_0 ? 18 : 22;
    for (int32_t b = 0; b < k / 32; b++) {
        const uint8_t *p = row + bytes * b;
        int8_t *wb = w + 32 * b;
        d[b] = f16(p);
#ifdef EM_AVX2
        __m256i v;
        if (type == EM_Q8_0) {
            v = em_load32(p + 2);
        } else {
            const int five = type == EM_Q5_0;
            v = em_nibbles32(p + (five ? 6 : 2));
            if (five) v = _mm256_or_si256(v, _mm256_and_si256(em_bits32(p + 2), _mm256_set1_epi8(0x10)));
            v = _mm256_sub_epi8(v, _mm256_set1_epi8(five ? 16 : 8));
        }
        _mm256_storeu_si256((__m256i *)wb, v);
        _mm256_storeu_si256((__m256i *)(mag + 32 * b), _mm256_abs_epi8(v));
        continue;
#endif
        if (type == EM_Q8_0) {
            memcpy(wb, p + 2, 32);
        } else {
            const int five = type == EM_Q5_0, off = five ? 16 : 8;
            const uint8_t *qs = p + (five ? 6 : 2);
            uint32_t h = 0;
            if (five) memcpy(&h, p + 2, 4);
            for (int j = 0; j < 16; j++) {
                wb[j] = (int8_t)(((qs[j] & 0x0f) | (((h >> j) & 1) << 4)) - off);
                wb[j + 16] = (int8_t)(((qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)) - off);
            }
        }
        for (int j = 0; j < 32; j++) mag[32 * b + j] = (uint8_t)(wb[j] < 0 ? -wb[j] : wb[j]);
    }
}

void em_gemm_decode(const em_mat *w, int64_t r0, int32_t n, em_gtile *t) {
    const int32_t k = w->cols;
    t->kind = em_gemm_kind(w->type), t->k = k, t->rows = n;
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *row = w->data + (r0 + i) * w->row_bytes;
        uint8_t *q = t->q + (int64_t)i * k;
        if (t->kind == EM_G_B32) {
            row_b32(w->type, row, k, q, t->w + (int64_t)i * k, t->d + (int64_t)i * (k / 32));
            continue;
        }
        int16_t *sc = t->sc + (int64_t)i * (k / 2), *mv = t->mv + (int64_t)i * (k / 16);
        float *d = t->d + (int64_t)i * (k / 256);
        if (t->kind == EM_G_Q6K)
            row_q6k(row, k, q, sc, mv, d);
        else
            row_k45(row, k, w->type == EM_Q5_K, q, sc, mv, d, t->dmin + (int64_t)i * (k / 256));
    }
}
