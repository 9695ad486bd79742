/*
 * clip_hf.c - Hugging Face CLIP, SigLIP and ViT checkpoints as the family's
 * GGUF (model/hf.h; the schema is clip.h's): the vision tower, and the
 * text tower where the checkpoint has one (CLIPModel, SiglipModel).
 *
 *   CLIPModel, CLIPVisionModel(WithProjection)   model_type clip, clip_vision_model
 *     vision_model.embeddings.{patch_embedding.weight, class_embedding, position_embedding.weight}
 *     vision_model.pre_layrnorm, vision_model.encoder.layers.N.{layer_norm1, self_attn.{q,k,v,out}_proj,
 *     layer_norm2, mlp.fc1, mlp.fc2}, vision_model.post_layernorm, visual_projection.weight
 *   SiglipModel, SiglipVisionModel               model_type siglip, siglip_vision_model
 *     the same tower (patch embedding with a bias, no class row, no pre-norm), and
 *     vision_model.head.{probe, attention.in_proj_{weight,bias} (q, k, v stacked), attention.out_proj,
 *     layernorm, mlp.fc1, mlp.fc2}
 *   text towers: text_model.embeddings.{token_embedding, position_embedding}.weight,
 *     text_model.encoder.layers.N (as the vision tower's), text_model.final_layer_norm, and
 *     CLIP's text_projection.weight (no bias) or SigLIP's text_model.head; logit_scale (and
 *     SigLIP's logit_bias) as one value each; sizes from config.json's text_config
 *   ViTModel, ViTForImageClassification         model_type vit ("vit." before each name but the head's)
 *     embeddings.{cls_token, position_embeddings, patch_embeddings.projection}, encoder.layer.N.
 *     {layernorm_before, attention.attention.{query,key,value}, attention.output.dense, layernorm_after,
 *     intermediate.dense, output.dense}, layernorm, classifier (labels: config.json's id2label)
 *
 * The hyper-parameters come from config.json (its vision_config for CLIPModel
 * and SiglipModel), the preprocessing from preprocessor_config.json (the
 * processor's defaults without one).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/fp16.h"
#include "image/image_prep.h"
#include "model/clip/clip.h"
#include "model/hf.h"

typedef struct {
    const wgml_hf_model *hf;
    gguf_writer *w;
    wgml_hf_plan *plan;
    const char *arch;
    wgml_error *err;
    int64_t D, F, L, H, S, P, proj;
} conv;

/* Plans GGUF tensor gname from checkpoint tensor src (rows of ne0; ne1 rows from first). */
static wgml_status add(conv *c, const char *gname, const st_tensor *src, const char *hfname, int64_t first, int64_t ne0,
                       int64_t ne1) {
    if (!src)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "the checkpoint has no tensor '%s' (for %s)", hfname, gname);
    return wgml_hf_plan_add(c->plan, gname, src, first, ne0, ne1, c->err);
}

#define ADD(gname, ne0, ne1, ...)                                                                                      \
    do {                                                                                                               \
        char hn_[160];                                                                                                 \
        snprintf(hn_, sizeof hn_, __VA_ARGS__);                                                                        \
        if ((st = add(c, gname, st_find(c->hf->st, hn_), hn_, 0, ne0, ne1))) return st;                                \
    } while (0)

/* Weight + bias of a linear layer or a norm (hf: "<pfx>.weight" / ".bias"; out x in). */
static wgml_status linear(conv *c, const char *gname, const char *hf, int64_t in, int64_t out) {
    wgml_status st;
    char g[96];
    snprintf(g, sizeof g, "%s.weight", gname);
    ADD(g, in, out, "%s.weight", hf);
    snprintf(g, sizeof g, "%s.bias", gname);
    ADD(g, out, 1, "%s.bias", hf);
    return WGML_OK;
}

/* A LayerNorm's weight and bias (D each). */
static wgml_status norm(conv *c, const char *gname, const char *hf) {
    wgml_status st;
    char g[96];
    snprintf(g, sizeof g, "%s.weight", gname);
    ADD(g, c->D, 1, "%s.weight", hf);
    snprintf(g, sizeof g, "%s.bias", gname);
    ADD(g, c->D, 1, "%s.bias", hf);
    return WGML_OK;
}

