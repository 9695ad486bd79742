/*
 * web_selftest.c - an export of web/dist/wgml.wasm for the tests: checks the
 * WebAssembly SIMD128 CPU kernels (kernels_wasm.c) against the scalar
 * reference kernels (kernels.c) in the wasm itself, where they run.
 *
 *   wgmlw_kernel_check() -> JSON {"isa": "wasm-simd128", "types": {"q4_0": err, ...},
 *                                 "gemm_mismatches": n}
 *
 * For every weight type: random weights quantized to the type, a random
 * activation row prepared as the type wants, then `dot` of the SIMD and the
 * scalar kernels over several row lengths (ragged ones for the float types),
 * `dot4x4` against 16 scalar dots and `to_float` against the reference
 * decoder. err is the largest difference relative to sum |w x| (a scale that
 * does not vanish when the dot product happens to); tests/web/cpu.mjs
 * requires it below 1e-5. The f32 GEMM micro-kernel against the scalar one
 * (every tile height, ragged column counts, ADD): gemm_mismatches counts the
 * outputs whose bits differ, which must be none.
 */
#include "backend/cpu/kernels_impl.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(#name)))

static uint32_t rng_state = 12345;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

/* Largest relative error of one type's SIMD kernels over a few lengths; -1 if it has none. */
static double check_type(uint32_t type) {
    const cpu_type_kernels *ref = cpu_kernels_get_isa("scalar", type);
    const cpu_type_kernels *simd = cpu_kernels_get_isa(cpu_kernels_isa(), type);
    const wgml_dtype_traits *tr = wgml_dtype_get(type);
    if (!ref || !simd || !tr) return -1;
    const int64_t bs = tr->block_size;
    const int64_t lens[3] = {bs > 1 ? bs * 3 : 37, bs > 1 ? bs * 8 : 256, bs > 1 ? bs * 17 : 1003};
    double worst = 0;
    for (int li = 0; li < 3; li++) {
        const int64_t n = lens[li];
        /* each kernel set prepares the activations in its own format */
        const size_t wrow = wgml_row_size(type, n), xrow = cpu_act_row_size(ref->act_type, n);
        const size_t srow = cpu_act_row_size(simd->act_type, n);
        float *f = wgml_malloc((size_t)n * 4 * sizeof(float)), *back = wgml_malloc((size_t)n * sizeof(float));
        float *back2 = wgml_malloc((size_t)n * sizeof(float));
        uint8_t *w = wgml_malloc(wrow * 4), *x = wgml_malloc(xrow * 4), *xs = wgml_malloc(srow * 4);
        if (!f || !back || !back2 || !w || !x || !xs) {
            worst = 1;
        } else {
            for (int r = 0; r < 4; r++) {
                for (int64_t i = 0; i < n; i++)
                    f[i] = frand() * (1.0f + (float)(i % 7));
                wgml_quantize_row(type, f, w + (size_t)r * wrow, n);
                for (int64_t i = 0; i < n; i++)
                    f[i] = frand();
                ref->prepare(f, x + (size_t)r * xrow, n);
                simd->prepare(f, xs + (size_t)r * srow, n);
            }
            /* the scale: sum |w x| of row 0 with the dequantized weights */
            wgml_dequantize_row(type, w, back, n);
            double scale = 1e-6;
            for (int64_t i = 0; i < n; i++)
                scale += fabs((double)back[i] * f[i]);
            float out[16];
            for (int r = 0; r < 4; r++)
                for (int t = 0; t < 4; t++) {
                    float a = ref->dot(n, w + (size_t)r * wrow, x + (size_t)t * xrow);
                    float b = simd->dot(n, w + (size_t)r * wrow, xs + (size_t)t * srow);
                    double e = fabs((double)a - b) / scale;
                    if (e > worst || e != e) worst = e == e ? e : 1;
                    out[4 * r + t] = a;
                }
            if (simd->dot4x4) {
                float got[16];
                simd->dot4x4(n, w, wrow, xs, srow, got);
                for (int k = 0; k < 16; k++) {
                    double e = fabs((double)got[k] - out[k]) / scale;
                    if (e > worst || e != e) worst = e == e ? e : 1;
                }
            }
            ref->to_float(w, back, n);
            simd->to_float(w, back2, n);
            if (memcmp(back, back2, (size_t)n * sizeof(float)) != 0) worst = 1;
        }
        wgml_free(f);
        wgml_free(back);
        wgml_free(back2);
        wgml_free(w);
        wgml_free(x);
        wgml_free(xs);
    }
    return worst;
}

/* Outputs of the SIMD GEMM micro-kernel whose bits differ from the scalar one's; -1 without one. */
static long check_gemm(void) {
    cpu_gemm_fn fast = cpu_kernels_gemm();
    if (fast == cpu_kernels_gemm_isa("scalar")) return -1;
    enum { KC = 37, LD = 40 };
    float *x = wgml_malloc(sizeof(float) * CPU_GEMM_MR * LD), *wp = wgml_aligned_alloc(sizeof(float) * KC * CPU_GEMM_NR);
    float *a = wgml_malloc(sizeof(float) * CPU_GEMM_MR * LD), *b = wgml_malloc(sizeof(float) * CPU_GEMM_MR * LD);
    long bad = 0;
    if (!x || !wp || !a || !b) bad = 1 << 20;
    for (int i = 0; !bad && i < CPU_GEMM_MR * LD; i++) x[i] = frand();
    for (int i = 0; !bad && i < KC * CPU_GEMM_NR; i++) wp[i] = frand();
    for (int mr = 1; !bad && mr <= CPU_GEMM_MR; mr++)
        for (int nc = 1; nc <= CPU_GEMM_NR; nc += nc < 9 ? 1 : 7)
            for (int add = 0; add < 2; add++) {
                for (int i = 0; i < CPU_GEMM_MR * LD; i++) a[i] = b[i] = (float)i * 0.25f;
                fast(KC, x, LD, wp, a, LD, mr, nc, add);
                cpu_kernels_gemm_isa("scalar")(KC, x, LD, wp, b, LD, mr, nc, add);
                bad += memcmp(a, b, sizeof(float) * CPU_GEMM_MR * LD) != 0;
            }
    wgml_free(x), wgml_aligned_free(wp), wgml_free(a), wgml_free(b);
    return bad;
}

EXPORT(wgmlw_kernel_check) const char *wgmlw_kernel_check(void) {
    static char json[2048];
    size_t at = (size_t)snprintf(json, sizeof json, "{\"isa\":\"%s\",\"types\":{", cpu_kernels_isa());
    int first = 1;
    for (uint32_t t = 0; t < WGML_DTYPE_COUNT && at + 64 < sizeof json; t++) {
        double e = check_type(t);
        if (e < 0) continue;
        at += (size_t)snprintf(json + at, sizeof json - at, "%s\"%s\":%.3g", first ? "" : ",", wgml_dtype_name(t), e);
        first = 0;
    }
    snprintf(json + at, sizeof json - at, "},\"gemm_mismatches\":%ld}", check_gemm());
    return json;
}
