/* Ember's thread pool for the decode step (pool.c). */
#ifndef EMBER_POOL_H
#define EMBER_POOL_H

#include <stdint.h>

/* fn(arg, tid) runs on the caller (tid 0) and on up to n_threads - 1 workers (tid 1 ..) that
 * join while the caller is still working (or on the caller alone, where that has measured
 * faster; units: the job's size, e.g. tokens, for those measurements); returns when the
 * caller's call has returned and every worker that joined has left. fn must share its work
 * dynamically (team.h): it cannot know how many threads take part. */
typedef void (*em_task_fn)(void *arg, int32_t tid);
void em_pool_run(int32_t n_threads, int32_t units, em_task_fn fn, void *arg);

#endif
