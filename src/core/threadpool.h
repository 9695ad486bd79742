/*
 * threadpool.h - a fixed set of worker threads that run one parallel job at a time.
 *
 * wgml_threadpool_run(pool, fn, ctx) calls fn(ctx, i, n) once for every thread
 * index i in [0, n), the calling thread doing i = 0, and returns when all are
 * done. Workers spin briefly between jobs (decode issues hundreds of small jobs
 * per token, so waking a sleeping thread each time would dominate) and then
 * sleep on a condition variable.
 *
 * wgml_threadpool_run_range(pool, fn, ctx, n, chunk) shares the items [0, n)
 * out instead: every thread first works through its own contiguous share, a
 * chunk at a time and in order (so each streams through memory as with a
 * fixed split), then takes the chunks the others have not reached yet. A
 * thread that the OS or a neighbouring VM slows then no longer holds up the
 * whole job: on a shared 2-vCPU host one thread ran up to a third slower than
 * the other (not always the same one), and with a fixed split every decode
 * matmul waited for it.
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

/* fn(ctx, lo, hi, ith): items [lo, hi), on thread ith; called once per chunk. */
typedef void (*wgml_range_fn)(void *ctx, int64_t lo, int64_t hi, int ith);
/* Calls fn over [0, n) in chunks of `chunk` items (the last may be shorter);
 * chunk boundaries are multiples of `chunk`. A pool of one thread, or a range
 * of one chunk (n <= chunk), makes a single call for all of [0, n) on the
 * calling thread, as ith 0, without waking the workers. Returns when all are
 * done. */
void wgml_threadpool_run_range(wgml_threadpool *pool, wgml_range_fn fn, void *ctx, int64_t n, int64_t chunk);

/* Number of CPUs this process may run on (WebAssembly: 1 + the idle worker
 * slots, below). */
int wgml_cpu_count(void);

#if defined(__wasm__)
/* The browser build's worker threads (web/thread.js, src/web/web_threads.c).
 * The main thread adds a slot per Web Worker it starts; that worker then calls
 * wgml_threadpool_wasm_serve(slot), which marks the slot idle and never
 * returns: it runs the jobs of whichever pool claims it. A pool created with
 * n threads claims up to n - 1 idle slots (fewer if fewer are idle) and hands
 * them back when freed. */
#define WGML_WASM_MAX_THREADS 64
int wgml_threadpool_wasm_add_slot(void); /* main thread; the slot's number, -1 when all are taken */
void wgml_threadpool_wasm_serve(int slot);
int wgml_threadpool_wasm_idle(void); /* slots serving and not in a pool */
#endif

#endif
