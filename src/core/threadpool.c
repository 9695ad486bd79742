/*
 * threadpool.c - see threadpool.h.
 *
 * A job is published by bumping `generation`; each worker remembers the last
 * generation it ran. Workers count themselves done through `pending`. Both are
 * atomics; the mutex/condvar pair is only for sleeping when idle.
 *
 * Two platforms share that protocol and differ only in how a thread starts,
 * stops and sleeps:
 *  - native: pthreads; an idle worker sleeps on a condition variable.
 *  - WebAssembly: wasi-libc has no threads. The browser build with threads
 *    (web/dist/wgml-threads.wasm, docs/web.md) runs on a shared memory, and
 *    its page starts Web Workers (web/thread.js) that each enter
 *    wgml_threadpool_wasm_serve() for good: a "slot". A pool claims idle slots
 *    instead of creating threads and hands them back when freed; an idle
 *    worker sleeps in memory.atomic.wait32. With no slots (the build without
 *    threads, or a page that is not cross-origin isolated) every pool is one
 *    thread, the caller, and run() is a plain call. Workers never allocate:
 *    wasi-libc's malloc is not thread-safe, so every job's memory comes from
 *    the calling thread (the CPU backend's scratch).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/threadpool.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdatomic.h>

#if defined(__wasm__)
#define CPU_RELAX() ((void)0)
#define CPU_YIELD() ((void)0)
#else
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#define CPU_YIELD() sched_yield()
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif
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

#if defined(__wasm__)
/* A worker thread of the browser build: a Web Worker that the page started
 * and that serves pools through this slot (wgml_threadpool_wasm_serve). */
enum { SLOT_FREE, SLOT_IDLE, SLOT_CLAIMED };
typedef struct {
    _Alignas(64) atomic_int state;        /* SLOT_* */
    _Atomic(wgml_threadpool *) pool;       /* set to hand the slot a pool */
    int index;                             /* its thread index in that pool */
} wasm_slot;
static wasm_slot wasm_slots[WGML_WASM_MAX_THREADS];
static atomic_int wasm_n_slots;

/* memory.atomic.wait32 / notify on a 32-bit word */
static void wasm_wait(void *word, int expected) {
    __builtin_wasm_memory_atomic_wait32((int *)word, expected, -1);
}
static void wasm_notify(void *word) { __builtin_wasm_memory_atomic_notify((int *)word, 0x7fffffffu); }
#endif

struct wgml_threadpool {
    int n;
    range_share *shares; /* n of them */
#if defined(__wasm__)
    int *slots; /* the wasm_slots it claimed, for threads 1 .. n-1 */
#else
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
#endif
    atomic_uint generation;
    atomic_int pending;
    atomic_int stop;
    atomic_int sleepers;
    wgml_task_fn fn;
    void *ctx;
};

/* Sleeps until the generation is no longer `seen` or the pool stops. */
static void idle_sleep(wgml_threadpool *p, unsigned seen) {
#if defined(__wasm__)
    atomic_fetch_add(&p->sleepers, 1);
    /* seq_cst: run() bumps the generation and then reads sleepers, so either
     * it sees this sleeper and notifies, or wait32 sees the new generation */
    if (!atomic_load(&p->stop)) wasm_wait(&p->generation, (int)seen);
    atomic_fetch_sub(&p->sleepers, 1);
#else
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
#endif
}

/* Wakes every sleeping worker (after a generation bump or stop). */
static void wake_sleepers(wgml_threadpool *p) {
#if defined(__wasm__)
    wasm_notify(&p->generation);
#else
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
#endif
}

