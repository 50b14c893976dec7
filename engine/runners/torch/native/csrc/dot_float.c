/* Float weights (F32, F16, BF16) times float32 activations, and the dot-product table. */
#include "ember_native.h"
#include "simd.h"

float em_dot_q8_0(const uint8_t *, const em_act *, int32_t);
float em_dot_q4_0(const uint8_t *, const em_act *, int32_t);
float em_dot_q4_1(const uint8_t *, const em_act *, int32_t);
float em_dot_q5_0(const uint8_t *, const em_act *, int32_t);
float em_dot_q5_1(const uint8_t *, const em_act *, int32_t);
float em_dot_q4_k(const uint8_t *, const em_act *, int32_t);
float em_dot_q5_k(const uint8_t *, const em_act *, int32_t);
float em_dot_q6_k(const uint8_t *, const em_act *, int32_t);

static inline const float *xrow(const em_act *a, int32_t m) { return a->x + (int64_t)m * a->ldx; }

static float dot_f32(const uint8_t *w, const em_act *a, int32_t m) {
    const float *x = xrow(a, m), *wf = (const float *)w;
    int j = 0;
    float tail = 0.0f;
#ifdef EM_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (; j + 8 <= a->k; j += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(wf + j), _mm256_loadu_ps(x + j), acc);
    tail = em_hsum(acc);
#endif
    for (; j < a->k; j++) tail += wf[j] * x[j];
    return tail;
}

static float dot_f16(const uint8_t *w, const em_act *a, int32_t m) {
    const float *x = xrow(a, m);
    const uint16_t *wh = (const uint16_t *)w;
    int j = 0;
    float tail = 0.0f;
#if defined(EM_AVX2) && defined(__F16C__)
    __m256 acc = _mm256_setzero_ps();
    for (; j + 8 <= a->k; j += 8) {
        __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wh + j)));
        acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j), acc);
    }
    tail = em_hsum(acc);
#endif
    for (; j < a->k; j++) tail += em_fp16_to_fp32(wh[j]) * x[j];
    return tail;
}

static inline float bf16(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static float dot_bf16(const uint8_t *w, const em_act *a, int32_t m) {
    const float *x = xrow(a, m);
    const uint16_t *wh = (const uint16_t *)w;
    int j = 0;
    float tail = 0.0f;
#ifdef EM_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (; j + 8 <= a->k; j += 8) {
        __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(wh + j)));
        __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
        acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j), acc);
    }
    tail = em_hsum(acc);
#endif
    for (; j < a->k; j++) tail += bf16(wh[j]) * x[j];
    return tail;
}

em_dot_fn em_dot_for(int32_t type) {
    switch (type) {
    case EM_F32: return dot_f32;
    case EM_F16: return dot_f16;
    case EM_BF16: return dot_bf16;
    case EM_Q4_0: return em_dot_q4_0;
    case EM_Q4_1: return em_dot_q4_1;
    case EM_Q5_0: return em_dot_q5_0;
    case EM_Q5_1: return em_dot_q5_1;
    case EM_Q8_0: return em_dot_q8_0;
    case EM_Q4_K: return em_dot_q4_k;
    case EM_Q5_K: return em_dot_q5_k;
    case EM_Q6_K: return em_dot_q6_k;
    default: return NULL;
    }
}

int em_supported(int32_t type) { return em_dot_for(type) != NULL; }

/* which activation forms a weight type reads: 1 = q8_0, 2 = q8_K, 0 = float32 */
static int act_form(int32_t type) {
    switch (type) {
    case EM_Q4_0: case EM_Q4_1: case EM_Q5_0: case EM_Q5_1: case EM_Q8_0: return 1;
    case EM_Q4_K: case EM_Q5_K: case EM_Q6_K: return 2;
    default: return 0;
    }
}

void em_linear_needs(const em_linear *w, int *need32, int *need256) {
    for (int p = 0; p < w->n_parts; p++) {
        int f = act_form(w->part[p].type);
        if (f == 1) *need32 = 1;
        if (f == 2) *need256 = 1;
    }
}
