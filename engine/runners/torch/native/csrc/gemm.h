/* The tiled 8-bit matmul (gemm.c): weight rows decoded once per tile into plain 8-bit codes
 * and integer scales (gemm_decode.c), then multiplied with many activation rows while they sit
 * in cache (gemm_tile.c).
 *
 * Every result is bit-identical to the one-row dot product of the same ISA build (dot_legacy.c,
 * dot_kquants.c): both sum the same exact integers and apply the same float steps in the same
 * order, so a row's product never depends on how many rows share the call, on the tile sizes,
 * or on which path ran it.
 *
 * Two families:
 *   super (Q4_K, Q5_K, Q6_K against q8_K rows): unsigned codes q (< 64), an int16 scale per 16
 *     values, per 256-block a float d (and dmin) and an int16 multiplier per 16 values of the
 *     activations' code sums (Q4_K/Q5_K: the 6-bit min, weighed by dmin; Q6_K: the scale, for
 *     the codes' +32 offset, taken off as an exact integer as the one-row dot does).
 *   b32 (Q4_0, Q5_0, Q8_0 against q8_0 rows): signed codes w (offset removed) and |w|, a float
 *     d per 32 values.
 *
 * Layouts. b32, and super without AVX2: row-major, row r at q + r k, sc + r k/16, mv + r k/16,
 * d (and dmin) + r k/256 (super) or d + r k/32 (b32).
 * Super with AVX2 (EM_GEMM_GROUPS): rows in groups of 8 (the last one padded with zero rows),
 * interleaved so that one 32-byte load holds 4 consecutive values of each of the 8 rows and an
 * integer sum lands in lane r for row r. Group g (values v = 0..k-1, rows r = 0..7):
 *   q  + 8k g:        byte 32 (v / 4) + 4 r + v % 4    = code of (r, v)
 *   sc + k g:         int16 16 (v / 16) + 2 r + {0, 1} = scale of (r, v) (twice: madd pairs)
 *   mv + (k / 2) g:   int16 16 (v / 32) + 2 r + i      = multiplier of values 32 (v / 32) + 16 i
 *   d, dmin + (k/32) g: float 8 (v / 256) + r
 */
#ifndef EMBER_GEMM_H
#define EMBER_GEMM_H

#include "ember_native.h"
#include "simd.h"

#ifdef EM_AVX2
#define EM_GEMM_GROUPS 1
#endif
#define EM_GROUP_ROWS 8

enum { EM_G_NONE = 0, EM_G_K45 = 1, EM_G_Q6K = 2, EM_G_B32 = 3 };

/* decoded rows (rows x k values); the tile a kernel call multiplies */
typedef struct {
    int32_t kind, k, rows;
    uint8_t *q;    /* super: unsigned codes; b32: |w| */
    int8_t *w;     /* (rows, k): b32: signed codes */
    int16_t *sc;   /* super: scale of each 16 values */
    int16_t *mv;   /* super: multiplier of each 16 values' activation code sum */
    float *d;      /* super: per 256 values; b32: per 32 */
    float *dmin;   /* K45: per 256 values */
} em_gtile;

int em_gemm_kind(int32_t type); /* EM_G_*; NONE: this type has no tiled kernel */
/* 1: this kind is decoded into groups of EM_GROUP_ROWS interleaved rows (see above) */
int em_gemm_grouped(int kind);
/* decoded bytes per row of k values (a tile holds about ITEM_BYTES of them: gemm.c) */
int64_t em_gemm_row_bytes(int kind, int64_t k);
/* decode rows [r0, r0 + n) of w into t (sized for at least n rows of w->cols values) */
void em_gemm_decode(const em_mat *w, int64_t r0, int32_t n, em_gtile *t);
/* this thread's decode buffer, grown to hold rows x k values of kind (NULL: out of memory) */
em_gtile *em_gemm_thread_tile(int kind, int32_t rows, int32_t k);
/* every row of t times activation rows p0 .. p1 of a: y[p ldy + col(i)] = row i's product
 * (+ bias[row0 + i]), col(i) = map ? map[row0 + i] : row0 + i; bias and map may be NULL */
void em_gemm_times(const em_gtile *t, const em_act *a, int32_t p0, int32_t p1, float *y,
                   int64_t ldy, int64_t row0, const int32_t *map, const float *bias);

#endif
