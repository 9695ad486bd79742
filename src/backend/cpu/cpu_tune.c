/*
 * cpu_tune.c - kernel paths chosen by measurement (cpu_tune.h): today
 * whether GEMMs that allow it go as bf16 pairs or in f32.
 *
 * The measurement: cpu_gemm on one thread (its own pool of one), 96 rows x
 * K 512 x M 512 of F32 weights (50 MFLOP, a weight panel block in L2 as in
 * Kokoro's convolutions), the two paths alternating, best of 5 each: a few
 * ms once per machine. The cache file (cpu-gemm-<hash>.txt in the cache
 * directory; the hash of the identity and version names it, the file
 * repeats both):
 *
 *   wgml cpu-gemm <CPU_TUNE_VERSION>
 *   cpu <identity>
 *   choice bf16|f32
 *   f32_gflops <x>
 *   bf16_gflops <y>
 *
 * written to a temporary file and renamed into place.
 */
#include "backend/cpu/cpu_tune.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/kernels.h"
#include "core/alloc.h"
#include "core/cache_dir.h"
#include "core/dtype.h"
#include "core/hash.h"
#include "core/threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

void cpu_tune_identity(char *out, size_t cap) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    char vendor[13] = {0}, brand[49] = {0};
    __get_cpuid(0, &a, &b, &c, &d);
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    unsigned f1a = 0, f1c = 0, f1d = 0, f7b = 0, f7c = 0, f7d = 0, f71a = 0, max = 0;
    __get_cpuid(1, &f1a, &b, &f1c, &f1d);
    __get_cpuid_count(7, 0, &a, &f7b, &f7c, &f7d);
    __get_cpuid_count(7, 1, &f71a, &b, &c, &d);
    __get_cpuid(0x80000000u, &max, &b, &c, &d);
    if (max >= 0x80000004u)
        for (unsigned i = 0; i < 3; i++) {
            unsigned r[4];
            __get_cpuid(0x80000002u + i, &r[0], &r[1], &r[2], &r[3]);
            memcpy(brand + 16 * i, r, 16);
        }
    for (char *p = brand; *p; p++) /* one line */
        if (*p == '\n' || *p == '\r') *p = ' ';
    const unsigned family = ((f1a >> 8) & 0xf) + ((f1a >> 20) & 0xff), model = ((f1a >> 4) & 0xf) | ((f1a >> 12) & 0xf0);
    /* the feature words without leaf 1's APIC id and CLFLUSH bits (ebx): per core, not per chip */
    snprintf(out, cap, "%s family %u model %u stepping %u | %s | %08x %08x %08x %08x %08x %08x", vendor, family, model,
             f1a & 0xf, brand, f1c & ~(1u << 27), f1d, f7b, f7c, f7d, f71a);
#else
    snprintf(out, cap, "%s", cpu_kernels_features());
#endif
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Times both paths; 0 on success. */
static int measure(double *f32_gflops, double *bf16_gflops) {
    enum { N = 96, K = 512, M = 512, TRIES = 5 };
    wgml_threadpool *pool = NULL;
    wgml_error err;
    if (wgml_threadpool_create(1, &pool, &err)) return -1;
    float *x = wgml_malloc(sizeof(float) * N * K), *w = wgml_malloc(sizeof(float) * M * K),
          *out = wgml_malloc(sizeof(float) * N * M), *tmp = wgml_malloc(sizeof(float) * cpu_gemm_tmp_floats(K));
    void *scratch = wgml_aligned_alloc(cpu_gemm_scratch(M, K));
    int rc = -1;
    if (!x || !w || !out || !tmp || !scratch) goto done;
    uint32_t s = 2463534242u;
    for (int i = 0; i < N * K; i++) s ^= s << 13, s ^= s >> 17, s ^= s << 5, x[i] = (float)(s >> 8) * 0x1p-24f - 0.5f;
    for (int i = 0; i < M * K; i++) s ^= s << 13, s ^= s >> 17, s ^= s << 5, w[i] = (float)(s >> 8) * 0x1p-27f - 0.0625f;
    cpu_gemm_args a = {.x = x, .n = N, .K = K, .M = M, .w = (const uint8_t *)w, .w_row = sizeof(float) * K,
                       .k = cpu_kernels_get(WGML_F32), .type = WGML_F32, .out = out};
    if (!a.k) goto done;
    double best[2] = {INFINITY, INFINITY};
    for (int t = 0; t < TRIES + 1; t++) /* the first round warms caches and clocks, untimed */
        for (int p = 0; p < 2; p++) {
            a.bf16 = p;
            const double t0 = now_s();
            cpu_gemm(pool, 1, &a, scratch, tmp);
            const double dt = now_s() - t0;
            if (t > 0 && dt < best[p]) best[p] = dt;
        }
    const double flop = 2.0 * N * K * M;
    *f32_gflops = flop / best[0] * 1e-9;
    *bf16_gflops = flop / best[1] * 1e-9;
    rc = isfinite(*f32_gflops) && isfinite(*bf16_gflops) && *f32_gflops > 0 && *bf16_gflops > 0 ? 0 : -1;
done:
    wgml_free(x), wgml_free(w), wgml_free(out), wgml_free(tmp);
    wgml_aligned_free(scratch);
    wgml_threadpool_free(pool);
    return rc;
}

/* The cache file's path for this identity into out; 0 when there is none. */
static int cache_path(const char *dir, const char *identity, char *out, size_t cap) {
    if (!dir || !*dir) return 0;
    const uint32_t v = CPU_TUNE_VERSION;
    uint64_t h = wgml_fnv64(WGML_FNV64_BASIS, &v, sizeof v);
    h = wgml_fnv64(h, identity, strlen(identity));
    const int n = snprintf(out, cap, "%s/cpu-gemm-%016llx.txt", dir, (unsigned long long)h);
    return n > 0 && (size_t)n < cap;
}

