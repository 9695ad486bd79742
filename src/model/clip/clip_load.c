/*
 * clip_load.c - the hyper-parameters, preprocessing and weights of a vision
 * tower GGUF (clip.h has the schema).
 *
 * Preprocessing keys, ARCH.preprocess.* (each optional; absent: the default
 * of the architecture's Hugging Face image processor, image/image_prep.h):
 *   resize_shortest (u32: the shorter side to this; 0: an exact size),
 *   resize_height / resize_width (u32; both 0: no resize), resample (u32,
 *   PIL's numbers), crop_height / crop_width (u32; 0: no crop),
 *   rescale_factor (f32; 0: none), normalize (bool),
 *   image_mean / image_std (f32 arrays of 3)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/clip/clip.h"

static wgml_status read_triple(const gguf_file *f, const char *arch, const char *suffix, double *out,
                               wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.preprocess.%s", arch, suffix);
    const gguf_value *a;
    int r = gguf_get_arr(f, key, GGUF_TYPE_FLOAT32, &a, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return WGML_OK;
    if (a->v.arr.n != 3)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: '%s' holds %llu values, not 3", gguf_name(f), key,
                         (unsigned long long)a->v.arr.n);
    for (int c = 0; c < 3; c++) out[c] = gguf_arr_f32(a, (uint64_t)c);
    return WGML_OK;
}

/* The preprocessing: the defaults of the architecture's HF image processor, then the file's keys. */
static wgml_status read_preprocess(const gguf_file *f, const char *arch, clip_variant variant, wgml_image_prep *p,
                                   wgml_error *err) {
    wgml_image_prep_defaults(variant == CLIP_OPENAI   ? WGML_IMAGE_PROCESSOR_CLIP
                             : variant == CLIP_SIGLIP ? WGML_IMAGE_PROCESSOR_SIGLIP
                                                      : WGML_IMAGE_PROCESSOR_VIT,
                             p);
    wgml_status st;
    const int64_t big = WGML_IMAGE_PREP_MAX_SIZE;
    int shortest = -1, rh = -1, rw = -1, ch = -1, cw = -1, resample = (int)p->resample;
    float rescale = -1;
    if ((st = wgml_hparam_int(f, arch, "preprocess.resize_shortest", 0, big, &shortest, 0, err)) ||
        (st = wgml_hparam_int(f, arch, "preprocess.resize_height", 0, big, &rh, 0, err)) ||
        (st = wgml_hparam_int(f, arch, "preprocess.resize_width", 0, big, &rw, 0, err)) ||
        (st = wgml_hparam_int(f, arch, "preprocess.resample", 0, 5, &resample, 0, err)) ||
        (st = wgml_hparam_int(f, arch, "preprocess.crop_height", 0, big, &ch, 0, err)) ||
        (st = wgml_hparam_int(f, arch, "preprocess.crop_width", 0, big, &cw, 0, err)) ||
        (st = wgml_hparam_float(f, arch, "preprocess.rescale_factor", &rescale, err)) ||
        (st = wgml_hparam_bool(f, arch, "preprocess.normalize", &p->do_normalize, err)) ||
        (st = read_triple(f, arch, "image_mean", p->image_mean, err)) ||
        (st = read_triple(f, arch, "image_std", p->image_std, err)))
        return st;
    p->resample = (wgml_image_filter)resample;
    if (shortest >= 0 || rh >= 0 || rw >= 0) { /* the file says how it resizes: all of it */
        p->resize_shortest = shortest > 0;
        p->shortest_edge = shortest > 0 ? shortest : p->shortest_edge;
        if (!p->resize_shortest) {
            p->height = rh > 0 ? rh : 0;
            p->width = rw > 0 ? rw : 0;
        }
        p->do_resize = p->resize_shortest || (p->height > 0 && p->width > 0);
        if (!p->resize_shortest && (rh > 0) != (rw > 0))
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: %s.preprocess gives a resize height without a width or the other way round",
                             gguf_name(f), arch);
    }
    if (ch >= 0 || cw >= 0) {
        if ((ch > 0) != (cw > 0))
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: %s.preprocess gives a crop height without a width or the other way round",
                             gguf_name(f), arch);
        p->do_center_crop = ch > 0;
        if (ch > 0) p->crop_height = ch, p->crop_width = cw;
    }
    if (rescale >= 0) {
        p->do_rescale = rescale > 0;
        /* stored as f32: 1/255 (every known config's) is given back as the double HF multiplies by */
        p->rescale_factor = fabs((double)rescale * 255.0 - 1.0) < 1e-7 ? 1.0 / 255.0 : (double)rescale;
    }
    st = wgml_image_prep_check(p, err);
    if (st) wgml_error_prefix(err, "%s: %s.preprocess", gguf_name(f), arch);
    return st;
}

