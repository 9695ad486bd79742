/*
 * test_threadpool.c - the worker pool (core/threadpool.h): run() calls every
 * thread index once; run_range() covers every item exactly once, in chunks
 * that start at multiples of the chunk size, for ragged and tiny ranges, and
 * hands a slow thread's untouched chunks to the others; a range of one chunk
 * runs on the calling thread alone, also among many small jobs.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/threadpool.h"
#include "testutil.h"

static wgml_threadpool *make_pool(int n) {
    wgml_threadpool *p;
    wgml_error err;
    assert_int_equal(wgml_threadpool_create(n, &p, &err), WGML_OK);
    assert_int_equal(wgml_threadpool_size(p), n);
    return p;
}

/* ---- run ---- */

typedef struct {
    atomic_int calls[8];
    atomic_int bad_nth;
} run_ctx;

static void count_run(void *p, int ith, int nth) {
    run_ctx *c = p;
    if (nth != 4) atomic_fetch_add(&c->bad_nth, 1);
    atomic_fetch_add(&c->calls[ith], 1);
}

static void test_run_every_index(void **state) {
    (void)state;
    wgml_threadpool *p = make_pool(4);
    for (int rep = 0; rep < 100; rep++) {
        run_ctx c;
        memset(&c, 0, sizeof c);
        wgml_threadpool_run(p, count_run, &c);
        for (int i = 0; i < 4; i++) assert_int_equal(atomic_load(&c.calls[i]), 1);
        assert_int_equal(atomic_load(&c.bad_nth), 0);
    }
    wgml_threadpool_free(p);
}

/* ---- run_range ---- */

typedef struct {
    int64_t n, chunk;
    atomic_int *seen;      /* per item: times covered */
    atomic_int bad;        /* chunks that broke the contract */
    atomic_int chunks[8];  /* chunks run, per thread */
    int slow_thread;       /* sleeps in its first chunk; -1: none */
} range_ctx;

static void count_range(void *p, int64_t lo, int64_t hi, int ith) {
    range_ctx *c = p;
    if (lo < 0 || hi > c->n || lo >= hi || lo % c->chunk || (hi - lo != c->chunk && hi != c->n) || ith < 0 || ith >= 8)
        atomic_fetch_add(&c->bad, 1);
    else
        for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&c->seen[i], 1);
    if (ith == c->slow_thread && atomic_fetch_add(&c->chunks[ith], 1) == 0) {
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        return;
    }
    if (ith != c->slow_thread) atomic_fetch_add(&c->chunks[ith], 1);
}

static void run_and_check(wgml_threadpool *p, int64_t n, int64_t chunk, int slow, range_ctx *c) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->chunk = chunk < 1 ? 1 : chunk;
    c->slow_thread = slow;
    c->seen = calloc((size_t)(n > 0 ? n : 1), sizeof *c->seen);
    wgml_threadpool_run_range(p, count_range, c, n, chunk);
    assert_int_equal(atomic_load(&c->bad), 0);
    for (int64_t i = 0; i < n; i++)
        if (atomic_load(&c->seen[i]) != 1) fail_msg("n %lld chunk %lld: item %lld covered %d times", (long long)n,
                                                    (long long)chunk, (long long)i, atomic_load(&c->seen[i]));
    free(c->seen);
}

static void test_range_covers_once(void **state) {
    (void)state;
    static const int64_t ns[] = {0, 1, 2, 3, 5, 16, 17, 63, 64, 65, 1000, 4099};
    static const int64_t chunks[] = {0, 1, 4, 16, 1000, 5000};
    for (int threads = 1; threads <= 4; threads += 3) {
        wgml_threadpool *p = make_pool(threads);
        range_ctx c;
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t b = 0; b < sizeof chunks / sizeof chunks[0]; b++)
                for (int rep = 0; rep < 5; rep++) run_and_check(p, ns[a], chunks[b], -1, &c);
        wgml_threadpool_free(p);
    }
}

