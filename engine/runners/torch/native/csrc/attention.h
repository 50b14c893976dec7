/* Decode attention, shared by attention.c and forward.c. */
#ifndef EMBER_ATTENTION_H
#define EMBER_ATTENTION_H

#include "ember_native.h"

#define EM_KEY_CHUNK 128 /* keys per attention task */
#define EM_KEY_BATCH 8   /* keys whose rows are loaded and used together (divides EM_KEY_CHUNK) */

/* floats of per-thread scratch em_attend_chunk needs: the scores, then a batch of rows */
#define EM_ATTEND_SCRATCH(g, d) ((g) * EM_KEY_CHUNK + EM_KEY_BATCH * (d))

typedef struct {
    const float *q;          /* (N, q_stride): query heads of each token, RoPE applied */
    int64_t q_stride;
    int32_t group, head_dim, n_kv, block_size, kv_type;
    float scale, softcap;    /* softcap 0 = off */
    const void *k_pool, *v_pool;
    const float *k_scale, *v_scale;
    const int32_t *table;    /* (N,) offsets into blocks */
    const int32_t *blocks;
} em_attn_args;

void em_kv_load(const void *pool, const float *scales, int32_t kv_type, int64_t row, int32_t d,
                float *out);
void em_kv_store(void *pool, float *scales, int32_t kv_type, int64_t row, int32_t d,
                 const float *x);
void em_attend_chunk(const em_attn_args *A, int32_t t, int32_t kvh, int32_t k0, int32_t k1,
                     float *part, float *scores, float *row);
void em_attend_merge(const em_attn_args *A, const float *parts, int32_t n_chunks, float *out);

#endif
