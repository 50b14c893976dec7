/* One forward step of the decoder for a few tokens (decode, drafts, short chunks), all layers
 * in one call on Ember's thread pool (pool.c): the per-op dispatch of a framework is gone.
 * Work is shared dynamically (team.h), so a thread the OS deschedules stalls no barrier.
 *
 * Per layer (pre-norm; Gemma's sandwich norms and q/k norms where the model has them):
 *   h = norm(x); q|k|v = W_qkv h; q, k = rope(norm_head(q, k)) over the first rope_dim dims
 *   (none on a NoPE layer), q *= q_scale[t] (a temperature); store k, v at the token slots;
 *   a = softmax(q k^T * scale [soft-capped]) v over the cache; o = W_o a [post-norm]; x += o;
 *   h = norm(x); g|u = W_gate_up h; y = W_down (act(g) * u) [post-norm]; x += y.
 * Then logits = W_head norm(x) [soft-capped] for the requested rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "ember_native.h"
#include "moe.h"
#include "pool.h"
#include "team.h"



static void rmsnorm(const float *x, const float *w, int32_t n, float eps, float *y) {
    float ss = 0.0f;
    for (int32_t i = 0; i < n; i++) ss += x[i] * x[i];
    const float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int32_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

/* NeoX (half-split) rotation of a head's first d dims with a (cos, sin) table of d/2 pairs;
 * the dims past d (partial rotary) stay as they are */
static void rope(float *x, const float *cs, int32_t d) {
    const int32_t half = d / 2;
    for (int32_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1], a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

static inline float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}


static inline float silu(float x) { return x / (1.0f + expf(-x)); }

#define EW_CHUNK 1024        /* elements per item of an elementwise loop */
#define PHASES_PER_LAYER 24  /* at most; a dense layer uses 16, a MoE layer 19 */

typedef struct {
    float *x, *h, *qkv, *att, *y, *gu, *cs, *parts, *scratch, *hrows;
    int32_t *task_start, *key_start;
    em_act a_h, a_att, a_ffn, a_head;
    em_moe_scratch moe;  /* for the MoE layers (moe.c), if any */
    int32_t n_tasks_max, scratch_per_thread;
} buffers;

static int alloc_buffers(const em_model *m, const em_step *s, buffers *B) {
    const int64_t N = s->n_tokens, H = m->hidden, D = m->head_dim, F = m->ffn;
    const int64_t qkv = (int64_t)(m->n_heads + 2 * m->n_kv) * D, g = m->n_heads / m->n_kv;
    int32_t max_keys = 1;
    for (int64_t t = 0; t < N; t++) max_keys = s->key_end[t] > max_keys ? s->key_end[t] : max_keys;
    const int64_t chunks = (max_keys + EM_KEY_CHUNK - 1) / EM_KEY_CHUNK;
    memset(B, 0, sizeof(*B));
    B->n_tasks_max = (int32_t)(N * m->n_kv * chunks);
    B->scratch_per_thread = (int32_t)EM_ATTEND_SCRATCH(g, D);
    B->x = malloc(sizeof(float) * N * H);
    B->h = malloc(sizeof(float) * N * H);
    B->y = malloc(sizeof(float) * N * H);
    B->qkv = malloc(sizeof(float) * N * qkv);
    B->att = malloc(sizeof(float) * N * m->n_heads * D);
    B->gu = malloc(sizeof(float) * N * 2 * F);
    B->cs = malloc(sizeof(float) * 2 * N * D);
    B->parts = malloc(sizeof(float) * (size_t)B->n_tasks_max * g * (2 + D));
    B->scratch = malloc(sizeof(float) * (size_t)B->scratch_per_thread * s->n_threads);
    B->hrows = malloc(sizeof(float) * (s->n_rows > 0 ? s->n_rows : 1) * H);
    B->task_start = malloc(sizeof(int32_t) * (N + 1));
    B->key_start = malloc(sizeof(int32_t) * N);
    if (!B->x || !B->h || !B->y || !B->qkv || !B->att || !B->gu || !B->cs || !B->parts ||
        !B->scratch || !B->hrows || !B->task_start || !B->key_start)
        return -1;
    int n32[3] = {0}, n256[3] = {0}, h32 = 0, h256 = 0, moe_need[4] = {0};
    const em_moe *moe = NULL;
    for (int32_t l = 0; l < m->n_layers; l++) {
        const em_layer *L = &m->layers[l];
        if (L->moe) em_moe_needs(moe = L->moe, moe_need);
        em_linear_needs(&L->qkv, &n32[0], &n256[0]);
        em_linear_needs(&L->gate_up, &n32[0], &n256[0]);
        em_linear_needs(&L->o, &n32[1], &n256[1]);
        em_linear_needs(&L->down, &n32[2], &n256[2]);
    }
    em_linear_needs(&m->head, &h32, &h256);
    if (em_act_alloc(&B->a_h, B->h, H, (int32_t)N, (int32_t)H, n32[0], n256[0]) ||
        em_act_alloc(&B->a_att, B->att, m->n_heads * D, (int32_t)N, (int32_t)(m->n_heads * D),
                     n32[1], n256[1]) ||
        em_act_alloc(&B->a_ffn, B->gu, 2 * F, (int32_t)N, (int32_t)F, n32[2], n256[2]) ||
        em_act_alloc(&B->a_head, B->hrows, H, s->n_rows, (int32_t)H, h32, h256))
        return -1;
    if (moe && em_moe_scratch_init(&B->moe, moe, (int32_t)N, moe_need)) return -1;
    return 0;
}

