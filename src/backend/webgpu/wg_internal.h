/*
 * wg_internal.h - state shared by the WebGPU backend's files.
 *
 *   wg_backend.c  the backend object: device, buffers, weight upload, steps
 *   wg_repack.c   GGUF blocks -> the GPU weight layout (aligned words, scales apart)
 *   wg_compose.c  WGSL composition (prelude, snippets, #ifdef) and the pipeline cache
 *   wg_record.c   recording dispatches: per-dispatch parameter slots, bind-group cache
 *   wg_ops.c      the ops of backend.h as dispatches of the kernels in kernels/
 *   wg_ops_attention.c  RoPE and attention (today's causal KV-cache path and general attention)
 *   wg_ops_nn.c   the same for the encoders' ops (layer_norm, unary, mul, pool, ...)
 *   wg_ops_copy.c copy (strided views) and get_rows from an activation table
 *   wg_ops_audio.c the audio models' ops (im2col, col2im, instance_norm, lstm,
 *                 stft, istft, nsf_source)
 *
 * The static plan: weights are uploaded once; a session's activations and
 * KV cache are allocated when it is created; parameters of the n-th dispatch
 * of a step live in slot n of one uniform buffer and are rewritten only when
 * they change; bind groups are cached per slot; so a decode step after the
 * first writes the 16-byte step uniform and the token id, records its
 * dispatches, submits once and reads back 4 bytes (greedy) - and creates
 * nothing.
 */
#ifndef WGML_WG_INTERNAL_H
#define WGML_WG_INTERNAL_H

#include "backend/backend.h"
#include "core/error.h"
#include "gpu/gpu.h"

#define WG_PARAM_SLOT 256   /* bytes per dispatch parameter slot (uniform offset alignment) */
#define WG_MAX_SLOTS 8192   /* parameter slots: dispatches per submit (a longer step is split) */
#define WG_MAX_BINDINGS 14
#define WG_BG_WAYS 4        /* cached bind groups per slot (prefill and decode variants) */

/* A weight tensor split by rows into windows that each fit one storage binding. */
typedef struct wg_window {
    wgml_gpu_buffer *gpu;
    int64_t row0, rows;
    uint32_t sb_word; /* start of the scale region, in words */
} wg_window;

struct wgml_buffer {
    wgml_gpu_buffer *gpu; /* non-weight buffers */
    size_t size;
    int is_weight;
    uint32_t wtype;
    int64_t ne0, ne1;
    int n_windows;
    wg_window *win;
    uint64_t gpu_bytes; /* device memory held */
    const void *host;   /* weights: the GGUF bytes they were uploaded from (valid while the buffer lives) */
};

typedef struct wg_bg_entry {
    uint64_t key;
    wgml_gpu_bindgroup *bg;
    uint64_t last_use;
} wg_bg_entry;

/* One cached pipeline. */
typedef struct wg_pipeline {
    uint64_t key;
    wgml_gpu_kernel *kernel;
    char label[48];
} wg_pipeline;

