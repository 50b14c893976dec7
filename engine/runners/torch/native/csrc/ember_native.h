/* Ember's native CPU kernels: GGUF block formats multiplied in place, and the decode step.
 *
 * Weights are never converted: a matrix is its GGUF bytes (rows of blocks, straight from the
 * file's mmap). Activations are rounded to 8-bit blocks before each quantized dot product,
 * like llama.cpp: 32-element blocks (q8_0) for the 32-weight formats, 256-element blocks
 * (q8_K) for the k-quants. Float weights (F32, F16, BF16) multiply float32 activations.
 * Everything else runs in float32.
 *
 * Threads: OpenMP, through the process's libgomp (the one torch loaded), with the thread
 * count passed by the caller (torch.get_num_threads()); inside a parallel region work is
 * claimed item by item (team.h), not split statically between barriers.
 */
#ifndef EMBER_NATIVE_H
#define EMBER_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#define EM_ABI_VERSION 2

/* GGML type ids (gguf.GGMLQuantizationType) */
enum {
    EM_F32 = 0, EM_F16 = 1, EM_Q4_0 = 2, EM_Q4_1 = 3, EM_Q5_0 = 6, EM_Q5_1 = 7, EM_Q8_0 = 8,
    EM_Q4_K = 12, EM_Q5_K = 13, EM_Q6_K = 14, EM_BF16 = 30
};

/* KV pool element types */
enum { EM_KV_F32 = 0, EM_KV_BF16 = 1, EM_KV_F16 = 2, EM_KV_I8 = 3 };

/* One weight matrix (rows, cols): `rows` rows of `row_bytes` bytes in GGML type `type`. */
typedef struct {
    const uint8_t *data;
    int64_t row_bytes;
    int32_t type;
    int32_t rows;
    int32_t cols;
    int32_t pad_;
} em_mat;

/* Up to 3 matrices with the same cols, multiplied as one (outputs side by side), plus an
 * optional bias over the fused outputs and an optional output-column map. */
#define EM_MAX_PARTS 3
typedef struct {
    em_mat part[EM_MAX_PARTS];
    int32_t n_parts;
    int32_t out_features;          /* sum of the parts' rows */
    const float *bias;             /* (out_features,) or NULL */
    const int32_t *out_map;        /* fused row r is written to column out_map[r]; or NULL */
} em_linear;

/* Activations of m rows rounded to 8-bit blocks (what the quantized dots read). */
typedef struct {
    int32_t m, k;
    const float *x;     /* (m, k) float32, row stride ldx */
    int64_t ldx;
    float *d32;         /* q8_0: scale per 32 (m, k/32) */
    float *s32;         /* q8_0: scale * sum of codes per 32 (for formats with a min) */
    int8_t *q32;        /* q8_0 codes (m, k) */
    float *d256;        /* q8_K: scale per 256 (m, k/256) */
    int16_t *bsum256;   /* q8_K: sum of codes per 16 (m, k/16) */
    int8_t *q256;       /* q8_K codes (m, k) */
} em_act;

typedef struct {
    em_linear qkv;            /* q | k | v */
    em_linear o;
    em_linear gate_up;        /* gate | up */
    em_linear down;
    const float *attn_norm;   /* (hidden,) */
    const float *ffn_norm;
    const float *post_attn_norm;  /* or NULL */
    const float *post_ffn_norm;   /* or NULL */
    const float *q_norm;      /* (head_dim,) or NULL */
    const float *k_norm;
    int32_t rope;             /* which of the step's RoPE tables (0 global, 1 sliding), -1 none */
    int32_t window;           /* sliding window in tokens, 0 = full attention */
    void *k_pool;             /* (num_blocks, block_size, n_kv, head_dim) */
    void *v_pool;
    float *k_scale;           /* int8 pools: (num_blocks, block_size, n_kv) scales, else NULL */
    float *v_scale;
    const struct em_moe_ *moe; /* routed experts (moe.h) in place of gate_up/down, or NULL */
} em_layer;

