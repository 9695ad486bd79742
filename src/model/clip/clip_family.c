/*
 * clip_family.c - the vision family's registry entry (model/family.h):
 * architectures "clip", "siglip" and "vit"; task embed-image, classify for
 * a ViT with a classifier head, and with a text tower (CLIP, SigLIP) embed
 * (texts) and zero-shot classify.
 */
#include <stdio.h>

#include "model/clip/clip.h"

static const char *const archs[] = {"clip", "siglip", "vit", NULL};

static const char *act_name(wgml_unary_kind k) {
    return k == WGML_UNARY_GELU_QUICK ? "quick_gelu" : k == WGML_UNARY_GELU ? "gelu_tanh" : "gelu";
}

static wgml_status describe(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err) {
    clip_hparams hp;
    wgml_status st = clip_read_hparams(f, &hp, err);
    if (st || !field) return st;
    const clip_vision_hparams *v = &hp.v;
    const wgml_image_prep *p = &hp.prep;
    char s[160];
#define F(key, ...) (snprintf(s, sizeof s, __VA_ARGS__), field(user, key, s))
    F("image", "%d x %d pixels, patches of %d (%d x %d)%s", v->image_size, v->image_size, v->patch_size, v->grid,
      v->grid, v->class_row ? " + a class row" : "");
    if (v->grid != v->trained_grid)
        F("positions", "interpolated (bicubic) from the %d x %d patches of %d x %d pixels it was trained at",
          v->trained_grid, v->trained_grid, v->trained_size, v->trained_size);
    F("layers", "%d", v->n_layer);
    F("embedding", "%d", v->n_embd);
    F("feed-forward", "%d (%s)", v->n_ff, act_name(v->act));
    F("heads", "%d (head size %d)", v->n_head, v->head_dim);
    F("layer norm eps", "%g", v->eps);
    F("pooling", "%s", v->map_head ? "attention-pooling head (MAP)" : "class row");
    if (v->proj_dim) F("projection", "%d", v->proj_dim);
    if (v->n_labels) F("labels", "%d", v->n_labels);
    const clip_text_hparams *t = &hp.t;
    if (t->n_layer) {
        F("text tower", "%d layers, width %d, %d heads, feed-forward %d (%s), %d tokens%s", t->n_layer, t->n_embd,
          t->n_head, t->n_ff, act_name(t->act), t->n_ctx, t->causal ? ", causal" : ", padded to the context");
        F("text vector", "%d (%s)", t->proj_dim, t->causal ? "first EOS row, projected" : "last row, head");
        F("zero-shot", "exp(%.4g) x cosine%s", hp.logit_scale, hp.t.pad_to_ctx ? " + bias, sigmoid" : ", softmax");
    }
    if (!p->do_resize) F("preprocess", "no resize");
    else if (p->resize_shortest) F("preprocess", "shortest side to %d, resample %d", p->shortest_edge, (int)p->resample);
    else F("preprocess", "resize to %d x %d, resample %d", p->width, p->height, (int)p->resample);
    if (p->do_center_crop) F("crop", "%d x %d (center)", p->crop_width, p->crop_height);
    if (p->do_normalize)
        F("normalize", "mean %.4g %.4g %.4g, std %.4g %.4g %.4g", p->image_mean[0], p->image_mean[1], p->image_mean[2],
          p->image_std[0], p->image_std[1], p->image_std[2]);
#undef F
    return WGML_OK;
}

static wgml_status load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err) {
    clip_model *m = NULL;
    wgml_status st = clip_model_load(f, be, p ? p->fault : NULL, p ? p->progress : NULL, p ? p->user : NULL, &m, err);
    *out = m;
    return st;
}

/* Embed-image always; classify with a classifier head or a text tower (zero-shot); embed with a text tower. */
static uint32_t tasks_of(const clip_hparams *hp) {
    return WGML_TASK_EMBED_IMAGE | (hp->v.n_labels || hp->t.n_layer ? WGML_TASK_CLASSIFY : 0) |
           (hp->t.n_layer ? WGML_TASK_EMBED : 0);
}

static uint32_t file_tasks(const gguf_file *f) {
    clip_hparams hp;
    return clip_read_hparams(f, &hp, NULL) ? 0 : tasks_of(&hp);
}

static void model_free(void *m) { clip_model_free(m); }

static wgml_weights *weights(void *m) { return &((clip_model *)m)->w; }

