/* A mixture-of-experts FFN over the file's stacked expert tensors (moe.c). */
#ifndef EMBER_MOE_H
#define EMBER_MOE_H

#include "ember_native.h"

/* One layer's routed experts. The expert stacks are the GGUF tensors as they are in the mmap:
 * gate and up (E * ffn rows, hidden cols), expert e's rows e * ffn .. (e + 1) * ffn; down
 * (E * hidden rows, ffn cols). Only the rows of the experts a token chooses are read. */
struct em_moe_ {
    int32_t n_experts, n_used;
    int32_t norm_topk;        /* 1: the k chosen weights are divided by their sum */
    int32_t act;              /* 0 silu, 1 gelu (tanh approximation) */
    int32_t hidden, ffn;      /* ffn: one expert's width */
    em_mat router;            /* (E, hidden) F32 */
    const float *router_bias; /* (E,) or NULL */
    em_mat gate, up, down;
    /* (2E + 1,) or NULL: [0, E) how often each expert was chosen; [E, 2E) the layer's token
     * count when it last was; [2E] the tokens this layer has routed */
    int64_t *usage;
};
typedef struct em_moe_ em_moe;

/* Scratch for N tokens of one model's MoE layers (the same shapes in every layer). A token's
 * k choices are its "pairs"; pairs are grouped by expert into P = N * k rows, and the experts
 * in use are numbered by "slot" (at most S = min(E, P) of them). */
typedef struct {
    int32_t n_tokens, n_pairs, n_slots_max;
    float *ids_w;          /* (N, k) chosen weights */
    int32_t *ids;          /* (N, k) chosen experts, best first */
    int32_t *pair_of;      /* (N, k) the pair row of token t's j-th choice */
    int32_t *pair_token;   /* (P,) the token of each pair row */
    int32_t *slot_expert;  /* (S,) the expert of each slot, in expert order */
    int32_t *slot_start;   /* (S + 1,) the slot's first pair row */
    int32_t *expert_row;   /* (E,) planning scratch */
    int32_t n_active;      /* slots in use this layer */
    float *logits;         /* (N, E) router logits */
    float *hp;             /* (P, hidden) the pairs' float rows, for float gate/up; or NULL */
    float *gu, *yp;        /* (P, 2 ffn), (P, hidden) */
    em_act a_h;            /* the tokens' rows rounded for gate and up (x: the caller's h) */
    em_act a_hp;           /* a_h's rows in pair order (codes only) */
    em_act a_act;          /* act(gate) * up (gu's first half) rounded for down */
} em_moe_scratch;

/* scratch for n_tokens tokens of experts shaped like M whose weights need the given 8-bit
 * activation forms (OR of every layer's em_moe_needs); -1 when out of memory (free it anyway) */
int em_moe_scratch_init(em_moe_scratch *S, const em_moe *M, int32_t n_tokens, const int need[4]);
void em_moe_scratch_free(em_moe_scratch *S);
/* need[0..1]: q8_0 / q8_K for gate and up; need[2..3]: for down (ORed in) */
void em_moe_needs(const em_moe *M, int need[4]);

/* y (N, hidden) = the routed FFN of h (N, hidden): EM_MOE_PHASES phases of the caller's team */
void em_moe_rows(const em_moe *M, const float *h, float *y, em_moe_scratch *S, em_team *T);

/* moe_pages.c: before expert e runs, ask for its rows if this is its first use, or its first
 * after a while idle with its pages reclaimed (needs M->usage) */
void em_moe_ask_for(const em_moe *M, int32_t e);

/* exported: the same for a prefill-sized batch on n_threads OpenMP threads; -1 out of memory */
int em_moe_forward(const em_moe *M, const float *x, int32_t n_tokens, float *y,
                   int32_t n_threads);

#define EM_MOE_PHASES 8

#endif
