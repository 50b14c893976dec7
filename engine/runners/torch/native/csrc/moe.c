/* The routed FFN of a mixture-of-experts layer (Qwen3-MoE, llama.cpp's qwen3moe):
 *
 *   p = softmax(h R^T [+ b]) over the E experts (float32); the k largest p_e are the token's
 *   choices, divided by their sum when norm_topk; y = sum_e p_e W_down,e (act(W_gate,e h) *
 *   W_up,e h).
 *
 * The (token, choice) pairs are grouped by expert, so each chosen expert's weight rows are read
 * once for all the tokens that chose it: a decode token is 4 experts of one row each, a
 * 128-token prefill of 32 experts ~16 rows each. Weight rows are split between threads in
 * chunks of ROWS_PER_ITEM; each row meets its expert's activation rows 4 at a time (the
 * em_dot4 kernels: the weight block unpacked once for 4 rows), in 8-bit activation blocks
 * like every quantized dot here. Nothing outside the chosen experts' rows is read, so pages
 * of experts never chosen stay out of memory.
 *
 * Item counts of every phase depend only on the batch's shape (N, k, E), never on the routing
 * (team.h: a thread that lags behind evaluates a phase's count late); items past the slots in
 * use do nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "moe.h"
#include "team.h"

#define ROWS_PER_ITEM 16
#define EW_CHUNK 1024
#define PREFETCH_AHEAD 4096 /* bytes, as linear.c */
#define LINE 64

static inline int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

void em_moe_needs(const em_moe *M, int need[4]) {
    em_linear in = {{M->gate, M->up}, 2, 0, NULL, NULL};
    em_linear down = {{M->down}, 1, 0, NULL, NULL};
    em_linear_needs(&in, &need[0], &need[1]);
    em_linear_needs(&down, &need[2], &need[3]);
}

static int is_float(int32_t type) { return type == EM_F32 || type == EM_F16 || type == EM_BF16; }

int em_moe_scratch_init(em_moe_scratch *S, const em_moe *M, int32_t n_tokens, const int need[4]) {
    const int64_t N = n_tokens, k = M->n_used, P = N * k, H = M->hidden, F = M->ffn;
    memset(S, 0, sizeof(*S));
    S->n_tokens = n_tokens, S->n_pairs = (int32_t)P;
    S->n_slots_max = min32(M->n_experts, (int32_t)P);
    S->ids_w = malloc(sizeof(float) * P);
    S->ids = malloc(sizeof(int32_t) * P);
    S->pair_of = malloc(sizeof(int32_t) * P);
    S->pair_token = malloc(sizeof(int32_t) * P);
    S->slot_expert = malloc(sizeof(int32_t) * M->n_experts);
    S->slot_start = malloc(sizeof(int32_t) * (M->n_experts + 1));
    S->expert_row = malloc(sizeof(int32_t) * M->n_experts);
    S->logits = malloc(sizeof(float) * N * M->n_experts);
    S->gu = malloc(sizeof(float) * P * 2 * F);
    S->yp = malloc(sizeof(float) * P * H);
    if (!S->ids_w || !S->ids || !S->pair_of || !S->pair_token || !S->slot_expert ||
        !S->slot_start || !S->expert_row || !S->logits || !S->gu || !S->yp)
        return -1;
    const int floats = is_float(M->gate.type) || is_float(M->up.type); /* they read x itself */
    if (floats && !(S->hp = malloc(sizeof(float) * P * H))) return -1;
    if (em_act_alloc(&S->a_h, NULL, H, n_tokens, (int32_t)H, need[0], need[1]) ||
        em_act_alloc(&S->a_hp, S->hp, H, (int32_t)P, (int32_t)H, need[0], need[1]) ||
        em_act_alloc(&S->a_act, S->gu, 2 * F, (int32_t)P, (int32_t)F, need[2], need[3]))
        return -1;
    return 0;
}

