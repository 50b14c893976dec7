/* y = x W^T (+ b) for a fused em_linear: the weight rows are split between threads, and each
 * weight row is multiplied with every activation row while it is in cache.
 *
 * A decode step streams every weight from memory once (the model is larger than the last-level
 * cache), and one core's hardware prefetcher alone leaves memory bandwidth unused: each item
 * therefore prefetches its own rows PREFETCH_AHEAD bytes before the dot products reach them
 * (measured on the starter model, 2 threads: decode 0.91x -> 0.99x llama.cpp's, paired in one
 * process; 6 KiB ahead was no better than none, 3-4 KiB best). */
#include <stdatomic.h>
#include <stdlib.h>

#include "ember_native.h"
#include "team.h"

#define ROWS_PER_TASK 16       /* weight rows per item */
#define ROWS_PER_BIG_TASK 256  /* in matrices of more than 8192 rows (an LM head) */
#define PREFETCH_AHEAD 4096    /* bytes */
#define LINE 64

/* prefetch the cache lines of [from, to) that lie before end */
static inline void prefetch(const uint8_t *from, const uint8_t *to, const uint8_t *end) {
    for (const uint8_t *c = from; c < to && c < end; c += LINE) __builtin_prefetch(c, 0, 3);
}

/* what this build's SIMD paths use (the compiler's target macros, set by isa.py's flags) */
const char *em_features(void) {
    static const char present[] = "" /* each present feature adds " name" */
#if defined(__AVX512F__)
           " avx512f"
#endif
#if defined(__AVX512BW__) && defined(__AVX512VL__)
           " avx512bw avx512vl"
#endif
#if defined(__AVX512VNNI__)
           " avx512vnni"
#elif defined(__AVXVNNI__)
           " avxvnni"
#endif
#if defined(__AVX512BF16__)
           " avx512bf16"
#endif
#if defined(__AVX2__) && defined(__FMA__)
           " avx2 fma"
#endif
#if defined(__F16C__)
           " f16c"
#endif
#if defined(__ARM_NEON)
           " neon"
#endif
#if defined(__ARM_FEATURE_DOTPROD)
           " dotprod"
#endif
        ;
    return present[0] ? present + 1 : "scalar";
}

int em_abi_version(void) { return EM_ABI_VERSION; }

/* from how many activation rows em_linear_rows runs the tiled matmul (gemm.c; the same results
 * bit for bit): the runner sets the crossover it measured on this machine (choice.py) */
static _Atomic int32_t gemm_min_rows = 16;
void em_set_gemm_min_rows(int32_t n) { atomic_store_explicit(&gemm_min_rows, n, memory_order_relaxed); }
int32_t em_gemm_min_rows(void) { return atomic_load_explicit(&gemm_min_rows, memory_order_relaxed); }

void em_linear_rows(const em_linear *w, const em_act *a, float *y, int64_t ldy, em_team *T) {
    if (a->m >= em_gemm_min_rows() && em_gemm_ok(w)) {
        em_gemm_rows(w, a, y, ldy, T);
        return;
    }
    int64_t start[EM_MAX_PARTS + 1] = {0};
    for (int p = 0; p < w->n_parts; p++) start[p + 1] = start[p] + w->part[p].rows;
    const int64_t total = start[w->n_parts], per = total > 8192 ? ROWS_PER_BIG_TASK : ROWS_PER_TASK;
    EM_PAR_FOR(T, t, (total + per - 1) / per) {
        const int64_t r0 = t * per, r1 = r0 + per < total ? r0 + per : total;
        for (int p = 0; p < w->n_parts; p++) { /* the task's rows within each part */
            const int64_t lo = r0 > start[p] ? r0 : start[p], hi = r1 < start[p + 1] ? r1 : start[p + 1];
            if (lo >= hi) continue;
            const em_mat *mt = &w->part[p];
            const em_dot_fn dot = em_dot_for(mt->type);
            const em_dot4_fn dot4 = em_dot4_for(mt->type);
            const uint8_t *first = mt->data + (lo - start[p]) * mt->row_bytes;
            const uint8_t *end = mt->data + (hi - start[p]) * mt->row_bytes; /* this item's rows */
            prefetch(first, first + PREFETCH_AHEAD, end);
            for (int64_t r = lo; r < hi; r++) {
                const uint8_t *row = mt->data + (r - start[p]) * mt->row_bytes;
                prefetch(row + PREFETCH_AHEAD, row + PREFETCH_AHEAD + mt->row_bytes, end);
                const int64_t col = w->out_map ? w->out_map[r] : r;
                const float b = w->bias ? w->bias[r] : 0.0f;
                int32_t i = 0;
                if (dot4) {
                    float four[4];
                    for (; i + 4 <= a->m; i += 4) {
                        dot4(row, a, i, four);
                        for (int j = 0; j < 4; j++) y[(i + j) * ldy + col] = four[j] + b;
                    }
                }
                for (; i < a->m; i++) y[i * ldy + col] = dot(row, a, i) + b;
            }
        }
    }
}

int em_linear_forward(const em_linear *w, const float *x, int64_t ldx, int32_t m, float *y,
                      int64_t ldy, int32_t n_threads) {
    int need32 = 0, need256 = 0;
    em_act a;
    em_linear_needs(w, &need32, &need256);
    if (em_act_alloc(&a, x, ldx, m, w->part[0].cols, need32, need256) != 0) {
        em_act_free(&a);
        return -1;
    }
    em_phase *phases = em_phases_alloc(2);
    if (!phases) {
        em_act_free(&a);
        return -1;
    }
#pragma omp parallel num_threads(n_threads)
    {
        em_team team = {phases, 0, 2, NULL};
        em_act_quantize_rows(&a, need32, need256, &team);
        em_linear_rows(w, &a, y, ldy, &team);
    }
    free(phases);
    em_act_free(&a);
    return 0;
}
