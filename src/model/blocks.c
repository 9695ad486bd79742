/*
 * blocks.c - the layers several families share (blocks.h).
 *
 * Encoder layer, post-norm:                  pre-norm:
 *   q, k, v = Wq x + bq, ...                   n = LN(x); q, k, v = Wq n + bq, ...
 *   x = LN(x + Wo attention(q, k, v) + bo)     x = x + Wo attention(q, k, v) + bo
 *   h = act(Wup x + bup)                       n = LN(x); h = act(Wup n + bup)
 *   x = LN(x + Wdown h + bdown)                x = x + Wdown h + bdown
 * (with a gate: h = silu(Wgate x) * Wup x). The residual adds are the
 * matmuls' ADD epilogue.
 */
#include <math.h>

#include "model/blocks.h"

void wgml_block_encoder_layer(wgml_backend *be, const wgml_encoder_layer *w, const wgml_encoder_layer_cfg *c,
                              const wgml_encoder_acts *a) {
    const wgml_tensor *in = a->x;
    if (c->pre_norm) {
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = a->att, .x = a->x, .w = w->attn_norm_w,
                                                       .b = w->attn_norm_b, .eps = c->eps});
        in = a->att;
    }
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = c->f32_act, .x = in, .n_w = 3, .w = {w->wq, w->wk, w->wv},
                                           .bias = {w->bq, w->bk, w->bv}, .out = {a->q, a->k, a->v}});
    wgml_op_attention(be, &(wgml_attention_args){.q = a->q, .k = a->k, .v = a->v, .out = a->att, .n_head = c->n_head,
                                                 .n_head_kv = c->n_head, .head_dim = c->head_dim,
                                                 .scale = 1.0f / sqrtf((float)c->head_dim), .rope = c->rope,
                                                 .bidirectional = !c->causal, .seq = c->seq, .pos = c->pos,
                                                 .kv_range = c->kv_range});
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = c->f32_act, .x = a->att, .n_w = 1, .w = {w->wo},
                                           .bias = {w->bo}, .out = {a->x}, .epilogue = WGML_EPI_ADD});
    if (c->pre_norm) {
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = a->att, .x = a->x, .w = w->ffn_norm_w,
                                                       .b = w->ffn_norm_b, .eps = c->eps});
        in = a->att;
    } else {
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = a->x, .x = a->x, .w = w->attn_norm_w,
                                                       .b = w->attn_norm_b, .eps = c->eps});
    }
    if (w->gate) {
        wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = c->f32_act, .x = in, .n_w = 2, .w = {w->gate, w->up},
                                               .out = {a->h}, .epilogue = WGML_EPI_SWIGLU});
    } else {
        wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = c->f32_act, .x = in, .n_w = 1, .w = {w->up},
                                               .bias = {w->b_up}, .out = {a->h}});
        wgml_op_unary(be, &(wgml_unary_args){.out = a->h, .x = a->h, .kind = c->act});
    }
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = c->f32_act, .x = a->h, .n_w = 1, .w = {w->down},
                                           .bias = {w->b_down}, .out = {a->x}, .epilogue = WGML_EPI_ADD});
    if (!c->pre_norm)
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = a->x, .x = a->x, .w = w->ffn_norm_w,
                                                       .b = w->ffn_norm_b, .eps = c->eps});
}

int64_t wgml_conv1d_len(int64_t T, int kernel, int stride, int dilation, int pad) {
    return (T + 2 * pad - (int64_t)dilation * (kernel - 1) - 1) / stride + 1;
}

void wgml_block_conv1d(wgml_backend *be, const wgml_tensor *x, const wgml_tensor *w, const wgml_tensor *b, int kernel,
                       int stride, int dilation, int pad, wgml_epilogue epi, int f32_act, int bf16_act,
                       const wgml_tensor *y) {
    wgml_conv1d cv = {0}; /* a pointwise convolution over whole rows is a plain matmul */
    if (kernel != 1 || stride != 1 || pad || w->ne[0] / kernel != x->ne[0])
        cv = (wgml_conv1d){.kernel = kernel, .stride = stride, .dilation = dilation, .pad_l = pad, .pad_r = pad};
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = f32_act, .bf16_act = bf16_act, .x = x, .n_w = 1, .w = {w},
                                           .bias = {b}, .out = {y}, .epilogue = epi, .conv = cv});
}