/* A tower's blocks (GGUF names under gp: "v" or "t"), names from the architecture's own. */
static wgml_status blocks(conv *c, const char *gp, const char *pfx, int vit) {
    wgml_status st;
    for (int64_t i = 0; i < c->L; i++) {
        char g[64], h[160];
        const long long l = (long long)i;
#define LIN(gsuffix, in, out, ...)                                                                                     \
    snprintf(g, sizeof g, "%s.blk.%lld.%s", gp, l, gsuffix);                                                           \
    snprintf(h, sizeof h, __VA_ARGS__);                                                                                \
    if ((st = linear(c, g, h, in, out))) return st;
#define NORM(gsuffix, ...)                                                                                             \
    snprintf(g, sizeof g, "%s.blk.%lld.%s", gp, l, gsuffix);                                                           \
    snprintf(h, sizeof h, __VA_ARGS__);                                                                                \
    if ((st = norm(c, g, h))) return st;
        if (vit) {
            NORM("attn_norm", "%sencoder.layer.%lld.layernorm_before", pfx, l)
            LIN("attn_q", c->D, c->D, "%sencoder.layer.%lld.attention.attention.query", pfx, l)
            LIN("attn_k", c->D, c->D, "%sencoder.layer.%lld.attention.attention.key", pfx, l)
            LIN("attn_v", c->D, c->D, "%sencoder.layer.%lld.attention.attention.value", pfx, l)
            LIN("attn_out", c->D, c->D, "%sencoder.layer.%lld.attention.output.dense", pfx, l)
            NORM("ffn_norm", "%sencoder.layer.%lld.layernorm_after", pfx, l)
            LIN("ffn_up", c->D, c->F, "%sencoder.layer.%lld.intermediate.dense", pfx, l)
            LIN("ffn_down", c->F, c->D, "%sencoder.layer.%lld.output.dense", pfx, l)
        } else {
            NORM("attn_norm", "%sencoder.layers.%lld.layer_norm1", pfx, l)
            LIN("attn_q", c->D, c->D, "%sencoder.layers.%lld.self_attn.q_proj", pfx, l)
            LIN("attn_k", c->D, c->D, "%sencoder.layers.%lld.self_attn.k_proj", pfx, l)
            LIN("attn_v", c->D, c->D, "%sencoder.layers.%lld.self_attn.v_proj", pfx, l)
            LIN("attn_out", c->D, c->D, "%sencoder.layers.%lld.self_attn.out_proj", pfx, l)
            NORM("ffn_norm", "%sencoder.layers.%lld.layer_norm2", pfx, l)
            LIN("ffn_up", c->D, c->F, "%sencoder.layers.%lld.mlp.fc1", pfx, l)
            LIN("ffn_down", c->F, c->D, "%sencoder.layers.%lld.mlp.fc2", pfx, l)
        }
#undef LIN
#undef NORM
    }
    return WGML_OK;
}

/* SigLIP's attention-pooling head: in_proj's rows are q, k, v one after another. */
static wgml_status siglip_head(conv *c) {
    wgml_status st;
    const char *ip = "vision_model.head.attention.in_proj_weight", *ib = "vision_model.head.attention.in_proj_bias";
    ADD("v.head.probe", c->D, 1, "vision_model.head.probe");
    static const char *const qkv[3] = {"q", "k", "v"};
    for (int k = 0; k < 3; k++) {
        char g[48];
        snprintf(g, sizeof g, "v.head.attn_%s.weight", qkv[k]);
        if ((st = add(c, g, st_find(c->hf->st, ip), ip, k * c->D, c->D, c->D))) return st;
        snprintf(g, sizeof g, "v.head.attn_%s.bias", qkv[k]);
        if ((st = add(c, g, st_find(c->hf->st, ib), ib, k, c->D, 1))) return st;
    }
    if ((st = linear(c, "v.head.attn_out", "vision_model.head.attention.out_proj", c->D, c->D)) ||
        (st = norm(c, "v.head.ffn_norm", "vision_model.head.layernorm")) ||
        (st = linear(c, "v.head.ffn_up", "vision_model.head.mlp.fc1", c->D, c->F)) ||
        (st = linear(c, "v.head.ffn_down", "vision_model.head.mlp.fc2", c->F, c->D)))
        return st;
    return WGML_OK;
}

static wgml_status set_u32(conv *c, const char *suffix, int64_t v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    return gguf_writer_set_u32(c->w, key, (uint32_t)v, c->err);
}

