/* The tiled 8-bit matmul (gemm.c): weight rows decoded once per tile into plain 8-bit codes
 * and integer scales (gemm_decode.c), then multiplied with many activation rows while they sit
 * in cache (gemm_tile.c).
 *
 * Every result is bit-identical to the one-row dot product of the same ISA build (dot_legacy.c,
 * dot_kquants.c): both sum the same exact integers per lane and apply the same float steps in
 * the same order, so a row's product never depends on how many rows share the call, on the
 * tile sizes, or on which path ran it.
 *
 * Two families:
 *   super (Q4_K, Q5_K, Q6_K against q8_K rows): unsigned codes q (< 64), an int16 scale per
 *     pair of values, per 256-block a float d (and dmin) and an int16 multiplier per 16 values
 *     of the activations' code sums (Q4_K/Q5_K: the 6-bit min, weighed by dmin; Q6_K: the
 *     scale, for the codes' +32 offset, taken off in float as the one-row dot does).
 *   b32 (Q4_0, Q5_0, Q8_0 against q8_0 rows): signed codes w (offset removed) and |w|, a float
 *     d per 32 values.
 */
#ifndef EMBER_GEMM_H
#define EMBER_GEMM_H

#include "ember_native.h"

enum { EM_G_NONE = 0, EM_G_K45 = 1, EM_G_Q6K = 2, EM_G_B32 = 3 };

/* decoded rows (rows x k values), row-major; the tile a kernel call multiplies */
typedef struct {
    int32_t kind, k, rows;
    uint8_t *q;    /* (rows, k): super: unsigned codes; b32: |w| */
    int8_t *w;     /* (rows, k): b32: signed codes */
    int16_t *sc;   /* (rows, k/2): super: scale of each pair of values */
    int16_t *mv;   /* (rows, k/16): super: multiplier of each 16 values' activation code sum */
    float *d;      /* super: (rows, k/256); b32: (rows, k/32) */
    float *dmin;   /* K45: (rows, k/256) */
} em_gtile;

int em_gemm_kind(int32_t type); /* EM_G_*; NONE: this type has no tiled kernel */
/* decode rows [r0, r0 + n) of w into t (sized for at least n rows of w->cols values) */
void em_gemm_decode(const em_mat *w, int64_t r0, int32_t n, em_gtile *t);
/* this thread's decode buffer, grown to hold rows x k values of kind (NULL: out of memory) */
em_gtile *em_gemm_thread_tile(int kind, int32_t rows, int32_t k);
/* out[i * nt + j] = row r0 + i of t . activation row t0 + j, for i < nr, j < nt (<= 4 each) */
void em_gemm_tile(const em_gtile *t, int32_t r0, int32_t nr, const em_act *a, int32_t t0,
                  int32_t nt, float *out);

#endif