static void free_buffers(buffers *B) {
    free(B->x), free(B->h), free(B->y), free(B->qkv), free(B->att), free(B->gu), free(B->cs);
    free(B->parts), free(B->scratch), free(B->hrows), free(B->task_start), free(B->key_start);
    em_act_free(&B->a_h), em_act_free(&B->a_att), em_act_free(&B->a_ffn), em_act_free(&B->a_head);
    em_moe_scratch_free(&B->moe);
}

static void quantize(em_act *a, em_team *T) {
    em_act_quantize_rows(a, a->q32 != NULL, a->q256 != NULL, T);
}

/* q/k norms, RoPE, and the KV stores of one layer (all tokens and heads) */
static void qk_rope_store(const em_model *m, const em_layer *L, const em_step *s, buffers *B,
                          em_team *T) {
    const int32_t D = m->head_dim, nh = m->n_heads, nkv = m->n_kv, heads = nh + nkv;
    const int64_t stride = (int64_t)(nh + 2 * nkv) * D;
    EM_PAR_FOR(T, i, (int64_t)s->n_tokens * heads) {
        const int64_t t = i / heads;
        const int32_t hd = (int32_t)(i % heads);
        float *v = B->qkv + t * stride + (int64_t)hd * D;
        const float *w = hd < nh ? L->q_norm : L->k_norm;
        if (w) rmsnorm(v, w, D, m->norm_eps, v);
        if (L->rope >= 0) rope(v, B->cs + ((int64_t)L->rope * s->n_tokens + t) * D, m->rope_dim);
        if (hd < nh && s->q_scale)
            for (int32_t j = 0; j < D; j++) v[j] *= s->q_scale[t];
        if (hd >= nh) {
            const int64_t row = s->slots[t] * nkv + (hd - nh);
            em_kv_store(L->k_pool, L->k_scale, m->kv_type, row, D, v);
            em_kv_store(L->v_pool, L->v_scale, m->kv_type, row, D, v + (int64_t)nkv * D);
        }
    }
}

/* softmax(q k^T) v per token and KV head, over chunks of keys on all threads (partial
 * softmaxes, merged afterwards) */
