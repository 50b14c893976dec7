/* GGUF weight rows -> the tiled matmul's decoded form (gemm.h): 8-bit codes, integer scales
 * per 16 values, float block scales; with AVX2 the k-quants' rows interleaved in groups of 8
 * (one 8 x 8 transpose of 4-byte chunks per 32 values). A row block is decoded once per call
 * and then multiplied with every activation row, so this costs a few percent of a
 * prompt-sized product. Block layouts: dot_legacy.c, dot_kquants.c. */
#include <string.h>

#include "gemm.h"
#include "kscales.h"
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

/* one Q4_K/Q5_K block: codes 0..31, sc = the 6-bit scale of each 16 values, mv = its 6-bit min */
static void block_k45(const uint8_t *p, int five, uint8_t *qb, int16_t *sc, int16_t *mv) {
    const uint8_t *qh = p + 16, *qs = p + (five ? 48 : 16);
#ifdef EM_AVX2
    const __m256i hb = five ? em_load32(qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        em_k45_codes(qs, hb, c, five, &lo, &hi);
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
    uint32_t u[4];
    uint8_t six[16]; /* the 8 scales, then the 8 mins (kscales.h) */
    em_k4_scales(p + 4, u);
    memcpy(six, u, 16);
    for (int j = 0; j < 8; j++) {
        sc[2 * j] = sc[2 * j + 1] = six[j];
        mv[2 * j] = mv[2 * j + 1] = six[8 + j];
    }
}

/* one Q6_K block: codes 0..63 (stored + 32), sc = mv = the signed scale of each 16 values */
static void block_q6k(const uint8_t *p, uint8_t *qb, int16_t *sc, int16_t *mv) {
    const uint8_t *ql = p, *qh = p + 128;
    const int8_t *s = (const int8_t *)(p + 192);
#ifdef EM_AVX2
    for (int n = 0; n < 2; n++) {
        __m256i q[4];
        em_q6_codes(ql, qh, n, q);
        for (int t = 0; t < 4; t++) _mm256_storeu_si256((__m256i *)(qb + 128 * n + 32 * t), q[t]);
    }
#else
    for (int n = 0; n < 2; n++) {
        for (int t = 0; t < 4; t++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t lo = ql[64 * n + 32 * (t & 1) + l];
                const uint8_t hi = (uint8_t)((qh[32 * n + l] >> (2 * t)) & 3);
                qb[128 * n + 32 * t + l] = (uint8_t)((t >= 2 ? lo >> 4 : lo & 0x0f) | (hi << 4));
            }
        }
    }
#endif
    for (int g = 0; g < 16; g++) sc[g] = mv[g] = s[g];
}

/* block b of a super row: codes, scales and multipliers per 16, d (and dmin) */
static void block_super(const em_mat *w, const uint8_t *row, int32_t b, uint8_t *qb, int16_t *sc,
                        int16_t *mv, float *d, float *dmin) {
    if (w->type == EM_Q6_K) {
        const uint8_t *p = row + 210 * b;
        block_q6k(p, qb, sc, mv);
        *d = f16(p + 208);
        return;
    }
    const int five = w->type == EM_Q5_K;
    const uint8_t *p = row + (five ? 176 : 144) * b;
    block_k45(p, five, qb, sc, mv);
    *d = f16(p), *dmin = f16(p + 2);
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

#ifdef EM_GEMM_GROUPS
/* the 8 x 8 int32 transpose: v[c] (c = 0..7) becomes dword c of each of the 8 inputs */
static inline void transpose8(__m256i v[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* inputs 0-3 (h = 0), 4-7 */
        u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int c = 0; c < 4; c++) {
        v[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        v[c + 4] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

/* rows [r0, r0 + n) (n <= 8) of a super matrix as group g of t (gemm.h), zero rows past n */
static void group_super(const em_mat *w, int64_t r0, int32_t n, em_gtile *t, int32_t g) {
    const int32_t k = w->cols, nb = k / 256;
    uint8_t *q = t->q + (int64_t)g * 8 * k;
    int16_t *sc = t->sc + (int64_t)g * k, *mv = t->mv + (int64_t)g * (k / 2);
    float *d = t->d + (int64_t)g * (k / 32), *dmin = t->dmin + (int64_t)g * (k / 32);
    _Alignas(32) uint8_t codes[8][256];
    int16_t sc16[8][16], mv16[8][16];
    for (int32_t b = 0; b < nb; b++) {
        for (int r = 0; r < 8; r++) {
            d[8 * b + r] = dmin[8 * b + r] = 0.0f;
            if (r < n)
                block_super(w, w->data + (r0 + r) * w->row_bytes, b, codes[r], sc16[r], mv16[r],
                            &d[8 * b + r], &dmin[8 * b + r]);
            else
                memset(codes[r], 0, 256), memset(sc16[r], 0, 32), memset(mv16[r], 0, 32);
        }
        for (int s = 0; s < 8; s++) { /* 32 values: 8 chunks of 4 values x 8 rows */
            __m256i v[8];
            for (int r = 0; r < 8; r++) v[r] = em_load32(codes[r] + 32 * s);
            transpose8(v);
            for (int c = 0; c < 8; c++)
                _mm256_storeu_si256((__m256i *)(q + 32 * (64 * b + 8 * s + c)), v[c]);
        }
        for (int r = 0; r < 8; r++) {
            for (int j = 0; j < 16; j++) /* the scale of values 16 j .. 16 j + 15 */
                sc[16 * (16 * b + j) + 2 * r] = sc[16 * (16 * b + j) + 2 * r + 1] = sc16[r][j];
            for (int i = 0; i < 8; i++) /* the multipliers of 16-value groups 2 i, 2 i + 1 */
                mv[16 * (8 * b + i) + 2 * r] = mv16[r][2 * i],
                mv[16 * (8 * b + i) + 2 * r + 1] = mv16[r][2 * i + 1];
        }
    }
}
#endif

int em_gemm_grouped(int kind) {
#ifdef EM_GEMM_GROUPS
    return kind == EM_G_K45 || kind == EM_G_Q6K;
#else
    (void)kind;
    return 0;
#endif
}

int64_t em_gemm_row_bytes(int kind, int64_t k) {
    if (kind == EM_G_B32) return 2 * k + k / 8;
    return em_gemm_grouped(kind) ? k + k / 4 + k / 8 + k / 32 : k + k / 4 + k / 32;
}

void em_gemm_decode(const em_mat *w, int64_t r0, int32_t n, em_gtile *t) {
    const int32_t k = w->cols;
    t->kind = em_gemm_kind(w->type), t->k = k, t->rows = n;
#ifdef EM_GEMM_GROUPS
    if (em_gemm_grouped(t->kind)) {
        for (int32_t g = 0; 8 * g < n; g++)
            group_super(w, r0 + 8 * g, n - 8 * g < 8 ? n - 8 * g : 8, t, g);
        return;
    }
#endif
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *row = w->data + (r0 + i) * w->row_bytes;
        uint8_t *q = t->q + (int64_t)i * k;
        if (t->kind == EM_G_B32) {
            row_b32(w->type, row, k, q, t->w + (int64_t)i * k, t->d + (int64_t)i * (k / 32));
            continue;
        }
        for (int32_t b = 0; b < k / 256; b++)
            block_super(w, row, b, q + 256 * b, t->sc + (int64_t)i * (k / 16) + 16 * b,
                        t->mv + (int64_t)i * (k / 16) + 16 * b, t->d + (int64_t)i * (k / 256) + b,
                        t->kind == EM_G_K45 ? t->dmin + (int64_t)i * (k / 256) + b : &(float){0});
    }
}
