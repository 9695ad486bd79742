/*
 * kokoro_weights.h - Kokoro's weights by their place in the network,
 * resolved from the file's tensor names once at load (kokoro_weights.c), so
 * that the forward pass (kokoro.c) reads pointers, never names.
 */
#ifndef WGML_MODEL_KOKORO_WEIGHTS_H
#define WGML_MODEL_KOKORO_WEIGHTS_H

#include "model/blocks.h"
#include "model/kokoro/kokoro.h"

#define KOKORO_MAX_LAYERS 64 /* n_layer's bound (kokoro_read_hparams) */

/* A weight and its bias (NULL where the layer has none). */
typedef struct kokoro_lin {
    const wgml_tensor *w, *b;
} kokoro_lin;

/* A bidirectional LSTM: input and recurrent weights, the summed biases, and
 * the style's share of the input weight (the predictor's cat(x, s); else NULL). */
typedef struct kokoro_lstm {
    const wgml_tensor *w_ih, *bias, *w_hh, *w_ih_s;
} kokoro_lstm;

/* AdainResBlk1d: the two AdaIN fcs, the two convolutions, the 1x1 shortcut
 * (NULL when the channels do not change) and the upsampling's depthwise
 * transposed convolution ("pool"; NULL w without upsampling). */
typedef struct kokoro_resblk {
    kokoro_lin norm1, norm2, conv1, conv2, pool;
    const wgml_tensor *conv1x1;
} kokoro_resblk;

/* AdaINResBlock1: three dilated pairs, each with its AdaIN fcs and Snake alphas. */
typedef struct kokoro_resblock1 {
    kokoro_lin adain1[3], adain2[3], convs1[3], convs2[3];
    const wgml_tensor *alpha1[3], *alpha2[3];
} kokoro_resblock1;

typedef struct kokoro_weights {
    /* ALBERT: embeddings, the mapping in, the one shared layer; then bert_encoder */
    const wgml_tensor *word, *position, *token_type;
    kokoro_lin emb_norm, map_in, bert_encoder;
    wgml_encoder_layer albert;
    /* the prosody predictor */
    kokoro_lstm dur_lstm[KOKORO_MAX_LAYERS];
    kokoro_lin dur_norm[KOKORO_MAX_LAYERS]; /* AdaLayerNorm fcs */
    kokoro_lstm lstm, shared;
    kokoro_lin dur_proj, f0_proj, n_proj;
    kokoro_resblk f0[3], n[3];
    /* the text encoder */
    const wgml_tensor *te_embedding;
    kokoro_lin te_cnn[KOKORO_MAX_LAYERS], te_norm[KOKORO_MAX_LAYERS];
    kokoro_lstm te_lstm;
    /* the decoder */
    kokoro_lin f0_conv, n_conv, asr_res;
    kokoro_resblk encode, decode[4];
    /* the generator */
    kokoro_lin source, conv_post;
    kokoro_lin noise_convs[KOKORO_MAX_UPS], ups[KOKORO_MAX_UPS];
    kokoro_resblock1 noise_res[KOKORO_MAX_UPS], resblocks[KOKORO_MAX_UPS * KOKORO_MAX_RB];
} kokoro_weights;

/* Finds the weight `name` among the model's (NULL: none). */
typedef const wgml_tensor *(*kokoro_find_fn)(void *ctx, const char *name);

/* Fills w for hyper-parameters hp through find; a weight the network needs
 * and the file lacks is an error naming it. */
wgml_status kokoro_weights_resolve(const kokoro_hparams *hp, kokoro_find_fn find, void *ctx, kokoro_weights *w,
                                   wgml_error *err);

#endif