typedef struct wg_backend {
    wgml_backend base;
    wgml_gpu *gpu;
    const wgml_gpu_adapter_info *info;
    int tier_f16;        /* shader-f16 enabled: KV cache in f16 */
    int tier_subgroups;  /* subgroup reductions */
    int mv_wg_subgroup;  /* matvec workgroups are exactly one subgroup (fixed subgroup size >= 4) */
    int mv_rows;         /* rows per matvec workgroup (reduction layout), per invocation (lane rows) */
    int mv_lane_rows;    /* matvec invocations compute whole rows (CPU adapters) */
    int mv_lane_wg;      /* workgroup size of the lane-rows matvec: the adapter's SIMD width */
    int mv_lane_sg;      /* lane rows share input loads through subgroupBroadcast (fixed size >= 4) */
    uint64_t max_window; /* tests: windows smaller than the binding limit */
    char device_label[300];

    /* pipelines */
    wg_pipeline *pipes;
    int n_pipes, cap_pipes;
    double compile_ms;
    char model_key[96];  /* names the model's kernel list in the pipeline cache (wg_manifest.c) */
    int n_prepared;      /* pipes[0, n_prepared) came from that list */

    /* recording */
    wgml_step step;
    int in_step;
    int n_slots;          /* dispatches recorded in this step */
    uint8_t *shadow;      /* host copy of the parameter slots */
    uint8_t *slot_valid;  /* 1 once a slot's shadow was written to the GPU */
    int dirty_lo, dirty_hi;
    wgml_gpu_buffer *params;
    wgml_gpu_buffer *step_buf;
    wg_bg_entry *bgs;     /* WG_MAX_SLOTS x WG_BG_WAYS */
    uint64_t use_clock;
    wgml_gpu_readback *reads; /* this step's downloads: grown as needed, kept (a steady state allocates nothing) */
    int n_reads, cap_reads;
    wgml_sticky sticky; /* first error recorded in this step */

    /* scratch owned by the backend */
    wgml_gpu_buffer *part;      /* attention split partials */
    uint64_t part_size;
    wgml_gpu_buffer *rope;      /* (cos, sin) table */
    uint64_t rope_key;          /* hash of the parameters the table was built for */
    int rope_rows;
    wgml_gpu_buffer *rope_pos; /* (cos, sin) table for explicit positions (rope_store.wgsl, POS) */
    uint64_t rope_pos_key;
    wgml_gpu_buffer *dummy;     /* bound where a kernel needs a buffer that is unused */
    wgml_buffer *tmp[2];        /* SwiGLU products when they cannot be fused */
    wgml_gpu_buffer *scratch;   /* per-op temporaries (nsf_source's phases, a convolution's unfolding),
                                   grown as needed (wg_scratch) */
    uint64_t scratch_size;
    uint64_t scratch_step;      /* the step that last used it */
    wgml_gpu_buffer *retired[8]; /* outgrown scratch buffers this step's dispatches use: destroyed
                                    after its submit */
    int n_retired;

    uint64_t steps;
    uint64_t weight_bytes;
} wg_backend;

/* Records the first error of a step (reported by end; later ones are dropped): wgml_sticky_fail on wb->sticky. */
#define wg_error(wb, code, ...) wgml_sticky_fail(&(wb)->sticky, (code), __VA_ARGS__)
/* The backend's scratch buffer (wb->scratch) with at least `need` bytes, for
 * an op's own temporaries (nsf_source's table, a convolution's unfolding);
 * NULL with the error recorded. Dispatches that use it run in order. */
wgml_gpu_buffer *wg_scratch(wg_backend *wb, const char *op, uint64_t need);

/* ---- wg_repack.c ---- */
/* Words per block of the main region and bytes of scales per block (0 when
 * the type keeps its blocks whole); 0 words if the GPU cannot use the type. */
int wg_repack_layout(uint32_t type, int *main_words, int *scale_bytes);
/* Bytes the GPU layout of `rows` rows of ne0 elements takes (main + scales, aligned). */
uint64_t wg_repack_size(uint32_t type, int64_t ne0, int64_t rows, uint32_t *sb_word);
/* Converts rows [0, rows) from GGUF layout at src into dst (wg_repack_size bytes). */
void wg_repack(uint32_t type, int64_t ne0, int64_t rows, const void *src, void *dst, uint32_t sb_word);

/* ---- wg_manifest.c: a model's kernels, remembered and compiled at load ---- */
void wg_kernels_prepare(wgml_backend *be, const char *model_key);
wgml_status wg_kernels_wait(wgml_backend *be, void (*progress)(void *user, int done, int total), void *user,
                            wgml_error *err);
/* Parses a stored list into keys (at most cap); -1 if it is not one. */
int wg_kernels_parse(const char *s, size_t n, uint64_t *keys, int cap);
/* Stores the list of pipelines when it grew (at free). */
void wg_kernels_remember(wg_backend *wb);

