/*
 * kokoro_keys.c - the tensors of the official Kokoro checkpoint (the keys of
 * its state dict, "component/module.<name>", and their torch shapes) as the
 * official code (StyleTTS 2's modules with the iSTFTNet generator) creates
 * them for a config: what `wgml synth --arch kokoro-*` feeds the converter,
 * with random values, so that a synthetic model goes the real file's way.
 * tests/test_kokoro.c checks the list against ../shared/kokoro/keys-*.tsv.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/kokoro/kokoro.h"

typedef struct {
    kokoro_key *out;
    int n, cap;
} keys;

static void key(keys *K, int ndim, int64_t a, int64_t b, int64_t c, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void key(keys *K, int ndim, int64_t a, int64_t b, int64_t c, const char *fmt, ...) {
    if (K->n < K->cap) {
        kokoro_key *k = &K->out[K->n];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(k->name, sizeof k->name, fmt, ap);
        va_end(ap);
        k->ndim = ndim;
        k->size[0] = a, k->size[1] = b, k->size[2] = c;
    }
    K->n++;
}

/* A weight-normed Conv1d (weight_g, weight_v [co][ci][k], bias unless nobias). */
static void wn_conv(keys *K, const char *p, int64_t co, int64_t ci, int64_t k, int bias) {
    if (bias) key(K, 1, co, 0, 0, "%s.bias", p);
    key(K, 3, co, 1, 1, "%s.weight_g", p);
    key(K, 3, co, ci, k, "%s.weight_v", p);
}

/* A bidirectional single-layer LSTM of `in` inputs and H hidden units. */
static void lstm(keys *K, const char *p, int64_t in, int64_t H) {
    for (int r = 0; r < 2; r++) {
        const char *s = r ? "_reverse" : "";
        key(K, 2, 4 * H, in, 0, "%s.weight_ih_l0%s", p, s);
        key(K, 2, 4 * H, H, 0, "%s.weight_hh_l0%s", p, s);
        key(K, 1, 4 * H, 0, 0, "%s.bias_ih_l0%s", p, s);
        key(K, 1, 4 * H, 0, 0, "%s.bias_hh_l0%s", p, s);
    }
}

static void linear(keys *K, const char *p, int64_t out, int64_t in) {
    key(K, 2, out, in, 0, "%s.weight", p);
    key(K, 1, out, 0, 0, "%s.bias", p);
}

/* AdainResBlk1d(ci -> co), upsampling by 2 when up. */
static void adain_resblk(keys *K, const char *p, int64_t ci, int64_t co, int64_t S, int up) {
    char q[160];
    snprintf(q, sizeof q, "%s.conv1", p), wn_conv(K, q, co, ci, 3, 1);
    snprintf(q, sizeof q, "%s.conv2", p), wn_conv(K, q, co, co, 3, 1);
    snprintf(q, sizeof q, "%s.norm1.fc", p), linear(K, q, 2 * ci, S);
    snprintf(q, sizeof q, "%s.norm2.fc", p), linear(K, q, 2 * co, S);
    if (ci != co) snprintf(q, sizeof q, "%s.conv1x1", p), wn_conv(K, q, co, ci, 1, 0);
    if (up) { /* depthwise ConvTranspose1d(ci, ci, 3, groups=ci): weight [ci][1][3] */
        snprintf(q, sizeof q, "%s.pool", p), wn_conv(K, q, ci, 1, 3, 1);
    }
}

/* AdaINResBlock1(C, k, 3 dilations) */
static void adain_resblock1(keys *K, const char *p, int64_t C, int64_t k, int64_t S) {
    char q[160];
    for (int j = 0; j < 3; j++) snprintf(q, sizeof q, "%s.convs1.%d", p, j), wn_conv(K, q, C, C, k, 1);
    for (int j = 0; j < 3; j++) snprintf(q, sizeof q, "%s.convs2.%d", p, j), wn_conv(K, q, C, C, k, 1);
    for (int j = 0; j < 3; j++) snprintf(q, sizeof q, "%s.adain1.%d.fc", p, j), linear(K, q, 2 * C, S);
    for (int j = 0; j < 3; j++) snprintf(q, sizeof q, "%s.adain2.%d.fc", p, j), linear(K, q, 2 * C, S);
    for (int j = 0; j < 3; j++) key(K, 3, 1, C, 1, "%s.alpha1.%d", p, j);
    for (int j = 0; j < 3; j++) key(K, 3, 1, C, 1, "%s.alpha2.%d", p, j);
}

