/*
 * clip_vision.c - the vision tower's forward pass (clip.h has the math),
 * written once against backend ops, and its per-request state.
 *
 * Rows: image i is rows [i T, (i+1) T), T = the class row (CLIP, ViT) and
 * then its patches in raster order. The host unfolds each image's patches
 * into rows of 3 P P values (channel, then y, then x: the order of the
 * Conv2d weight's [D][3][P][P]), a zero row in each class row's place; one
 * matmul makes every row, then the class rows get the class embedding.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/fp16.h"
#include "model/acts.h"
#include "model/blocks.h"
#include "model/clip/clip.h"

struct clip_state {
    clip_model *m;
    int n_images; /* images per step it holds */
    wgml_tensor pix, x, q, k, v, att, h;           /* [rows][...] */
    wgml_tensor pooled, a, a2, hq, out;             /* [images][...] */
    wgml_tensor pos, range, start, qrange, zero;   /* i32 tables uploaded per step */
    wgml_acts acts;
    wgml_tensor pos_tab; /* the interpolated position table (clip.h), uploaded in the state's first step */
    float *pos_host;     /* its values */
    int pos_uploaded;
    float *patches; /* host staging: rows x 3 P P */
    int32_t *host;  /* host staging for the i32 tables */
};

static void state_release(clip_state *s) {
    wgml_acts_release(&s->acts);
    s->n_images = 0;
    wgml_free(s->patches);
    wgml_free(s->host);
    s->patches = NULL;
    s->host = NULL;
}

void clip_state_free(clip_state *s) {
    if (!s) return;
    state_release(s);
    wgml_free(s->pos_host);
    wgml_free(s);
}