/* ---- wg_compose.c ---- */
/* Whether a WGSL decoder for weights of this type exists. */
int wg_has_decoder(uint32_t type);
/* Properties of a kernel kind: the pieces wg_compose.c puts before its file. */
#define WGKP_MATRIX 1u /* a weight matrix kernel: mm_common.wgsl, generated bindings, the weight decoder */
#define WGKP_REDUCE 2u /* reduce.wgsl: workgroup reductions */
#define WGKP_OUT_X 4u  /* out_x.wgsl: the output and the input x of kernels that may run in place */
#define WGKP_AUDIO 8u  /* audio_math.wgsl: tanh, sigmoid, sin and cos, twiddles, atan2 */

/* X(NAME, file, label, define, properties, in0, in1, in2): the kernel kinds, one a row,
 * and everything wg_compose.c knows of them:
 *   NAME        the enum wg_kind (WGK_<NAME>); its value is in the pipeline cache's keys
 *               (wg_manifest.c): rows are only ever added at the end
 *   file        the WGSL file in kernels/ (several kinds share one, told apart by `define`)
 *   label       the kernel's name in pipeline labels, profiles and tests
 *   define      the name the kind defines for the file's #ifdef (NULL: none)
 *   properties  WGKP_MATRIX, WGKP_REDUCE, WGKP_OUT_X, WGKP_AUDIO
 *   in0..in2    the names the kernel gives inputs 0..2 read through the output's binding
 *               (WGF_IN0_IS_OUT...), NULL where it has none */
#define WG_KINDS(X)                                                                                                    \
    X(MATVEC, "matvec", "matvec", NULL, WGKP_MATRIX | WGKP_REDUCE, NULL, NULL, NULL)                                   \
    X(MATMUL, "matmul", "matmul", NULL, WGKP_MATRIX | WGKP_REDUCE, NULL, NULL, NULL)                                   \
    X(GET_ROWS, "get_rows", "get_rows", "GET_ROWS", WGKP_MATRIX, NULL, NULL, NULL)                                     \
    X(ROPE, "rope_store", "rope", NULL, 0, NULL, NULL, NULL)                                                           \
    X(ROPE_STORE, "rope_store", "rope_kv_store", "STORE", 0, NULL, NULL, NULL)                                         \
    X(ATTENTION, "attention", "attention", NULL, WGKP_REDUCE, NULL, NULL, NULL)                                        \
    X(ATTN_COMBINE, "attention_combine", "attention_combine", NULL, 0, NULL, NULL, NULL)                               \
    X(ATTN_GENERAL, "attention_general", "attention_general", NULL, WGKP_REDUCE, NULL, NULL, NULL)                     \
    X(RMS_NORM, "rows", "rms_norm", "RMS_NORM", WGKP_REDUCE | WGKP_OUT_X, "X_IS_OUT", NULL, NULL)                      \
    X(SOFTMAX, "rows", "softmax", "SOFTMAX", WGKP_REDUCE | WGKP_OUT_X, "X_IS_OUT", NULL, NULL)                         \
    X(ARGMAX, "rows", "argmax", "ARGMAX", WGKP_REDUCE, NULL, NULL, NULL)                                               \
    X(ADD, "elementwise", "add", "ADD", 0, "A_IS_OUT", "B_IS_OUT", NULL)                                               \
    X(SWIGLU, "elementwise", "swiglu", "SWIGLU", 0, NULL, NULL, NULL)                                                  \
    X(BENCH_READ, "bench_read", "bench_read", NULL, WGKP_REDUCE, NULL, NULL, NULL)                                     \
    X(MUL, "elementwise", "mul", "MUL", 0, "A_IS_OUT", "B_IS_OUT", NULL)                                               \
    X(LAYER_NORM, "norm", "layer_norm", "LAYER_NORM", WGKP_OUT_X, "X_IS_OUT", "W_IS_OUT", "B_IS_OUT")                  \
    X(L2_NORM, "norm", "l2_norm", "L2_NORM", WGKP_OUT_X, "X_IS_OUT", "W_IS_OUT", "B_IS_OUT")                           \
    X(UNARY, "unary", "unary", NULL, WGKP_OUT_X, "X_IS_OUT", "V_IS_OUT", NULL)                                         \
    X(POOL, "pool", "pool", NULL, WGKP_OUT_X, "X_IS_OUT", NULL, NULL)                                                  \
    /* a strided view into contiguous rows */                                                                          \
    X(COPY, "copy", "copy", NULL, WGKP_OUT_X, "X_IS_OUT", NULL, NULL)                                                  \
    /* get_rows from an f32 activation table */                                                                        \
    X(GET_ROWS_ACT, "copy", "get_rows_act", "GATHER", WGKP_OUT_X, "X_IS_OUT", NULL, NULL)                              \
    /* a signal unfolded for a convolution as a matmul */                                                              \
    X(IM2COL, "conv", "im2col", "IM2COL", WGKP_OUT_X, "X_IS_OUT", NULL, NULL)                                          \
    /* a transposed convolution's overlap-add */                                                                       \
    X(COL2IM, "conv", "col2im", "COL2IM", WGKP_OUT_X, "X_IS_OUT", "B_IS_OUT", NULL)                                    \
    /* columns normalized over the rows */                                                                             \
    X(INSTANCE_NORM, "instance_norm", "instance_norm", NULL, WGKP_OUT_X, "X_IS_OUT", "W_IS_OUT", "B_IS_OUT")           \
    /* an LSTM layer's whole recurrence */                                                                             \
    X(LSTM, "lstm", "lstm", NULL, WGKP_AUDIO, "GX_IS_OUT", "W_IS_OUT", NULL)                                           \
    X(STFT, "spectral", "stft", "STFT", WGKP_OUT_X | WGKP_AUDIO, "X_IS_OUT", "W_IS_OUT", NULL)                         \
    X(ISTFT, "spectral", "istft", "ISTFT", WGKP_AUDIO, "MAG_IS_OUT", "PH_IS_OUT", "W_IS_OUT")                          \
    /* nsf_source's phase table, then its samples */                                                                   \
    X(NSF_RATES, "nsf", "nsf_rates", "RATES", 0, NULL, NULL, NULL)                                                     \
    X(NSF_SAMPLES, "nsf", "nsf_samples", "SAMPLES", WGKP_AUDIO, "F0_IS_OUT", "W_IS_OUT", "B_IS_OUT")