typedef struct {
    int32_t n_layers, hidden, n_heads, n_kv, head_dim, ffn, vocab;
    int32_t act;              /* 0 silu, 1 gelu (tanh approximation) */
    int32_t kv_type;          /* EM_KV_* */
    int32_t block_size;
    float norm_eps, attn_scale, attn_softcap, final_softcap, embed_scale; /* softcap 0 = off */
    em_mat embed;             /* (vocab, hidden) */
    em_linear head;           /* (vocab, hidden) */
    const float *out_norm;
    const em_layer *layers;
    int32_t rope_dim;         /* dims of each q/k head RoPE rotates, the first ones (<= head_dim) */
    int32_t pad_;
} em_model;

typedef struct {
    int32_t n_tokens;
    int32_t n_threads;
    const int32_t *token_ids;    /* (N,) */
    const int32_t *positions;    /* (N,) RoPE positions */
    const int64_t *slots;        /* (N,) KV slot each token is written to */
    const int32_t *key_end;      /* (N,) cache index of the token + 1 (keys it sees: < this) */
    const int32_t *table;        /* (N,) offset of the token's block table in `blocks` */
    const int32_t *blocks;       /* physical block ids of every sequence's table */
    int32_t n_rows;              /* logit rows */
    const int32_t *rows;         /* (n_rows,) flat-batch rows that get logits */
    const float *inv_freq[2];    /* (head_dim/2,) RoPE inverse frequencies: global, sliding */
    float rope_factor[2];        /* cos/sin multiplier of each */
    const float *q_scale;        /* (N,) query multiplier after RoPE (temperature), or NULL */
} em_step;

/* exported */
int em_abi_version(void);
const char *em_features(void);
int em_supported(int32_t type);
int em_linear_forward(const em_linear *w, const float *x, int64_t ldx, int32_t m, float *y,
                      int64_t ldy, int32_t n_threads);
void em_dequant_rows(const em_mat *w, int64_t row0, int64_t n_rows, float *out,
                     int32_t n_threads);
void em_dequant_rows_bf16(const em_mat *w, int64_t row0, int64_t n_rows, uint16_t *out,
                          float *scratch, int32_t n_threads);
void em_gather_rows(const em_mat *w, const int32_t *ids, int32_t n, float *out, float scale);
void em_set_gemm_min_rows(int32_t n); /* linear.c: tiled matmul from this many activation rows */
int32_t em_gemm_min_rows(void);
int em_forward(const em_model *m, const em_step *s, float *logits);

/* internal, shared between files */
#if defined(__F16C__)
#include <immintrin.h>
static inline float em_fp16_to_fp32(uint16_t h) { return _cvtsh_ss(h); }
static inline uint16_t em_fp32_to_fp16(float f) { return _cvtss_sh(f, 0); }
#else
float em_fp16_to_fp32(uint16_t h);
uint16_t em_fp32_to_fp16(float f);
#endif
int em_act_alloc(em_act *a, const float *x, int64_t ldx, int32_t m, int32_t k, int need32,
                 int need256);
void em_act_free(em_act *a);
struct em_team_;
typedef struct em_team_ em_team; /* team.h: work shared inside a parallel region */
void em_act_quantize_rows(em_act *a, int need32, int need256, em_team *T); /* one phase */
void em_linear_rows(const em_linear *w, const em_act *a, float *y, int64_t ldy,
                    em_team *T); /* one phase */
void em_linear_needs(const em_linear *w, int *need32, int *need256);
int em_gemm_ok(const em_linear *w); /* gemm.c: every part has a tiled kernel */
void em_gemm_rows(const em_linear *w, const em_act *a, float *y, int64_t ldy,
                  em_team *T); /* one phase */
typedef float (*em_dot_fn)(const uint8_t *row, const em_act *a, int32_t m);
em_dot_fn em_dot_for(int32_t type);
/* one weight row against activation rows m0 .. m0 + 3 (NULL: no such kernel for the type) */
typedef void (*em_dot4_fn)(const uint8_t *row, const em_act *a, int32_t m0, float *out);
em_dot4_fn em_dot4_for(int32_t type);
void em_dequant_row(int32_t type, const uint8_t *row, float *out, int32_t cols);

#endif
