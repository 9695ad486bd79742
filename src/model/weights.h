/*
 * weights.h - the weight loader every model family shares.
 *
 * A family names each tensor it needs and the shape its hyper-parameters
 * imply; the loader finds the tensor in the GGUF, checks its shape and type
 * (vectors, i.e. norms and biases, must be F32; matrices of a type the backend
 * can compute with) with errors that name the file and the tensor, creates it
 * on the backend (used in place in the mapping, copied into the backend's own
 * layout, or created empty and streamed in afterwards for a header-only file)
 * and counts its parameters and bytes.
 */
#ifndef WGML_MODEL_WEIGHTS_H
#define WGML_MODEL_WEIGHTS_H

#include "backend/backend.h"
#include "format/gguf.h"

/* Progress while loading (bytes done of total); non-zero cancels. */
typedef int (*wgml_load_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Reads len bytes at offset of the model file into buf; returns the bytes read. */
typedef int64_t (*wgml_weights_read_fn)(void *user, uint64_t offset, void *buf, size_t len);

/* A planted fault, for testing `wgml verify` (api_internal.h): the weight
 * named `tensor` reaches the backend with the scale of one block (the f16 d of
 * block `block` of a quantized type; element `block` of a float type)
 * multiplied by `factor`, as a device that decoded that one scale wrongly
 * would see it. The file's bytes stay as they are. */
typedef struct wgml_weight_fault {
    const char *tensor;
    float factor;
    int64_t block;
} wgml_weight_fault;

/* A model's weights on one backend: the buffers and what they hold. */
typedef struct wgml_weights {
    wgml_backend *be;            /* borrowed */
    wgml_buffer **bufs;
    const gguf_tensor **src;     /* the GGUF tensor each buffer holds rows of */
    int64_t *first_row, *n_rows; /* which rows of it (all of them, or a part: wgml_weights_load_part) */
    int n, cap;
    uint64_t n_params, bytes;    /* elements and stored bytes of every weight loaded */
    void *fault_copy;            /* the bytes of the weight with the planted fault, owned */
    /* The tensors of a header-only file that no weight holds (a family reads
     * them on the host through gguf, as Kokoro its voices): wgml_weights_stream
     * reads their bytes too, into host memory owned here. */
    const gguf_tensor **host_src;
    void **host_data;
    int n_host;
} wgml_weights;

/* One load: the file, where the weights go, progress and an optional fault. */
typedef struct wgml_weights_loader {
    const gguf_file *f;
    wgml_weights *w;
    wgml_error *err;
    wgml_load_progress_fn progress;
    void *user;
    uint64_t done, total;
    const wgml_weight_fault *fault; /* NULL: none */
    int fault_planted;
    const gguf_tensor *fault_src; /* the tensor fault_copy copies */
} wgml_weights_loader;

/* The type most of the loaded matrices (weights of more than one row) are
 * stored in, by bytes: what a model's matmuls mostly read ("Q4_K"); "" with none. */
const char *wgml_weights_main_type(const wgml_weights *w);

/* Starts a load into w (zeroed here, on backend be); total = every tensor's bytes. */
void wgml_weights_begin(wgml_weights_loader *L, const gguf_file *f, wgml_backend *be, wgml_weights *w,
                        const wgml_weight_fault *fault, wgml_load_progress_fn progress, void *user, wgml_error *err);

/* Looks up the weight `name`, checks its shape [ne0, ne1] (ne1 = 1 for a
 * vector) and type, and creates its backend buffer into t. required = 0 leaves
 * t zeroed when the file has no such tensor. */
wgml_status wgml_weights_load(wgml_weights_loader *L, wgml_tensor *t, const char *name, int64_t ne0, int64_t ne1,
                              int required);

/* Loads rows [first, first + rows) of the [ne0, ne1] matrix `name` as a
 * weight of its own, [ne0, rows]: the parts of a fused tensor (nomic-bert's
 * attn_qkv holds Wq, Wk and Wv one after another) become three weights with
 * no copy at run time. */
wgml_status wgml_weights_load_part(wgml_weights_loader *L, wgml_tensor *t, const char *name, int64_t ne0, int64_t ne1,
                                   int64_t first, int64_t rows);

/* Ends a load: a fault naming a tensor that was never loaded is an error;
 * reports the final progress. */
wgml_status wgml_weights_end(wgml_weights_loader *L);

/* Fills the weights of a load from a header-only file through read, tensor by
 * tensor in file order, in chunks of at most a few MiB; the tensors that no
 * weight holds go into host memory (w->host_*), so that a streamed model
 * has every byte a model loaded from a file would read. */
wgml_status wgml_weights_stream(wgml_weights *w, const gguf_file *f, wgml_weights_read_fn read, void *read_user,
                                wgml_load_progress_fn progress, void *user, wgml_error *err);

/* The bytes of tensor t on the host: t->data (a file or memory load), else
 * the copy a streamed load kept; NULL when there is none. */
const void *wgml_weights_host_data(const wgml_weights *w, const gguf_tensor *t);

/* Frees the buffers and the loader's arrays (not w itself). */
void wgml_weights_free(wgml_weights *w);

#endif
