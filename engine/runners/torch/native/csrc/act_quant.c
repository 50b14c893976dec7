/* Half-precision conversions and the 8-bit rounding of activation rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ember_native.h"
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

/* q8_0: per 32 values, d = max|x| / 127 (kept at half precision, as llama.cpp stores it),
 * q = round(x / d); s = d * sum(q). */
static void quantize_row_32(const float *x, int32_t k, float *d, float *s, int8_t *q) {
    for (int32_t b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float db = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int v = (int)nearbyintf(xb[j] * id);
            q[32 * b + j] = (int8_t)v;
            sum += v;
        }
        d[b] = em_fp16_to_fp32(em_fp32_to_fp16(db));
        s[b] = d[b] * (float)sum;
    }
}

/* q8_K: per 256 values, d = max|x| / 127 in float32, q = round(x / d); sums of q per 16. */
static void quantize_row_256(const float *x, int32_t k, float *d, int16_t *bsum, int8_t *q) {
    for (int32_t b = 0; b < k / 256; b++) {
        const float *xb = x + 256 * b;
        float amax = 0.0f;
        for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        d[b] = amax / 127.0f;
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
