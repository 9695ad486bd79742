/*
 * clip.h - vision transformers (architectures "clip", "siglip" and "vit"):
 * image embeddings from OpenAI CLIP and Google SigLIP vision towers, and
 * image classification with a ViT classifier head.
 *
 * One vision tower serves the three (Hugging Face's CLIPVisionModel,
 * SiglipVisionModel, ViTModel), which differ only in the pieces below:
 *
 *   rows = patches of P x P pixels (Conv2d with stride P, as a matmul of each
 *          patch's 3 P P values), preceded by a class row (CLIP, ViT)
 *   x = rows + position table                          (learned, one per row; interpolated
 *                                                       when the preprocessing makes another size)
 *   x = LN(x)                                          (CLIP's pre_layrnorm)
 *   pre-norm blocks: x += attn(LN(x)); x += mlp(LN(x))  (QuickGELU: CLIP;
 *                                                       tanh GELU: SigLIP; erf GELU: ViT)
 *   CLIP:   e = proj(LN(x[class row]))                 (post_layernorm, visual_projection)
 *   ViT:    e = LN(x[class row]); logits = W e + b      (layernorm; classifier)
 *   SigLIP: x = LN(x); e = MAP head: a probe row attends to x,
 *           then a = attn_out; e = a + mlp(LN(a))
 *
 * The images of one step are packed one after another in the rows, each
 * attending to its own rows only, so an image's vector does not depend on
 * its neighbours. clip_vision_encode takes the pixels already preprocessed
 * (resized, cropped, normalized: [3][S][S] floats per image, S the model's
 * image size); the API does that (image/image_prep.h) with the model's
 * preprocessing parameters (clip_hparams.prep).
 *
 * GGUF schema (our own; `wgml convert hf` writes it from a Hugging Face
 * folder, `wgml synth` from random weights), ARCH = clip, siglip or vit:
 *   ARCH.vision.image_size, .patch_size, .embedding_length,
 *   .feed_forward_length, .block_count, .attention.head_count (u32),
 *   .attention.layer_norm_epsilon (f32), .projection_dim (u32, CLIP),
 *   .activation (str: "quick_gelu", "gelu" (erf), "gelu_tanh"; default by
 *   arch), ARCH.classifier.output_labels (str array, ViT with a head)
 *   ARCH.preprocess.* the image processor's parameters (clip_load.c)
 * tensors (ne0 first, as GGUF writes shapes):
 *   v.patch_embd.weight {3 P P, D} (Conv2d's [D][3][P][P] as it is),
 *   v.patch_embd.bias {D} (SigLIP, ViT), v.class_embd {D} (CLIP, ViT),
 *   v.position_embd.weight {D, rows}, v.pre_norm.{weight,bias} (CLIP),
 *   v.blk.N.attn_norm, .attn_{q,k,v,out}.{weight,bias}, .ffn_norm,
 *   .ffn_up.{weight,bias} {D, F}, .ffn_down.{weight,bias} {F, D},
 *   v.post_norm.{weight,bias}, v.proj.weight {D, proj} (CLIP),
 *   v.head.probe {D}, v.head.attn_{q,k,v,out}.{weight,bias},
 *   v.head.ffn_norm, v.head.ffn_up/ffn_down (SigLIP),
 *   v.classifier.{weight,bias} {D, labels} (ViT)
 *
 * The text tower (CLIP's CLIPTextModel + text_projection, SigLIP's
 * SiglipTextModel with its head), when the file has one:
 *
 *   x = token_embd[id] + position_embd[pos]
 *   blocks as above (pre-norm; CLIP causal, SigLIP bidirectional)
 *   CLIP:   e = proj(LN(x[the first EOS]))           (final_layer_norm, text_projection)
 *   SigLIP: e = head(LN(x[the last row])) + b        (texts padded to the context)
 *   zero-shot: logits = exp(logit_scale) cos(image, text) (+ logit_bias: SigLIP);
 *              CLIP: softmax over the labels, SigLIP: a sigmoid each
 *
 * keys ARCH.text.context_length, .embedding_length, .feed_forward_length,
 * .block_count, .attention.head_count (u32), .attention.layer_norm_epsilon
 * (f32), .projection_dim (u32), .activation (str); ARCH.logit_scale,
 * ARCH.logit_bias (f32); the tokenizer as tokenizer.ggml.* (text/tokenizer.h);
 * tensors t.token_embd.weight {D, vocab}, t.position_embd.weight {D, ctx},
 * t.blk.N.* (as v.blk.N), t.post_norm.{weight,bias}, t.proj.weight {D, proj}
 * (+ t.proj.bias: SigLIP's head)
 */
#ifndef WGML_MODEL_CLIP_H
#define WGML_MODEL_CLIP_H

#include "backend/backend.h"
#include "format/gguf.h"
#include "image/image_prep.h"
#include "model/blocks.h"
#include "model/family.h"
#include "model/weights.h"

/* The family's registry entry (model/family.h): "clip", "siglip", "vit". */
extern const wgml_family wgml_family_clip;

typedef enum clip_variant { CLIP_OPENAI = 0, CLIP_SIGLIP, CLIP_VIT } clip_variant;

typedef struct clip_vision_hparams {
    int image_size, patch_size, grid; /* grid = image_size / patch_size patches per side (as run) */
    int n_rows;                       /* rows per image: grid^2, + 1 with a class row */
    int trained_size, trained_grid;   /* what the position table was trained for (vision.image_size);
                                       * the preprocessing may make other sizes: the patches' positions
                                       * are then interpolated (clip_pos_interpolate) */
    int n_embd, n_layer, n_head, head_dim, n_ff;
    int proj_dim;                     /* CLIP's projection; 0: none */
    int n_labels;                     /* ViT's classifier; 0: none */
    int class_row, pre_norm, map_head;
    float eps;
    wgml_unary_kind act;
} clip_vision_hparams;

