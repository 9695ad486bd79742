/*
 * cpu_ops_copy.c - the CPU backend's copy op (ops.h): a strided view of f32
 * or f16 values (tensor.h: a transpose, column slice, permutation or
 * broadcast) written out as contiguous rows of f32 or f16. Exact, as a copy
 * is (f16 -> f32 loses nothing; f32 -> f16 rounds to nearest even, the bits
 * of wgml_f32_to_f16 on every instruction set): the reference every GPU
 * backend must match bit for bit.
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/kernels.h"
#include "core/fp16.h"

#define COPY_CHUNK_ELEMS 16384 /* elements per chunk of rows handed to a thread */

typedef struct {
    uint8_t *out;
    const uint8_t *x; /* the view's first element */
    int64_t ne[4];
    size_t nb[4];
    int x16, o16;         /* x, out: f16 (else f32) */
    cpu_to_f16_fn to_f16; /* contiguous f32 rows into f16 */
} copy_task;

/* Output rows [lo, hi): row r is x's (i1, i2, i3) with r = i1 + ne1 (i2 + ne2 i3). */
static void copy_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const copy_task *t = p;
    const int64_t n0 = t->ne[0];
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i1 = r % t->ne[1], i2 = r / t->ne[1] % t->ne[2], i3 = r / t->ne[1] / t->ne[2];
        const uint8_t *src = t->x + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
        if (!t->o16) {
            float *o = (float *)t->out + r * n0;
            if (t->x16)
                for (int64_t i = 0; i < n0; i++) o[i] = wgml_f16_to_f32(*(const uint16_t *)(src + (size_t)i * t->nb[0]));
            else
                for (int64_t i = 0; i < n0; i++) o[i] = *(const float *)(src + (size_t)i * t->nb[0]);
            continue;
        }
        uint16_t *o = (uint16_t *)t->out + r * n0;
        if (t->x16)
            for (int64_t i = 0; i < n0; i++) o[i] = *(const uint16_t *)(src + (size_t)i * t->nb[0]);
        else if (t->nb[0] == sizeof(float)) /* a contiguous f32 row: the SIMD conversion */
            t->to_f16((const float *)src, o, n0);
        else
            for (int64_t i = 0; i < n0; i++) o[i] = wgml_f32_to_f16(*(const float *)(src + (size_t)i * t->nb[0]));
    }
}

void cpu_op_copy(cpu_backend *cb, const wgml_copy_args *a) {
    /* cpu_check bounds x's whole strided span (wgml_tensor_extent) */
    if (!cpu_check(cb, "copy", a->out) || !cpu_check(cb, "copy", a->x)) return;
    copy_task t = {.out = cpu_ptr(a->out),
                   .x = cpu_ptr(a->x),
                   .x16 = a->x->type == WGML_F16,
                   .o16 = a->out->type == WGML_F16,
                   .to_f16 = cpu_kernels_to_f16()};
    for (int d = 0; d < 4; d++) {
        t.ne[d] = a->x->ne[d];
        t.nb[d] = wgml_tensor_stride(a->x, d);
    }
    const int64_t rows = wgml_tensor_nrows(a->x);
    if (rows == 0 || t.ne[0] == 0) return;
    wgml_threadpool_run_range(cb->pool, copy_rows, &t, rows,
                              t.ne[0] >= COPY_CHUNK_ELEMS ? 1 : COPY_CHUNK_ELEMS / t.ne[0]);
}
