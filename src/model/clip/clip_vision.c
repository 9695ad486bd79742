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
#include "model/blocks.h"
#include "model/clip/clip.h"

#define CLIP_STATE_BUFS 17 /* the tensors below, one buffer each */

struct clip_state {
    clip_model *m;
    int n_images; /* images per step it holds */
    wgml_tensor pix, x, q, k, v, att, h;           /* [rows][...] */
    wgml_tensor pooled, a, a2, hq, out;             /* [images][...] */
    wgml_tensor pos, range, start, qrange, zero;   /* i32 tables uploaded per step */
    wgml_buffer *bufs[CLIP_STATE_BUFS];
    int n_bufs;
    float *patches; /* host staging: rows x 3 P P */
    int32_t *host;  /* host staging for the i32 tables */
};

static void state_release(clip_state *s) {
    for (int i = 0; i < s->n_bufs; i++) s->m->be->buffer_free(s->m->be, s->bufs[i]);
    s->n_bufs = 0;
    s->n_images = 0;
    wgml_free(s->patches);
    wgml_free(s->host);
    s->patches = NULL;
    s->host = NULL;
}

void clip_state_free(clip_state *s) {
    if (!s) return;
    state_release(s);
    wgml_free(s);
}

static wgml_status new_tensor(clip_state *s, wgml_tensor *t, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                              wgml_error *err) {
    wgml_backend *be = s->m->be;
    size_t size = wgml_row_size(type, ne0) * (size_t)ne1;
    if (s->n_bufs >= CLIP_STATE_BUFS) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "vision state: too many buffers");
    wgml_buffer *b;
    wgml_status st = be->buffer_create(be, size, WGML_BUFFER_ACTIVATIONS, &b, err);
    if (st) {
        wgml_error_prefix(err, "allocating '%s' (%zu bytes)", name, size);
        return st;
    }
    s->bufs[s->n_bufs++] = b;
    *t = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = b, .offset = 0, .name = name};
    return WGML_OK;
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
    wgml_status st;
    if ((st = new_tensor(s, &s->pix, "pixels", WGML_F32, K, R, err)) ||
        (st = new_tensor(s, &s->x, "x", WGML_F32, E, R, err)) || (st = new_tensor(s, &s->q, "q", WGML_F32, E, R, err)) ||
        (st = new_tensor(s, &s->k, "k", WGML_F32, E, R, err)) || (st = new_tensor(s, &s->v, "v", WGML_F32, E, R, err)) ||
        (st = new_tensor(s, &s->att, "att", WGML_F32, E, R, err)) ||
        (st = new_tensor(s, &s->h, "h", WGML_F32, F, R, err)) ||
        (st = new_tensor(s, &s->pooled, "pooled", WGML_F32, E, n, err)) ||
        (st = new_tensor(s, &s->a, "a", WGML_F32, E, n, err)) ||
        (st = new_tensor(s, &s->a2, "a2", WGML_F32, E, n, err)) ||
        (st = new_tensor(s, &s->hq, "hq", WGML_F32, E, n, err)) ||
        (st = new_tensor(s, &s->out, "out", WGML_F32, outw, n, err)) ||
        (st = new_tensor(s, &s->pos, "pos", WGML_I32, R, 1, err)) ||
        (st = new_tensor(s, &s->range, "range", WGML_I32, 2, R, err)) ||
        (st = new_tensor(s, &s->start, "start", WGML_I32, n + 1, 1, err)) ||
        (st = new_tensor(s, &s->qrange, "qrange", WGML_I32, 2, n, err)) ||
        (st = new_tensor(s, &s->zero, "zero", WGML_I32, n, 1, err))) {
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
    wgml_status st = state_reserve(s, n_images, err);
    if (st) {
        wgml_free(s);
        return st;
    }
    *out = s;
    return WGML_OK;
}

static const wgml_tensor *opt(const wgml_tensor *t) { return t->buf ? t : NULL; }