/* ARCH.<tower>.activation into *act (absent: *act kept). */
static wgml_status read_activation(const gguf_file *f, const char *arch, const char *tower, wgml_unary_kind *act,
                                   wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s.activation", arch, tower);
    gguf_str a;
    int r = gguf_get_str(f, key, &a, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return WGML_OK;
    if (gguf_str_eq(a, "quick_gelu")) *act = WGML_UNARY_GELU_QUICK;
    else if (gguf_str_eq(a, "gelu")) *act = WGML_UNARY_GELU_ERF;
    else if (gguf_str_eq(a, "gelu_tanh")) *act = WGML_UNARY_GELU;
    else
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: activation '%.*s' is not supported (quick_gelu, gelu, gelu_tanh)",
                         gguf_name(f), (int)(a.len > 40 ? 40 : a.len), a.ptr);
    return WGML_OK;
}

/* The text tower's hyper-parameters (none without ARCH.text.block_count) and the zero-shot scale. */
static wgml_status read_text_hparams(const gguf_file *f, clip_hparams *hp, wgml_error *err) {
    const char *arch = hp->arch;
    clip_text_hparams *t = &hp->t;
    const int64_t big = 1 << 16;
    wgml_status st;
    hp->logit_scale = logf(100.0f); /* CLIP's trained value, the usual default */
    hp->logit_bias = 0;
    if ((st = wgml_hparam_float(f, arch, "logit_scale", &hp->logit_scale, err)) ||
        (st = wgml_hparam_float(f, arch, "logit_bias", &hp->logit_bias, err)))
        return st;
    if (!isfinite(hp->logit_scale) || fabsf(hp->logit_scale) > 20 || !isfinite(hp->logit_bias))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: logit scale %g / bias %g out of range", gguf_name(f),
                         hp->logit_scale, hp->logit_bias);
    if ((st = wgml_hparam_int(f, arch, "text.block_count", 1, 1024, &t->n_layer, 0, err)) || !t->n_layer) return st;
    if (hp->variant == CLIP_VIT)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: a vit model has no text tower", gguf_name(f));
    if ((st = wgml_hparam_int(f, arch, "text.context_length", 1, 1 << 14, &t->n_ctx, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "text.embedding_length", 1, big, &t->n_embd, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "text.feed_forward_length", 1, 4 * big, &t->n_ff, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "text.attention.head_count", 1, 1024, &t->n_head, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "text.projection_dim", 1, big, &t->proj_dim, 1, err)))
        return st;
    if (t->n_embd % t->n_head)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: text width %d is not divisible by %d heads", gguf_name(f),
                         t->n_embd, t->n_head);
    t->head_dim = t->n_embd / t->n_head;
    t->causal = hp->variant == CLIP_OPENAI;
    t->pad_to_ctx = hp->variant == CLIP_SIGLIP;
    t->eps = hp->v.eps;
    t->act = hp->variant == CLIP_OPENAI ? WGML_UNARY_GELU_QUICK : WGML_UNARY_GELU;
    if ((st = wgml_hparam_float(f, arch, "text.attention.layer_norm_epsilon", &t->eps, err))) return st;
    if (!(t->eps > 0 && t->eps < 1))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: text layer norm epsilon %g is out of range", gguf_name(f), t->eps);
    if (hp->variant == CLIP_OPENAI && hp->v.proj_dim != t->proj_dim)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: the text projection (%d) and the image projection (%d) differ",
                         gguf_name(f), t->proj_dim, hp->v.proj_dim);
    if (hp->variant == CLIP_SIGLIP && t->proj_dim != hp->v.n_embd)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: the text head gives %d, the image vectors have %d", gguf_name(f),
                         t->proj_dim, hp->v.n_embd);
    return read_activation(f, arch, "text", &t->act, err);
}

