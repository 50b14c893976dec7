/* y = x W^T (+ b) for many activation rows (a prompt): the tiled 8-bit matmul.
 *
 * The one-row dots (linear.c) unpack every weight block again for every 4 activation rows. Here
 * the weight rows are split into items of ITEM_BYTES of decoded form (gemm.h: 8-bit codes and
 * integer scales, a cache-sized block); a thread decodes an item's rows once, then multiplies
 * them with every activation row, TILE_T activation rows x TILE_R weight rows per kernel call
 * (gemm_tile.c), the activation tile staying in L1 while the item's rows stream from L2.
 * Threads claim items (team.h). Results are the one-row dots' bit for bit (gemm.h).
 */
#include <stdlib.h>

#include "gemm.h"
#include "team.h"

#define TILE_R 2
#define TILE_T 4
#define ITEM_BYTES (96 << 10) /* decoded weight bytes per item (L2 holds it beside the tile) */
#define MIN_ITEM_ROWS 4
#define MAX_ITEM_ROWS 64

/* decoded bytes per row of k values */
static int64_t row_bytes(int kind, int64_t k) {
    return kind == EM_G_B32 ? 2 * k + k / 8 : 2 * k + k / 8 + k / 32;
}

int em_gemm_ok(const em_linear *w) {
    for (int p = 0; p < w->n_parts; p++)
        if (em_gemm_kind(w->part[p].type) == EM_G_NONE) return 0;
    return w->n_parts > 0;
}

em_gtile *em_gemm_thread_tile(int kind, int32_t rows, int32_t k) {
    static _Thread_local em_gtile tile;
    static _Thread_local void *mem;
    static _Thread_local size_t cap;
    const size_t q = (size_t)rows * k, need = 2 * q + q / 2 + 4 * q / 32 + 256;
    if (need > cap) {
        free(mem);
        cap = 0;
        if (posix_memalign(&mem, 64, need)) return mem = NULL, NULL;
        cap = need;
    }
    uint8_t *p = mem;
    tile.q = p, p += q;
    if (kind == EM_G_B32) {
        tile.w = (int8_t *)p, p += q;
        tile.d = (float *)p; /* k/32 per row */
        tile.sc = tile.mv = NULL, tile.dmin = NULL;
    } else {
        tile.sc = (int16_t *)p, p += q;  /* k/2 int16 */
        tile.mv = (int16_t *)p, p += q / 8; /* k/16 int16 */
        tile.d = (float *)p, p += q / 64;   /* k/256 float */
        tile.dmin = (float *)p;
        tile.w = NULL;
    }
    return &tile;
}

/* rows [r0, r0 + n) of part p (whose first fused row is `first`) times every activation row */
static void item(const em_linear *w, int p, int64_t first, int64_t r0, int32_t n,
                 const em_act *a, float *y, int64_t ldy) {
    const em_mat *mt = &w->part[p];
    em_gtile *t = em_gemm_thread_tile(em_gemm_kind(mt->type), n, mt->cols);
    if (!t) abort(); /* a few hundred KiB per thread; the caller's buffers are far larger */
    em_gemm_decode(mt, r0, n, t);
    float out[TILE_R * TILE_T];
    for (int32_t t0 = 0; t0 < a->m; t0 += TILE_T) {
        const int32_t nt = a->m - t0 < TILE_T ? a->m - t0 : TILE_T;
        for (int32_t r = 0; r < n; r += TILE_R) {
            const int32_t nr = n - r < TILE_R ? n - r : TILE_R;
            em_gemm_tile(t, r, nr, a, t0, nt, out);
            for (int32_t i = 0; i < nr; i++) {
                const int64_t row = first + r0 + r + i, col = w->out_map ? w->out_map[row] : row;
                const float b = w->bias ? w->bias[row] : 0.0f;
                for (int32_t j = 0; j < nt; j++) y[(t0 + j) * ldy + col] = out[i * nt + j] + b;
            }
        }
    }
}

void em_gemm_rows(const em_linear *w, const em_act *a, float *y, int64_t ldy, em_team *T) {
    int64_t first[EM_MAX_PARTS + 1] = {0}, items[EM_MAX_PARTS + 1] = {0};
    int32_t per[EM_MAX_PARTS];
    for (int p = 0; p < w->n_parts; p++) {
        const em_mat *mt = &w->part[p];
        int64_t rows = ITEM_BYTES / row_bytes(em_gemm_kind(mt->type), mt->cols);
        rows = rows < MIN_ITEM_ROWS ? MIN_ITEM_ROWS : rows > MAX_ITEM_ROWS ? MAX_ITEM_ROWS : rows;
        per[p] = (int32_t)(rows / TILE_R * TILE_R);
        first[p + 1] = first[p] + mt->rows;
        items[p + 1] = items[p] + (mt->rows + per[p] - 1) / per[p];
    }
    EM_PAR_FOR(T, i, items[w->n_parts]) {
        int p = 0;
        while (i >= items[p + 1]) p++;
        const int64_t r0 = (i - items[p]) * per[p];
        const int64_t left = w->part[p].rows - r0;
        item(w, p, first[p], r0, (int32_t)(left < per[p] ? left : per[p]), a, y, ldy);
    }
}
