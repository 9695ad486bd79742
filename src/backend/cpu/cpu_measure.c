/*
 * cpu_measure.c - the CPU's memory read bandwidth, as decode sees it.
 *
 * The threads of the backend's pool sum a 512 MiB buffer (about 14x the
 * last-level cache of a large server part) filled with non-constant data, so
 * neither caches nor zero-page tricks help; the best of a few passes counts.
 * They share the buffer out in 1 MiB chunks as matmul shares weight rows
 * (wgml_threadpool_run_range), so a thread slowed by a neighbour does not
 * lower the measured ceiling. This is the ceiling a memory-bound decode step
 * can reach on these threads: the loads are the widest the CPU has (the same the
 * decode kernels use), with four independent sums so that no dependency
 * chain slows them, and a software prefetch a few lines ahead. A scalar loop
 * measured 10-15% below what the AVX-512 matvec kernels then reached, and a
 * decode "above 100% of the bandwidth" helps nobody.
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_impl.h"
#include "core/alloc.h"
#include "core/error.h"

#include <stdint.h>
#include <string.h>

#define MEASURE_BYTES  (512ull << 20)
#define MEASURE_PASSES 4

#define MEASURE_CHUNK (1u << 20) /* bytes */

typedef struct {
    const uint64_t *data;
    size_t n; /* u64 words */
    uint64_t sums[512];
} read_task;

/* Sum of d[lo..hi) (u64 words; lo and hi multiples of 32), portable. */
static uint64_t sum_scalar(const uint64_t *d, size_t lo, size_t hi) {
    uint64_t a = 0, b = 0, c = 0, e = 0;
    for (size_t i = lo; i < hi; i += 4) {
        a += d[i];
        b ^= d[i + 1];
        c += d[i + 2];
        e ^= d[i + 3];
    }
    return a + b + c + e;
}

#if defined(WGML_CPU_X86)
#include <immintrin.h>

#define PREFETCH_AHEAD 512 /* u64 words: 4 KiB */

__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint64_t *d, size_t lo, size_t hi) {
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = lo; i < hi; i += 32) {
        _mm_prefetch((const char *)(d + i + PREFETCH_AHEAD), _MM_HINT_T0);
        _mm_prefetch((const char *)(d + i + PREFETCH_AHEAD + 8), _MM_HINT_T0);
        _mm_prefetch((const char *)(d + i + PREFETCH_AHEAD + 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(d + i + PREFETCH_AHEAD + 24), _MM_HINT_T0);
        s0 = _mm512_add_epi64(s0, _mm512_load_si512((const void *)(d + i)));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512((const void *)(d + i + 8)));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512((const void *)(d + i + 16)));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512((const void *)(d + i + 24)));
    }
    /* Reduce by hand in unsigned arithmetic: the sum is a sink that wraps on purpose, and
     * _mm512_reduce_add_epi64 adds as signed long long (undefined on overflow). */
    uint64_t w[8], sum = 0;
    _mm512_storeu_si512((void *)w, _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
    for (int k = 0; k < 8; k++) sum += w[k];
    return sum;
}

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *d, size_t lo, size_t hi) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = lo; i < hi; i += 16) {
        _mm_prefetch((const char *)(d + i + PREFETCH_AHEAD), _MM_HINT_T0);
        _mm_prefetch((const char *)(d + i + PREFETCH_AHEAD + 8), _MM_HINT_T0);
        s0 = _mm256_add_epi64(s0, _mm256_load_si256((const __m256i *)(d + i)));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256((const __m256i *)(d + i + 4)));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256((const __m256i *)(d + i + 8)));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256((const __m256i *)(d + i + 12)));
    }
    uint64_t w[4];
    _mm256_storeu_si256((__m256i *)w, _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    return w[0] + w[1] + w[2] + w[3];
}
#endif

/* Chunks [c0, c1) of MEASURE_CHUNK bytes (the buffer is a whole number of them). */
static void read_run(void *p, int64_t c0, int64_t c1, int ith) {
    read_task *t = p;
    const size_t words = MEASURE_CHUNK / 8, lo = (size_t)c0 * words, hi = (size_t)c1 * words;
    uint64_t s;
#if defined(WGML_CPU_X86)
    const char *isa = cpu_kernels_isa();
    if (strcmp(isa, "avx512") == 0)
        s = sum_avx512(t->data, lo, hi);
    else if (strcmp(isa, "avx2") == 0)
        s = sum_avx2(t->data, lo, hi);
    else
#endif
        s = sum_scalar(t->data, lo, hi);
    t->sums[ith & 511] += s;
}

static void fill_run(void *p, int ith, int nth) {
    read_task *t = p;
    uint64_t *w = (uint64_t *)t->data;
    size_t per = t->n / (size_t)nth, lo = per * (size_t)ith, hi = ith == nth - 1 ? t->n : lo + per;
    for (size_t i = lo; i < hi; i++)
        w[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
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
        wgml_threadpool_run_range(cb->pool, read_run, &t, MEASURE_BYTES / MEASURE_CHUNK, 1);
        double ms = cpu_now_ms() - t0;
        if (ms < best) best = ms;
    }
    volatile uint64_t sink = 0;
    for (int i = 0; i < 512; i++)
        sink += t.sums[i];
    (void)sink;
    wgml_aligned_free(buf);
    *gbs = (double)MEASURE_BYTES / (best / 1e3) / 1e9;
    return WGML_OK;
}
