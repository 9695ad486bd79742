/*
 * opcheck.h - checks a backend op by op against a reference backend.
 *
 * Every op of backend.h runs on both backends with the same inputs over a
 * grid of shapes (ragged sizes that are no multiple of any workgroup size),
 * weight types and variants (norm, bias, residual add, SwiGLU, fused weights,
 * weights split into binding windows, RoPE layouts, KV-cache positions that
 * need split-K attention); outputs are compared with a tolerance per case.
 * The reference is meant to be the exact CPU backend
 * (wgml_backend_cpu_create_exact). Used by `wgml verify` and the GPU tests.
 */
#ifndef WGML_BACKEND_OPCHECK_H
#define WGML_BACKEND_OPCHECK_H

#include "backend/backend.h"

typedef struct wgml_opcheck_options {
    int quick;          /* a smaller grid */
    const char *filter; /* only these ops: comma-separated names of wgml_op_names; NULL: all */
    const char *type;   /* only matmul and get_rows cases of these weight types: type names
                           as wgml_dtype_name gives them, comma-separated ("Q8_0" or
                           "F32,Q8_0,Q4_K"); NULL: all types */
    uint64_t seed;
    /* The device rounds the activations of matmuls with block-quantized
     * weights to 8 bits, one scale per block (the fast CPU backend), and
     * those with BF16 weights to bf16 (its blocked GEMM with AVX512_BF16;
     * a step no coarser than 8 bits of the block's largest value): those
     * cases are held to 7 standard deviations of the error that rounding
     * makes (opcheck.c, act8_sigma) instead of the f32 tolerance. 0: the
     * device computes in f32. */
    int act8;
} wgml_opcheck_options;

typedef struct wgml_opcheck_result {
    const char *op;
    char config[200];
    double err;         /* max |dev - ref| / (1 + max |ref|) */
    double tol;
    int pass;
    wgml_status status; /* an op that failed to run */
    char message[WGML_ERROR_MESSAGE_MAX];
} wgml_opcheck_result;

typedef void (*wgml_opcheck_fn)(void *user, const wgml_opcheck_result *r);

/* Runs the grid; calls fn for each case; returns the number of failed cases. */
int wgml_opcheck_run(wgml_backend *dev, wgml_backend *ref, const wgml_opcheck_options *opt, wgml_opcheck_fn fn,
                     void *user);

#endif
