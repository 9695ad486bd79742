/*
 * cpu_measure.c - the CPU's memory read bandwidth, as decode sees it.
 *
 * Every thread of the backend's pool sums its share of a 512 MiB buffer
 * (about 14x the last-level cache of a large server part) filled with
 * non-constant data, so neither caches nor zero-page tricks help; the best of
 * a few passes counts. This is the ceiling a memory-bound decode step can
 * reach on these threads.
 */
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "core/alloc.h"
#include "core/error.h"

#define MEASURE_BYTES (512ull << 20)
#define MEASURE_PASSES 4

typedef struct {
    const uint64_t *data;
    size_t n; /* u64 words */
    uint64_t sums[512];
} read_task;

static void read_run(void *p, int ith, int nth) {
    read_task *t = p;
    size_t per = (t->n / (size_t)nth) & ~(size_t)7, lo = per * (size_t)ith, hi = ith == nth - 1 ? t->n : lo + per;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = lo; i + 4 <= hi; i += 4) {
        a += t->data[i];
        b ^= t->data[i + 1];
        c += t->data[i + 2];
        d ^= t->data[i + 3];
    }
    t->sums[ith & 511] = a + b + c + d;
}

static void fill_run(void *p, int ith, int nth) {
    read_task *t = p;
    uint64_t *w = (uint64_t *)t->data;
    size_t per = t->n / (size_t)nth, lo = per * (size_t)ith, hi = ith == nth - 1 ? t->n : lo + per;
    for (size_t i = lo; i < hi; i++) w[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
}

wgml_status cpu_measure_bandwidth(wgml_backend *be, double *gbs, wgml_error *err) {
    cpu_backend *cb = (cpu_backend *)be;
    *gbs = 0;
    uint64_t *buf = wgml_aligned_alloc(MEASURE_BYTES);
    if (!buf) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "cpu backend: no memory for a bandwidth test");
    read_task t = {buf, MEASURE_BYTES / 8, {0}};
    wgml_threadpool_run(cb->pool, fill_run, &t); /* each thread touches its own pages first */
    double best = 1e30;
    for (int pass = 0; pass < MEASURE_PASSES; pass++) {
        double t0 = cpu_now_ms();
        wgml_threadpool_run(cb->pool, read_run, &t);
        double ms = cpu_now_ms() - t0;
        if (ms < best) best = ms;
    }
    volatile uint64_t sink = 0;
    for (int i = 0; i < 512; i++) sink += t.sums[i];
    (void)sink;
    wgml_aligned_free(buf);
    *gbs = (double)MEASURE_BYTES / (best / 1e3) / 1e9;
    return WGML_OK;
}