wgml_status clip_read_hparams(const gguf_file *f, clip_hparams *hp, wgml_error *err) {
    memset(hp, 0, sizeof *hp);
    const wgml_family *fam;
    wgml_status st = wgml_family_of(f, hp->arch, sizeof hp->arch, &fam, err);
    if (st) return st;
    if (fam != &wgml_family_clip)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: architecture '%s' is of the %s family, not clip", gguf_name(f),
                         hp->arch, fam->name);
    const char *arch = hp->arch;
    hp->variant = !strcmp(arch, "siglip") ? CLIP_SIGLIP : !strcmp(arch, "vit") ? CLIP_VIT : CLIP_OPENAI;
    clip_vision_hparams *v = &hp->v;
    const int64_t big = 1 << 16;
    if ((st = wgml_hparam_int(f, arch, "vision.image_size", 1, 4096, &v->image_size, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "vision.patch_size", 1, 256, &v->patch_size, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "vision.embedding_length", 1, big, &v->n_embd, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "vision.feed_forward_length", 1, 4 * big, &v->n_ff, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "vision.block_count", 1, 1024, &v->n_layer, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "vision.attention.head_count", 1, 1024, &v->n_head, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "vision.projection_dim", 0, big, &v->proj_dim, 0, err)))
        return st;
    if (v->image_size % v->patch_size)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: image size %d is not a multiple of the patch size %d",
                         gguf_name(f), v->image_size, v->patch_size);
    if (v->n_embd % v->n_head)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: vision width %d is not divisible by %d heads", gguf_name(f),
                         v->n_embd, v->n_head);
    v->head_dim = v->n_embd / v->n_head;
    v->trained_size = v->image_size;
    v->trained_grid = v->grid = v->image_size / v->patch_size;
    v->class_row = hp->variant != CLIP_SIGLIP;
    v->n_rows = v->grid * v->grid + v->class_row;
    v->pre_norm = hp->variant == CLIP_OPENAI;
    v->map_head = hp->variant == CLIP_SIGLIP;
    if (hp->variant != CLIP_OPENAI) v->proj_dim = 0;
    v->eps = hp->variant == CLIP_OPENAI ? 1e-5f : hp->variant == CLIP_SIGLIP ? 1e-6f : 1e-12f;
    if ((st = wgml_hparam_float(f, arch, "vision.attention.layer_norm_epsilon", &v->eps, err))) return st;
    if (!(v->eps > 0 && v->eps < 1))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: layer norm epsilon %g is out of range", gguf_name(f), v->eps);
    v->act = hp->variant == CLIP_OPENAI ? WGML_UNARY_GELU_QUICK
             : hp->variant == CLIP_SIGLIP ? WGML_UNARY_GELU
                                          : WGML_UNARY_GELU_ERF;
    if ((st = read_activation(f, arch, "vision", &v->act, err))) return st;
    char key[128];
    snprintf(key, sizeof key, "%s.classifier.output_labels", arch);
    const gguf_value *labels;
    int r = gguf_get_arr(f, key, GGUF_TYPE_STRING, &labels, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r > 0) {
        if (labels->v.arr.n < 1 || labels->v.arr.n > (1u << 20))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: '%s' holds %llu labels", gguf_name(f), key,
                             (unsigned long long)labels->v.arr.n);
        v->n_labels = (int)labels->v.arr.n;
    }
    if ((st = read_preprocess(f, arch, hp->variant, &hp->prep, err)) || (st = read_text_hparams(f, hp, err)))
        return st;
    int out_h, out_w;
    if ((st = wgml_image_prep_output_size(&hp->prep, v->image_size, v->image_size, &out_h, &out_w, err))) return st;
    if (out_h != v->image_size || out_w != v->image_size) {
        /* another size: square, whole patches; the positions interpolated (HF's interpolate_pos_encoding) */
        if (out_h != out_w || out_h % v->patch_size || out_h / v->patch_size > 256)
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: the preprocessing makes %d x %d pixels: the model (trained at %d x %d) takes a square "
                             "of whole %d-pixel patches, at most 256 a side", gguf_name(f), out_w, out_h,
                             v->image_size, v->image_size, v->patch_size);
        v->image_size = out_h;
        v->grid = out_h / v->patch_size;
        v->n_rows = v->grid * v->grid + v->class_row;
    }
    return WGML_OK;
}

