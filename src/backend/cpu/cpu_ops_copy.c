/*
 * cpu_ops_copy.c - the CPU backend's copy op (ops.h): a strided view of f32
 * values (tensor.h: a transpose, column slice, permutation or broadcast)
 * written out as contiguous rows. Exact, as a copy is: the reference every
 * GPU backend must match bit for bit.
 */
#include "backend/cpu/cpu_internal.h"

#define COPY_CHUNK_ELEMS 16384 /* elements per chunk of rows handed to a thread */

typedef struct {
    float *out;
    const uint8_t *x; /* the view's first element */
    int64_t ne[4];
    size_t nb[4];
} copy_task;

/* Output rows [lo, hi): row r is x's (i1, i2, i3) with r = i1 + ne1 (i2 + ne2 i3). */
static void copy_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const copy_task *t = p;
    const int64_t n0 = t->ne[0];
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i1 = r % t->ne[1], i2 = r / t->ne[1] % t->ne[2], i3 = r / t->ne[1] / t->ne[2];
        const uint8_t *src = t->x + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
        float *o = t->out + r * n0;
        for (int64_t i = 0; i < n0; i++)
            o[i] = *(const float *)(src + (size_t)i * t->nb[0]);
    }
}

void cpu_op_copy(cpu_backend *cb, const wgml_copy_args *a) {
    /* cpu_check bounds x's whole strided span (wgml_tensor_extent) */
    if (!cpu_check(cb, "copy", a->out) || !cpu_check(cb, "copy", a->x)) return;
    copy_task t = {.out = cpu_ptr(a->out), .x = cpu_ptr(a->x)};
    for (int d = 0; d < 4; d++) {
        t.ne[d] = a->x->ne[d];
        t.nb[d] = wgml_tensor_stride(a->x, d);
    }
    const int64_t rows = wgml_tensor_nrows(a->x);
    if (rows == 0 || t.ne[0] == 0) return;
    wgml_threadpool_run_range(cb->pool, copy_rows, &t, rows,
                              t.ne[0] >= COPY_CHUNK_ELEMS ? 1 : COPY_CHUNK_ELEMS / t.ne[0]);
}
