/* Half-precision conversions and the 8-bit rounding of activation rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ember_native.h"
#include "simd.h"
#include "team.h"

#if !defined(__F16C__)
float em_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            exp = 113;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
uint16_t em_fp32_to_fp16(float f) {
    /* round to nearest even through float arithmetic on the magnitude */
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint16_t sign = (bits >> 16) & 0x8000;
    float a = fabsf(f);
    if (a >= 65520.0f) return sign | (isnan(f) ? 0x7e00 : 0x7c00);
    if (a < 6.103515625e-05f) { /* subnormal half: multiples of 2^-24 */
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    int e;
    float m = frexpf(a, &e);              /* a = m 2^e, m in [0.5, 1) */
    uint32_t man = (uint32_t)nearbyintf(m * 2048.0f); /* 11 significant bits */
    if (man == 2048) { man = 1024; e++; }
    return sign | (uint16_t)(((e + 14) << 10) | (man - 1024));
}
#endif

int em_act_alloc(em_act *a, const float *x, int64_t ldx, int32_t m, int32_t k, int need32,
                 int need256) {
    memset(a, 0, sizeof(*a));
    a->m = m, a->k = k, a->x = x, a->ldx = ldx;
    size_t n = (size_t)m * (size_t)k;
    if (need32) {
        a->q32 = malloc(n);
        a->d32 = malloc(sizeof(float) * (n / 32 + 1));
        a->s32 = malloc(sizeof(float) * (n / 32 + 1));
        if (!a->q32 || !a->d32 || !a->s32) return -1;
    }
    if (need256) {
        a->q256 = malloc(n);
        a->d256 = malloc(sizeof(float) * (n / 256 + 1));
        a->bsum256 = malloc(sizeof(int16_t) * (n / 16 + 1));
        if (!a->q256 || !a->d256 || !a->bsum256) return -1;
    }
    return 0;
}

void em_act_free(em_act *a) {
    free(a->q32), free(a->d32), free(a->s32), free(a->q256), free(a->d256), free(a->bsum256);
    memset(a, 0, sizeof(*a));
}

#ifdef EM_AVX2
/* |x| of 8 floats, their max, and round(x * id) as int32 (the default rounding mode, as
 * nearbyintf: to nearest, ties to even) */
static inline __m256 abs8(const float *x) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x));
}

static inline float max8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* 32 int32 codes (4 vectors, in order) -> 32 int8 at q */
static inline void store32(__m256i a, __m256i b, __m256i c, __m256i d, int8_t *q) {
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256((__m256i *)q,
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}
#endif

/* the largest |x[j]| of n (a multiple of 8); max ignores NaN like fmaxf, and so does the
 * comparison below (a NaN never compares greater) */
static inline float abs_max(const float *x, int n) {
#ifdef EM_AVX2
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) m = _mm256_max_ps(abs8(x + j), m); /* m, not NaN, if x is */
    return max8(m);
#else
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    return amax;
#endif
}

/* q8_0: per 32 values, d = max|x| / 127 (kept at half precision, as llama.cpp stores it),
 * q = round(x / d); s = d * sum(q). */
static void quantize_row_32(const float *x, int32_t k, float *d, float *s, int8_t *q) {
    for (int32_t b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        const float amax = abs_max(xb, 32);
        float db = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
#ifdef EM_AVX2
        const __m256 vid = _mm256_set1_ps(id);
        __m256i v[4];
        for (int j = 0; j < 4; j++) v[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * j), vid));
        store32(v[0], v[1], v[2], v[3], q + 32 * b);
        sum = em_hsum_i32(_mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3])));
#else
        for (int j = 0; j < 32; j++) {
            int v = (int)nearbyintf(xb[j] * id);
            q[32 * b + j] = (int8_t)v;
            sum += v;
        }
#endif
        d[b] = em_fp16_to_fp32(em_fp32_to_fp16(db));
        s[b] = d[b] * (float)sum;
    }
}

/* q8_K: per 256 values, d = max|x| / 127 in float32, q = round(x / d); sums of q per 16. */
static void quantize_row_256(const float *x, int32_t k, float *d, int16_t *bsum, int8_t *q) {
    for (int32_t b = 0; b < k / 256; b++) {
        const float *xb = x + 256 * b;
        const float amax = abs_max(xb, 256);
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        d[b] = amax / 127.0f;
#ifdef EM_AVX2
        const __m256 vid = _mm256_set1_ps(id);
        const __m256i hi = _mm256_set1_epi32(127), lo = _mm256_set1_epi32(-127);
        for (int g = 0; g < 16; g += 2) {
            __m256i v[4];
            for (int j = 0; j < 4; j++) {
                const __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 16 * g + 8 * j), vid));
                v[j] = _mm256_max_epi32(_mm256_min_epi32(r, hi), lo);
            }
            store32(v[0], v[1], v[2], v[3], q + 256 * b + 16 * g);
            bsum[16 * b + g] = (int16_t)em_hsum_i32(_mm256_add_epi32(v[0], v[1]));
            bsum[16 * b + g + 1] = (int16_t)em_hsum_i32(_mm256_add_epi32(v[2], v[3]));
        }
#else
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 16 * g; j < 16 * g + 16; j++) {
                int v = (int)nearbyintf(xb[j] * id);
                if (v > 127) v = 127;
                if (v < -127) v = -127;
                q[256 * b + j] = (int8_t)v;
                sum += v;
            }
            bsum[16 * b + g] = (int16_t)sum;
        }
#endif
    }
}

void em_act_quantize_rows(em_act *a, int need32, int need256, em_team *T) {
    int32_t k = a->k;
    EM_PAR_FOR(T, i, a->m) {
        const float *x = a->x + (int64_t)i * a->ldx;
        if (need32)
            quantize_row_32(x, k, a->d32 + (size_t)i * (k / 32), a->s32 + (size_t)i * (k / 32),
                            a->q32 + (size_t)i * k);
        if (need256)
            quantize_row_256(x, k, a->d256 + (size_t)i * (k / 256),
                             a->bsum256 + (size_t)i * (k / 16), a->q256 + (size_t)i * k);
    }
}
