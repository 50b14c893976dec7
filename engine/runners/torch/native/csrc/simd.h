/* SIMD helpers (AVX2; NEON below) shared by the dot-product files (compiled only where the compiler targets AVX2;
 * the AVX-512 build uses them too, EVEX-encoded, with VNNI's dot product where present). */
#ifndef EMBER_SIMD_H
#define EMBER_SIMD_H

#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#define EM_AVX2 1
#include <immintrin.h>

/* 16 bytes of packed nibbles -> 32 values: the low nibbles (values 0..15), then the high ones */
static inline __m256i em_nibbles32(const uint8_t *qs) {
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_insertf128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* 32 bits (little endian) -> 32 bytes, 0xff where the bit is set */
static inline __m256i em_bits32(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), pick);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* sum of a[i] * b[i] over each 4 bytes: signed a (> -128 or exactly its magnitude), signed b.
 * With VNNI one instruction does both steps; the sums are the same integers (|a| <= 127, so
 * maddubs's int16 pair sums, at most 2 * 127 * 128, never saturate). */
static inline __m256i em_dot_i8(__m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(a, a),
                               _mm256_sign_epi8(b, a));
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(a, a),
                                   _mm256_sign_epi8(b, a));
#else
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
}

/* unsigned a (< 128), signed b: int16 sums of adjacent pairs */
static inline __m256i em_dot_u8_pairs(__m256i a, __m256i b) { return _mm256_maddubs_epi16(a, b); }

static inline float em_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* a * b + c rounded once (the scalar twin of _mm256_fmadd_ps, lane for lane) */
static inline float em_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

static inline __m256i em_load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* the sum of v's 8 int32 lanes (exact) */
static inline int em_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
#define EM_NEON 1
#include <arm_neon.h>

/* acc + the sums of a[i] * b[i] over each 4 bytes (16 int8 pairs); exact integers, so a NEON
 * dot gives the portable C path's result bit for bit (the float steps around it are shared) */
static inline int32x4_t em_ndot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* sum of the 32 products of unsigned codes (< 128) and int8 activations */
static inline int em_ndot32(uint8x16_t q0, uint8x16_t q1, const int8_t *x) {
    int32x4_t s = em_ndot16(vdupq_n_s32(0), vreinterpretq_s8_u8(q0), vld1q_s8(x));
    return vaddvq_s32(em_ndot16(s, vreinterpretq_s8_u8(q1), vld1q_s8(x + 16)));
}
#endif
#endif