/* torch's cubic convolution weights (a = -0.75) of the 4 taps around a point t in [0, 1) past a sample. */
static void cubic_weights(double t, double w[4]) {
    const double a = -0.75;
    const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
    w[0] = ((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a;
    w[1] = ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1;
    w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
    w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

/* For each of n outputs resampled from m inputs: its 4 (clamped) input indices and weights. */
static void cubic_taps(int m, int n, int *idx, double *w) {
    const double scale = (double)m / (double)n;
    for (int o = 0; o < n; o++) {
        const double src = scale * (o + 0.5) - 0.5; /* align_corners off, no clamp before the floor (cubic) */
        const double f = floor(src);
        cubic_weights(src - f, w + 4 * o);
        for (int k = 0; k < 4; k++) {
            int i = (int)f - 1 + k;
            idx[4 * o + k] = i < 0 ? 0 : i > m - 1 ? m - 1 : i;
        }
    }
}

void clip_pos_interpolate(const void *src, int f16, int64_t D, int class_row, int trained, int grid, float *out) {
    const float *s32 = src;
    const uint16_t *s16 = src;
#define SRC(row, d) ((double)(f16 ? wgml_f16_to_f32(s16[(size_t)(row) * (size_t)D + (size_t)(d)]) \
                                  : s32[(size_t)(row) * (size_t)D + (size_t)(d)]))
    if (class_row)
        for (int64_t d = 0; d < D; d++) out[d] = (float)SRC(0, d);
    int iy[4 * 256], ix[4 * 256];
    double wy[4 * 256], wx[4 * 256];
    cubic_taps(trained, grid, iy, wy);
    cubic_taps(trained, grid, ix, wx);
    const int c = class_row;
    for (int y = 0; y < grid; y++)
        for (int x = 0; x < grid; x++) {
            float *o = out + ((size_t)c + (size_t)y * (size_t)grid + (size_t)x) * (size_t)D;
            for (int64_t d = 0; d < D; d++) {
                double acc = 0;
                for (int ky = 0; ky < 4; ky++) {
                    double row = 0;
                    for (int kx = 0; kx < 4; kx++) row += wx[4 * x + kx] * SRC(c + iy[4 * y + ky] * trained + ix[4 * x + kx], d);
                    acc += wy[4 * y + ky] * row;
                }
                o[d] = (float)acc;
            }
        }
#undef SRC
}

/* Makes s's buffers for n images (s holds none). */
static wgml_status state_reserve(clip_state *s, int n, wgml_error *err) {
    const clip_vision_hparams *hp = &s->m->hp.v;
    const int64_t E = hp->n_embd, F = hp->n_ff, K = 3LL * hp->patch_size * hp->patch_size;
    const int64_t R = (int64_t)n * hp->n_rows;
    int64_t outw = clip_vision_dim(s->m);
    if (hp->n_labels > outw) outw = hp->n_labels;
    if (!(s->patches = wgml_malloc((size_t)(R * K) * sizeof(float))) ||
        !(s->host = wgml_malloc((size_t)(3 * R + 4 * n + 1) * sizeof(int32_t))) /* pos, range, start, qrange, zero */) {
        state_release(s);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for %d images' activations", n);
    }
    s->n_images = n;
    s->pos_uploaded = 0;
    wgml_acts *a = &s->acts;
    wgml_status st;
    if ((st = wgml_acts_tensor(a, &s->pix, "pixels", WGML_F32, K, R, err)) ||
        (st = wgml_acts_tensor(a, &s->x, "x", WGML_F32, E, R, err)) || (st = wgml_acts_tensor(a, &s->q, "q", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->k, "k", WGML_F32, E, R, err)) || (st = wgml_acts_tensor(a, &s->v, "v", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->att, "att", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->h, "h", WGML_F32, F, R, err)) ||
        (st = wgml_acts_tensor(a, &s->pooled, "pooled", WGML_F32, E, n, err)) ||
        (st = wgml_acts_tensor(a, &s->a, "a", WGML_F32, E, n, err)) ||
        (st = wgml_acts_tensor(a, &s->a2, "a2", WGML_F32, E, n, err)) ||
        (st = wgml_acts_tensor(a, &s->hq, "hq", WGML_F32, E, n, err)) ||
        (st = wgml_acts_tensor(a, &s->out, "out", WGML_F32, outw, n, err)) ||
        (st = wgml_acts_tensor(a, &s->pos, "pos", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->range, "range", WGML_I32, 2, R, err)) ||
        (st = wgml_acts_tensor(a, &s->start, "start", WGML_I32, n + 1, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->qrange, "qrange", WGML_I32, 2, n, err)) ||
        (st = wgml_acts_tensor(a, &s->zero, "zero", WGML_I32, n, 1, err)) ||
        (s->pos_host && (st = wgml_acts_tensor(a, &s->pos_tab, "positions", WGML_F32, E, hp->n_rows, err)))) {
        state_release(s);
        return st;
    }
    return WGML_OK;
}

wgml_status clip_state_create(clip_model *m, int n_images, clip_state **out, wgml_error *err) {
    *out = NULL;
    if (n_images < 1) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "vision state: %d images", n_images);
    clip_state *s = wgml_calloc(1, sizeof *s);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the vision state");
    s->m = m;
    s->acts.be = m->be;
    const clip_vision_hparams *hp = &m->hp.v;
    if (m->pos_src) { /* this state's interpolated position table, from the trained one on the host */
        const void *src = wgml_weights_host_data(&m->w, m->pos_src);
        if (!src) {
            wgml_free(s);
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "vision state: the position table's values are not loaded");
        }
        if (!(s->pos_host = wgml_malloc((size_t)hp->n_rows * (size_t)hp->n_embd * sizeof(float)))) {
            wgml_free(s);
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the vision state");
        }
        clip_pos_interpolate(src, m->pos_src->type == WGML_F16, hp->n_embd, hp->class_row, hp->trained_grid, hp->grid,
                             s->pos_host);
    }
    wgml_status st = state_reserve(s, n_images, err);
    if (st) {
        wgml_free(s->pos_host);
        wgml_free(s);
        return st;
    }
    *out = s;
    return WGML_OK;
}

/* Image i's patches as rows of s->patches (its class row zero). */
static void unfold(const clip_vision_hparams *hp, const float *img, float *rows) {
    const int P = hp->patch_size, S = hp->image_size, G = hp->grid;
    const size_t K = 3u * (size_t)P * (size_t)P;
    if (hp->class_row) {
        memset(rows, 0, K * sizeof *rows);
        rows += K;
    }
    for (int py = 0; py < G; py++)
        for (int px = 0; px < G; px++, rows += K)
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < P; y++)
                    memcpy(rows + ((size_t)c * P + (size_t)y) * (size_t)P,
                           img + ((size_t)c * S + (size_t)(py * P + y)) * (size_t)S + (size_t)px * P,
                           (size_t)P * sizeof *rows);
}

/* The block's weights as model/blocks.h takes them. */
wgml_encoder_layer clip_layer_of(const clip_block *b) {
    return (wgml_encoder_layer){.wq = &b->wq, .wk = &b->wk, .wv = &b->wv, .bq = wgml_opt(&b->bq),
                                .bk = wgml_opt(&b->bk), .bv = wgml_opt(&b->bv), .wo = &b->wo, .bo = wgml_opt(&b->bo),
                                .attn_norm_w = &b->attn_norm_w, .attn_norm_b = wgml_opt(&b->attn_norm_b),
                                .up = &b->up, .b_up = wgml_opt(&b->b_up), .down = &b->down,
                                .b_down = wgml_opt(&b->b_down), .ffn_norm_w = &b->ffn_norm_w,
                                .ffn_norm_b = wgml_opt(&b->ffn_norm_b)};
}