/* The text tower (CLIP, SigLIP); n_layer 0: the file has none. */
typedef struct clip_text_hparams {
    int n_vocab, n_ctx, n_embd, n_layer, n_head, head_dim, n_ff;
    int proj_dim;    /* the vector's length: CLIP's text_projection, SigLIP's head */
    int causal;      /* CLIP: each token sees those before it */
    int pad_to_ctx;  /* SigLIP: texts are padded to n_ctx tokens and read at the last */
    float eps;
    wgml_unary_kind act;
} clip_text_hparams;

typedef struct clip_hparams {
    char arch[32];
    clip_variant variant;
    clip_vision_hparams v;
    clip_text_hparams t;
    float logit_scale;    /* log of the zero-shot temperature (as stored; exp() at use) */
    float logit_bias;     /* SigLIP's */
    wgml_image_prep prep; /* the HF image processor's parameters */
} clip_hparams;

typedef struct clip_block {
    wgml_tensor attn_norm_w, attn_norm_b, wq, bq, wk, bk, wv, bv, wo, bo;
    wgml_tensor ffn_norm_w, ffn_norm_b, up, b_up, down, b_down;
} clip_block;

typedef struct clip_vision {
    wgml_tensor patch_w, patch_b, class_embd, pos_embd, pre_norm_w, pre_norm_b;
    clip_block *blocks;
    wgml_tensor post_norm_w, post_norm_b, proj;
    clip_block head; /* SigLIP's MAP head: attention (attn_*) and its MLP (ffn_*, ffn_norm) */
    wgml_tensor probe;
    wgml_tensor cls_w, cls_b; /* ViT's classifier */
} clip_vision;

typedef struct clip_text {
    wgml_tensor tok_embd, pos_embd;
    clip_block *blocks;
    wgml_tensor post_norm_w, post_norm_b, proj, proj_b; /* proj_b: SigLIP's head bias */
} clip_text;

typedef struct clip_model {
    clip_hparams hp;
    wgml_backend *be; /* borrowed */
    clip_vision v;
    const gguf_tensor *pos_src; /* the trained position table when it is interpolated (kept on the host) */
    clip_text t;
    int32_t eos, pad; /* the tokenizer's EOS (CLIP pools its first) and pad (SigLIP) ids; -1: none */
    char **labels;    /* n_labels names (ViT), owned; NULL without */
    wgml_weights w;
} clip_model;

typedef struct clip_state clip_state;

/* Reads and checks the hyper-parameters and preprocessing from f's metadata. */
wgml_status clip_read_hparams(const gguf_file *f, clip_hparams *hp, wgml_error *err);

wgml_status clip_model_load(const gguf_file *f, wgml_backend *be, const wgml_weight_fault *fault,
                            wgml_load_progress_fn progress, void *user, clip_model **out, wgml_error *err);
void clip_model_free(clip_model *m);

/* The length of one image's vector: the projection's, else the width. */
int clip_vision_dim(const clip_model *m);

/* A request's activations for steps of up to n_images images (grown between steps). */
wgml_status clip_state_create(clip_model *m, int n_images, clip_state **out, wgml_error *err);
void clip_state_free(clip_state *s);

/* Encodes n preprocessed images (pixels: n x [3][S][S] floats) in one step:
 * WGML_ENCODE_POOLED / _L2 write clip_vision_dim floats per image,
 * WGML_ENCODE_SCORE the classifier's n_labels logits (ViT with a head). */
wgml_status clip_vision_encode(clip_model *m, clip_state *s, const float *pixels, int n, wgml_encoder_output what,
                               float *out, wgml_error *err);

/* The position table for a grid of `grid` patches a side from one trained for
 * `trained` (rows: [class,] then the patches in raster order; D floats each):
 * HF's interpolate_pos_encoding, torch's bicubic resampling of the patches'
 * rows as a trained x trained image of D channels (align_corners off, a =
 * -0.75, edge rows repeated), the class row as it is. src: the trained table
 * (F32 or F16); out: (class_row + grid^2) x D floats. */
void clip_pos_interpolate(const void *src, int f16, int64_t D, int class_row, int trained, int grid, float *out);

/* A block's weights as model/blocks.h's encoder layer takes them (either tower's). */
wgml_encoder_layer clip_layer_of(const clip_block *b);

/* ---- the text tower (clip_text.c) ---- */
typedef struct clip_text_state clip_text_state;

/* The length of a text's vector (0: the model has no text tower). */
int clip_text_dim(const clip_model *m);
wgml_status clip_text_state_create(clip_model *m, int n_rows, clip_text_state **out, wgml_error *err);
void clip_text_state_free(clip_text_state *s);
/* Encodes a packed batch of texts (model/family.h's wgml_encoder_batch):
 * WGML_POOL_LAST (the model's pooling) reads CLIP's row of the first EOS
 * (Hugging Face's pooled_output) and SigLIP's last row; then the final
 * LayerNorm and the projection (CLIP) or head (SigLIP). */
wgml_status clip_text_encode(clip_model *m, clip_text_state *s, const wgml_encoder_batch *b, wgml_pool_mode mode,
                             wgml_encoder_output what, float *out, wgml_error *err);

/* Hugging Face checkpoints (clip_hf.c, model/hf.h): the model_types read, and the conversion. */
struct wgml_hf_model;
struct wgml_hf_plan;
extern const char *const clip_hf_types[];
wgml_status clip_hf_convert(const struct wgml_hf_model *hf, const char *model_type, gguf_writer *w,
                            struct wgml_hf_plan *plan, wgml_error *err);

#endif
