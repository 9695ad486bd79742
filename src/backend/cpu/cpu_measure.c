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

/*
 * The FMA peak: a register-only loop on every thread of the pool at once,
 * FMA_CHAINS independent accumulators (enough to cover the FMA latency on
 * two ports), no memory traffic: the rate the GEMMs' share is measured
 * against (`wgml bench --profile`). f32: vfmadd (2 flops per lane);
 * bf16 pairs: vdpbf16ps (4 flops per lane: two products and their sums),
 * where the CPU has it. The widest registers the kernels use.
 */
#define FMA_CHAINS 12
#define FMA_ITERS  200000

typedef struct {
    int kind;         /* 0: f32 FMA, 1: bf16 pairs */
    float sink[512];
} fma_task;

static float fma_scalar(int64_t iters) {
    float a[FMA_CHAINS];
    for (int c = 0; c < FMA_CHAINS; c++) a[c] = (float)c * 1e-3f;
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < FMA_CHAINS; c++) a[c] = a[c] * 0.999999f + 1e-7f;
    float s = 0;
    for (int c = 0; c < FMA_CHAINS; c++) s += a[c];
    return s;
}

#if defined(WGML_CPU_X86)
__attribute__((target("avx512f"))) static float fma_avx512(int64_t iters) {
    __m512 a[FMA_CHAINS];
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int c = 0; c < FMA_CHAINS; c++) a[c] = _mm512_set1_ps((float)c * 1e-3f);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < FMA_CHAINS; c++) a[c] = _mm512_fmadd_ps(a[c], x, y);
    __m512 s = a[0];
    for (int c = 1; c < FMA_CHAINS; c++) s = _mm512_add_ps(s, a[c]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512bf16"))) static float bf16_avx512(int64_t iters) {
    __m512 a[FMA_CHAINS];
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380); /* 1, ~6e-8 */
    for (int c = 0; c < FMA_CHAINS; c++) a[c] = _mm512_set1_ps((float)c * 1e-3f);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < FMA_CHAINS; c++) a[c] = _mm512_dpbf16_ps(a[c], x, y);
    __m512 s = a[0];
    for (int c = 1; c < FMA_CHAINS; c++) s = _mm512_add_ps(s, a[c]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float fma_avx2(int64_t iters) {
    __m256 a[FMA_CHAINS];
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < FMA_CHAINS; c++) a[c] = _mm256_set1_ps((float)c * 1e-3f);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < FMA_CHAINS; c++) a[c] = _mm256_fmadd_ps(a[c], x, y);
    __m256 s = a[0];
    for (int c = 1; c < FMA_CHAINS; c++) s = _mm256_add_ps(s, a[c]);
    float w[8];
    _mm256_storeu_ps(w, s);
    return w[0] + w[1] + w[2] + w[3] + w[4] + w[5] + w[6] + w[7];
}
#endif

/* flops of one loop iteration of the kind on this CPU's widest kernels (0: no such loop) */
static double fma_flops_per_iter(int kind) {
#if defined(WGML_CPU_X86)
    const char *isa = cpu_kernels_isa();
    if (kind == 1) return cpu_kernels_gemm_bf16() ? FMA_CHAINS * 16.0 * 4 : 0;
    if (strcmp(isa, "avx512") == 0) return FMA_CHAINS * 16.0 * 2;
    if (strcmp(isa, "avx2") == 0) return FMA_CHAINS * 8.0 * 2;
#endif
    return kind == 0 ? FMA_CHAINS * 2.0 : 0;
}

static void fma_run(void *p, int ith, int nth) {
    (void)nth;
    fma_task *t = p;
    float s;
#if defined(WGML_CPU_X86)
    const char *isa = cpu_kernels_isa();
    if (t->kind == 1) s = bf16_avx512(FMA_ITERS);
    else if (strcmp(isa, "avx512") == 0) s = fma_avx512(FMA_ITERS);
    else if (strcmp(isa, "avx2") == 0) s = fma_avx2(FMA_ITERS);
    else
#endif
        s = fma_scalar(FMA_ITERS / 8);
    t->sink[ith & 511] += s;
}

wgml_status cpu_measure_fma_peak(wgml_backend *be, double *f32_gflops, double *bf16_gflops, wgml_error *err) {
    (void)err;
    cpu_backend *cb = (cpu_backend *)be;
    *f32_gflops = *bf16_gflops = 0;
    for (int kind = 0; kind < 2; kind++) {
        double per = fma_flops_per_iter(kind);
        if (per <= 0) continue;
        const int64_t iters = kind == 0 && per == FMA_CHAINS * 2.0 ? FMA_ITERS / 8 : FMA_ITERS;
        fma_task t = {.kind = kind};
        double best = 1e30;
        for (int pass = 0; pass < 4; pass++) { /* the first warms the clocks */
            const double t0 = cpu_now_ms();
            wgml_threadpool_run(cb->pool, fma_run, &t);
            const double ms = cpu_now_ms() - t0;
            if (pass > 0 && ms < best) best = ms;
        }
        volatile float sink = 0;
        for (int i = 0; i < 512; i++) sink += t.sink[i];
        (void)sink;
        const double g = per * (double)iters * cb->n_threads / (best * 1e6);
        if (kind == 0) *f32_gflops = g;
        else *bf16_gflops = g;
    }
    return WGML_OK;
}
