/* y = x W^T (+ b) for many activation rows (a prompt): the tiled 8-bit matmul.
 *
 * The one-row dots (linear.c) unpack every weight block again for every 4 activation rows. Here
 * the weight rows are split into items of ITEM_BYTES of decoded form (gemm.h: 8-bit codes and
 * integer scales, a cache-sized block); a thread decodes an item's rows once, then multiplies
 * them with every activation row, 4 activation rows x 8 (k-quants on AVX2) or 2 weight rows per
 * kernel call (gemm_tile.c), the activation tile staying in L1 while the item's rows stream
 * from L2.
 * Threads claim items (team.h). Results are the one-row dots' bit for bit (gemm.h).
 */
#include <stdlib.h>

#include "gemm.h"
#include "team.h"

#define ITEM_BYTES (96 << 10) /* decoded weight bytes per item (L2 holds it beside the tile) */
#define MIN_ITEM_ROWS 8
#define MAX_ITEM_ROWS 64

int em_gemm_ok(const em_linear *w) {
    for (int p = 0; p < w->n_parts; p++)
        if (em_gemm_kind(w->part[p].type) == EM_G_NONE) return 0;
    return w->n_parts > 0;
}

em_gtile *em_gemm_thread_tile(int kind, int32_t rows, int32_t k) {
    static _Thread_local em_gtile tile;
    static _Thread_local void *mem;
    static _Thread_local size_t cap;
    if (em_gemm_grouped(kind)) rows = (rows + EM_GROUP_ROWS - 1) / EM_GROUP_ROWS * EM_GROUP_ROWS;
    const size_t q = (size_t)rows * k, need = 2 * q + q / 2 + 256;
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
    } else { /* gemm.h: at most k/4 bytes of scales, k/8 of multipliers, k/64 of d per row */
        tile.sc = (int16_t *)p, p += q / 4;
        tile.mv = (int16_t *)p, p += q / 8;
        tile.d = (float *)p, p += q / 64;
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
    em_gemm_times(t, a, 0, a->m, y, ldy, first + r0, w->out_map, w->bias);
}

void em_gemm_rows(const em_linear *w, const em_act *a, float *y, int64_t ldy, em_team *T) {
    int64_t first[EM_MAX_PARTS + 1] = {0}, items[EM_MAX_PARTS + 1] = {0};
    int32_t per[EM_MAX_PARTS];
    for (int p = 0; p < w->n_parts; p++) {
        const em_mat *mt = &w->part[p];
        int64_t rows = ITEM_BYTES / em_gemm_row_bytes(em_gemm_kind(mt->type), mt->cols);
        rows = rows < MIN_ITEM_ROWS ? MIN_ITEM_ROWS : rows > MAX_ITEM_ROWS ? MAX_ITEM_ROWS : rows;
        per[p] = (int32_t)(rows / EM_GROUP_ROWS * EM_GROUP_ROWS); /* whole groups and tiles */
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
