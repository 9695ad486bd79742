/*
 * tensor.h - tensors as the ops see them: views (buffer, byte offset, type,
 * shape) of backend buffers, and the step the ops of a forward pass run in.
 *
 * Rows are contiguous (row stride = wgml_row_size(type, ne[0])). Activations
 * are f32 [rows][cols] with ne[0] = cols; a model takes views of fixed buffers
 * (a row range, a layer of the KV cache) freely, as plain structs: views cost
 * nothing. Weights W are [out][in] (ne[0] = in) in any weight dtype; a view
 * of whole rows of a weight (wgml_tensor_rows: its offset counts rows of the
 * GGUF layout) serves wherever the weight does (matmul, get_rows, vectors),
 * on every backend.
 *
 * Strided views. nb[] holds byte strides: element (i0, i1, i2, i3) lies at
 * offset + i0 nb[0] + i1 nb[1] + i2 nb[2] + i3 nb[3]. All four zero (what
 * every struct literal that leaves nb out gets) means contiguous, as above.
 * The helpers below make views that transpose, permute, slice columns and
 * broadcast (a stride of 0) without copying anything. Only the copy op
 * (wgml_op_copy) reads a non-contiguous view; every other op rejects one
 * (wgml_check_type, validate.c): copy it into a contiguous tensor first.
 * Strides are for plain types (f32, f16, i32, ...): a block-quantized
 * tensor is only ever viewed by whole rows.
 */
#ifndef WGML_BACKEND_TENSOR_H
#define WGML_BACKEND_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "wgml.h"

typedef struct wgml_backend wgml_backend;
typedef struct wgml_buffer wgml_buffer; /* backend-specific */

typedef struct wgml_tensor {
    uint32_t type;    /* wgml_dtype */
    int64_t ne[4];    /* ne[0] = row length; unused dims 1 */
    wgml_buffer *buf;
    size_t offset;    /* bytes from the start of buf */
    const char *name; /* for messages; may be NULL */
    size_t nb[4];     /* byte strides; all zero: contiguous (see above) */
} wgml_tensor;

/* Elements, rows and bytes of a tensor (rows = ne[1]*ne[2]*ne[3]). */
int64_t wgml_tensor_nelements(const wgml_tensor *t);
int64_t wgml_tensor_nrows(const wgml_tensor *t);
size_t wgml_tensor_nbytes(const wgml_tensor *t);
/* A view of rows [first, first+n) of a 2-D tensor (a strided one keeps its strides). */
wgml_tensor wgml_tensor_rows(const wgml_tensor *t, int64_t first, int64_t n);

/* ---- strided views (only wgml_op_copy reads them; see above) ---- */

/* The byte stride of dimension d (0..3): nb[d], or the contiguous one when nb
 * is all zero (dimension 0 of a block-quantized type has none: 0). */
size_t wgml_tensor_stride(const wgml_tensor *t, int d);
/* Whether the view is laid out contiguously: nb all zero, or every dimension
 * of more than one element at its contiguous stride. */
int wgml_tensor_is_contiguous(const wgml_tensor *t);
/* Bytes from the view's offset to the end of its last element (0 when it has
 * none): what it needs of its buffer. wgml_tensor_nbytes for a contiguous view. */
size_t wgml_tensor_extent(const wgml_tensor *t);
/* A view of t's buffer with shape ne and byte strides nb, starting `offset`
 * bytes after t's own offset (the general form of the helpers below). */
wgml_tensor wgml_tensor_view(const wgml_tensor *t, const int64_t ne[4], const size_t nb[4], size_t offset);
/* Dimensions 0 and 1 swapped: the transpose of a matrix. */
wgml_tensor wgml_tensor_transpose(const wgml_tensor *t);
/* Dimension d of the result is dimension perm[d] of t (perm: 0..3 once each). */
wgml_tensor wgml_tensor_permute(const wgml_tensor *t, const int perm[4]);
/* Columns [first, first+n) of every row: q, k or v of a fused [n][3E] activation. */
wgml_tensor wgml_tensor_cols(const wgml_tensor *t, int64_t first, int64_t n);
/* One row of t (its first) repeated `rows` times: ne[1] = rows with stride 0. */
wgml_tensor wgml_tensor_broadcast_rows(const wgml_tensor *t, int64_t rows);

typedef enum wgml_buffer_usage {
    WGML_BUFFER_WEIGHTS,     /* read-only model data */
    WGML_BUFFER_ACTIVATIONS, /* per-session scratch */
    WGML_BUFFER_KV,          /* KV cache */
} wgml_buffer_usage;

typedef struct wgml_step {
    int pos;      /* position of the first token of this step */
    int n_tokens; /* tokens in this step (rows of the activations) */
} wgml_step;

#endif
