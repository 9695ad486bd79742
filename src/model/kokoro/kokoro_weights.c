/*
 * kokoro_weights.c - Kokoro's weights resolved by name once at load
 * (kokoro_weights.h): the official checkpoint's module names, as the
 * converter (kokoro_convert.c) writes them.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"
#include "model/kokoro/kokoro_weights.h"

typedef struct {
    kokoro_find_fn find;
    void *ctx;
    wgml_error *err;
    wgml_status st;
} resolver;

/* The weight named by fmt; a missing one (when required) is the resolver's error. */
static const wgml_tensor *get(resolver *r, int required, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static const wgml_tensor *get(resolver *r, int required, const char *fmt, ...) {
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const wgml_tensor *t = r->find(r->ctx, name);
    if (!t && required && !r->st) r->st = wgml_fail(r->err, WGML_ERR_FORMAT, "kokoro: the model has no tensor '%s'", name);
    return t;
}

/* "<p>.weight" and "<p>.bias" */
static kokoro_lin lin(resolver *r, const char *p) {
    return (kokoro_lin){get(r, 1, "%s.weight", p), get(r, 1, "%s.bias", p)};
}

static kokoro_lstm lstm(resolver *r, const char *p, int styled) {
    return (kokoro_lstm){get(r, 1, "%s.weight_ih", p), get(r, 1, "%s.bias", p), get(r, 1, "%s.weight_hh", p),
                         styled ? get(r, 1, "%s.weight_ih_s", p) : NULL};
}

static kokoro_resblk resblk(resolver *r, const char *p, int upsample) {
    char q[160];
    kokoro_resblk b = {0};
    snprintf(q, sizeof q, "%s.norm1.fc", p), b.norm1 = lin(r, q);
    snprintf(q, sizeof q, "%s.norm2.fc", p), b.norm2 = lin(r, q);
    snprintf(q, sizeof q, "%s.conv1", p), b.conv1 = lin(r, q);
    snprintf(q, sizeof q, "%s.conv2", p), b.conv2 = lin(r, q);
    if (upsample) snprintf(q, sizeof q, "%s.pool", p), b.pool = lin(r, q);
    b.conv1x1 = get(r, 0, "%s.conv1x1.weight", p); /* only where the channels change */
    return b;
}

static kokoro_resblock1 resblock1(resolver *r, const char *p) {
    kokoro_resblock1 b;
    char q[160];
    for (int j = 0; j < 3; j++) {
        snprintf(q, sizeof q, "%s.adain1.%d.fc", p, j), b.adain1[j] = lin(r, q);
        snprintf(q, sizeof q, "%s.adain2.%d.fc", p, j), b.adain2[j] = lin(r, q);
        snprintf(q, sizeof q, "%s.convs1.%d", p, j), b.convs1[j] = lin(r, q);
        snprintf(q, sizeof q, "%s.convs2.%d", p, j), b.convs2[j] = lin(r, q);
        b.alpha1[j] = get(r, 1, "%s.alpha1.%d", p, j);
        b.alpha2[j] = get(r, 1, "%s.alpha2.%d", p, j);
    }
    return b;
}

wgml_status kokoro_weights_resolve(const kokoro_hparams *hp, kokoro_find_fn find, void *ctx, kokoro_weights *w,
                                   wgml_error *err) {
    resolver r = {find, ctx, err, WGML_OK};
    char p[160];
    *w = (kokoro_weights){0};
    if (hp->n_layer > KOKORO_MAX_LAYERS)
        return wgml_fail(err, WGML_ERR_FORMAT, "kokoro: %d layers (at most %d)", hp->n_layer, KOKORO_MAX_LAYERS);
    w->word = get(&r, 1, "bert.embeddings.word_embeddings.weight");
    w->position = get(&r, 1, "bert.embeddings.position_embeddings.weight");
    w->token_type = get(&r, 1, "bert.embeddings.token_type_embeddings.weight");
    w->emb_norm = lin(&r, "bert.embeddings.LayerNorm");
    w->map_in = lin(&r, "bert.encoder.embedding_hidden_mapping_in");
    const char *L = "bert.encoder.albert_layer_groups.0.albert_layers.0";
    w->albert = (wgml_encoder_layer){
        .wq = get(&r, 1, "%s.attention.query.weight", L), .wk = get(&r, 1, "%s.attention.key.weight", L),
        .wv = get(&r, 1, "%s.attention.value.weight", L), .bq = get(&r, 1, "%s.attention.query.bias", L),
        .bk = get(&r, 1, "%s.attention.key.bias", L), .bv = get(&r, 1, "%s.attention.value.bias", L),
        .wo = get(&r, 1, "%s.attention.dense.weight", L), .bo = get(&r, 1, "%s.attention.dense.bias", L),
        .attn_norm_w = get(&r, 1, "%s.attention.LayerNorm.weight", L),
        .attn_norm_b = get(&r, 1, "%s.attention.LayerNorm.bias", L), .up = get(&r, 1, "%s.ffn.weight", L),
        .b_up = get(&r, 1, "%s.ffn.bias", L), .down = get(&r, 1, "%s.ffn_output.weight", L),
        .b_down = get(&r, 1, "%s.ffn_output.bias", L), .ffn_norm_w = get(&r, 1, "%s.full_layer_layer_norm.weight", L),
        .ffn_norm_b = get(&r, 1, "%s.full_layer_layer_norm.bias", L)};
    w->bert_encoder = lin(&r, "bert_encoder");
    for (int i = 0; i < hp->n_layer; i++) {
        snprintf(p, sizeof p, "predictor.text_encoder.lstms.%d", 2 * i), w->dur_lstm[i] = lstm(&r, p, 1);
        snprintf(p, sizeof p, "predictor.text_encoder.lstms.%d.fc", 2 * i + 1), w->dur_norm[i] = lin(&r, p);
        snprintf(p, sizeof p, "text_encoder.cnn.%d.0", i), w->te_cnn[i] = lin(&r, p);
        w->te_norm[i] = (kokoro_lin){get(&r, 1, "text_encoder.cnn.%d.1.gamma", i),
                                     get(&r, 1, "text_encoder.cnn.%d.1.beta", i)};
    }
    w->lstm = lstm(&r, "predictor.lstm", 1);
    w->shared = lstm(&r, "predictor.shared", 1);
    w->dur_proj = lin(&r, "predictor.duration_proj.linear_layer");
    w->f0_proj = lin(&r, "predictor.F0_proj");
    w->n_proj = lin(&r, "predictor.N_proj");
    for (int b = 0; b < 3; b++) {
        snprintf(p, sizeof p, "predictor.F0.%d", b), w->f0[b] = resblk(&r, p, b == 1);
        snprintf(p, sizeof p, "predictor.N.%d", b), w->n[b] = resblk(&r, p, b == 1);
    }
    w->te_embedding = get(&r, 1, "text_encoder.embedding.weight");
    w->te_lstm = lstm(&r, "text_encoder.lstm", 0);
    w->f0_conv = lin(&r, "decoder.F0_conv");
    w->n_conv = lin(&r, "decoder.N_conv");
    w->asr_res = lin(&r, "decoder.asr_res.0");
    w->encode = resblk(&r, "decoder.encode", 0);
    for (int b = 0; b < 4; b++) snprintf(p, sizeof p, "decoder.decode.%d", b), w->decode[b] = resblk(&r, p, b == 3);
    w->source = lin(&r, "decoder.generator.m_source.l_linear");
    w->conv_post = lin(&r, "decoder.generator.conv_post");
    for (int i = 0; i < hp->n_ups; i++) {
        snprintf(p, sizeof p, "decoder.generator.noise_convs.%d", i), w->noise_convs[i] = lin(&r, p);
        snprintf(p, sizeof p, "decoder.generator.noise_res.%d", i), w->noise_res[i] = resblock1(&r, p);
        snprintf(p, sizeof p, "decoder.generator.ups.%d", i), w->ups[i] = lin(&r, p);
        for (int j = 0; j < hp->n_rb; j++) {
            snprintf(p, sizeof p, "decoder.generator.resblocks.%d", i * hp->n_rb + j);
            w->resblocks[i * hp->n_rb + j] = resblock1(&r, p);
        }
    }
    return r.st;
}
