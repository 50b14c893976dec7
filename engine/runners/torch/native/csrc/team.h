/* Dynamic work sharing inside one parallel job (pool.c, or an OpenMP region), without
 * thread barriers.
 *
 * A step is a fixed sequence of phases (each a loop over n independent items); every thread
 * walks the same sequence. Items are claimed one at a time from a shared counter, and a phase
 * ends when all its items are *done*, not when every thread has *arrived*: a thread that the
 * OS has descheduled holds up the others only while it holds an unfinished item, never for
 * its share of a static split (the stall `omp for` + barrier had on busy cores, where every
 * one of a step's ~250 barriers waited for the slowest thread). The thread that is running
 * does the work of the one that is not.
 *
 * Waiting for the last items of a phase spins a little (the usual case: the other thread is
 * running and nearly done), then yields the core (sched_yield), so a busy machine's other
 * work runs instead of our spin and the descheduled thread's core is not the only one free.
 */
#ifndef EMBER_TEAM_H
#define EMBER_TEAM_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "ember_native.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EM_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define EM_RELAX() __asm__ __volatile__("yield")
#else
#define EM_RELAX() ((void)0)
#endif

#define EM_SPIN_BEFORE_YIELD 512

/* nanoseconds waiters spent past their spin, giving their cores away (pool.c reads it) */
extern _Atomic uint64_t em_team_stall_ns;

static inline uint64_t em_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct {
    _Atomic int64_t next; /* next unclaimed item */
    _Atomic int64_t done; /* items finished */
    char pad_[48];        /* one cache line per phase */
} em_phase;

/* one thread's cursor into the shared phases (typedef em_team in ember_native.h) */
struct em_team_ {
    em_phase *ph;
    int32_t at, n_phases;
    float *scratch; /* this thread's scratch (the decode step's), or NULL */
};

/* n_phases zeroed phases (free() them after the parallel region); NULL if out of memory */
static inline em_phase *em_phases_alloc(int32_t n_phases) {
    return calloc((size_t)n_phases, sizeof(em_phase));
}

static inline int64_t em_claim(em_team *t) {
    if (t->at >= t->n_phases) abort(); /* a step uses more phases than it allocated */
    return atomic_fetch_add_explicit(&t->ph[t->at].next, 1, memory_order_relaxed);
}

static inline void em_item_done(em_team *t) {
    atomic_fetch_add_explicit(&t->ph[t->at].done, 1, memory_order_release);
}

/* wait until the phase's n items are done (their writes visible), then go to the next phase */
static inline void em_phase_end(em_team *t, int64_t n) {
    em_phase *p = &t->ph[t->at];
    uint64_t since = 0;
    for (int spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < n;) {
        if (++spins < EM_SPIN_BEFORE_YIELD) {
            EM_RELAX();
        } else {
            if (!since) since = em_now_ns();
            sched_yield();
        }
    }
    if (since) atomic_fetch_add_explicit(&em_team_stall_ns, em_now_ns() - since, memory_order_relaxed);
    t->at++;
}

/* for (i over 0 .. n-1, items claimed dynamically); the phase ends (em_phase_end) when the loop
 * does. Not nestable; `continue` is fine, `break`/`return` are not. n must not depend on
 * shared buffers that a later phase rewrites: a thread that lags behind evaluates it late. */
#define EM_PAR_FOR(T, i, n)                                                                  \
    for (int64_t i, em_n_ = (n); (i = em_claim(T)) < em_n_ || (em_phase_end(T, em_n_), 0); \
         em_item_done(T))

#endif
