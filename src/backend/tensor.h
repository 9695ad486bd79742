/*
 * tensor.h - tensors as the ops see them: views (buffer, byte offset, type,
 * shape) of backend buffers, and the step the ops of a forward pass run in.
 *
 * Rows are contiguous (row stride = wgml_row_size(type, ne[0])). Activations
 * are f32 [rows][cols] with ne[0] = cols; a model takes views of fixed buffers
 * (a row range, a layer of the KV cache) freely, as plain structs: views cost
 * nothing. Weights W are [out][in] (ne[0] = in) in any weight dtype.
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
} wgml_tensor;

/* Elements, rows and bytes of a tensor (rows = ne[1]*ne[2]*ne[3]). */
int64_t wgml_tensor_nelements(const wgml_tensor *t);
int64_t wgml_tensor_nrows(const wgml_tensor *t);
size_t wgml_tensor_nbytes(const wgml_tensor *t);
/* A view of rows [first, first+n) of a 2-D tensor. */
wgml_tensor wgml_tensor_rows(const wgml_tensor *t, int64_t first, int64_t n);

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