/* SigLIP's attention-pooling head on x (rows of n images, post-norm applied):
 * pooled = a + mlp(LN(a)), a = out_proj(attention(probe, x, x)). */
static void map_head(clip_model *m, clip_state *s, int n, const wgml_tensor *x, const wgml_tensor *zero,
                     const wgml_tensor *qrange, wgml_tensor *pooled) {
    wgml_backend *be = m->be;
    const clip_vision_hparams *hp = &m->hp.v;
    const clip_block *b = &m->v.head;
    const int64_t R = (int64_t)n * hp->n_rows;
    wgml_tensor k = wgml_tensor_rows(&s->k, 0, R), v = wgml_tensor_rows(&s->v, 0, R);
    wgml_tensor a = wgml_tensor_rows(&s->a, 0, n), a2 = wgml_tensor_rows(&s->a2, 0, n);
    wgml_tensor hq = wgml_tensor_rows(&s->hq, 0, n), h = wgml_tensor_rows(&s->h, 0, n);
    /* the probe's query, the same row for every image */
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &a2, .table = &m->v.probe, .ids = zero});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &a2, .n_w = 1, .w = {&b->wq}, .bias = {wgml_opt(&b->bq)}, .out = {&hq}});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = x, .n_w = 2, .w = {&b->wk, &b->wv}, .bias = {wgml_opt(&b->bk), wgml_opt(&b->bv)},
                                           .out = {&k, &v}});
    wgml_op_attention(be, &(wgml_attention_args){.q = &hq, .k = &k, .v = &v, .out = &a2, .n_head = hp->n_head,
                                                 .n_head_kv = hp->n_head, .head_dim = hp->head_dim,
                                                 .scale = 1.0f / sqrtf((float)hp->head_dim), .bidirectional = 1,
                                                 .kv_range = qrange});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &a2, .n_w = 1, .w = {&b->wo}, .bias = {wgml_opt(&b->bo)}, .out = {&a}});
    wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &a2, .x = &a, .w = &b->ffn_norm_w, .b = wgml_opt(&b->ffn_norm_b),
                                                   .eps = hp->eps});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &a2, .n_w = 1, .w = {&b->up}, .bias = {wgml_opt(&b->b_up)}, .out = {&h}});
    wgml_op_unary(be, &(wgml_unary_args){.out = &h, .x = &h, .kind = hp->act});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &h, .n_w = 1, .w = {&b->down}, .bias = {wgml_opt(&b->b_down)}, .out = {&a},
                                           .epilogue = WGML_EPI_ADD});
    *pooled = a;
}

