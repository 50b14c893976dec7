/* Which pages of a MoE layer's experts the kernel reads, and when (moe.c calls this as tokens
 * choose experts; residency.py advises the mapping at load). */
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "moe.h"

/* ask the kernel to read rows e * rows .. (e + 1) * rows of w now: the loader made the mapping
 * MADV_RANDOM (residency.py), so without this the first use of an expert would be one
 * synchronous page fault per 4 KiB. Linux reads at most one read-ahead window per call (128 KiB
 * by default), hence the chunks. */
#define WILLNEED_CHUNK (128 << 10)
#define IDLE_TOKENS 64 /* an expert unchosen this long may have left the page cache: probe it */
static void will_need(const em_mat *w, int32_t e, int32_t rows) {
#if defined(__unix__) || defined(__APPLE__)
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t from = (uintptr_t)(w->data + (int64_t)e * rows * w->row_bytes);
    const uintptr_t to = from + (uintptr_t)((int64_t)rows * w->row_bytes);
    for (uintptr_t at = from / page * page; at < to; at += WILLNEED_CHUNK) {
        const uintptr_t n = to - at < WILLNEED_CHUNK ? to - at : WILLNEED_CHUNK;
        posix_madvise((void *)at, n, POSIX_MADV_WILLNEED);
    }
#else
    (void)w, (void)e, (void)rows;
#endif
}

/* whether the first page of expert e's rows of w is in memory (1 where it cannot be told) */
static int resident(const em_mat *w, int32_t e, int32_t rows) {
#if defined(__linux__) || defined(__APPLE__)
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t at = (uintptr_t)(w->data + (int64_t)e * rows * w->row_bytes) / page * page;
#if defined(__APPLE__)
    char vec = 0;
#else
    unsigned char vec = 0;
#endif
    return mincore((void *)at, (size_t)page, &vec) != 0 || (vec & 1);
#else
    (void)w, (void)e, (void)rows;
    return 1;
#endif
}

/* expert e's first use, or its first after IDLE_TOKENS without one whose pages the kernel has
 * since reclaimed (a model larger than memory): ask for all of its rows in one go */
void em_moe_ask_for(const em_moe *M, int32_t e) {
    int64_t *u = M->usage;
    const int64_t idle = u[2 * M->n_experts] - u[M->n_experts + e];
    if (u[e] == 0 || (idle >= IDLE_TOKENS && !(resident(&M->gate, e, M->ffn) &&
                                             resident(&M->up, e, M->ffn) &&
                                             resident(&M->down, e, M->hidden)))) {
        will_need(&M->gate, e, M->ffn);
        will_need(&M->up, e, M->ffn);
        will_need(&M->down, e, M->hidden);
    }
}
