/*
 * threadpool.c - see threadpool.h.
 *
 * A job is published by bumping `generation`; each worker remembers the last
 * generation it ran. Workers count themselves done through `pending`. Both are
 * atomics; the mutex/condvar pair is only for sleeping when idle.
 *
 * WebAssembly (wasi-libc has no threads): a pool is always one thread, the
 * caller, and run() is a plain call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/threadpool.h"

#include "core/alloc.h"
#include "core/error.h"

#if defined(__wasm__)

struct wgml_threadpool {
    int n;
};

int wgml_cpu_count(void) { return 1; }

wgml_status wgml_threadpool_create(int n_threads, wgml_threadpool **out, wgml_error *err) {
    (void)n_threads;
    *out = wgml_calloc(1, sizeof **out);
    if (!*out) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating thread pool");
    (*out)->n = 1;
    return WGML_OK;
}

void wgml_threadpool_free(wgml_threadpool *p) { wgml_free(p); }

int wgml_threadpool_size(const wgml_threadpool *p) { return p ? p->n : 1; }

void wgml_threadpool_run(wgml_threadpool *p, wgml_task_fn fn, void *ctx) {
    (void)p;
    fn(ctx, 0, 1);
}

void wgml_threadpool_run_range(wgml_threadpool *p, wgml_range_fn fn, void *ctx, int64_t n, int64_t chunk) {
    (void)p;
    (void)chunk;
    if (n > 0) fn(ctx, 0, n, 0);
}

#else /* native: worker threads */

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Between jobs a worker spins briefly (decode issues a job every few
 * microseconds), then yields its core for a while (other threads - a GPU
 * driver's, another pool's - may need it), then sleeps. */
#define SPIN_ITERATIONS 20000
#define YIELD_ITERATIONS 1000

/* One thread's share of a range job, on its own cache line: chunks
 * [next, end) are not taken yet. Its owner and the other threads all take
 * chunks with an atomic add, so no chunk runs twice. */
typedef struct {
    _Alignas(64) atomic_llong next;
    int64_t end;
} range_share;

struct wgml_threadpool {
    int n;
    range_share *shares; /* n of them */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint generation;
    atomic_int pending;
    atomic_int stop;
    atomic_int sleepers;
    wgml_task_fn fn;
    void *ctx;
};

typedef struct {
    wgml_threadpool *pool;
    int index;
} worker_arg;

static worker_arg *worker_args(wgml_threadpool *p) { return (worker_arg *)(p->threads + p->n); }

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    wgml_threadpool *p = wa->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERATIONS) {
                CPU_RELAX();
                continue;
            }
            if (spins < SPIN_ITERATIONS + YIELD_ITERATIONS) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) break;
        seen = gen;
        p->fn(p->ctx, wa->index, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
    return NULL;
}

int wgml_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

wgml_status wgml_threadpool_create(int n_threads, wgml_threadpool **out, wgml_error *err) {
    *out = NULL;
    if (n_threads <= 0) n_threads = wgml_cpu_count();
    if (n_threads > 512) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "too many threads: %d", n_threads);
    wgml_threadpool *p = wgml_calloc(1, sizeof *p);
    if (!p) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating thread pool");
    p->n = n_threads;
    p->threads = wgml_calloc((size_t)n_threads, sizeof(pthread_t) + sizeof(worker_arg));
    p->shares = wgml_aligned_alloc((size_t)n_threads * sizeof(range_share));
    if (!p->threads || !p->shares) {
        wgml_free(p->threads);
        wgml_aligned_free(p->shares);
        wgml_free(p);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating thread pool");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = &worker_args(p)[i];
        wa->pool = p;
        wa->index = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            p->n = i; /* stop the ones already started */
            wgml_threadpool_free(p);
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "cannot start worker thread %d", i);
        }
    }
    *out = p;
    return WGML_OK;
}

void wgml_threadpool_free(wgml_threadpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    wgml_free(p->threads);
    wgml_aligned_free(p->shares);
    wgml_free(p);
}

int wgml_threadpool_size(const wgml_threadpool *p) { return p ? p->n : 1; }

void wgml_threadpool_run(wgml_threadpool *p, wgml_task_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1); /* seq_cst: pairs with the sleepers check */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins < SPIN_ITERATIONS) CPU_RELAX();
        else sched_yield();
    }
}

typedef struct {
    wgml_threadpool *pool;
    wgml_range_fn fn;
    void *ctx;
    int64_t n, chunk;
} range_job;

static void range_run(void *arg, int ith, int nth) {
    const range_job *j = arg;
    for (int v = 0; v < nth; v++) { /* own share first, then the others' in turn */
        range_share *s = &j->pool->shares[(ith + v) % nth];
        for (;;) {
            int64_t c = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed);
            if (c >= s->end) break;
            int64_t lo = c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
            j->fn(j->ctx, lo, hi, ith);
        }
    }
}

void wgml_threadpool_run_range(wgml_threadpool *p, wgml_range_fn fn, void *ctx, int64_t n, int64_t chunk) {
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
    if (!p || p->n == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* chunks split evenly; the first (n_chunks % n) threads take one more */
    int64_t n_chunks = (n + chunk - 1) / chunk, per = n_chunks / p->n, extra = n_chunks % p->n, at = 0;
    for (int i = 0; i < p->n; i++) {
        int64_t len = per + (i < extra);
        atomic_store_explicit(&p->shares[i].next, at, memory_order_relaxed);
        p->shares[i].end = at + len;
        at += len;
    }
    range_job j = {p, fn, ctx, n, chunk};
    wgml_threadpool_run(p, range_run, &j); /* publishes the shares (seq_cst generation bump) */
}

#endif /* __wasm__ */