wgml_status clip_vision_encode(clip_model *m, clip_state *s, const float *pixels, int n, wgml_encoder_output what,
                               float *out, wgml_error *err) {
    const clip_vision_hparams *hp = &m->hp.v;
    wgml_backend *be = m->be;
    if (n < 1 || !pixels || !out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "vision: a step of %d images", n);
    if (s->m != m) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "vision: the state belongs to another model");
    if (what == WGML_ENCODE_SCORE && !hp->n_labels)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this model has no classifier head");
    wgml_status st;
    if (n > s->n_images) { /* between steps: the state grows for this one */
        state_release(s);
        if ((st = state_reserve(s, n, err))) return st;
    }
    const int T = hp->n_rows;
    const int64_t R = (int64_t)n * T, E = hp->n_embd, K = 3LL * hp->patch_size * hp->patch_size;
    const size_t img_floats = 3u * (size_t)hp->image_size * (size_t)hp->image_size;
    for (int i = 0; i < n; i++) unfold(hp, pixels + (size_t)i * img_floats, s->patches + (size_t)i * (size_t)(T * K));
    /* per row its position; per image its rows (attention's window and the pooling's start) */
    int32_t *pos = s->host, *range = pos + R, *start = range + 2 * R, *qrange = start + n + 1, *zero = qrange + 2 * n;
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < T; r++) {
            const int64_t row = (int64_t)i * T + r;
            pos[row] = r;
            range[2 * row] = i * T;
            range[2 * row + 1] = (i + 1) * T;
        }
        start[i] = i * T;
        qrange[2 * i] = i * T;
        qrange[2 * i + 1] = (i + 1) * T;
        zero[i] = 0;
    }
    start[n] = n * T;

    wgml_tensor pix = wgml_tensor_rows(&s->pix, 0, R), x = wgml_tensor_rows(&s->x, 0, R);
    wgml_tensor q = wgml_tensor_rows(&s->q, 0, R), k = wgml_tensor_rows(&s->k, 0, R);
    wgml_tensor v = wgml_tensor_rows(&s->v, 0, R), att = wgml_tensor_rows(&s->att, 0, R);
    wgml_tensor h = wgml_tensor_rows(&s->h, 0, R);
    wgml_tensor tpos = wgml_acts_head(&s->pos, R), trange = wgml_tensor_rows(&s->range, 0, R), tstart = wgml_acts_head(&s->start, n + 1);
    wgml_tensor tq = wgml_tensor_rows(&s->qrange, 0, n), tzero = wgml_acts_head(&s->zero, n), tzero1 = wgml_acts_head(&s->zero, 1);
    wgml_tensor pooled = wgml_tensor_rows(&s->pooled, 0, n);

    be->begin(be, &(wgml_step){.pos = 0, .n_tokens = (int)R});
    be->upload(be, &pix, s->patches, (size_t)(R * K) * sizeof(float));
    be->upload(be, &tpos, pos, (size_t)R * sizeof(int32_t));
    be->upload(be, &trange, range, (size_t)R * 2 * sizeof(int32_t));
    be->upload(be, &tstart, start, (size_t)(n + 1) * sizeof(int32_t));
    be->upload(be, &tq, qrange, (size_t)n * 2 * sizeof(int32_t));
    be->upload(be, &tzero, zero, (size_t)n * sizeof(int32_t));
    if (s->pos_host && !s->pos_uploaded)
        be->upload(be, &s->pos_tab, s->pos_host, (size_t)T * (size_t)E * sizeof(float));

    /* patches (and zero class rows) -> the width; class rows get the class embedding; + positions */
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &pix, .n_w = 1, .w = {&m->v.patch_w}, .bias = {wgml_opt(&m->v.patch_b)},
                                           .out = {&x}});
    if (hp->class_row)
        for (int i = 0; i < n; i++) {
            wgml_tensor row = wgml_tensor_rows(&x, (int64_t)i * T, 1);
            wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &row, .table = &m->v.class_embd, .ids = &tzero1});
        }
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &att, .table = s->pos_host ? &s->pos_tab : &m->v.pos_embd,
                                               .ids = &tpos});
    wgml_op_add(be, &(wgml_add_args){.out = &x, .a = &x, .b = &att});
    if (hp->pre_norm)
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &x, .x = &x, .w = &m->v.pre_norm_w,
                                                       .b = wgml_opt(&m->v.pre_norm_b), .eps = hp->eps});
    const wgml_encoder_layer_cfg cfg = {.n_head = hp->n_head, .head_dim = hp->head_dim, .eps = hp->eps,
                                        .pre_norm = 1, .act = hp->act, .kv_range = &trange};
    const wgml_encoder_acts acts = {&x, &q, &k, &v, &att, &h};
    for (int l = 0; l < hp->n_layer; l++) {
        const wgml_encoder_layer w = clip_layer_of(&m->v.blocks[l]);
        wgml_block_encoder_layer(be, &w, &cfg, &acts);
    }
    const wgml_tensor *res = &pooled;
    if (hp->map_head) { /* post_norm on every row, then the attention-pooling head */
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &att, .x = &x, .w = &m->v.post_norm_w,
                                                       .b = wgml_opt(&m->v.post_norm_b), .eps = hp->eps});
        wgml_tensor p;
        map_head(m, s, n, &att, &tzero, &tq, &p);
        pooled = p;
    } else { /* the class row, then post_norm */
        wgml_op_pool(be, &(wgml_pool_args){.out = &pooled, .x = &x, .seq = &tstart, .mode = WGML_POOL_FIRST});
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &pooled, .x = &pooled, .w = &m->v.post_norm_w,
                                                       .b = wgml_opt(&m->v.post_norm_b), .eps = hp->eps});
    }
    int64_t width = E;
    wgml_tensor o = wgml_tensor_rows(&s->out, 0, n);
    if (what == WGML_ENCODE_SCORE) {
        o.ne[0] = hp->n_labels;
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &pooled, .n_w = 1, .w = {&m->v.cls_w}, .bias = {wgml_opt(&m->v.cls_b)},
                                               .out = {&o}});
        res = &o;
        width = hp->n_labels;
    } else {
        if (hp->proj_dim) {
            o.ne[0] = hp->proj_dim;
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &pooled, .n_w = 1, .w = {&m->v.proj}, .out = {&o}});
            res = &o;
            width = hp->proj_dim;
        }
        if (what == WGML_ENCODE_L2) wgml_op_l2_norm(be, &(wgml_l2_norm_args){.out = res, .x = res, .eps = 1e-12f});
    }
    be->download(be, res, out, (size_t)n * (size_t)width * sizeof(float));
    wgml_status done = be->end(be, err);
    if (!done && s->pos_host) s->pos_uploaded = 1;
    return done;
}
