/*
 * threadpool.h - a fixed set of worker threads that run one parallel job at a time.
 *
 * wgml_threadpool_run(pool, fn, ctx) calls fn(ctx, i, n) once for every thread
 * index i in [0, n), the calling thread doing i = 0, and returns when all are
 * done. Workers spin briefly between jobs (decode issues hundreds of small jobs
 * per token, so waking a sleeping thread each time would dominate) and then
 * sleep on a condition variable.
 */
#ifndef WGML_CORE_THREADPOOL_H
#define WGML_CORE_THREADPOOL_H

#include "wgml.h"

typedef struct wgml_threadpool wgml_threadpool;
typedef void (*wgml_task_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0 means one per online CPU. */
wgml_status wgml_threadpool_create(int n_threads, wgml_threadpool **out, wgml_error *err);
void wgml_threadpool_free(wgml_threadpool *pool);
int wgml_threadpool_size(const wgml_threadpool *pool);
void wgml_threadpool_run(wgml_threadpool *pool, wgml_task_fn fn, void *ctx);

/* Number of CPUs this process may run on. */
int wgml_cpu_count(void);

#endif