/* The preprocessing as ARCH.preprocess.* keys (clip_load.c reads them back). */
static wgml_status write_preprocess(conv *c, clip_variant v) {
    wgml_image_prep p;
    wgml_image_processor proc = v == CLIP_OPENAI   ? WGML_IMAGE_PROCESSOR_CLIP
                                : v == CLIP_SIGLIP ? WGML_IMAGE_PROCESSOR_SIGLIP
                                                   : WGML_IMAGE_PROCESSOR_VIT;
    wgml_status st;
    if (c->hf->preprocessor_text) {
        if ((st = wgml_image_prep_parse(c->hf->preprocessor_text, c->hf->preprocessor_len, proc, &p, c->err))) {
            wgml_error_prefix(c->err, "preprocessor_config.json");
            return st;
        }
    } else { /* no preprocessor_config.json: the processor's defaults at the model's image size */
        wgml_image_prep_defaults(proc, &p);
        p.shortest_edge = p.height = p.width = p.crop_height = p.crop_width = (int)c->S;
    }
    char key[128];
    float mean[3], std[3];
    for (int k = 0; k < 3; k++) mean[k] = (float)p.image_mean[k], std[k] = (float)p.image_std[k];
    const int shortest = p.do_resize && p.resize_shortest;
    if ((st = set_u32(c, "preprocess.resize_shortest", shortest ? p.shortest_edge : 0)) ||
        (st = set_u32(c, "preprocess.resize_height", p.do_resize && !shortest ? p.height : 0)) ||
        (st = set_u32(c, "preprocess.resize_width", p.do_resize && !shortest ? p.width : 0)) ||
        (st = set_u32(c, "preprocess.resample", (int64_t)p.resample)) ||
        (st = set_u32(c, "preprocess.crop_height", p.do_center_crop ? p.crop_height : 0)) ||
        (st = set_u32(c, "preprocess.crop_width", p.do_center_crop ? p.crop_width : 0)))
        return st;
    snprintf(key, sizeof key, "%s.preprocess.rescale_factor", c->arch);
    if ((st = gguf_writer_set_f32(c->w, key, p.do_rescale ? (float)p.rescale_factor : 0.0f, c->err))) return st;
    snprintf(key, sizeof key, "%s.preprocess.normalize", c->arch);
    if ((st = gguf_writer_set_bool(c->w, key, p.do_normalize, c->err))) return st;
    snprintf(key, sizeof key, "%s.preprocess.image_mean", c->arch);
    if ((st = gguf_writer_set_arr(c->w, key, GGUF_TYPE_FLOAT32, mean, 3, c->err))) return st;
    snprintf(key, sizeof key, "%s.preprocess.image_std", c->arch);
    return gguf_writer_set_arr(c->w, key, GGUF_TYPE_FLOAT32, std, 3, c->err);
}

