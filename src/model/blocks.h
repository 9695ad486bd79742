/*
 * blocks.h - the layers several model families are built of, written once
 * against the backend ops: the transformer encoder layer (post-norm as in
 * BERT and ALBERT, pre-norm as in Whisper's encoder and CLIP) and the 1-D
 * convolution as a matmul over the signal's unfolding. A family names its
 * weights and activations; the block records the ops into the step.
 */
#ifndef WGML_MODEL_BLOCKS_H
#define WGML_MODEL_BLOCKS_H

#include "backend/backend.h"

/* One encoder layer's weights; NULL where the file has none (biases, the
 * gate of a SwiGLU feed-forward). */
typedef struct wgml_encoder_layer {
    const wgml_tensor *wq, *wk, *wv, *bq, *bk, *bv; /* attention's projections */
    const wgml_tensor *wo, *bo;                     /* its output */
    const wgml_tensor *attn_norm_w, *attn_norm_b;   /* the norm around attention */
    const wgml_tensor *up, *b_up, *gate, *down, *b_down; /* feed-forward: gate: SwiGLU (silu(gate x) * up x) */
    const wgml_tensor *ffn_norm_w, *ffn_norm_b;     /* the norm around the feed-forward */
} wgml_encoder_layer;

typedef struct wgml_encoder_layer_cfg {
    int n_head, head_dim;
    float eps;           /* the layer norms' */
    int pre_norm;        /* 0: x = LN(x + f(x)) (BERT, ALBERT); 1: x = x + f(LN(x)) (Whisper, CLIP) */
    wgml_unary_kind act; /* the feed-forward's activation without a gate (GELU, GELU_ERF, ...) */
    int f32_act;         /* the matmuls' f32_act (ops.h): no 8-bit activations */
    int causal;          /* 0: every row sees its whole text */
    const wgml_rope *rope; /* rotary positions on q and k, or NULL */
    /* several texts packed in the rows (ops.h attention): each row's text,
     * position and window of rows; all NULL for one text */
    const wgml_tensor *seq, *pos, *kv_range;
} wgml_encoder_layer_cfg;

/* The step's activations, rows x columns: x (in and out) and att [rows][n_head
 * * head_dim] (pre-norm: att also holds LN(x)), q, k, v alike, h [rows][the
 * feed-forward's width]. */
typedef struct wgml_encoder_acts {
    const wgml_tensor *x, *q, *k, *v, *att, *h;
} wgml_encoder_acts;

/* Records one encoder layer on x. */
void wgml_block_encoder_layer(wgml_backend *be, const wgml_encoder_layer *w, const wgml_encoder_layer_cfg *c,
                              const wgml_encoder_acts *a);

/* The output length of a 1-D convolution over T rows. */
int64_t wgml_conv1d_len(int64_t T, int kernel, int stride, int dilation, int pad);

/* y (= or +=, epi) conv1d(x) with weight w ([Co][K][Ct]: each tap's Ct >= x's
 * channels, the rest zero) and optional bias b, as a matmul over x's
 * unfolding; x and y time-major [T][C]. f32_act, bf16_act: the matmul's. */
void wgml_block_conv1d(wgml_backend *be, const wgml_tensor *x, const wgml_tensor *w, const wgml_tensor *b, int kernel,
                       int stride, int dilation, int pad, wgml_epilogue epi, int f32_act, int bf16_act,
                       const wgml_tensor *y);

#endif
