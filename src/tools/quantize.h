/*
 * quantize.h - quantization recipes (which type each tensor gets) and the
 * streaming GGUF-to-GGUF quantizer.
 *
 * A recipe is named as llama.cpp names its file types: "Q4_K_M" is Q4_K for
 * most matrices, Q6_K for attn_v and ffn_down in the layers llama.cpp gives
 * "more bits" and for the output matrix; "Q8_0" is Q8_0 everywhere, ... The
 * per-tensor rules follow llama.cpp's llama_tensor_get_type for the
 * architectures we run (no MoE, no 70B special case); docs/model-tools.md has
 * the table. Plain K types without a llama.cpp file type of their own
 * ("Q3_K", "Q4_K", "Q5_K") are uniform: every matrix gets that type.
 *
 * In every recipe 1-D tensors (norms, biases, rope_freqs) and BERT's
 * position_embd, token_types and cls.output matrices stay F32, and a
 * matrix whose row length is no multiple of its type's block size falls back
 * as llama.cpp does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K ->
 * Q4_0 where llama.cpp uses IQ4_NL), and finally to F16.
 *
 * quantize_file streams: one tensor at a time is converted (rows spread over
 * a thread pool) and written; the output appears under its name only when
 * complete, so a failure leaves nothing behind.
 */
#ifndef WGML_TOOLS_QUANTIZE_H
#define WGML_TOOLS_QUANTIZE_H

#include "core/dtype.h"
#include "wgml.h"

#include <stdint.h>

typedef struct quantize_recipe {
    const char *name; /* "Q4_K_M" as llama.cpp spells it */
    uint32_t ftype;   /* llama.cpp's LLAMA_FTYPE_* (general.file_type; see quantize_file_type) */
    uint32_t base;    /* the type most matrices get (wgml_dtype) */
    int mix;          /* 1: llama.cpp's per-tensor rules; 0: every matrix gets `base` */
} quantize_recipe;

/* Case-insensitive lookup; NULL when unknown. */
const quantize_recipe *quantize_recipe_find(const char *name);
int quantize_recipe_count(void);
const quantize_recipe *quantize_recipe_at(int i);
/* "F32, F16, BF16, Q4_0, ..." for help texts and error messages. */
const char *quantize_recipe_list(void);

/* What the rules need to know about the model besides a tensor's name. */
typedef struct quantize_model_info {
    int n_layer;    /* block_count */
    int n_gqa;      /* attention heads per KV head */
    int has_output; /* output.weight exists (else token_embd is the tied output) */
} quantize_model_info;

/* The type a tensor gets. *wanted (may be NULL) receives the type the rules
 * chose before the row-length fallback; it differs from the result when the
 * tensor fell back. Tensors that are not quantized (1-D, norms) get F32. */
uint32_t quantize_tensor_type(const quantize_recipe *r, const quantize_model_info *mi, const char *name, int n_dims,
                              const int64_t *ne, uint32_t *wanted);

/* Whether a tensor is a weight matrix that recipes quantize (else it stays F32). */
int quantize_is_matrix(const char *name, int n_dims);

/* The general.file_type that describes what was written: the recipe's own
 * number when most matrix elements have the recipe's base type, else the
 * "mostly <type>" number of the type that holds most of them (a small model
 * whose rows fit no K-quant block is mostly Q5_0 or Q8_0, not Q4_K_M).
 * elements[t] = matrix elements stored in wgml_dtype t. */
uint32_t quantize_file_type(const quantize_recipe *r, const uint64_t elements[WGML_DTYPE_COUNT]);
/* "MOSTLY_Q4_K_M" etc. for a LLAMA_FTYPE number; "unknown" otherwise. */
const char *quantize_ftype_name(uint32_t ftype);

typedef struct quantize_params {
    int n_threads;             /* 0 = one per core */
    wgml_progress_fn progress; /* optional: (user, "quantizing", bytes done, total); non-zero cancels */
    void *progress_user;
    void (*log)(void *user, const char *line); /* optional: fallback notes */
    void *log_user;
} quantize_params;

typedef struct quantize_result {
    int n_tensors, n_fallback;
    uint64_t bytes_in, bytes_out;   /* tensor data */
    int per_type[WGML_DTYPE_COUNT]; /* tensors written in each wgml_dtype */
    uint32_t file_type;             /* general.file_type written */
} quantize_result;

/* Reads `in` (F32/F16/BF16 weights; a tensor already in its target type is
 * copied) and writes `out` with the recipe named `type`. result may be NULL. */
wgml_status quantize_file(const char *in, const char *out, const char *type, const quantize_params *params,
                          quantize_result *result, wgml_error *err);

/* ---- shared with synth ---- */

/* One tensor that fell back to another type because its rows fit no block. */
typedef struct quantize_fallback {
    const char *name;
    uint32_t wanted, type;
    int64_t ne0;
} quantize_fallback;

/* Logs the fallbacks, one line per (row length, wanted type, type used):
 * "blk.0.ffn_down.weight and 4 more: rows of 172 fit no Q8_0 block (32); using F16". */
void quantize_note_fallbacks(const quantize_fallback *fb, int n, void (*log)(void *user, const char *line), void *user);

/* Rows produced as f32, converted in parallel: */

struct wgml_threadpool;
/* Writes row `row` (n floats) of a tensor into dst. Called from pool threads. */
typedef void (*quantize_row_fn)(void *ctx, int64_t row, float *dst, int64_t n);

/* Converts rows [r0, r1) of a tensor with rows of ne0 elements to `type`,
 * writing row r at dst + r * row_size. */
wgml_status quantize_rows(struct wgml_threadpool *pool, uint32_t type, int64_t ne0, int64_t r0, int64_t r1,
                          quantize_row_fn fn, void *ctx, void *dst, wgml_error *err);

#endif
