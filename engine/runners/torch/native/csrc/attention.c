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

static inline void axpy(float *y, float p, const float *x, int32_t n) {
    int32_t i = 0;
#ifdef EM_AVX2
    const __m256 pv = _mm256_set1_ps(p);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] += p * x[i];
}

/* out[k] = q . rows[k] for the EM_KEY_BATCH rows of a batch (rows: EM_KEY_BATCH x d) */
static void dots_batch(const float *q, const float *rows, int32_t d, float *out) {
    int32_t i = 0;
#ifdef EM_AVX2
    _Static_assert(EM_KEY_BATCH == 8, "the reduction below transposes 8 accumulators");
    __m256 acc[EM_KEY_BATCH];
    for (int k = 0; k < EM_KEY_BATCH; k++) acc[k] = _mm256_setzero_ps();
    for (; i + 8 <= d; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        for (int k = 0; k < EM_KEY_BATCH; k++)
            acc[k] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(rows + (int64_t)k * d + i), acc[k]);
    }
    /* a transposing reduction: lane k = the sum of acc[k]'s 8 lanes */
    __m256 p[4], h[2];
    for (int k = 0; k < 4; k++)
        p[k] = _mm256_add_ps(_mm256_unpacklo_ps(acc[2 * k], acc[2 * k + 1]),
                             _mm256_unpackhi_ps(acc[2 * k], acc[2 * k + 1]));
    for (int k = 0; k < 2; k++) {
        const __m256d a = _mm256_castps_pd(p[2 * k]), b = _mm256_castps_pd(p[2 * k + 1]);
        h[k] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                             _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(h[0], h[1], 0x20),
                                        _mm256_permute2f128_ps(h[0], h[1], 0x31)));
#else
    for (int k = 0; k < EM_KEY_BATCH; k++) out[k] = 0.0f;
#endif
    for (; i < d; i++)
        for (int k = 0; k < EM_KEY_BATCH; k++) out[k] += q[i] * rows[(int64_t)k * d + i];
}

/* x[k] = exp(x[k] - mx) for the first `valid` keys of a batch, 0 for the rest (padding); returns
 * their sum. Where AVX2 exists, every lane takes the same polynomial, so a score's weight does
 * not depend on its position: exp(r) * 2^n with x = n ln2 + r, |r| <= ln2 / 2, Cephes expf's
 * degree-6 polynomial (within 2 ulp of expf); below -87.3 (weights under 1e-38) it clamps
 * instead of going subnormal. */
static float exp_batch(float *x, float mx, int32_t valid) {
#ifdef EM_AVX2
    const __m256 v = _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(x), _mm256_set1_ps(mx)),
                                   _mm256_set1_ps(-87.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), v);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(
        _mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    y = _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
    _mm256_storeu_ps(x, y);
    return em_hsum(y);
#else
    float sum = 0.0f;
    for (int k = 0; k < EM_KEY_BATCH; k++) sum += (x[k] = k < valid ? expf(x[k] - mx) : 0.0f);
    return sum;
#endif
}

/* Keys [k0, k1) of one token's sequence for the g query heads of one KV head: the chunk's
 * max score, sum of exp(score - max) and the exp-weighted sum of values per query head.
 * Keys go in batches of EM_KEY_BATCH (the last one padded: a repeated key whose weight is
 * zeroed), each batch's K or V rows loaded as float32 once and used by all g heads. */
void em_attend_chunk(const em_attn_args *A, int32_t t, int32_t kvh, int32_t k0, int32_t k1,
                     float *part /* g * (2 + D) */, float *scores /* g * EM_KEY_CHUNK */,
                     float *rows /* EM_KEY_BATCH * D */) {
    const int32_t g = A->group, d = A->head_dim, n = k1 - k0, bs = A->block_size;
    const float *q = A->q + (int64_t)t * A->q_stride + (int64_t)kvh * g * d;
    const int32_t *blocks = A->blocks + A->table[t];
    const int32_t padded = (n + EM_KEY_BATCH - 1) / EM_KEY_BATCH * EM_KEY_BATCH;
    int64_t slots[EM_KEY_CHUNK]; /* pool rows of this KV head, walked block by block */
    for (int32_t j = 0, idx = k0; j < n;) {
        const int64_t base = (int64_t)blocks[idx / bs] * bs;
        for (int32_t off = idx % bs; off < bs && j < n; off++, j++, idx++)
            slots[j] = (base + off) * A->n_kv + kvh;
    }
    for (int32_t j = n; j < padded; j++) slots[j] = slots[n - 1];
    for (int32_t j0 = 0; j0 < padded; j0 += EM_KEY_BATCH) {
        for (int k = 0; k < EM_KEY_BATCH; k++)
            em_kv_load(A->k_pool, A->k_scale, A->kv_type, slots[j0 + k], d, rows + (int64_t)k * d);
        for (int32_t h = 0; h < g; h++) {
            float *s = scores + (int64_t)h * EM_KEY_CHUNK + j0;
            dots_batch(q + (int64_t)h * d, rows, d, s);
            for (int k = 0; k < EM_KEY_BATCH; k++) {
                s[k] *= A->scale;
                if (A->softcap > 0.0f) s[k] = A->softcap * tanhf(s[k] / A->softcap);
            }
        }
    }
    for (int32_t h = 0; h < g; h++) {
        float *sc = scores + (int64_t)h * EM_KEY_CHUNK, mx = -INFINITY, sum = 0.0f;
        for (int32_t j = 0; j < n; j++) mx = fmaxf(mx, sc[j]);
        for (int32_t j0 = 0; j0 < padded; j0 += EM_KEY_BATCH)
            sum += exp_batch(sc + j0, mx, n - j0);
        float *p = part + (int64_t)h * (2 + d);
        p[0] = mx, p[1] = sum;
        memset(p + 2, 0, sizeof(float) * (size_t)d);
    }
    for (int32_t j0 = 0; j0 < padded; j0 += EM_KEY_BATCH) {
        for (int k = 0; k < EM_KEY_BATCH; k++)
            em_kv_load(A->v_pool, A->v_scale, A->kv_type, slots[j0 + k], d, rows + (int64_t)k * d);
        for (int32_t h = 0; h < g; h++) {
            const float *w = scores + (int64_t)h * EM_KEY_CHUNK + j0;
            float *o = part + (int64_t)h * (2 + d) + 2;
            int32_t i = 0;
#ifdef EM_AVX2
            for (; i + 8 <= d; i += 8) { /* one accumulator slice over the batch's 8 rows */
                __m256 acc = _mm256_loadu_ps(o + i);
                for (int k = 0; k < EM_KEY_BATCH; k++)
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(w[k]),
                                          _mm256_loadu_ps(rows + (int64_t)k * d + i), acc);
                _mm256_storeu_ps(o + i, acc);
            }
#endif
            for (; i < d; i++)
                for (int k = 0; k < EM_KEY_BATCH; k++) o[i] += w[k] * rows[(int64_t)k * d + i];
        }
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
