/*
 * cpu_tune.h - kernel paths chosen by measurement, not by feature bits.
 *
 * Where a CPU offers two paths for one product, which is faster depends on
 * the chip, not on the feature bits: AVX512_BF16's bf16 pairs double the
 * f32 FMA rate on AMD Zen 4 but are 1.5x slower than f32 in Kokoro on an
 * Intel Sapphire Rapids (issue 38). So the first GEMM that could take bf16
 * pairs times both paths on a small fixed problem (cpu_gemm on one thread,
 * a few ms), keeps the faster, and stores the choice in the cache directory
 * (wgml_pipeline_cache_default_dir: $WGML_CACHE_DIR, else XDG's) keyed by
 * the CPU's identity (vendor, family, model, stepping, brand, feature words)
 * and CPU_TUNE_VERSION; later processes read it back. A reduced-precision
 * path is chosen only when it is at least CPU_TUNE_MARGIN faster. A file that
 * does not parse, or names another CPU or version, is ignored (measured
 * again and rewritten). WGML_CPU_GEMM=f32|bf16|auto overrides the choice
 * (bf16 only where the kernel exists). `wgml --version` and `wgml bench`
 * say what was chosen and why (cpu_gemm_choice_describe).
 */
#ifndef WGML_CPU_TUNE_H
#define WGML_CPU_TUNE_H

#include <stddef.h>

#define CPU_TUNE_VERSION 1   /* bump when the GEMM kernels change enough to re-measure */
#define CPU_TUNE_MARGIN 1.10 /* bf16 pairs must beat f32 by this factor */

typedef enum cpu_tune_source {
    CPU_TUNE_NO_KERNEL = 0, /* no bf16 kernel on this CPU (or scalar kernels forced): f32 */
    CPU_TUNE_OVERRIDE,      /* WGML_CPU_GEMM */
    CPU_TUNE_CACHED,        /* read from the cache file */
    CPU_TUNE_MEASURED,      /* timed in this process (stored when the cache is on) */
} cpu_tune_source;

typedef struct cpu_gemm_choice {
    int bf16;                         /* 1: products that allow it go as bf16 pairs */
    cpu_tune_source source;
    double f32_gflops, bf16_gflops;   /* one thread; 0 when not measured (override, no kernel) */
    char file[512];                   /* the cache file read or written ("" when none) */
} cpu_gemm_choice;

/* The process's choice (made once, thread-safe). */
const cpu_gemm_choice *cpu_gemm_choice_get(void);

/* One line for `wgml --version` and `wgml bench`: "bf16 pairs (measured 1.62x the f32
 * rate on this CPU, 171 vs 106 GFLOP/s a thread; cached in ...)". */
void cpu_gemm_choice_describe(char *out, size_t cap);

/* The choice made afresh, for tests: `dir` the cache directory (NULL: none),
 * `override` as WGML_CPU_GEMM (NULL: auto), `identity` the CPU's (NULL: this
 * CPU's, cpu_tune_identity). */
void cpu_gemm_choose(const char *dir, const char *override, const char *identity, cpu_gemm_choice *out);

/* This CPU's identity as the cache keys it (one line of text). */
void cpu_tune_identity(char *out, size_t cap);

#endif