/* Thread `index` of pool p: runs every job published until the pool stops. */
static void worker_loop(wgml_threadpool *p, int index) {
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
                CPU_YIELD();
                continue;
            }
            idle_sleep(p, seen);
            spins = 0;
        }
        if (atomic_load(&p->stop)) break;
        seen = gen;
        p->fn(p->ctx, index, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

static wgml_threadpool *pool_alloc(int n_threads) {
    wgml_threadpool *p = wgml_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    p->shares = wgml_aligned_alloc((size_t)n_threads * sizeof(range_share));
    if (!p->shares) {
        wgml_free(p);
        return NULL;
    }
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    return p;
}

/* Tells the workers to leave (they finish no job: none is running). */
#if defined(__wasm__)

int wgml_threadpool_wasm_add_slot(void) {
    int i = atomic_load(&wasm_n_slots);
    if (i >= WGML_WASM_MAX_THREADS) return -1;
    atomic_store(&wasm_slots[i].state, SLOT_FREE);
    atomic_store(&wasm_slots[i].pool, NULL);
    atomic_store(&wasm_n_slots, i + 1);
    return i;
}

int wgml_threadpool_wasm_idle(void) {
    int n = 0, m = atomic_load(&wasm_n_slots);
    for (int i = 0; i < m; i++) n += atomic_load(&wasm_slots[i].state) == SLOT_IDLE;
    return n;
}

void wgml_threadpool_wasm_serve(int slot) {
    if (slot < 0 || slot >= atomic_load(&wasm_n_slots)) return;
    wasm_slot *s = &wasm_slots[slot];
    atomic_store(&s->state, SLOT_IDLE);
    for (;;) {
        wgml_threadpool *p;
        while (!(p = atomic_load(&s->pool))) wasm_wait(&s->pool, 0);
        worker_loop(p, s->index);
        atomic_store(&s->pool, NULL);
        atomic_store(&s->state, SLOT_IDLE); /* the pool's free() waits for this */
    }
}

/* As many threads as there are idle worker slots, plus the caller. */
int wgml_cpu_count(void) { return 1 + wgml_threadpool_wasm_idle(); }

wgml_status wgml_threadpool_create(int n_threads, wgml_threadpool **out, wgml_error *err) {
    *out = NULL;
    if (n_threads <= 0) n_threads = wgml_cpu_count();
    if (n_threads > 512) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "too many threads: %d", n_threads);
    int want = n_threads - 1, m = atomic_load(&wasm_n_slots);
    int *claimed = want > 0 ? wgml_calloc((size_t)want, sizeof *claimed) : NULL;
    if (want > 0 && !claimed) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating thread pool");
    int got = 0; /* fewer idle slots than asked for: a smaller pool */
    for (int i = 0; i < m && got < want; i++) {
        int idle = SLOT_IDLE;
        if (atomic_compare_exchange_strong(&wasm_slots[i].state, &idle, SLOT_CLAIMED)) claimed[got++] = i;
    }
    wgml_threadpool *p = pool_alloc(1 + got);
    if (!p) {
        for (int k = 0; k < got; k++) atomic_store(&wasm_slots[claimed[k]].state, SLOT_IDLE);
        wgml_free(claimed);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating thread pool");
    }
    p->slots = claimed;
    for (int k = 0; k < got; k++) {
        wasm_slot *s = &wasm_slots[claimed[k]];
        s->index = 1 + k;
        atomic_store(&s->pool, p);
        wasm_notify(&s->pool);
    }
    *out = p;
    return WGML_OK;
}

void wgml_threadpool_free(wgml_threadpool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->generation, 1); /* a worker about to wait32 on the old one returns at once */
    wake_sleepers(p);
    for (int k = 0; k < p->n - 1; k++) /* back to idle once out of the pool; a spin: rare and short */
        while (atomic_load(&wasm_slots[p->slots[k]].state) != SLOT_IDLE || atomic_load(&wasm_slots[p->slots[k]].pool))
            CPU_RELAX();
    wgml_free(p->slots);
    wgml_aligned_free(p->shares);
    wgml_free(p);
}

#else /* native */

typedef struct {
    wgml_threadpool *pool;
    int index;
} worker_arg;

static worker_arg *worker_args(wgml_threadpool *p) { return (worker_arg *)(p->threads + p->n); }

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    worker_loop(wa->pool, wa->index);
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
    wgml_threadpool *p = pool_alloc(n_threads);
    if (p) p->threads = wgml_calloc((size_t)n_threads, sizeof(pthread_t) + sizeof(worker_arg));
    if (!p || !p->threads) {
        if (p) wgml_aligned_free(p->shares);
        wgml_free(p);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating thread pool");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
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

#endif

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
    if (atomic_load(&p->sleepers) > 0) wake_sleepers(p);
    fn(ctx, 0, p->n);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins < SPIN_ITERATIONS) CPU_RELAX();
        else CPU_YIELD();
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
    /* One thread, or a single chunk (a one-row layer_norm of a decoder step, a
     * small activation's GELU): the caller runs it as thread 0, waking no
     * worker and waiting for none. A fork-join would only add the round trip
     * to the workers, which on a loaded machine means waiting for every
     * descheduled one (a millisecond and more at load 9 on 2 vCPUs). */
    if (!p || p->n == 1 || chunk >= n) {
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