/* A view of the first n elements of a one-row i32 table. */
static wgml_tensor head(const wgml_tensor *t, int64_t n) {
    wgml_tensor v = *t;
    v.ne[0] = n;
    return v;
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
static wgml_encoder_layer layer_of(const clip_block *b) {
    return (wgml_encoder_layer){.wq = &b->wq, .wk = &b->wk, .wv = &b->wv, .bq = opt(&b->bq), .bk = opt(&b->bk),
                                .bv = opt(&b->bv), .wo = &b->wo, .bo = opt(&b->bo), .attn_norm_w = &b->attn_norm_w,
                                .attn_norm_b = opt(&b->attn_norm_b), .up = &b->up, .b_up = opt(&b->b_up),
                                .down = &b->down, .b_down = opt(&b->b_down), .ffn_norm_w = &b->ffn_norm_w,
                                .ffn_norm_b = opt(&b->ffn_norm_b)};
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
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &a2, .n_w = 1, .w = {&b->wq}, .bias = {opt(&b->bq)}, .out = {&hq}});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = x, .n_w = 2, .w = {&b->wk, &b->wv}, .bias = {opt(&b->bk), opt(&b->bv)},
                                           .out = {&k, &v}});
    wgml_op_attention(be, &(wgml_attention_args){.q = &hq, .k = &k, .v = &v, .out = &a2, .n_head = hp->n_head,
                                                 .n_head_kv = hp->n_head, .head_dim = hp->head_dim,
                                                 .scale = 1.0f / sqrtf((float)hp->head_dim), .bidirectional = 1,
                                                 .kv_range = qrange});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &a2, .n_w = 1, .w = {&b->wo}, .bias = {opt(&b->bo)}, .out = {&a}});
    wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &a2, .x = &a, .w = &b->ffn_norm_w, .b = opt(&b->ffn_norm_b),
                                                   .eps = hp->eps});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &a2, .n_w = 1, .w = {&b->up}, .bias = {opt(&b->b_up)}, .out = {&h}});
    wgml_op_unary(be, &(wgml_unary_args){.out = &h, .x = &h, .kind = hp->act});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &h, .n_w = 1, .w = {&b->down}, .bias = {opt(&b->b_down)}, .out = {&a},
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
    wgml_tensor tpos = head(&s->pos, R), trange = wgml_tensor_rows(&s->range, 0, R), tstart = head(&s->start, n + 1);
    wgml_tensor tq = wgml_tensor_rows(&s->qrange, 0, n), tzero = head(&s->zero, n), tzero1 = head(&s->zero, 1);
    wgml_tensor pooled = wgml_tensor_rows(&s->pooled, 0, n);

    be->begin(be, &(wgml_step){.pos = 0, .n_tokens = (int)R});
    be->upload(be, &pix, s->patches, (size_t)(R * K) * sizeof(float));
    be->upload(be, &tpos, pos, (size_t)R * sizeof(int32_t));
    be->upload(be, &trange, range, (size_t)R * 2 * sizeof(int32_t));
    be->upload(be, &tstart, start, (size_t)(n + 1) * sizeof(int32_t));
    be->upload(be, &tq, qrange, (size_t)n * 2 * sizeof(int32_t));
    be->upload(be, &tzero, zero, (size_t)n * sizeof(int32_t));

    /* patches (and zero class rows) -> the width; class rows get the class embedding; + positions */
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &pix, .n_w = 1, .w = {&m->v.patch_w}, .bias = {opt(&m->v.patch_b)},
                                           .out = {&x}});
    if (hp->class_row)
        for (int i = 0; i < n; i++) {
            wgml_tensor row = wgml_tensor_rows(&x, (int64_t)i * T, 1);
            wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &row, .table = &m->v.class_embd, .ids = &tzero1});
        }
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &att, .table = &m->v.pos_embd, .ids = &tpos});
    wgml_op_add(be, &(wgml_add_args){.out = &x, .a = &x, .b = &att});
    if (hp->pre_norm)
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &x, .x = &x, .w = &m->v.pre_norm_w,
                                                       .b = opt(&m->v.pre_norm_b), .eps = hp->eps});
    const wgml_encoder_layer_cfg cfg = {.n_head = hp->n_head, .head_dim = hp->head_dim, .eps = hp->eps,
                                        .pre_norm = 1, .act = hp->act, .kv_range = &trange};
    const wgml_encoder_acts acts = {&x, &q, &k, &v, &att, &h};
    for (int l = 0; l < hp->n_layer; l++) {
        const wgml_encoder_layer w = layer_of(&m->v.blocks[l]);
        wgml_block_encoder_layer(be, &w, &cfg, &acts);
    }
    const wgml_tensor *res = &pooled;
    if (hp->map_head) { /* post_norm on every row, then the attention-pooling head */
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &att, .x = &x, .w = &m->v.post_norm_w,
                                                       .b = opt(&m->v.post_norm_b), .eps = hp->eps});
        wgml_tensor p;
        map_head(m, s, n, &att, &tzero, &tq, &p);
        pooled = p;
    } else { /* the class row, then post_norm */
        wgml_op_pool(be, &(wgml_pool_args){.out = &pooled, .x = &x, .seq = &tstart, .mode = WGML_POOL_FIRST});
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &pooled, .x = &pooled, .w = &m->v.post_norm_w,
                                                       .b = opt(&m->v.post_norm_b), .eps = hp->eps});
    }
    int64_t width = E;
    wgml_tensor o = wgml_tensor_rows(&s->out, 0, n);
    if (what == WGML_ENCODE_SCORE) {
        o.ne[0] = hp->n_labels;
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &pooled, .n_w = 1, .w = {&m->v.cls_w}, .bias = {opt(&m->v.cls_b)},
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
    return be->end(be, err);
}
