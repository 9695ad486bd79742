/*
 * api_vision.c - the public API's image tasks (include/wgml.h): image
 * embeddings and classification, for models whose family has a vision
 * encoder (model/family.h: the clip family's CLIP, SigLIP and ViT towers).
 *
 * Each image is preprocessed on the host by the model's own parameters
 * (image/image_prep.h: HF's image processor, Pillow's resampling bit for
 * bit) into [3][S][S] floats, and the images are packed in input order into
 * steps of up to n_batch images: each attends to its own rows only, so an
 * image's vector does not depend on its neighbours.
 */
#include <math.h>
#include <string.h>

#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"
#include "image/image_prep.h"

/* Images per step by default: the CPU's steps stay near its caches, a GPU's are large. */
static int default_batch(const wgml_model *m) { return strcmp(m->be->name, "cpu") ? 64 : 16; }

/* The model's vision encoder and what it takes (info); NULL with an error when it has none. */
static const wgml_vision_encoder *vision(const wgml_model *m, wgml_vision_info *info, const char *what,
                                         wgml_error *err) {
    if (!m->fam->vision) {
        wgml_fail(err, WGML_ERR_UNSUPPORTED, "a %s model does not %s (its family has no vision encoder)", m->fam->name,
                  what);
        return NULL;
    }
    m->fam->vision->info(m->impl, info);
    return m->fam->vision;
}

/* Preprocesses and encodes n images in steps of up to n_batch; result i (per floats) to out + i * per. */
static wgml_status run_images(wgml_model *m, const wgml_image *images, int n, int n_batch, wgml_encoder_output what,
                              int per, float *out, wgml_error *err) {
    wgml_vision_info vi;
    const wgml_vision_encoder *enc = vision(m, &vi, "see", err);
    if (!enc) return WGML_ERR_UNSUPPORTED;
    wgml_image_prep prep;
    enc->preprocess(m->impl, &prep);
    const size_t S = (size_t)vi.image_size, img_floats = 3 * S * S;
    wgml_status st = WGML_OK;
    for (int i = 0; i < n && !st; i++) { /* every image checked before any work */
        int oh, ow;
        if ((st = wgml_image_check(&images[i], err)) ||
            (st = wgml_image_prep_output_size(&prep, images[i].w, images[i].h, &oh, &ow, err))) {
            wgml_error_prefix(err, "image %d", i);
            return st;
        }
        if ((size_t)oh != S || (size_t)ow != S)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "image %d: the preprocessing makes %d x %d pixels, the model takes %zu x %zu", i, ow, oh,
                             S, S);
    }
    const int cap = n_batch < n ? n_batch : n;
    float *pix = wgml_malloc((size_t)cap * img_floats * sizeof *pix);
    if (!pix) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for %d images' pixels", cap);
    void *state = wgml_model_take_state(m, WGML_STATE_VISION);
    if (!state) st = enc->create(m->impl, cap, &state, err);
    for (int i0 = 0; i0 < n && !st; i0 += cap) {
        const int k = n - i0 < cap ? n - i0 : cap;
        for (int i = 0; i < k && !st; i++)
            if ((st = wgml_image_prep_run(&prep, &images[i0 + i], pix + (size_t)i * img_floats, img_floats, err)))
                wgml_error_prefix(err, "image %d", i0 + i);
        if (!st) st = enc->encode(m->impl, state, pix, k, what, out + (size_t)i0 * (size_t)per, err);
    }
    if (state) wgml_model_give_state(m, WGML_STATE_VISION, state, enc->free);
    wgml_free(pix);
    return st;
}

wgml_status wgml_embed_images(wgml_model *model, const wgml_image *images, int n, const wgml_embed_params *params,
                              float *out, int dim, wgml_error *err) {
    if (!model || n < 0 || (n > 0 && (!images || !out)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_embed_images: NULL argument or negative count");
    wgml_vision_info vi;
    if (!vision(model, &vi, "embed images", err)) return WGML_ERR_UNSUPPORTED;
    wgml_embed_params p = params ? *params : wgml_embed_default_params();
    if (p.dimensions && p.dimensions != vi.dim)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "dimensions %d: the model's image vectors have %d",
                         p.dimensions, vi.dim);
    if (dim != vi.dim)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_embed_images: dim is %d, the vectors have %d", dim,
                         vi.dim);
    if (p.n_batch < 0 || (p.normalize != WGML_NORMALIZE_L2 && p.normalize != WGML_NORMALIZE_NONE))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_embed_images: bad batch size or normalization");
    if (n == 0) return WGML_OK;
    return run_images(model, images, n, p.n_batch ? p.n_batch : default_batch(model),
                      p.normalize == WGML_NORMALIZE_L2 ? WGML_ENCODE_L2 : WGML_ENCODE_POOLED, dim, out, err);
}

