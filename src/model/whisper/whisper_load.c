/*
 * whisper_load.c - hyper-parameters and weights of a Whisper GGUF (the
 * layout in whisper_vocab.h: the official tensor names, as the .bin reader,
 * synth and `wgml convert whisper` write them):
 *
 *   encoder.conv{1,2}.{weight,bias}, encoder.positional_embedding,
 *   encoder.blocks.N.{attn,attn_ln,mlp.0,mlp.2,mlp_ln}.*, encoder.ln_post.*,
 *   decoder.token_embedding.weight, decoder.positional_embedding,
 *   decoder.blocks.N.{attn,attn_ln,cross_attn,cross_attn_ln,mlp.0,mlp.2,mlp_ln}.*,
 *   decoder.ln.*, mel_filters
 *
 * attn.key has no bias (the official MultiHeadAttention).
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/whisper/whisper.h"

wgml_status whisper_read_hparams(const gguf_file *f, whisper_hparams *hp, wgml_error *err) {
    memset(hp, 0, sizeof *hp);
    const char *a = "whisper";
    wgml_status st;
    if ((st = wgml_hparam_int(f, a, "vocab_size", 51864, 51866, &hp->n_vocab, 1, err)) ||
        (st = wgml_hparam_int(f, a, "n_mels", 1, 1024, &hp->n_mels, 1, err)) ||
        (st = wgml_hparam_int(f, a, "audio.context_length", 1, 1 << 16, &hp->n_audio_ctx, 1, err)) ||
        (st = wgml_hparam_int(f, a, "audio.embedding_length", 1, 1 << 16, &hp->n_audio_state, 1, err)) ||
        (st = wgml_hparam_int(f, a, "audio.head_count", 1, 1024, &hp->n_audio_head, 1, err)) ||
        (st = wgml_hparam_int(f, a, "audio.block_count", 1, 1024, &hp->n_audio_layer, 1, err)) ||
        (st = wgml_hparam_int(f, a, "text.context_length", 1, 448, &hp->n_text_ctx, 1, err)) ||
        (st = wgml_hparam_int(f, a, "text.embedding_length", 1, 1 << 16, &hp->n_text_state, 1, err)) ||
        (st = wgml_hparam_int(f, a, "text.head_count", 1, 1024, &hp->n_text_head, 1, err)) ||
        (st = wgml_hparam_int(f, a, "text.block_count", 1, 1024, &hp->n_text_layer, 1, err)))
        return st;
    const char *name = gguf_name(f);
    if (hp->n_audio_state != hp->n_text_state)
        return wgml_fail(err, WGML_ERR_FORMAT,
                         "%s: the encoder's width %d differs from the decoder's %d (Whisper needs them equal)", name,
                         hp->n_audio_state, hp->n_text_state);
    if (hp->n_audio_state % hp->n_audio_head || hp->n_text_state % hp->n_text_head ||
        hp->n_audio_state / hp->n_audio_head != hp->n_text_state / hp->n_text_head)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: width %d does not split into %d and %d heads of one size", name,
                         hp->n_audio_state, hp->n_audio_head, hp->n_text_head);
    hp->head_dim = hp->n_audio_state / hp->n_audio_head;
    /* the encoder halves the window's frames (conv2's stride 2) into its positions */
    if (hp->n_audio_ctx * 2 != WHISPER_WINDOW_FRAMES)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %d audio positions; a 30 s window of %d frames gives %d", name,
                         hp->n_audio_ctx, WHISPER_WINDOW_FRAMES, WHISPER_WINDOW_FRAMES / 2);
    const gguf_value *toks;
    if (gguf_get_arr(f, "whisper.tokens", GGUF_TYPE_STRING, &toks, err) != 1)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: missing or bad 'whisper.tokens' (the BPE vocabulary)", name);
    hp->n_tokens = (int)toks->v.arr.n;
    whisper_specials sp;
    if ((st = whisper_specials_init(&sp, hp->n_vocab, err))) return st;
    if (hp->n_tokens != sp.n_text)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %d BPE tokens for a vocabulary of %d (%d expected)", name,
                         hp->n_tokens, hp->n_vocab, sp.n_text);
    return WGML_OK;
}

static wgml_status load_block(wgml_weights_loader *L, whisper_layer *l, const char *stack, int i, int S, int cross) {
    char n[128];
    wgml_status st;
    const int64_t F = 4 * (int64_t)S;
#define T(field, suffix, a, b)                                  \
    snprintf(n, sizeof n, "%s.blocks.%d.%s", stack, i, suffix); \
    if ((st = wgml_weights_load(L, &l->field, n, a, b, 1))) return st;
    T(wq, "attn.query.weight", S, S)
    T(bq, "attn.query.bias", S, 1)
    T(wk, "attn.key.weight", S, S)
    T(wv, "attn.value.weight", S, S)
    T(bv, "attn.value.bias", S, 1)
    T(wo, "attn.out.weight", S, S)
    T(bo, "attn.out.bias", S, 1)
    T(attn_ln_w, "attn_ln.weight", S, 1)
    T(attn_ln_b, "attn_ln.bias", S, 1)
    if (cross) {
        T(cwq, "cross_attn.query.weight", S, S)
        T(cbq, "cross_attn.query.bias", S, 1)
        T(cwk, "cross_attn.key.weight", S, S)
        T(cwv, "cross_attn.value.weight", S, S)
        T(cbv, "cross_attn.value.bias", S, 1)
        T(cwo, "cross_attn.out.weight", S, S)
        T(cbo, "cross_attn.out.bias", S, 1)
        T(cross_ln_w, "cross_attn_ln.weight", S, 1)
        T(cross_ln_b, "cross_attn_ln.bias", S, 1)
    }
    T(up, "mlp.0.weight", S, F)
    T(b_up, "mlp.0.bias", F, 1)
    T(down, "mlp.2.weight", F, S)
    T(b_down, "mlp.2.bias", S, 1)
    T(mlp_ln_w, "mlp_ln.weight", S, 1)
    T(mlp_ln_b, "mlp_ln.bias", S, 1)
#undef T
    return WGML_OK;
}