/* A block's weights under pfx ("v.blk.3"); attn_norm 0: without the norm before attention
 * (SigLIP's MAP head has none). */
static wgml_status load_block(wgml_weights_loader *L, clip_block *b, const char *pfx, int64_t E, int64_t F,
                              int attn_norm) {
    char n[96];
    wgml_status st;
#define T(field, suffix, a, c, req)                       \
    snprintf(n, sizeof n, "%s.%s", pfx, suffix);          \
    if ((st = wgml_weights_load(L, &b->field, n, a, c, req))) return st;
    if (attn_norm) {
        T(attn_norm_w, "attn_norm.weight", E, 1, 1)
        T(attn_norm_b, "attn_norm.bias", E, 1, 1)
    }
    T(wq, "attn_q.weight", E, E, 1)
    T(bq, "attn_q.bias", E, 1, 1)
    T(wk, "attn_k.weight", E, E, 1)
    T(bk, "attn_k.bias", E, 1, 1)
    T(wv, "attn_v.weight", E, E, 1)
    T(bv, "attn_v.bias", E, 1, 1)
    T(wo, "attn_out.weight", E, E, 1)
    T(bo, "attn_out.bias", E, 1, 1)
    T(ffn_norm_w, "ffn_norm.weight", E, 1, 1)
    T(ffn_norm_b, "ffn_norm.bias", E, 1, 1)
    T(up, "ffn_up.weight", E, F, 1)
    T(b_up, "ffn_up.bias", F, 1, 1)
    T(down, "ffn_down.weight", F, E, 1)
    T(b_down, "ffn_down.bias", E, 1, 1)
#undef T
    return WGML_OK;
}

/* The classifier's labels from the metadata (n_labels of them). */
static wgml_status read_labels(const gguf_file *f, clip_model *m, wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.classifier.output_labels", m->hp.arch);
    const gguf_value *a;
    if (gguf_get_arr(f, key, GGUF_TYPE_STRING, &a, err) <= 0) return WGML_ERR_FORMAT;
    if (!(m->labels = wgml_calloc((size_t)m->hp.v.n_labels, sizeof *m->labels)))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the labels");
    for (int i = 0; i < m->hp.v.n_labels; i++) {
        gguf_str s = a->v.arr.items[i].v.str;
        size_t len = s.len > 255 ? 255 : (size_t)s.len;
        if (!(m->labels[i] = wgml_malloc(len + 1)))
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the labels");
        memcpy(m->labels[i], s.ptr, len);
        m->labels[i][len] = '\0';
    }
    return WGML_OK;
}

/* The position table: a weight, or when the model runs at another size than it was trained for,
 * kept on the host for each state to interpolate (clip_pos_interpolate). */