/* ViT's id2label ({"0": "tench", ...}) as the labels in index order, n of them. */
static wgml_status write_labels(conv *c, jv cfg, int64_t n) {
    jv id2 = wgml_hf_dict(c->hf, cfg, "id2label");
    if (id2.t != JV_DICT || (int64_t)id2.u.d->n != n)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "config.json: id2label must name the classifier's %lld labels",
                         (long long)n);
    const char **names = wgml_calloc((size_t)n, sizeof *names);
    if (!names) return wgml_fail(c->err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_status st = WGML_OK;
    for (size_t i = 0; i < id2.u.d->n && !st; i++) {
        jv k = id2.u.d->k[i], v = id2.u.d->v[i];
        char *end = NULL;
        long idx = k.t == JV_STR ? strtol(k.u.s->s, &end, 10) : -1;
        if (k.t != JV_STR || !end || *end || end == k.u.s->s || idx < 0 || idx >= n || names[idx] || v.t != JV_STR)
            st = wgml_fail(c->err, WGML_ERR_FORMAT, "config.json: id2label must map \"0\" .. \"%lld\" to strings",
                           (long long)n - 1);
        else
            names[idx] = v.u.s->s;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.classifier.output_labels", c->arch);
    if (!st) st = gguf_writer_set_arr_str(c->w, key, names, NULL, (uint64_t)n, c->err);
    wgml_free(names);
    return st;
}

static const char *act_of(const char *hf_act) {
    if (!strcmp(hf_act, "quick_gelu")) return "quick_gelu";
    if (!strcmp(hf_act, "gelu")) return "gelu";
    if (!strcmp(hf_act, "gelu_pytorch_tanh") || !strcmp(hf_act, "gelu_new") || !strcmp(hf_act, "gelu_fast"))
        return "gelu_tanh";
    return NULL;
}

/* A one-element checkpoint tensor's value (logit_scale, logit_bias); absent: *out kept. */
static wgml_status scalar(conv *c, const char *name, float *out) {
    const st_tensor *t = st_find(c->hf->st, name);
    if (!t) return WGML_OK;
    if (t->n_elements != 1 || (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16))
        return wgml_fail(c->err, WGML_ERR_FORMAT, "'%s' is not one F32 / F16 / BF16 value", name);
    const unsigned char *b = t->data;
    if (t->dtype == ST_F32) {
        memcpy(out, b, sizeof *out);
    } else {
        uint16_t h = (uint16_t)(b[0] | b[1] << 8);
        *out = t->dtype == ST_BF16 ? wgml_bf16_to_f32(h) : wgml_f16_to_f32(h);
    }
    if (!isfinite(*out)) return wgml_fail(c->err, WGML_ERR_FORMAT, "'%s' is not finite", name);
    return WGML_OK;
}

/* The text tower (CLIPModel's text_model + text_projection, SigLIP's text_model with its head),
 * its config from text_config, and the zero-shot scale (and SigLIP's bias). */
static wgml_status text_tower(conv *c, clip_variant v, int64_t vision_width) {
    const wgml_hf_model *hf = c->hf;
    jv cfg = wgml_hf_dict(hf, hf->config, "text_config");
    const char *what = "config.json text_config";
    if (cfg.t != JV_DICT) return wgml_fail(c->err, WGML_ERR_FORMAT, "config.json: the text tower has no text_config");
    const int siglip = v == CLIP_SIGLIP;
    int64_t D = siglip ? 768 : 512, F = siglip ? 3072 : 2048, L = 12, H = siglip ? 12 : 8, ctx = siglip ? 64 : 77;
    double eps = siglip ? 1e-6 : 1e-5;
    const char *act = siglip ? "gelu_pytorch_tanh" : "quick_gelu";
    wgml_error *err = c->err;
    if (wgml_hf_int(hf, cfg, what, "hidden_size", 1, 1 << 16, &D, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "intermediate_size", 1, 1 << 18, &F, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "num_hidden_layers", 1, 1024, &L, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "num_attention_heads", 1, 1024, &H, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "max_position_embeddings", 1, 1 << 14, &ctx, err) < 0 ||
        wgml_hf_num(hf, cfg, what, "layer_norm_eps", &eps, err) < 0)
        return WGML_ERR_FORMAT;
    wgml_hf_str(hf, cfg, "hidden_act", &act);
    if (!act_of(act)) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: hidden_act '%.40s' is not supported", what, act);
    if (D % H) return wgml_fail(err, WGML_ERR_FORMAT, "%s: hidden_size %lld and %lld heads do not fit together", what,
                                (long long)D, (long long)H);
    const st_tensor *te = st_find(hf->st, "text_model.embeddings.token_embedding.weight");
    const st_tensor *pr = st_find(hf->st, siglip ? "text_model.head.weight" : "text_projection.weight");
    if (te->rank != 2 || te->shape[1] != D || te->shape[0] < 1)
        return wgml_fail(err, WGML_ERR_FORMAT, "text_model.embeddings.token_embedding.weight is not [vocab][%lld]",
                         (long long)D);
    if (!pr || pr->rank != 2 || pr->shape[1] != D)
        return wgml_fail(err, WGML_ERR_FORMAT, "the checkpoint has no %s of [out][%lld]",
                         siglip ? "text_model.head.weight" : "text_projection.weight", (long long)D);
    const int64_t V = te->shape[0], P = pr->shape[0];
    if ((siglip && P != vision_width) || (!siglip && P != c->proj))
        return wgml_fail(err, WGML_ERR_FORMAT, "the text vectors (%lld) and the image vectors (%lld) differ",
                         (long long)P, (long long)(siglip ? vision_width : c->proj));
    float scale = logf(100.0f), bias = 0;
    wgml_status st;
    if ((st = scalar(c, "logit_scale", &scale)) || (st = scalar(c, "logit_bias", &bias))) return st;
    char key[128];
#define F32(suffix, val)                                                                                               \
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);                                                               \
    if ((st = gguf_writer_set_f32(c->w, key, (float)(val), err))) return st;
    if ((st = set_u32(c, "text.context_length", ctx)) || (st = set_u32(c, "text.embedding_length", D)) ||
        (st = set_u32(c, "text.feed_forward_length", F)) || (st = set_u32(c, "text.block_count", L)) ||
        (st = set_u32(c, "text.attention.head_count", H)) || (st = set_u32(c, "text.projection_dim", P)))
        return st;
    F32("text.attention.layer_norm_epsilon", eps)
    F32("logit_scale", scale)
    if (siglip) {
        F32("logit_bias", bias)
    }
#undef F32
    snprintf(key, sizeof key, "%s.text.activation", c->arch);
    if ((st = gguf_writer_set_str(c->w, key, act_of(act), err))) return st;
    /* the tensors: the blocks at the text tower's sizes */
    const int64_t sD = c->D, sF = c->F, sL = c->L;
    c->D = D, c->F = F, c->L = L;
    ADD("t.token_embd.weight", D, V, "text_model.embeddings.token_embedding.weight");
    ADD("t.position_embd.weight", D, ctx, "text_model.embeddings.position_embedding.weight");
    if (!(st = blocks(c, "t", "text_model.", 0)) && !(st = norm(c, "t.post_norm", "text_model.final_layer_norm"))) {
        st = siglip ? linear(c, "t.proj", "text_model.head", D, P)
                    : add(c, "t.proj.weight", pr, "text_projection.weight", 0, D, P);
    }
    c->D = sD, c->F = sF, c->L = sL;
    return st;
}