int kokoro_official_keys(const kokoro_hparams *hp, kokoro_key *out, int cap) {
    keys K = {out, 0, cap};
    const int64_t E = hp->bert_embd, H = hp->bert_hidden, D = hp->hidden, S = hp->style, V = hp->n_token;
    char p[160];
    /* bert: ALBERT */
    const char *b = "bert/module.";
    key(&K, 2, V, E, 0, "%sembeddings.word_embeddings.weight", b);
    key(&K, 2, hp->bert_ctx, E, 0, "%sembeddings.position_embeddings.weight", b);
    key(&K, 2, 2, E, 0, "%sembeddings.token_type_embeddings.weight", b);
    key(&K, 1, E, 0, 0, "%sembeddings.LayerNorm.weight", b);
    key(&K, 1, E, 0, 0, "%sembeddings.LayerNorm.bias", b);
    snprintf(p, sizeof p, "%sencoder.embedding_hidden_mapping_in", b), linear(&K, p, H, E);
    const char *L = "bert/module.encoder.albert_layer_groups.0.albert_layers.0";
    key(&K, 1, H, 0, 0, "%s.full_layer_layer_norm.weight", L);
    key(&K, 1, H, 0, 0, "%s.full_layer_layer_norm.bias", L);
    static const char *const att[] = {"query", "key", "value", "dense"};
    for (int i = 0; i < 4; i++) snprintf(p, sizeof p, "%s.attention.%s", L, att[i]), linear(&K, p, H, H);
    key(&K, 1, H, 0, 0, "%s.attention.LayerNorm.weight", L);
    key(&K, 1, H, 0, 0, "%s.attention.LayerNorm.bias", L);
    snprintf(p, sizeof p, "%s.ffn", L), linear(&K, p, hp->bert_ff, H);
    snprintf(p, sizeof p, "%s.ffn_output", L), linear(&K, p, H, hp->bert_ff);
    snprintf(p, sizeof p, "%spooler", b), linear(&K, p, H, H);
    linear(&K, "bert_encoder/module", D, H);
    /* predictor: the duration encoder, duration LSTM and projection, F0 and N */
    for (int i = 0; i < hp->n_layer; i++) {
        snprintf(p, sizeof p, "predictor/module.text_encoder.lstms.%d", 2 * i), lstm(&K, p, D + S, D / 2);
        snprintf(p, sizeof p, "predictor/module.text_encoder.lstms.%d.fc", 2 * i + 1), linear(&K, p, 2 * D, S);
    }
    lstm(&K, "predictor/module.lstm", D + S, D / 2);
    linear(&K, "predictor/module.duration_proj.linear_layer", hp->max_dur, D);
    lstm(&K, "predictor/module.shared", D + S, D / 2);
    for (int br = 0; br < 2; br++) {
        const char *B = br ? "N" : "F0";
        snprintf(p, sizeof p, "predictor/module.%s.0", B), adain_resblk(&K, p, D, D, S, 0);
        snprintf(p, sizeof p, "predictor/module.%s.1", B), adain_resblk(&K, p, D, D / 2, S, 1);
        snprintf(p, sizeof p, "predictor/module.%s.2", B), adain_resblk(&K, p, D / 2, D / 2, S, 0);
    }
    for (int br = 0; br < 2; br++) {
        key(&K, 3, 1, D / 2, 1, "predictor/module.%s_proj.weight", br ? "N" : "F0");
        key(&K, 1, 1, 0, 0, "predictor/module.%s_proj.bias", br ? "N" : "F0");
    }
    /* text encoder */
    key(&K, 2, V, D, 0, "text_encoder/module.embedding.weight");
    for (int i = 0; i < hp->n_layer; i++) {
        snprintf(p, sizeof p, "text_encoder/module.cnn.%d.0", i), wn_conv(&K, p, D, D, hp->text_kernel, 1);
        key(&K, 1, D, 0, 0, "text_encoder/module.cnn.%d.1.gamma", i);
        key(&K, 1, D, 0, 0, "text_encoder/module.cnn.%d.1.beta", i);
    }
    lstm(&K, "text_encoder/module.lstm", D, D / 2);
    /* decoder */
    const int64_t Dd = hp->dec_dim, R = hp->asr_res_dim, U = hp->up_initial, nb = hp->n_fft + 2;
    adain_resblk(&K, "decoder/module.encode", D + 2, Dd, S, 0);
    for (int i = 0; i < 4; i++)
        snprintf(p, sizeof p, "decoder/module.decode.%d", i), adain_resblk(&K, p, Dd + R + 2, i == 3 ? U : Dd, S, i == 3);
    wn_conv(&K, "decoder/module.F0_conv", 1, 1, 3, 1);
    wn_conv(&K, "decoder/module.N_conv", 1, 1, 3, 1);
    wn_conv(&K, "decoder/module.asr_res.0", R, D, 1, 1);
    /* the generator */
    const char *g = "decoder/module.generator";
    key(&K, 2, 1, hp->n_harmonics, 0, "%s.m_source.l_linear.weight", g);
    key(&K, 1, 1, 0, 0, "%s.m_source.l_linear.bias", g);
    int64_t up_total = 1, up_done = 1;
    for (int i = 0; i < hp->n_ups; i++) up_total *= hp->up_rates[i];
    for (int i = 0; i < hp->n_ups; i++) {
        const int64_t C = U >> (i + 1);
        up_done *= hp->up_rates[i];
        const int64_t stride = up_total / up_done, nk = i + 1 < hp->n_ups ? 2 * stride : 1;
        key(&K, 3, C, nb, nk, "%s.noise_convs.%d.weight", g, i);
        key(&K, 1, C, 0, 0, "%s.noise_convs.%d.bias", g, i);
        snprintf(p, sizeof p, "%s.noise_res.%d", g, i), adain_resblock1(&K, p, C, i + 1 < hp->n_ups ? 7 : 11, S);
    }
    for (int i = 0; i < hp->n_ups; i++) { /* ConvTranspose1d(U/2^i -> U/2^(i+1)): weight [ci][co][k] */
        snprintf(p, sizeof p, "%s.ups.%d", g, i);
        key(&K, 1, U >> (i + 1), 0, 0, "%s.bias", p);
        key(&K, 3, U >> i, 1, 1, "%s.weight_g", p);
        key(&K, 3, U >> i, U >> (i + 1), hp->up_kernels[i], "%s.weight_v", p);
    }
    for (int i = 0; i < hp->n_ups; i++)
        for (int j = 0; j < hp->n_rb; j++)
            snprintf(p, sizeof p, "%s.resblocks.%d", g, i * hp->n_rb + j),
                adain_resblock1(&K, p, U >> (i + 1), hp->rb_kernels[j], S);
    snprintf(p, sizeof p, "%s.conv_post", g), wn_conv(&K, p, nb, U >> hp->n_ups, 7, 1);
    return K.n;
}