static wgml_status load_positions(wgml_weights_loader *L, clip_model *m, wgml_error *err) {
    const clip_vision_hparams *hp = &m->hp.v;
    const int64_t E = hp->n_embd, trained_rows = (int64_t)hp->trained_grid * hp->trained_grid + hp->class_row;
    if (hp->grid == hp->trained_grid)
        return wgml_weights_load(L, &m->v.pos_embd, "v.position_embd.weight", E, hp->n_rows, 1);
    const gguf_tensor *t = gguf_find_tensor(L->f, "v.position_embd.weight");
    if (!t || t->n_dims != 2 || t->ne[0] != E || t->ne[1] != trained_rows || (t->type != WGML_F32 && t->type != WGML_F16))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: no position table 'v.position_embd.weight' of %lld x %lld F32 or F16 "
                         "values to interpolate", gguf_name(L->f), (long long)E, (long long)trained_rows);
    m->pos_src = t;
    return WGML_OK;
}

/* The text tower's weights; its vocabulary's size from the token table. */
static wgml_status load_text(wgml_weights_loader *L, clip_model *m, wgml_error *err) {
    clip_text_hparams *hp = &m->hp.t;
    clip_text *t = &m->t;
    const gguf_tensor *te = gguf_find_tensor(L->f, "t.token_embd.weight");
    if (!te || te->n_dims != 2 || te->ne[0] != hp->n_embd || te->ne[1] < 1 || te->ne[1] > (1 << 24))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: no token table 't.token_embd.weight' of width %d", gguf_name(L->f),
                         hp->n_embd);
    hp->n_vocab = (int)te->ne[1];
    if (!(t->blocks = wgml_calloc((size_t)hp->n_layer, sizeof *t->blocks)))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
    const int64_t E = hp->n_embd, F = hp->n_ff;
    const int siglip = m->hp.variant == CLIP_SIGLIP;
    wgml_status st;
    if ((st = wgml_weights_load(L, &t->tok_embd, "t.token_embd.weight", E, hp->n_vocab, 1)) ||
        (st = wgml_weights_load(L, &t->pos_embd, "t.position_embd.weight", E, hp->n_ctx, 1)))
        return st;
    for (int i = 0; i < hp->n_layer; i++) {
        char pfx[32];
        snprintf(pfx, sizeof pfx, "t.blk.%d", i);
        if ((st = load_block(L, &t->blocks[i], pfx, E, F, 1))) return st;
    }
    if ((st = wgml_weights_load(L, &t->post_norm_w, "t.post_norm.weight", E, 1, 1)) ||
        (st = wgml_weights_load(L, &t->post_norm_b, "t.post_norm.bias", E, 1, 1)) ||
        (st = wgml_weights_load(L, &t->proj, "t.proj.weight", E, hp->proj_dim, 1)) ||
        (st = wgml_weights_load(L, &t->proj_b, "t.proj.bias", hp->proj_dim, 1, siglip)))
        return st;
    return WGML_OK;
}

/* The tokenizer's EOS and pad ids, which the text tower pools and pads with. */
static wgml_status read_special_ids(const gguf_file *f, clip_model *m, wgml_error *err) {
    int64_t eos = -1, pad = -1;
    if (gguf_get_int(f, "tokenizer.ggml.eos_token_id", 0, m->hp.t.n_vocab - 1, &eos, err) < 0 ||
        gguf_get_int(f, "tokenizer.ggml.padding_token_id", 0, m->hp.t.n_vocab - 1, &pad, err) < 0) {
        wgml_error_prefix(err, "%s: the text tower's %d tokens", gguf_name(f), m->hp.t.n_vocab);
        return WGML_ERR_FORMAT;
    }
    m->eos = (int32_t)eos;
    m->pad = (int32_t)(pad >= 0 ? pad : eos);
    if (m->hp.t.pad_to_ctx && m->pad < 0 && gguf_find_kv(f, "tokenizer.ggml.model")) /* none: no text at all */
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: a %s text tower needs a padding (or EOS) token", gguf_name(f),
                         m->hp.arch);
    return WGML_OK;
}

