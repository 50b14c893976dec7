/* Ember's own small thread pool for the decode step (em_forward), instead of OpenMP's.
 *
 * Why not OpenMP: libgomp's idle workers spin for a long time (GOMP_SPINCOUNT, 300k by
 * default, fixed when torch loads it) after every parallel region, and every region ends
 * with a barrier that waits for every thread. On a busy machine both cost: the spinning
 * worker takes the core the caller's Python needs between steps, and a worker the OS has not
 * yet scheduled holds the caller at the end of each step. Here:
 *
 *   - the caller works on the job at once and never waits for a worker to *start*: a worker
 *     that wakes late finds the job closed and goes back to sleep;
 *   - the caller waits at the end only for workers that joined (they hold items, team.h);
 *   - an idle worker spins briefly, then sleeps on a futex (Linux; elsewhere short naps);
 *   - where sharing stalls more than it gains (a busy machine), steps run on one thread.
 *
 * One job at a time: a second caller (another Python thread; ctypes drops the GIL) runs its
 * job on its own thread rather than waiting. After fork() the child starts without workers
 * and makes new ones on its next call.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "pool.h"
#include "team.h"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define MAX_WORKERS 63
#define SPIN_IDLE 2000             /* relax() rounds before an idle worker sleeps (~50 us) */
#define CLOSED ((uint64_t)1 << 31) /* state: gen << 32 | CLOSED | number of joined workers */
#define JOINED (CLOSED - 1)

static struct {
    pthread_mutex_t run; /* held by the caller of the running job */
    int32_t n_workers;
    _Atomic uint32_t gen; /* job number; the futex idle workers sleep on */
    _Atomic uint64_t state;
    em_task_fn fn; /* the job (stable while any worker is joined) */
    void *arg;
    int32_t n_threads;
} P = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, NULL, NULL, 0};

_Atomic uint64_t em_team_stall_ns = 0;

/* Whether to share a step at all. On a machine whose other work keeps descheduling our
 * threads, a worker preempted while it holds an item stalls the caller until the OS runs it
 * again, and one thread can beat two. Steps whose waiters stalled (over a tenth of the step
 * past their spin) are the sign: then every EXPLORE-th step runs alone, and the faster way
 * (moving averages of time per unit of work) is used, with a step of the other way every
 * EXPLORE-th step to notice when the machine changes. Guarded by P.run. */
#define EXPLORE 16
static struct {
    double ns[2]; /* [shared, alone]: ns per unit */
    int have[2];
    int stalled;
    uint32_t step;
} A;

static int choose_alone(void) {
    const int alone_best = A.have[0] && A.have[1] && A.ns[1] < A.ns[0];
    if (++A.step % EXPLORE) return alone_best;
    return alone_best ? 0 : A.stalled;
}

static void record(int alone, uint64_t ns, int32_t units) {
    const double per = (double)ns / (units > 0 ? units : 1);
    A.ns[alone] = A.have[alone] ? 0.7 * A.ns[alone] + 0.3 * per : per;
    A.have[alone] = 1;
}

static void sleep_while(_Atomic uint32_t *word, uint32_t value) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#else
    (void)word, (void)value;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
#endif
}

static void wake_all(_Atomic uint32_t *word) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* join job gen unless it is closed or already replaced; 1 if joined */
static int join(uint32_t gen) {
    uint64_t st = atomic_load_explicit(&P.state, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(st >> 32) != gen || (st & CLOSED)) return 0;
        if (atomic_compare_exchange_weak_explicit(&P.state, &st, st + 1, memory_order_acquire,
                                                  memory_order_acquire))
            return 1;
    }
}

static void *worker(void *p) {
    const int32_t tid = (int32_t)(intptr_t)p;
    uint32_t seen = atomic_load_explicit(&P.gen, memory_order_acquire);
    for (;;) {
        uint32_t gen;
        for (int spins = 0; (gen = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen;)
            if (++spins < SPIN_IDLE)
                EM_RELAX();
            else
                sleep_while(&P.gen, seen);
        seen = gen;
        if (!join(gen)) continue;
        if (tid < P.n_threads) P.fn(P.arg, tid);
        atomic_fetch_sub_explicit(&P.state, 1, memory_order_release);
    }
    return NULL;
}

static void after_fork_in_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    P.run = fresh;
    P.n_workers = 0; /* the workers did not survive the fork */
    atomic_store(&P.state, 0);
}

static void grow(int32_t n_workers) {
    static int atfork_done = 0;
    if (!atfork_done) atfork_done = pthread_atfork(NULL, NULL, after_fork_in_child) == 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1 << 20);
    while (P.n_workers < n_workers && P.n_workers < MAX_WORKERS) {
        pthread_t th;
        if (pthread_create(&th, &attr, worker, (void *)(intptr_t)(P.n_workers + 1)) != 0) break;
        P.n_workers++;
    }
    pthread_attr_destroy(&attr);
}

void em_pool_run(int32_t n_threads, int32_t units, em_task_fn fn, void *arg) {
    if (n_threads <= 1 || pthread_mutex_trylock(&P.run) != 0) {
        fn(arg, 0); /* alone: one thread asked for, or the pool is busy with another job */
        return;
    }
    const uint64_t t0 = em_now_ns();
    if (choose_alone()) {
        fn(arg, 0);
        record(1, em_now_ns() - t0, units);
        pthread_mutex_unlock(&P.run);
        return;
    }
    const uint64_t stall0 = atomic_load_explicit(&em_team_stall_ns, memory_order_relaxed);
    if (P.n_workers < n_threads - 1) grow(n_threads - 1);
    const uint32_t gen = atomic_load_explicit(&P.gen, memory_order_relaxed) + 1;
    P.fn = fn, P.arg = arg, P.n_threads = n_threads;
    atomic_store_explicit(&P.state, (uint64_t)gen << 32, memory_order_release);
    atomic_store_explicit(&P.gen, gen, memory_order_seq_cst);
    wake_all(&P.gen);
    fn(arg, 0);
    /* close the job to late workers, then wait for the ones inside to leave */
    atomic_fetch_or_explicit(&P.state, CLOSED, memory_order_acq_rel);
    for (int spins = 0; atomic_load_explicit(&P.state, memory_order_acquire) & JOINED;)
        if (++spins < EM_SPIN_BEFORE_YIELD)
            EM_RELAX();
        else
            sched_yield();
    const uint64_t ns = em_now_ns() - t0;
    A.stalled = (atomic_load_explicit(&em_team_stall_ns, memory_order_relaxed) - stall0) * 10 > ns;
    record(0, ns, units);
    pthread_mutex_unlock(&P.run);
}