int wgml_model_n_labels(const wgml_model *model) {
    if (!model || !model->fam->vision) return 0;
    wgml_vision_info vi;
    model->fam->vision->info(model->impl, &vi);
    return vi.n_labels;
}

const char *wgml_model_label(const wgml_model *model, int i) {
    if (i < 0 || i >= wgml_model_n_labels(model)) return NULL;
    return model->fam->vision->label(model->impl, i);
}

wgml_status wgml_classify_images(wgml_model *model, const wgml_image *images, int n, float *probs, int n_labels,
                                 wgml_error *err) {
    if (!model || n < 0 || (n > 0 && (!images || !probs)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_classify_images: NULL argument or negative count");
    const int L = wgml_model_n_labels(model);
    if (!L)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this model has no classifier head (a %s model)", model->fam->name);
    if (n_labels != L)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_classify_images: n_labels is %d, the model has %d",
                         n_labels, L);
    if (n == 0) return WGML_OK;
    wgml_status st = run_images(model, images, n, default_batch(model), WGML_ENCODE_SCORE, L, probs, err);
    for (int i = 0; !st && i < n; i++) { /* softmax of the logits, in double */
        float *p = probs + (size_t)i * (size_t)L;
        double mx = p[0], sum = 0;
        for (int j = 1; j < L; j++) mx = p[j] > mx ? p[j] : mx;
        for (int j = 0; j < L; j++) sum += exp((double)p[j] - mx);
        for (int j = 0; j < L; j++) p[j] = (float)(exp((double)p[j] - mx) / sum);
    }
    return st;
}

wgml_status wgml_zero_shot_classify(wgml_model *model, const wgml_image *images, int n, const char *const *labels,
                                    int n_labels, float *probs, wgml_error *err) {
    if (!model || n < 0 || n_labels < 0 || (n > 0 && (!images || !probs)) || (n_labels > 0 && !labels))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_zero_shot_classify: NULL argument or negative count");
    wgml_vision_info vi;
    if (!vision(model, &vi, "classify images", err)) return WGML_ERR_UNSUPPORTED;
    if (vi.zero_shot == WGML_ZERO_SHOT_NONE)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                         "this %s model has no text tower: zero-shot classification needs one (CLIP, SigLIP)",
                         model->fam->name);
    if (n_labels < 1) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "zero-shot classification needs labels");
    if (n == 0) return WGML_OK;
    const int D = vi.dim;
    float *img = wgml_malloc((size_t)n * (size_t)D * sizeof *img);
    float *txt = wgml_malloc((size_t)n_labels * (size_t)D * sizeof *txt);
    double *lg = wgml_malloc((size_t)n_labels * sizeof *lg); /* one image's logits */
    wgml_status st =
        img && txt && lg ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the vectors");
    wgml_embed_params p = wgml_embed_default_params();
    p.truncate = 1;
    if (!st && wgml_embed_dim(model, &p) != D)
        st = wgml_fail(err, WGML_ERR_FORMAT, "the text vectors (%d) and the image vectors (%d) differ",
                       wgml_embed_dim(model, &p), D);
    if (!st && (st = wgml_embed(model, labels, n_labels, &p, txt, D, err))) wgml_error_prefix(err, "the labels");
    if (!st) st = wgml_embed_images(model, images, n, &p, img, D, err);
    const double scale = exp((double)vi.logit_scale), bias = vi.logit_bias;
    for (int i = 0; !st && i < n; i++) { /* cosines of unit vectors, scaled; then softmax or sigmoid, in double */
        float *pr = probs + (size_t)i * (size_t)n_labels;
        const float *a = img + (size_t)i * (size_t)D;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < n_labels; j++) {
            const float *b = txt + (size_t)j * (size_t)D;
            double dot = 0;
            for (int k = 0; k < D; k++) dot += (double)a[k] * b[k];
            double logit = scale * dot + (vi.zero_shot == WGML_ZERO_SHOT_SIGMOID ? bias : 0.0);
            if (vi.zero_shot == WGML_ZERO_SHOT_SIGMOID) {
                pr[j] = (float)(1.0 / (1.0 + exp(-logit)));
            } else {
                lg[j] = logit;
                mx = logit > mx ? logit : mx;
            }
        }
        if (vi.zero_shot == WGML_ZERO_SHOT_SOFTMAX) {
            for (int j = 0; j < n_labels; j++) sum += exp(lg[j] - mx);
            for (int j = 0; j < n_labels; j++) pr[j] = (float)(exp(lg[j] - mx) / sum);
        }
    }
    wgml_free(lg);
    wgml_free(img);
    wgml_free(txt);
    return st;
}