typedef enum wg_kind {
#define WG_KIND_ENUM(NAME, file, label, define, props, in0, in1, in2) WGK_##NAME,
    WG_KINDS(WG_KIND_ENUM)
#undef WG_KIND_ENUM
        WGK_COUNT
} wg_kind;

/* matvec/matmul variant flags */
#define WGF_NORM 1u
#define WGF_ADD 2u
#define WGF_SWIGLU 4u
#define WGF_BIAS0 8u
#define WGF_BIAS1 16u
#define WGF_BIAS2 32u
#define WGF_ROW_VIEW 64u /* weights are views of rows: decoders start at window row roff (ROW_VIEW) */
#define WGF_NW_SHIFT 8 /* number of weights << 8 */
/* bench_read variant flag: per-invocation contiguous chunks */
#define WGF_CHUNKED 1u
/* Variants of the encoders' kernels (wg_ops_nn.c; bits that no other kind uses):
 * input i of the dispatch lies in the output's buffer and is read through the
 * output's read_write binding (WebGPU forbids binding a buffer that a
 * dispatch writes a second time); the names the kernel sees are per kind
 * (wg_compose.c: X_IS_OUT, W_IS_OUT, ...). */
#define WGF_IN0_IS_OUT (1u << 16)
#define WGF_IN1_IS_OUT (1u << 17)
#define WGF_IN2_IS_OUT (1u << 18)
/* elementwise.wgsl (add, mul): rows of a [rows][cols] grid, b one row or a's shape (ROWS) */
#define WGF_EW_ROWS (1u << 19)
/* rope_store.wgsl (WGK_ROPE, WGK_ROPE_STORE): positions from an i32 tensor (POS) */
#define WGF_ROPE_POS (1u << 24)
/* attention_general.wgsl (WGK_ATTN_GENERAL): key rows from the KV cache (CACHE), causal
 * (CAUSAL), sequence ids of the query rows (SEQ) and of the key rows apart (KV_SEQ),
 * positions from a tensor (POS), an additive mask (MASK), a window of key rows per query (RANGE) */