static wgml_status convert(const wgml_hf_model *hf, const char *model_type, gguf_writer *w, wgml_hf_plan *plan,
                           wgml_error *err) {
    const clip_variant v = !strncmp(model_type, "siglip", 6) ? CLIP_SIGLIP
                           : !strcmp(model_type, "vit")       ? CLIP_VIT
                                                              : CLIP_OPENAI;
    conv cc = {.hf = hf, .w = w, .plan = plan, .err = err}, *c = &cc;
    c->arch = v == CLIP_OPENAI ? "clip" : v == CLIP_SIGLIP ? "siglip" : "vit";
    /* the vision tower's config: vision_config of a two-tower model, else the whole config */
    jv cfg = wgml_hf_dict(hf, hf->config, "vision_config");
    if (cfg.t != JV_DICT) cfg = hf->config;
    const char *what = cfg.u.d == hf->config.u.d ? "config.json" : "config.json vision_config";
    /* the defaults of transformers' configuration classes */
    c->D = 768, c->F = 3072, c->L = 12, c->H = 12, c->S = 224, c->P = v == CLIP_OPENAI ? 32 : 16, c->proj = 512;
    double eps = v == CLIP_OPENAI ? 1e-5 : v == CLIP_SIGLIP ? 1e-6 : 1e-12;
    const char *act = v == CLIP_OPENAI ? "quick_gelu" : v == CLIP_SIGLIP ? "gelu_pytorch_tanh" : "gelu";
    if (wgml_hf_int(hf, cfg, what, "hidden_size", 1, 1 << 16, &c->D, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "intermediate_size", 1, 1 << 18, &c->F, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "num_hidden_layers", 1, 1024, &c->L, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "num_attention_heads", 1, 1024, &c->H, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "image_size", 1, 4096, &c->S, err) < 0 ||
        wgml_hf_int(hf, cfg, what, "patch_size", 1, 256, &c->P, err) < 0 ||
        wgml_hf_num(hf, cfg, what, "layer_norm_eps", &eps, err) < 0)
        return WGML_ERR_FORMAT;
    wgml_hf_str(hf, cfg, "hidden_act", &act);
    if (v == CLIP_OPENAI && (wgml_hf_int(hf, hf->config, "config.json", "projection_dim", 1, 1 << 16, &c->proj, err) < 0 ||
                             wgml_hf_int(hf, cfg, what, "projection_dim", 1, 1 << 16, &c->proj, err) < 0))
        return WGML_ERR_FORMAT;
    int64_t channels = 3;
    if (wgml_hf_int(hf, cfg, what, "num_channels", 1, 16, &channels, err) < 0) return WGML_ERR_FORMAT;
    if (channels != 3)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: %lld channels (RGB images, 3, are read)", what,
                         (long long)channels);
    if (!act_of(act)) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: hidden_act '%.40s' is not supported", what, act);
    if (c->S % c->P || c->D % c->H)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: image_size %lld, patch_size %lld, hidden_size %lld and %lld heads "
                         "do not fit together", what, (long long)c->S, (long long)c->P, (long long)c->D,
                         (long long)c->H);
    const int64_t G = c->S / c->P, rows = G * G + (v != CLIP_SIGLIP), K = 3 * c->P * c->P, vision_width = c->D;
    /* ViT: ViTForImageClassification's names have "vit." before the tower's; ViTModel's none */
    const char *vp = v == CLIP_VIT ? (st_find(hf->st, "vit.embeddings.cls_token") ? "vit." : "") : "vision_model.";
    const int64_t labels = v == CLIP_VIT && st_find(hf->st, "classifier.weight")
                               ? st_find(hf->st, "classifier.weight")->shape[0]
                               : 0;
    const int proj = v == CLIP_OPENAI && st_find(hf->st, "visual_projection.weight");

    wgml_status st;
    char key[128];
    if ((st = gguf_writer_set_str(w, "general.architecture", c->arch, err)) ||
        (st = gguf_writer_set_str(w, "general.name", hf->dir, err)) || (st = set_u32(c, "vision.image_size", c->S)) ||
        (st = set_u32(c, "vision.patch_size", c->P)) || (st = set_u32(c, "vision.embedding_length", c->D)) ||
        (st = set_u32(c, "vision.feed_forward_length", c->F)) || (st = set_u32(c, "vision.block_count", c->L)) ||
        (st = set_u32(c, "vision.attention.head_count", c->H)) ||
        (proj && (st = set_u32(c, "vision.projection_dim", c->proj))))
        return st;
    snprintf(key, sizeof key, "%s.vision.attention.layer_norm_epsilon", c->arch);
    if ((st = gguf_writer_set_f32(w, key, (float)eps, err))) return st;
    snprintf(key, sizeof key, "%s.vision.activation", c->arch);
    if ((st = gguf_writer_set_str(w, key, act_of(act), err))) return st;
    if (labels && (st = write_labels(c, hf->config, labels))) return st;
    if ((st = write_preprocess(c, v))) return st;

    char h[160];
    if (v == CLIP_VIT) {
        snprintf(h, sizeof h, "%sembeddings.patch_embeddings.projection", vp);
        if ((st = linear(c, "v.patch_embd", h, K, c->D))) return st;
        ADD("v.class_embd", c->D, 1, "%sembeddings.cls_token", vp);
        ADD("v.position_embd.weight", c->D, rows, "%sembeddings.position_embeddings", vp);
    } else {
        ADD("v.patch_embd.weight", K, c->D, "%sembeddings.patch_embedding.weight", vp);
        if (v == CLIP_SIGLIP) ADD("v.patch_embd.bias", c->D, 1, "%sembeddings.patch_embedding.bias", vp);
        if (v == CLIP_OPENAI) ADD("v.class_embd", c->D, 1, "%sembeddings.class_embedding", vp);
        ADD("v.position_embd.weight", c->D, rows, "%sembeddings.position_embedding.weight", vp);
        if (v == CLIP_OPENAI && (st = norm(c, "v.pre_norm", "vision_model.pre_layrnorm"))) return st;
    }
    if ((st = blocks(c, "v", vp, v == CLIP_VIT))) return st;
    snprintf(h, sizeof h, "%s%s", vp, v == CLIP_VIT ? "layernorm" : "post_layernorm");
    if ((st = norm(c, "v.post_norm", h))) return st;
    if (proj) ADD("v.proj.weight", c->D, c->proj, "visual_projection.weight");
    if (v == CLIP_SIGLIP && (st = siglip_head(c))) return st;
    if (labels && (st = linear(c, "v.classifier", "classifier", c->D, labels))) return st;
    if (v != CLIP_VIT && st_find(hf->st, "text_model.embeddings.token_embedding.weight") &&
        (st = text_tower(c, v, vision_width)))
        return st;
    return WGML_OK;
}

const char *const clip_hf_types[] = {"clip", "clip_vision_model", "siglip", "siglip_vision_model", "vit", NULL};

wgml_status clip_hf_convert(const wgml_hf_model *hf, const char *model_type, gguf_writer *w, wgml_hf_plan *plan,
                            wgml_error *err) {
    return convert(hf, model_type, w, plan, err);
}
