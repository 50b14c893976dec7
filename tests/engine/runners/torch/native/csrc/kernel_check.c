/* Runs every weight format's product and row dequantization on fixed pseudo-random data and
 * prints each result's float bits, so two builds of the kernels (portable C on this machine,
 * NEON under qemu-aarch64) can be compared bit for bit (test_neon.py). The NEON dots sum the
 * same integers and share the portable path's float steps, so the outputs must be identical. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember_native.h"

static uint32_t state = 12345u;
static uint32_t next(void) { return state = state * 1664525u + 1013904223u; }
static float uniform(void) { return (float)((next() >> 8) & 0xffff) / 32768.0f - 1.0f; }

static void put_half(uint8_t *p, float f) {
    uint16_t h = em_fp32_to_fp16(f);
    memcpy(p, &h, 2);
}

typedef struct {
    const char *name;
    int type, block, bytes, half_at[2]; /* f16 fields of a block (-1: none) */
} format;

static const format FORMATS[] = {
    {"Q4_0", EM_Q4_0, 32, 18, {0, -1}},  {"Q4_1", EM_Q4_1, 32, 20, {0, 2}},
    {"Q5_0", EM_Q5_0, 32, 22, {0, -1}},  {"Q5_1", EM_Q5_1, 32, 24, {0, 2}},
    {"Q8_0", EM_Q8_0, 32, 34, {0, -1}},  {"Q4_K", EM_Q4_K, 256, 144, {0, 2}},
    {"Q5_K", EM_Q5_K, 256, 176, {0, 2}}, {"Q6_K", EM_Q6_K, 256, 210, {208, -1}},
    {"F16", EM_F16, 1, 2, {0, -1}},      {"F32", EM_F32, 1, 4, {-1, -1}},
};

static void fill(const format *f, uint8_t *w, int64_t n_bytes) {
    for (int64_t i = 0; i < n_bytes; i++) w[i] = (uint8_t)(next() >> 24);
    for (int64_t b = 0; b < n_bytes / f->bytes; b++) {
        uint8_t *p = w + b * f->bytes;
        if (f->type == EM_F32) {
            float v = uniform();
            memcpy(p, &v, 4);
            continue;
        }
        for (int h = 0; h < 2; h++)
            if (f->half_at[h] >= 0) put_half(p + f->half_at[h], uniform() * 0.05f);
    }
}

int main(void) {
    enum { ROWS = 8, COLS = 512, M = 3, MT = 9 };
    static float x[MT * COLS], y[M * ROWS], yt[MT * ROWS], yd[MT * ROWS], row[COLS];
    for (int i = 0; i < MT * COLS; i++) x[i] = uniform() * 4.0f;
    for (size_t t = 0; t < sizeof(FORMATS) / sizeof(FORMATS[0]); t++) {
        const format *f = &FORMATS[t];
        const int64_t row_bytes = (int64_t)COLS / f->block * f->bytes;
        uint8_t *w = malloc((size_t)(ROWS * row_bytes));
        fill(f, w, ROWS * row_bytes);
        em_linear lin;
        memset(&lin, 0, sizeof(lin));
        lin.part[0] = (em_mat){w, row_bytes, f->type, ROWS, COLS, 0};
        lin.n_parts = 1, lin.out_features = ROWS;
        if (em_linear_forward(&lin, x, COLS, M, y, ROWS, 1) != 0) return 1;
        printf("%s product", f->name);
        for (int i = 0; i < M * ROWS; i++) {
            uint32_t bits;
            memcpy(&bits, &y[i], 4);
            printf(" %08x", bits);
        }
        /* the tiled matmul over more rows: printed, and equal to the one-row dots */
        em_set_gemm_min_rows(1);
        if (em_linear_forward(&lin, x, COLS, MT, yt, ROWS, 2) != 0) return 1;
        em_set_gemm_min_rows(1 << 30);
        if (em_linear_forward(&lin, x, COLS, MT, yd, ROWS, 2) != 0) return 1;
        if (memcmp(yt, yd, sizeof(yt)) != 0) {
            printf("%s tiled products differ from the one-row dots\n", f->name);
            return 2;
        }
        printf("\n%s tiled", f->name);
        for (int i = 0; i < MT * ROWS; i++) {
            uint32_t bits;
            memcpy(&bits, &yt[i], 4);
            printf(" %08x", bits);
        }
        em_dequant_rows(&lin.part[0], ROWS - 1, 1, row, 1);
        uint32_t hash = 2166136261u;
        for (int i = 0; i < COLS; i++) {
            uint32_t bits;
            memcpy(&bits, &row[i], 4);
            hash = (hash ^ bits) * 16777619u;
        }
        printf("\n%s rows %08x\n", f->name, hash);
        free(w);
    }
    printf("%s\n", em_features());
    return 0;
}