static void attention(const em_model *m, const em_layer *L, const em_step *s, buffers *B,
                      em_team *T) {
    const int32_t N = s->n_tokens, nkv = m->n_kv, g = m->n_heads / nkv, D = m->head_dim;
    EM_PAR_FOR(T, one, 1) {
        B->task_start[0] = 0;
        for (int32_t t = 0; t < N; t++) {
            const int32_t end = s->key_end[t];
            const int32_t start = L->window > 0 && end > L->window ? end - L->window : 0;
            B->key_start[t] = start;
            B->task_start[t + 1] = B->task_start[t] + (end - start + EM_KEY_CHUNK - 1) / EM_KEY_CHUNK;
        }
    }
    em_attn_args A = {B->qkv, (int64_t)(m->n_heads + 2 * nkv) * D, g, D, nkv, m->block_size,
                      m->kv_type, m->attn_scale, m->attn_softcap, L->k_pool, L->v_pool,
                      L->k_scale, L->v_scale, s->table, s->blocks};
    /* the count of key chunks from the step itself, not from B->task_start: a thread that
     * lags behind reads this after later layers have rewritten B (its items read B only
     * while their phase is current) */
    int32_t per_kv = 0;
    for (int32_t t = 0; t < N; t++) {
        const int32_t end = s->key_end[t];
        const int32_t start = L->window > 0 && end > L->window ? end - L->window : 0;
        per_kv += (end - start + EM_KEY_CHUNK - 1) / EM_KEY_CHUNK;
    }
    const int32_t part = g * (2 + D);
    float *scratch = T->scratch;
    EM_PAR_FOR(T, i, (int64_t)per_kv * nkv) {
        const int32_t kvh = (int32_t)(i / per_kv), c = (int32_t)(i % per_kv);
        int32_t t = 0;
        while (B->task_start[t + 1] <= c) t++;
        const int32_t k0 = B->key_start[t] + (c - B->task_start[t]) * EM_KEY_CHUNK;
        const int32_t k1 = k0 + EM_KEY_CHUNK < s->key_end[t] ? k0 + EM_KEY_CHUNK : s->key_end[t];
        em_attend_chunk(&A, t, kvh, k0, k1, B->parts + (int64_t)i * part, scratch,
                        scratch + g * EM_KEY_CHUNK);
    }
    EM_PAR_FOR(T, i, (int64_t)N * nkv) {
        const int32_t t = (int32_t)(i / nkv), kvh = (int32_t)(i % nkv);
        const int32_t first = kvh * per_kv + B->task_start[t];
        em_attend_merge(&A, B->parts + (int64_t)first * part,
                        B->task_start[t + 1] - B->task_start[t],
                        B->att + (int64_t)t * m->n_heads * D + (int64_t)kvh * g * D);
    }
}

/* y = W_down (act(W_gate h) * W_up h) for the normed rows h */
static void dense_ffn(const em_model *m, const em_layer *L, int32_t N, buffers *B, em_team *T) {
    const int32_t F = m->ffn, H = m->hidden;
    quantize(&B->a_h, T);
    em_linear_rows(&L->gate_up, &B->a_h, B->gu, 2 * (int64_t)F, T);
    EM_PAR_FOR(T, c, ((int64_t)N * F + EW_CHUNK - 1) / EW_CHUNK) {
        const int64_t end = (c + 1) * EW_CHUNK < (int64_t)N * F ? (c + 1) * EW_CHUNK : (int64_t)N * F;
        for (int64_t i = c * EW_CHUNK; i < end; i++) {
            float *gate = B->gu + (i / F) * 2 * F + i % F;
            *gate = (m->act ? gelu_tanh(*gate) : silu(*gate)) * gate[F];
        }
    }
    quantize(&B->a_ffn, T);
    em_linear_rows(&L->down, &B->a_ffn, B->y, H, T);
}