void em_moe_scratch_free(em_moe_scratch *S) {
    free(S->ids_w), free(S->ids), free(S->pair_of), free(S->pair_token), free(S->slot_expert);
    free(S->slot_start), free(S->expert_row), free(S->logits), free(S->hp), free(S->gu), free(S->yp);
    em_act_free(&S->a_h), em_act_free(&S->a_hp), em_act_free(&S->a_act);
    memset(S, 0, sizeof(*S));
}

/* softmax over the E logits, the k largest (ties: the lower expert id), optionally renormed */
static void choose(const em_moe *M, float *logits, int32_t *ids, float *w) {
    const int32_t E = M->n_experts, k = M->n_used;
    float top = logits[0], sum = 0.0f;
    for (int32_t e = 1; e < E; e++) top = fmaxf(top, logits[e]);
    for (int32_t e = 0; e < E; e++) sum += logits[e] = expf(logits[e] - top);
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < E; e++) {
            int taken = 0;
            for (int32_t i = 0; i < j; i++) taken |= ids[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        ids[j] = best, w[j] = logits[best] / sum;
    }
    if (M->norm_topk) {
        float chosen = 0.0f;
        for (int32_t j = 0; j < k; j++) chosen += w[j];
        for (int32_t j = 0; j < k; j++) w[j] /= chosen;
    }
}

/* one thread's single item: choices per token, then the pairs grouped by expert into slots */
static void plan(const em_moe *M, em_moe_scratch *S) {
    const int32_t N = S->n_tokens, k = M->n_used, E = M->n_experts;
    int32_t *row_of = S->expert_row; /* (E,) choices per expert, then its next pair row */
    memset(row_of, 0, sizeof(int32_t) * E);
    for (int32_t t = 0; t < N; t++) {
        choose(M, S->logits + (int64_t)t * E, S->ids + t * k, S->ids_w + t * k);
        for (int32_t j = 0; j < k; j++) row_of[S->ids[t * k + j]]++;
    }
    int32_t slots = 0, row = 0;
    for (int32_t e = 0; e < E; e++) {
        const int32_t count = row_of[e];
        row_of[e] = row;
        if (count) {
            if (M->usage) {
                em_moe_ask_for(M, e);
                M->usage[e] += count, M->usage[E + e] = M->usage[2 * E];
            }
            S->slot_expert[slots] = e, S->slot_start[slots] = row;
            slots++;
        }
        row += count;
    }
    S->slot_start[slots] = row; /* = P */
    if (M->usage) M->usage[2 * E] += N;
    for (int32_t t = 0; t < N; t++)
        for (int32_t j = 0; j < k; j++) {
            const int32_t p = row_of[S->ids[t * k + j]]++;
            S->pair_of[t * k + j] = p, S->pair_token[p] = t;
        }
    S->n_active = slots;
}

static inline void prefetch(const uint8_t *from, const uint8_t *to, const uint8_t *end) {
    for (const uint8_t *c = from; c < to && c < end; c += LINE) __builtin_prefetch(c, 0, 3);
}

/* rows r0 .. r0 + n of w times activation rows p0 .. p1 of a through the tiled matmul:
 * y[p * ldy + col + i] for row r0 + i; 0 where it does not apply (type, size, memory) */
static int tiled_rows(const em_mat *w, int64_t r0, int32_t n, const em_act *a, int32_t p0,
                      int32_t p1, float *y, int64_t ldy, int64_t col) {
    const int kind = em_gemm_kind(w->type);
    if (kind == EM_G_NONE || p1 - p0 < em_gemm_min_rows()) return 0;
    em_gtile *t = em_gemm_thread_tile(kind, n, w->cols);
    if (!t) return 0;
    em_gemm_decode(w, r0, n, t);
    em_gemm_times(t, a, p0, p1, y, ldy, col, NULL, NULL);
    return 1;
}

/* rows j0 .. j1 of one expert's matrix w (first row `base`) times activation rows p0 .. p1 of
 * a: y[p * ldy + col0 + j] */
