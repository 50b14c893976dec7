/* Decode attention over paged KV pools, split over key chunks (the partial softmaxes are merged
 * afterwards), and the KV pool element conversions.
 *
 * Pools are (num_blocks, block_size, n_kv, head_dim); cache index j of a sequence lives in slot
 * blocks[j / block_size] * block_size + j % block_size. int8 pools keep one float scale per
 * (slot, kv head): x = scale * q.
 */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "simd.h"

static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even, as torch does */
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40); /* NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* one head row of a pool as float32 */
void em_kv_load(const void *pool, const float *scales, int32_t kv_type, int64_t row, int32_t d,
                float *out) {
    switch (kv_type) {
    case EM_KV_F32: memcpy(out, (const float *)pool + row * d, sizeof(float) * (size_t)d); return;
    case EM_KV_BF16: {
        const uint16_t *p = (const uint16_t *)pool + row * d;
        for (int32_t i = 0; i < d; i++) out[i] = bf16_to_f32(p[i]);
        return;
    }
    case EM_KV_F16: {
        const uint16_t *p = (const uint16_t *)pool + row * d;
        int32_t i = 0;
#if defined(EM_AVX2) && defined(__F16C__)
        for (; i + 8 <= d; i += 8)
            _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
#endif
        for (; i < d; i++) out[i] = em_fp16_to_fp32(p[i]);
        return;
    }
    default: {
        const int8_t *p = (const int8_t *)pool + row * d;
        const float s = scales[row];
        for (int32_t i = 0; i < d; i++) out[i] = s * (float)p[i];
    }
    }
}

void em_kv_store(void *pool, float *scales, int32_t kv_type, int64_t row, int32_t d,
                 const float *x) {
    switch (kv_type) {
    case EM_KV_F32: memcpy((float *)pool + row * d, x, sizeof(float) * (size_t)d); return;
    case EM_KV_BF16: {
        uint16_t *p = (uint16_t *)pool + row * d;
        for (int32_t i = 0; i < d; i++) p[i] = f32_to_bf16(x[i]);
        return;
    }
    case EM_KV_F16: {
        uint16_t *p = (uint16_t *)pool + row * d;
        int32_t i = 0;
#if defined(EM_AVX2) && defined(__F16C__)
        for (; i + 8 <= d; i += 8)
            _mm_storeu_si128((__m128i *)(p + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0));
#endif
        for (; i < d; i++) p[i] = em_fp32_to_fp16(x[i]);
        return;
    }
    default: { /* symmetric int8 per head row: scale = max|x| / 127 */
        int8_t *p = (int8_t *)pool + row * d;
        float amax = 0.0f;
        for (int32_t i = 0; i < d; i++) amax = fmaxf(amax, fabsf(x[i]));
        const float s = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int32_t i = 0; i < d; i++) p[i] = (int8_t)nearbyintf(x[i] * inv);
        scales[row] = s;
    }
    }
}

static inline float dot(const float *a, const float *b, int32_t n) {
    int32_t i = 0;
    float s = 0.0f;
#ifdef EM_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    s = em_hsum(acc);
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline void axpy(float *y, float p, const float *x, int32_t n) {
    int32_t i = 0;
#ifdef EM_AVX2
    const __m256 pv = _mm256_set1_ps(p);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] += p * x[i];
}

/* Keys [k0, k1) of one token's sequence for the g query heads of one KV head: the chunk's
 * max score, sum of exp(score - max) and the exp-weighted sum of values per query head. */
void em_attend_chunk(const em_attn_args *A, int32_t t, int32_t kvh, int32_t k0, int32_t k1,
                     float *part /* g * (2 + D) */, float *scores /* g * chunk */,
                     float *row /* D */) {
    const int32_t g = A->group, d = A->head_dim, n = k1 - k0, bs = A->block_size;
    const float *q = A->q + (int64_t)t * A->q_stride + (int64_t)kvh * g * d;
    const int32_t *blocks = A->blocks + A->table[t];
    for (int32_t j = 0; j < n; j++) {
        const int32_t idx = k0 + j;
        const int64_t slot = (int64_t)blocks[idx / bs] * bs + idx % bs;
        em_kv_load(A->k_pool, A->k_scale, A->kv_type, slot * A->n_kv + kvh, d, row);
        for (int32_t h = 0; h < g; h++) {
            float s = dot(q + (int64_t)h * d, row, d) * A->scale;
            if (A->softcap > 0.0f) s = A->softcap * tanhf(s / A->softcap);
            scores[(int64_t)h * n + j] = s;
        }
    }
    for (int32_t h = 0; h < g; h++) {
        float *sc = scores + (int64_t)h * n, mx = -INFINITY, sum = 0.0f;
        for (int32_t j = 0; j < n; j++) mx = fmaxf(mx, sc[j]);
        for (int32_t j = 0; j < n; j++) sum += (sc[j] = expf(sc[j] - mx));
        float *p = part + (int64_t)h * (2 + d);
        p[0] = mx, p[1] = sum;
        memset(p + 2, 0, sizeof(float) * (size_t)d);
    }
    for (int32_t j = 0; j < n; j++) {
        const int32_t idx = k0 + j;
        const int64_t slot = (int64_t)blocks[idx / bs] * bs + idx % bs;
        em_kv_load(A->v_pool, A->v_scale, A->kv_type, slot * A->n_kv + kvh, d, row);
        for (int32_t h = 0; h < g; h++)
            axpy(part + (int64_t)h * (2 + d) + 2, scores[(int64_t)h * n + j], row, d);
    }
}

/* softmax-merge n_chunks partials of one (token, KV head) into the g output heads */
void em_attend_merge(const em_attn_args *A, const float *parts, int32_t n_chunks, float *out) {
    const int32_t g = A->group, d = A->head_dim, stride = g * (2 + d);
    for (int32_t h = 0; h < g; h++) {
        float mx = -INFINITY, total = 0.0f;
        for (int32_t c = 0; c < n_chunks; c++) mx = fmaxf(mx, parts[c * stride + h * (2 + d)]);
        float *o = out + (int64_t)h * d;
        memset(o, 0, sizeof(float) * (size_t)d);
        for (int32_t c = 0; c < n_chunks; c++) {
            const float *p = parts + c * stride + h * (2 + d);
            const float w = expf(p[0] - mx);
            total += w * p[1];
            axpy(o, w, p + 2, d);
        }
        const float inv = 1.0f / total;
        for (int32_t i = 0; i < d; i++) o[i] *= inv;
    }
}