static void layer(const em_model *m, const em_layer *L, const em_step *s, buffers *B, em_team *T) {
    const int32_t N = s->n_tokens, H = m->hidden;
    EM_PAR_FOR(T, t, N)
        rmsnorm(B->x + (int64_t)t * H, L->attn_norm, H, m->norm_eps, B->h + (int64_t)t * H);
    quantize(&B->a_h, T);
    em_linear_rows(&L->qkv, &B->a_h, B->qkv, (int64_t)(m->n_heads + 2 * m->n_kv) * m->head_dim, T);
    qk_rope_store(m, L, s, B, T);
    attention(m, L, s, B, T);
    quantize(&B->a_att, T);
    em_linear_rows(&L->o, &B->a_att, B->y, H, T);
    EM_PAR_FOR(T, t, N) {
        float *y = B->y + (int64_t)t * H, *x = B->x + (int64_t)t * H;
        if (L->post_attn_norm) rmsnorm(y, L->post_attn_norm, H, m->norm_eps, y);
        for (int32_t i = 0; i < H; i++) x[i] += y[i];
        rmsnorm(x, L->ffn_norm, H, m->norm_eps, B->h + (int64_t)t * H);
    }
    if (L->moe)
        em_moe_rows(L->moe, B->h, B->y, &B->moe, T);
    else
        dense_ffn(m, L, N, B, T);
    EM_PAR_FOR(T, t, N) {
        float *y = B->y + (int64_t)t * H, *x = B->x + (int64_t)t * H;
        if (L->post_ffn_norm) rmsnorm(y, L->post_ffn_norm, H, m->norm_eps, y);
        for (int32_t i = 0; i < H; i++) x[i] += y[i];
    }
}

typedef struct {
    const em_model *m;
    const em_step *s;
    buffers *B;
    float *logits;
    em_phase *phases;
    int32_t n_phases;
} step_job;

/* one thread's part of the step: every thread walks all phases, claiming items (team.h) */
static void step_task(void *arg, int32_t tid) {
    const step_job *J = arg;
    const em_model *m = J->m;
    const em_step *s = J->s;
    buffers *B = J->B;
    const int32_t N = s->n_tokens, H = m->hidden, D = m->head_dim;
    em_team team = {J->phases, 0, J->n_phases, B->scratch + (int64_t)tid * B->scratch_per_thread};
    em_team *T = &team;
    EM_PAR_FOR(T, i, 2 * (int64_t)N) { /* (cos, sin) pairs per RoPE table and token */
        const int32_t r = (int32_t)(i / N), t = (int32_t)(i % N);
        const float pos = (float)s->positions[t], f = s->rope_factor[r];
        for (int32_t j = 0; j < m->rope_dim / 2; j++) {
            const float a = pos * s->inv_freq[r][j];
            B->cs[i * D + 2 * j] = cosf(a) * f;
            B->cs[i * D + 2 * j + 1] = sinf(a) * f;
        }
    }
    for (int32_t l = 0; l < m->n_layers; l++) layer(m, &m->layers[l], s, B, T);
    EM_PAR_FOR(T, r, s->n_rows)
        rmsnorm(B->x + (int64_t)s->rows[r] * H, m->out_norm, H, m->norm_eps, B->hrows + r * H);
    quantize(&B->a_head, T);
    em_linear_rows(&m->head, &B->a_head, J->logits, m->vocab, T);
    if (m->final_softcap > 0.0f) {
        const float cap = m->final_softcap;
        const int64_t total = (int64_t)s->n_rows * m->vocab;
        EM_PAR_FOR(T, c, (total + EW_CHUNK - 1) / EW_CHUNK) {
            const int64_t end = (c + 1) * EW_CHUNK < total ? (c + 1) * EW_CHUNK : total;
            for (int64_t i = c * EW_CHUNK; i < end; i++)
                J->logits[i] = cap * tanhf(J->logits[i] / cap);
        }
    }
}

int em_forward(const em_model *m, const em_step *s, float *logits) {
    buffers B;
    if (alloc_buffers(m, s, &B) != 0) {
        free_buffers(&B);
        return -1;
    }
    const int32_t n_phases = PHASES_PER_LAYER * m->n_layers + 8;
    step_job job = {m, s, &B, logits, em_phases_alloc(n_phases), n_phases};
    if (!job.phases) {
        free_buffers(&B);
        return -1;
    }
    em_gather_rows(&m->embed, s->token_ids, s->n_tokens, B.x, m->embed_scale);
    em_pool_run(s->n_threads, s->n_tokens, step_task, &job);
    free(job.phases);
    free_buffers(&B);
    return 0;
}