#define WGF_ATT_CACHE (1u << 24)
#define WGF_ATT_CAUSAL (1u << 25)
#define WGF_ATT_SEQ (1u << 26)
#define WGF_ATT_KV_SEQ (1u << 27)
#define WGF_ATT_POS (1u << 28)
#define WGF_ATT_MASK (1u << 29)
#define WGF_ATT_RANGE (1u << 30)
/* lstm.wgsl (WGK_LSTM): room for a hidden size above 1024 (BIG: 2048, all 16 KiB of workgroup memory) */
#define WGF_LSTM_BIG (1u << 24)

/* Rows per matvec invocation (lane rows) or workgroup (GPU layout) of a variant. */
int wg_matvec_rows(const wg_backend *wb, uint32_t flags);
/* The pipeline for (kind, weight type, flags), composed and compiled on first use. */
wgml_gpu_kernel *wg_kernel(wg_backend *wb, wg_kind kind, uint32_t wtype, uint32_t flags, wgml_error *err);
void wg_pipelines_free(wg_backend *wb);
/* Exposed for tests: the composed WGSL (caller frees with wgml_free). */
char *wg_compose_source(wg_backend *wb, wg_kind kind, uint32_t wtype, uint32_t flags, wgml_error *err);

/* ---- wg_record.c ---- */
typedef struct wg_dispatch {
    wgml_gpu_kernel *kernel;
    const void *params; /* copied into this dispatch's slot */
    size_t params_size;
    int n_bind;
    wgml_gpu_binding bind[WG_MAX_BINDINGS]; /* bindings 2..; 0 (step) and 1 (params) are added */
    uint32_t grid[3];
} wg_dispatch;

wgml_status wg_record_init(wg_backend *wb, wgml_error *err);
void wg_record_free(wg_backend *wb);
void wg_record(wg_backend *wb, const wg_dispatch *d);
/* Writes changed parameter slots and the step uniform (before the submit). */
void wg_record_flush(wg_backend *wb);
/* Drops cached bind groups that use buf (before it is destroyed). */
void wg_record_forget(wg_backend *wb, const wgml_gpu_buffer *buf);

/* ---- wg_ops.c: the backend's entry point (be->run) and one wg_op_<name> per line of ops.h
 * (wg_ops_nn.c: the encoders' ops; wg_ops_attention.c: rope and attention; wg_ops_copy.c:
 * copy; wg_ops_audio.c: the audio models' ops) ---- */
void wg_run(wgml_backend *be, wgml_op op, const void *args);
int wg_supports(wgml_backend *be, wgml_op op, const void *args);
#define WG_OP_DECL(name, NAME, args) void wg_op_##name(wg_backend *wb, const args *a);
WGML_OPS(WG_OP_DECL)
#undef WG_OP_DECL
/* add and mul (wg_ops_nn.c): out = a (op) b with b one row or a's shape, a weight or an
 * activation, any of them in out's buffer (validated: the same view or apart). */
void wg_binary_rows(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *a,
                    const wgml_tensor *b);
/* get_rows from an f32 activation table (wg_ops_copy.c; wg_op_get_rows hands it those). */
void wg_get_rows_act(wg_backend *wb, const wgml_get_rows_args *a);

/* ---- wg_measure.c ---- */
wgml_status wg_measure_bandwidth(wgml_backend *be, double *gbs, wgml_error *err);

/* The whole GPU buffer behind a (non-weight) tensor, with the tensor's byte offset. */
static inline wgml_gpu_buffer *wg_gpu_of(const wgml_tensor *t) { return t->buf->gpu; }

/* ---- what the op files (wg_ops.c, wg_ops_nn.c) share ---- */