static void expert_rows(const em_mat *w, const uint8_t *base, int32_t j0, int32_t j1,
                        const em_act *a, int32_t p0, int32_t p1, float *y, int64_t ldy,
                        int64_t col0) {
    const int64_t first = (base - w->data) / w->row_bytes;
    if (tiled_rows(w, first + j0, j1 - j0, a, p0, p1, y, ldy, col0 + j0)) return;
    const em_dot_fn dot = em_dot_for(w->type);
    const em_dot4_fn dot4 = em_dot4_for(w->type);
    const uint8_t *end = base + (int64_t)j1 * w->row_bytes;
    prefetch(base + (int64_t)j0 * w->row_bytes, base + (int64_t)j0 * w->row_bytes + PREFETCH_AHEAD,
             end);
    for (int32_t j = j0; j < j1; j++) {
        const uint8_t *row = base + (int64_t)j * w->row_bytes;
        prefetch(row + PREFETCH_AHEAD, row + PREFETCH_AHEAD + w->row_bytes, end);
        float *out = y + col0 + j;
        int32_t p = p0;
        if (dot4) {
            float four[4];
            for (; p + 4 <= p1; p += 4) {
                dot4(row, a, p, four);
                for (int i = 0; i < 4; i++) out[(int64_t)(p + i) * ldy] = four[i];
            }
        }
        for (; p < p1; p++) out[(int64_t)p * ldy] = dot(row, a, p);
    }
}

/* one phase over (slot, row chunk) items of `mats` (each `rows` rows per expert), writing
 * mats[i]'s rows to columns i * rows .. of y (P, ldy) */