static void get_info(const void *model, wgml_model_info *info) {
    const clip_model *m = model;
    const clip_vision_hparams *v = &m->hp.v;
    info->architecture = m->hp.arch;
    info->tasks = tasks_of(&m->hp);
    info->n_params = m->w.n_params;
    info->weights_bytes = m->w.bytes;
    info->matmul_type = wgml_weights_main_type(&m->w);
    info->n_ctx_train = v->n_rows;
    info->n_embd = v->n_embd;
    info->n_layer = v->n_layer;
    info->n_head = info->n_head_kv = v->n_head;
    info->n_ff = v->n_ff;
    info->head_dim = v->head_dim;
    /* the position table is read a row per patch, not multiplied */
    uint64_t table = m->v.pos_embd.buf ? (uint64_t)v->n_embd * (uint64_t)v->n_rows : 0; /* a weight unless interpolated */
    info->matmul_params = m->w.n_params > table ? m->w.n_params - table : 0;
}

/* ---- the text tower's encoder interface ---- */

static void enc_info(const void *model, wgml_encoder_info *out) {
    const clip_model *m = model;
    const clip_text_hparams *t = &m->hp.t;
    *out = (wgml_encoder_info){.dim = clip_text_dim(m), .n_ctx = t->n_ctx, .n_types = 1, .pool = WGML_POOL_LAST,
                               .pad_id = t->pad_to_ctx ? m->pad : -1};
}

static wgml_status enc_create(void *model, int n_rows, void **state, wgml_error *err) {
    clip_text_state *s = NULL;
    wgml_status st = clip_text_state_create(model, n_rows, &s, err);
    *state = s;
    return st;
}

static void enc_free(void *state) { clip_text_state_free(state); }

static wgml_status enc_encode(void *model, void *state, const wgml_encoder_batch *b, wgml_pool_mode pool,
                              wgml_encoder_output what, float *out, wgml_error *err) {
    return clip_text_encode(model, state, b, pool, what, out, err);
}

static const wgml_encoder text_encoder = {
    .info = enc_info,
    .create = enc_create,
    .free = enc_free,
    .encode = enc_encode,
};

/* ---- the vision interface ---- */

static void vis_info(const void *model, wgml_vision_info *out) {
    const clip_model *m = model;
    out->dim = clip_vision_dim(m);
    out->image_size = m->hp.v.image_size;
    out->n_labels = m->hp.v.n_labels;
    out->logit_scale = m->hp.logit_scale;
    out->logit_bias = m->hp.logit_bias;
    out->zero_shot = !m->hp.t.n_layer             ? WGML_ZERO_SHOT_NONE
                     : m->hp.variant == CLIP_SIGLIP ? WGML_ZERO_SHOT_SIGMOID
                                                    : WGML_ZERO_SHOT_SOFTMAX;
}

static void vis_preprocess(const void *model, wgml_image_prep *out) { *out = ((const clip_model *)model)->hp.prep; }

static const char *vis_label(const void *model, int i) {
    const clip_model *m = model;
    return m->labels && i >= 0 && i < m->hp.v.n_labels ? m->labels[i] : NULL;
}

static wgml_status vis_create(void *model, int n_images, void **state, wgml_error *err) {
    clip_state *s = NULL;
    wgml_status st = clip_state_create(model, n_images, &s, err);
    *state = s;
    return st;
}

static void vis_free(void *state) { clip_state_free(state); }

static wgml_status vis_encode(void *model, void *state, const float *pixels, int n, wgml_encoder_output what,
                              float *out, wgml_error *err) {
    return clip_vision_encode(model, state, pixels, n, what, out, err);
}

static const wgml_vision_encoder vision = {
    .info = vis_info,
    .preprocess = vis_preprocess,
    .label = vis_label,
    .create = vis_create,
    .free = vis_free,
    .encode = vis_encode,
};

const wgml_family wgml_family_clip = {
    .name = "clip",
    .archs = archs,
    .tasks = WGML_TASK_EMBED_IMAGE | WGML_TASK_CLASSIFY | WGML_TASK_EMBED,
    .no_tokenizer = 1,
    .describe = describe,
    .file_tasks = file_tasks,
    .load = load,
    .free = model_free,
    .weights = weights,
    .get_info = get_info,
    .vision = &vision,
    .encoder = &text_encoder,
    .hf_types = clip_hf_types,
    .hf_convert = clip_hf_convert,
};