/* An activation/KV tensor: inside its buffer, 4-byte aligned; *elem_off: its offset in elements. */
static inline int wg_act(wg_backend *wb, const char *op, const wgml_tensor *t, uint32_t *elem_off) {
    if (!t || !t->buf || t->buf->is_weight) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: tensor '%s' must be an activation", op,
                 t && t->name ? t->name : "?");
        return 0;
    }
    size_t n = wgml_tensor_extent(t); /* a strided view's whole span (copy's input) */
    if (t->offset > t->buf->size || n > t->buf->size - t->offset || (t->offset & 3)) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: tensor '%s' at offset %zu exceeds its buffer of %zu bytes", op,
                 t->name ? t->name : "?", t->offset, t->buf->size);
        return 0;
    }
    if (elem_off) *elem_off = (uint32_t)(t->offset / (t->type == WGML_F16 ? 2 : 4));
    return 1;
}

/* A weight tensor: the whole weight, or a view of whole rows of it
 * (wgml_tensor_rows: its offset counts rows of the GGUF layout), rows
 * [*first, *first + rows); the GPU layout of each window maps those rows
 * (wg_ops.c). */
static inline int wg_weight_rows(wg_backend *wb, const char *op, const wgml_tensor *t, int64_t *first) {
    size_t rb = t && t->buf && t->buf->is_weight ? wgml_row_size(t->buf->wtype, t->buf->ne0) : 0;
    if (!rb || t->ne[0] != t->buf->ne0 || !wgml_tensor_is_contiguous(t) || t->offset % rb ||
        (int64_t)(t->offset / rb) + wgml_tensor_nrows(t) > t->buf->ne1) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: '%s' must be a weight tensor or a view of whole rows of one", op,
                 t && t->name ? t->name : "?");
        return 0;
    }
    *first = (int64_t)(t->offset / rb);
    return 1;
}
/* A vector operand read from a weight (a bias, a norm's scale): any
 * contiguous piece of an f32 weight that fits its one window (a row, or part
 * of one: the two halves of one bias). */
static inline int wg_weight_vec(wg_backend *wb, const char *op, const wgml_tensor *t) {
    const wgml_buffer *b = t ? t->buf : NULL;
    if (!b || !b->is_weight || b->wtype != WGML_F32 || t->type != WGML_F32 || !wgml_tensor_is_contiguous(t) ||
        (t->offset & 3) || t->offset / 4 + (uint64_t)wgml_tensor_nelements(t) > (uint64_t)(b->ne0 * b->ne1)) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: '%s' must be a contiguous piece of an f32 weight", op,
                 t && t->name ? t->name : "?");
        return 0;
    }
    if (b->n_windows != 1) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "%s: weight '%s' does not fit one binding", op, t->name ? t->name : "?");
        return 0;
    }
    return 1;
}
static inline int wg_weight(wg_backend *wb, const char *op, const wgml_tensor *t) {
    int64_t first;
    return wg_weight_rows(wb, op, t, &first);
}

/* The whole buffer of an activation tensor (its offset goes in the parameters). */
static inline wgml_gpu_binding wg_bind(uint32_t binding, const wgml_tensor *t) {
    return (wgml_gpu_binding){binding, t->buf->gpu, 0, 0};
}

/* Records one dispatch of kernel k with its parameters and bindings (2..). */
static inline void wg_dispatch_kernel(wg_backend *wb, wgml_gpu_kernel *k, const void *params, size_t psize,
                                      const wgml_gpu_binding *b, int nb, uint32_t gx, uint32_t gy, uint32_t gz) {
    wg_dispatch d = {.kernel = k, .params = params, .params_size = psize, .n_bind = nb, .grid = {gx, gy, gz}};
    for (int i = 0; i < nb; i++) d.bind[i] = b[i];
    wg_record(wb, &d);
}

/* The pipeline of a kernel variant (wg_kernel), or NULL with the error recorded (or one recorded before). */
static inline wgml_gpu_kernel *wg_get_kernel(wg_backend *wb, wg_kind kind, uint32_t wtype, uint32_t flags) {
    if (wb->sticky.status) return NULL;
    wgml_error e;
    wgml_gpu_kernel *k = wg_kernel(wb, kind, wtype, flags, &e);
    if (!k) wgml_sticky_set(&wb->sticky, &e);
    return k;
}

static inline uint32_t wg_div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

#endif