void clip_model_free(clip_model *m) {
    if (!m) return;
    wgml_weights_free(&m->w);
    wgml_free(m->v.blocks);
    wgml_free(m->t.blocks);
    for (int i = 0; m->labels && i < m->hp.v.n_labels; i++) wgml_free(m->labels[i]);
    wgml_free(m->labels);
    wgml_free(m);
}

wgml_status clip_model_load(const gguf_file *f, wgml_backend *be, const wgml_weight_fault *fault,
                            wgml_load_progress_fn progress, void *user, clip_model **out, wgml_error *err) {
    *out = NULL;
    clip_model *m = wgml_calloc(1, sizeof *m);
    if (!m) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
    m->be = be;
    m->eos = m->pad = -1;
    wgml_status st = clip_read_hparams(f, &m->hp, err);
    if (st) goto fail;
    const clip_vision_hparams *hp = &m->hp.v;
    clip_vision *v = &m->v;
    if (!(v->blocks = wgml_calloc((size_t)hp->n_layer, sizeof *v->blocks))) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
        goto fail;
    }
    if (hp->n_labels && (st = read_labels(f, m, err))) goto fail;
    wgml_weights_loader L;
    wgml_weights_begin(&L, f, be, &m->w, fault, progress, user, err);
    const int64_t E = hp->n_embd, F = hp->n_ff, K = 3LL * hp->patch_size * hp->patch_size;
    const int siglip = m->hp.variant == CLIP_SIGLIP;
    if ((st = wgml_weights_load(&L, &v->patch_w, "v.patch_embd.weight", K, E, 1)) ||
        (st = wgml_weights_load(&L, &v->patch_b, "v.patch_embd.bias", E, 1, m->hp.variant != CLIP_OPENAI)) ||
        (st = wgml_weights_load(&L, &v->class_embd, "v.class_embd", E, 1, hp->class_row)) ||
        (st = load_positions(&L, m, err)) ||
        (st = wgml_weights_load(&L, &v->pre_norm_w, "v.pre_norm.weight", E, 1, hp->pre_norm)) ||
        (st = wgml_weights_load(&L, &v->pre_norm_b, "v.pre_norm.bias", E, 1, hp->pre_norm)))
        goto fail;
    for (int i = 0; i < hp->n_layer; i++) {
        char pfx[32];
        snprintf(pfx, sizeof pfx, "v.blk.%d", i);
        if ((st = load_block(&L, &v->blocks[i], pfx, E, F, 1))) goto fail;
    }
    if ((st = wgml_weights_load(&L, &v->post_norm_w, "v.post_norm.weight", E, 1, 1)) ||
        (st = wgml_weights_load(&L, &v->post_norm_b, "v.post_norm.bias", E, 1, 1)) ||
        (hp->proj_dim && (st = wgml_weights_load(&L, &v->proj, "v.proj.weight", E, hp->proj_dim, 1))) ||
        (siglip && (st = wgml_weights_load(&L, &v->probe, "v.head.probe", E, 1, 1))) ||
        (siglip && (st = load_block(&L, &v->head, "v.head", E, F, 0))) ||
        (hp->n_labels && (st = wgml_weights_load(&L, &v->cls_w, "v.classifier.weight", E, hp->n_labels, 1))) ||
        (hp->n_labels && (st = wgml_weights_load(&L, &v->cls_b, "v.classifier.bias", hp->n_labels, 1, 1))))
        goto fail;
    if (m->hp.t.n_layer && ((st = load_text(&L, m, err)) || (st = read_special_ids(f, m, err)))) goto fail;
    if ((st = wgml_weights_end(&L))) goto fail;
    *out = m;
    return WGML_OK;
fail:
    clip_model_free(m);
    return st;
}

int clip_vision_dim(const clip_model *m) { return m->hp.v.proj_dim ? m->hp.v.proj_dim : m->hp.v.n_embd; }