/* The mel filters: a host tensor [n_mels][201] f32, its bytes read where the
 * model needs them (a streamed file has them once the stream is in). */
static wgml_status find_filters(const gguf_file *f, whisper_model *m, wgml_error *err) {
    const whisper_hparams *hp = &m->hp;
    const gguf_tensor *t = gguf_find_tensor(f, "mel_filters");
    const int bins = WHISPER_N_FFT / 2 + 1;
    if (!t || t->type != WGML_F32 || t->n_dims != 2 || t->ne[0] != bins || t->ne[1] != hp->n_mels)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor 'mel_filters' must be F32 [%d][%d]", gguf_name(f),
                         hp->n_mels, bins);
    m->mel_src = t;
    return WGML_OK;
}

const float *whisper_mel_filters(const whisper_model *m) {
    return (const float *)wgml_weights_host_data(&m->w, m->mel_src);
}

wgml_status whisper_model_load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p,
                               whisper_model **out, wgml_error *err) {
    *out = NULL;
    whisper_model *m = wgml_calloc(1, sizeof *m);
    if (!m) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
    m->be = be;
    wgml_mutex_init(&m->step_mu);
    whisper_hparams *hp = &m->hp;
    wgml_status st = whisper_read_hparams(f, hp, err);
    if (st || (st = whisper_specials_init(&m->sp, hp->n_vocab, err))) goto fail;
    m->enc = wgml_calloc((size_t)hp->n_audio_layer, sizeof *m->enc);
    m->dec = wgml_calloc((size_t)hp->n_text_layer, sizeof *m->dec);
    if (!m->enc || !m->dec) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
        goto fail;
    }
    wgml_weights_loader L;
    wgml_weights_begin(&L, f, be, &m->w, p ? p->fault : NULL, p ? p->progress : NULL, p ? p->user : NULL, err);
    const int64_t S = hp->n_audio_state;
    if ((st = wgml_weights_load(&L, &m->conv1_w, "encoder.conv1.weight", 3 * (int64_t)hp->n_mels, S, 1)) ||
        (st = wgml_weights_load(&L, &m->conv1_b, "encoder.conv1.bias", S, 1, 1)) ||
        (st = wgml_weights_load(&L, &m->conv2_w, "encoder.conv2.weight", 3 * S, S, 1)) ||
        (st = wgml_weights_load(&L, &m->conv2_b, "encoder.conv2.bias", S, 1, 1)) ||
        (st = wgml_weights_load(&L, &m->enc_pos, "encoder.positional_embedding", S, hp->n_audio_ctx, 1)) ||
        (st = wgml_weights_load(&L, &m->ln_post_w, "encoder.ln_post.weight", S, 1, 1)) ||
        (st = wgml_weights_load(&L, &m->ln_post_b, "encoder.ln_post.bias", S, 1, 1)) ||
        (st = wgml_weights_load(&L, &m->tok_embd, "decoder.token_embedding.weight", S, hp->n_vocab, 1)) ||
        (st = wgml_weights_load(&L, &m->dec_pos, "decoder.positional_embedding", S, hp->n_text_ctx, 1)) ||
        (st = wgml_weights_load(&L, &m->ln_w, "decoder.ln.weight", S, 1, 1)) ||
        (st = wgml_weights_load(&L, &m->ln_b, "decoder.ln.bias", S, 1, 1)))
        goto fail;
    for (int i = 0; i < hp->n_audio_layer; i++)
        if ((st = load_block(&L, &m->enc[i], "encoder", i, (int)S, 0))) goto fail;
    for (int i = 0; i < hp->n_text_layer; i++)
        if ((st = load_block(&L, &m->dec[i], "decoder", i, (int)S, 1))) goto fail;
    if ((st = wgml_weights_end(&L))) goto fail;
    if ((st = find_filters(f, m, err)) || (st = whisper_tokenizer_load(f, &m->tok, err))) goto fail;
    *out = m;
    return WGML_OK;
fail:
    whisper_model_free(m);
    return st;
}

void whisper_model_free(whisper_model *m) {
    if (!m) return;
    wgml_weights_free(&m->w);
    wgml_free(m->enc);
    wgml_free(m->dec);
    whisper_tokenizer_free(m->tok);
    wgml_mutex_destroy(&m->step_mu);
    wgml_free(m);
}