/* Reads a cache file: 1 when it is whole and is this identity's and version's. */
static int read_cache(const char *path, const char *identity, cpu_gemm_choice *c) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int ok = 0, version = -1, have_cpu = 0, bf16 = -1;
    double g32 = -1, g16 = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "wgml cpu-gemm %d", &version) == 1) continue;
        if (!strncmp(line, "cpu ", 4)) have_cpu = !strcmp(line + 4, identity);
        else if (!strcmp(line, "choice bf16")) bf16 = 1;
        else if (!strcmp(line, "choice f32")) bf16 = 0;
        else if (sscanf(line, "f32_gflops %lf", &g32) == 1 || sscanf(line, "bf16_gflops %lf", &g16) == 1) continue;
    }
    fclose(f);
    ok = version == CPU_TUNE_VERSION && have_cpu && bf16 >= 0 && isfinite(g32) && isfinite(g16) && g32 > 0 && g16 > 0 &&
         bf16 == (g16 >= CPU_TUNE_MARGIN * g32);
    if (ok) c->bf16 = bf16, c->f32_gflops = g32, c->bf16_gflops = g16;
    return ok;
}

static void write_cache(const char *dir, const char *path, const char *identity, const cpu_gemm_choice *c) {
    if (wgml_make_dirs(dir) != 0) return;
    char tmp[600];
#if defined(__wasm__) /* no process ids: the time and a stack address tell writers apart */
    const unsigned long long tag = (unsigned long long)(now_s() * 1e9) ^ (unsigned long long)(uintptr_t)&tmp;
#else
    const unsigned long long tag = (unsigned long long)getpid();
#endif
    if (snprintf(tmp, sizeof tmp, "%s.%llx.tmp", path, tag) >= (int)sizeof tmp) return;
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    int bad = fprintf(f, "wgml cpu-gemm %d\ncpu %s\nchoice %s\nf32_gflops %.3f\nbf16_gflops %.3f\n", CPU_TUNE_VERSION,
                      identity, c->bf16 ? "bf16" : "f32", c->f32_gflops, c->bf16_gflops) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) remove(tmp);
}

void cpu_gemm_choose(const char *dir, const char *override, const char *identity, cpu_gemm_choice *out) {
    memset(out, 0, sizeof *out);
    if (!cpu_kernels_gemm_bf16()) return; /* CPU_TUNE_NO_KERNEL: f32 */
    if (override && *override && strcmp(override, "auto")) {
        out->source = CPU_TUNE_OVERRIDE;
        out->bf16 = !strcmp(override, "bf16");
        return;
    }
    char id[512];
    if (!identity) cpu_tune_identity(id, sizeof id), identity = id;
    char path[sizeof out->file];
    const int have_path = cache_path(dir, identity, path, sizeof path);
    if (have_path && read_cache(path, identity, out)) {
        out->source = CPU_TUNE_CACHED;
        snprintf(out->file, sizeof out->file, "%s", path);
        return;
    }
    out->source = CPU_TUNE_MEASURED;
    if (measure(&out->f32_gflops, &out->bf16_gflops)) { /* out of memory: the full-precision path */
        out->f32_gflops = out->bf16_gflops = 0;
        return;
    }
    out->bf16 = out->bf16_gflops >= CPU_TUNE_MARGIN * out->f32_gflops;
    if (have_path) {
        write_cache(dir, path, identity, out);
        snprintf(out->file, sizeof out->file, "%s", path);
    }
}

static cpu_gemm_choice g_choice;
static atomic_int g_state; /* 0 not made, 1 being made, 2 made */

const cpu_gemm_choice *cpu_gemm_choice_get(void) {
    if (atomic_load_explicit(&g_state, memory_order_acquire) == 2) return &g_choice;
    int expected = 0;
    if (atomic_compare_exchange_strong(&g_state, &expected, 1)) {
        char dir[512];
        const int have_dir = wgml_cache_dir(dir, sizeof dir);
        cpu_gemm_choose(have_dir ? dir : NULL, getenv("WGML_CPU_GEMM"), NULL, &g_choice);
        atomic_store_explicit(&g_state, 2, memory_order_release);
    } else {
        while (atomic_load_explicit(&g_state, memory_order_acquire) != 2) {}
    }
    return &g_choice;
}

void cpu_gemm_choice_describe(char *out, size_t cap) {
    const cpu_gemm_choice *c = cpu_gemm_choice_get();
    const char *path = c->bf16 ? "bf16 pairs" : "f32";
    switch (c->source) {
    case CPU_TUNE_NO_KERNEL: snprintf(out, cap, "f32 (no bf16 kernel on this CPU)"); return;
    case CPU_TUNE_OVERRIDE: snprintf(out, cap, "%s (WGML_CPU_GEMM)", path); return;
    case CPU_TUNE_CACHED:
    case CPU_TUNE_MEASURED:
        if (c->f32_gflops <= 0) {
            snprintf(out, cap, "f32 (the measurement could not run)");
            return;
        }
        snprintf(out, cap, "%s (%s: bf16 pairs %.2fx the f32 rate on this CPU, %.0f vs %.0f GFLOP/s a thread%s%s%s)",
                 path, c->source == CPU_TUNE_CACHED ? "measured before" : "measured now",
                 c->bf16_gflops / c->f32_gflops, c->bf16_gflops, c->f32_gflops, *c->file ? "; " : "",
                 c->source == CPU_TUNE_CACHED ? "from " : (*c->file ? "kept in " : ""), c->file);
        return;
    }
}