/* A thread stuck in its first chunk for 200 ms: the other threads finish its
 * share long before it wakes, so it runs that one chunk only. With a fixed
 * split it would have run all 64 of its chunks. */
static void test_range_slow_thread(void **state) {
    (void)state;
    wgml_threadpool *p = make_pool(2);
    for (int slow = 0; slow < 2; slow++) {
        range_ctx c;
        run_and_check(p, 128 * 16, 16, slow, &c);
        /* at most one: the other thread may even take the whole share before this one starts */
        assert_true(atomic_load(&c.chunks[slow]) <= 1);
        assert_int_equal(atomic_load(&c.chunks[slow]) + atomic_load(&c.chunks[1 - slow]), 128);
    }
    wgml_threadpool_free(p);
}

/* ---- single-chunk jobs: inline on the caller ---- */

typedef struct {
    pthread_t caller;
    atomic_int calls, off_caller, bad;
    int64_t n;
} inline_ctx;

static void inline_range(void *p, int64_t lo, int64_t hi, int ith) {
    inline_ctx *c = p;
    atomic_fetch_add(&c->calls, 1);
    if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->off_caller, 1);
    if (lo != 0 || hi != c->n || ith != 0) atomic_fetch_add(&c->bad, 1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A range of one chunk (n <= chunk) is one call [0, n) as thread 0 on the
 * calling thread, however many threads the pool has; from two chunks on the
 * pool shares it out as before. */
static void test_range_single_chunk(void **state) {
    (void)state;
    static const int64_t cases[][2] = {{1, 1}, {1, 0}, {1, 16}, {5, 5}, {5, 1000}, {16384, 16384}};
    for (int threads = 2; threads <= 4; threads += 2) {
        wgml_threadpool *p = make_pool(threads);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            inline_ctx c;
            memset(&c, 0, sizeof c);
            c.caller = pthread_self();
            c.n = cases[k][0];
            wgml_threadpool_run_range(p, inline_range, &c, cases[k][0], cases[k][1]);
            assert_int_equal(atomic_load(&c.calls), 1);
            assert_int_equal(atomic_load(&c.off_caller), 0);
            assert_int_equal(atomic_load(&c.bad), 0);
        }
        /* two chunks: still shared out, every item once */
        range_ctx r;
        run_and_check(p, 2, 1, -1, &r);
        run_and_check(p, 17, 16, -1, &r);
        wgml_threadpool_free(p);
    }
}

/* Many small jobs, as a decoder step issues them: single-chunk ones (inline)
 * between shared ones, with pauses that let the workers fall asleep, so that
 * a shared job after inline ones must wake them; every item once throughout.
 * Prints the time per job of each kind (no bound: the machine may be shared). */
static void test_range_many_small(void **state) {
    (void)state;
    wgml_threadpool *p = make_pool(2);
    range_ctx r;
    double t_inline = 0, t_shared = 0;
    int n_inline = 0, n_shared = 0;
    for (int rep = 0; rep < 20000; rep++) {
        if (rep % 5000 == 4999) { /* the workers spin 20000 times, yield, then sleep */
            struct timespec ts = {0, 30 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        const int shared = rep % 4 == 3;
        const double t0 = now_s();
        if (shared)
            run_and_check(p, 64, 16, -1, &r); /* four chunks */
        else
            run_and_check(p, 1 + rep % 32, 32, -1, &r); /* one chunk */
        const double dt = now_s() - t0;
        if (shared) t_shared += dt, n_shared++;
        else t_inline += dt, n_inline++;
    }
    printf("threadpool: %.2f us per single-chunk job (inline), %.2f us per 4-chunk job (shared)\n",
           t_inline / n_inline * 1e6, t_shared / n_shared * 1e6);
    wgml_threadpool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_every_index),
        cmocka_unit_test(test_range_covers_once),
        cmocka_unit_test(test_range_slow_thread),
        cmocka_unit_test(test_range_single_chunk),
        cmocka_unit_test(test_range_many_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