static void experts_phase(const em_moe_scratch *S, const em_mat *mats, int n_mats, int32_t rows,
                          const em_act *a, float *y, int64_t ldy, em_team *T) {
    const int32_t chunks = (rows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM;
    EM_PAR_FOR(T, i, (int64_t)S->n_slots_max * n_mats * chunks) {
        const int32_t s = (int32_t)(i / ((int64_t)n_mats * chunks));
        const int32_t rest = (int32_t)(i % ((int64_t)n_mats * chunks));
        const int32_t which = rest / chunks, c = rest % chunks;
        if (s >= S->n_active) continue;
        const em_mat *w = &mats[which];
        const uint8_t *base = w->data + (int64_t)S->slot_expert[s] * rows * w->row_bytes;
        const int32_t j0 = c * ROWS_PER_ITEM, j1 = min32(j0 + ROWS_PER_ITEM, rows);
        expert_rows(w, base, j0, j1, a, S->slot_start[s], S->slot_start[s + 1], y, ldy,
                    (int64_t)which * rows);
    }
}

/* point a's code buffers at its row r (so that its row 0 is r) */
static void shift_rows(em_act *a, int32_t r) {
    const int64_t k = a->k;
    if (a->q32) a->q32 += r * k, a->d32 += r * (k / 32), a->s32 += r * (k / 32);
    if (a->q256) a->q256 += r * k, a->d256 += r * (k / 256), a->bsum256 += r * (k / 16);
}

/* row 0 of a (one row) rounded to its 8-bit forms */
static void quantize_one(em_act *a) {
    em_phase ph[1] = {0};
    em_team solo = {ph, 0, 1, NULL}; /* a phase of one thread and one item */
    em_act_quantize_rows(a, a->q32 != NULL, a->q256 != NULL, &solo);
}

/* row r of dst = row t of src (codes and scales, and the float row where dst keeps them) */
static void copy_row(em_act *dst, int32_t r, const em_act *src, int32_t t) {
    em_act d = *dst, s = *src;
    if (dst->x)
        memcpy((float *)dst->x + (int64_t)r * dst->ldx, src->x + (int64_t)t * src->ldx,
               sizeof(float) * (size_t)dst->k);
    shift_rows(&d, r), shift_rows(&s, t);
    const size_t k = (size_t)dst->k;
    if (d.q32) {
        memcpy(d.q32, s.q32, k), memcpy(d.d32, s.d32, 4 * (k / 32)), memcpy(d.s32, s.s32, 4 * (k / 32));
    }
    if (d.q256) {
        memcpy(d.q256, s.q256, k), memcpy(d.d256, s.d256, 4 * (k / 256));
        memcpy(d.bsum256, s.bsum256, 2 * (k / 16));
    }
}

static inline float gelu_tanh(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

static inline float silu(float x) { return x / (1.0f + expf(-x)); }

void em_moe_rows(const em_moe *M, const float *h, float *y, em_moe_scratch *S, em_team *T) {
    const int32_t N = S->n_tokens, k = M->n_used, E = M->n_experts, H = M->hidden, F = M->ffn;
    const int64_t P = S->n_pairs;
    const em_dot_fn router_dot = em_dot_for(M->router.type);
    em_act x = S->a_h; /* this thread's view of the token rows: the float h, the shared codes */
    x.x = h;
    EM_PAR_FOR(T, i, (int64_t)N * E + N) {
        if (i < (int64_t)N * E) { /* router logits, one (token, expert) per item */
            const int32_t t = (int32_t)(i / E), e = (int32_t)(i % E);
            const float b = M->router_bias ? M->router_bias[e] : 0.0f;
            S->logits[i] = router_dot(M->router.data + (int64_t)e * M->router.row_bytes, &x, t) + b;
        } else { /* the token's row rounded to 8 bits, once for all its choices */
            em_act one = x;
            const int32_t t = (int32_t)(i - (int64_t)N * E);
            one.m = 1, one.x = h + (int64_t)t * H;
            shift_rows(&one, t);
            quantize_one(&one);
        }
    }
    EM_PAR_FOR(T, one, 1) plan(M, S);
    EM_PAR_FOR(T, p, P) copy_row(&S->a_hp, (int32_t)p, &x, S->pair_token[p]);
    const em_mat gate_up[2] = {M->gate, M->up};
    experts_phase(S, gate_up, 2, F, &S->a_hp, S->gu, 2 * (int64_t)F, T);
    EM_PAR_FOR(T, c, (P * F + EW_CHUNK - 1) / EW_CHUNK) {
        const int64_t end = (c + 1) * EW_CHUNK < P * F ? (c + 1) * EW_CHUNK : P * F;
        for (int64_t i = c * EW_CHUNK; i < end; i++) {
            float *g = S->gu + (i / F) * 2 * F + i % F;
            *g = (M->act ? gelu_tanh(*g) : silu(*g)) * g[F];
        }
    }
    em_act_quantize_rows(&S->a_act, S->a_act.q32 != NULL, S->a_act.q256 != NULL, T);
    experts_phase(S, &M->down, 1, H, &S->a_act, S->yp, H, T);
    EM_PAR_FOR(T, t, N) { /* y = the choices' outputs, weighted, in the order chosen */
        float *out = y + t * H;
        memset(out, 0, sizeof(float) * H);
        for (int32_t j = 0; j < k; j++) {
            const float w = S->ids_w[t * k + j], *src = S->yp + (int64_t)S->pair_of[t * k + j] * H;
            for (int32_t d = 0; d < H; d++) out[d] += w * src[d];
        }
    }
}

int em_moe_forward(const em_moe *M, const float *x, int32_t n_tokens, float *y,
                   int32_t n_threads) {
    int need[4] = {0};
    em_moe_needs(M, need);
    em_moe_scratch S;
    em_phase *phases = NULL;
    int rc = -1;
    if (em_moe_scratch_init(&S, M, n_tokens, need) == 0 &&
        (phases = em_phases_alloc(EM_MOE_PHASES)) != NULL) {
#pragma omp parallel num_threads(n_threads)
        {
            em_team team = {phases, 0, EM_MOE_PHASES, NULL};
            em_moe_rows(M, x, y, &S, &team);
        }
        rc = 0;
    }
    free(phases);
    em_moe_scratch_free(&S);
    return rc;
}
