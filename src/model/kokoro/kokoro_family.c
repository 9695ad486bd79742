/*
 * kokoro_family.c - the Kokoro family's registry entry (model/family.h):
 * architecture "kokoro", task speech. Its vocabulary is the phoneme table in
 * its own keys (kokoro.vocab), not a text tokenizer.
 */
#include <stdio.h>
#include <string.h>

#include "model/kokoro/kokoro_model.h"

static const char *const archs[] = {"kokoro", NULL};

static wgml_status describe(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err) {
    kokoro_hparams hp;
    static char vocab[KOKORO_N_VOCAB_MAX][8];
    wgml_status st = kokoro_read_hparams(f, &hp, err);
    if (!st) st = kokoro_read_vocab(f, hp.n_token, vocab, err);
    if (st || !field) return st;
    char v[512];
#define F(key, ...) (snprintf(v, sizeof v, __VA_ARGS__), field(user, key, v))
    int nsym = 0;
    for (int i = 1; i < hp.n_token; i++) nsym += vocab[i][0] != 0;
    F("phonemes", "%d symbols (ids 1..%d), at most %d per piece", nsym, hp.n_token - 1, KOKORO_MAX_PHONEMES);
    F("albert", "%d layers (shared), hidden %d, %d heads, feed-forward %d, embedding %d", hp.bert_layers,
      hp.bert_hidden, hp.bert_heads, hp.bert_ff, hp.bert_embd);
    F("prosody", "hidden %d, style %d, %d LSTM layers, %d duration classes", hp.hidden, hp.style, hp.n_layer,
      hp.max_dur);
    F("decoder", "%d channels, generator %d channels, upsampling %d x %d, iSTFT n_fft %d hop %d", hp.dec_dim,
      hp.up_initial, hp.up_rates[0], hp.n_ups > 1 ? hp.up_rates[1] : 1, hp.n_fft, hp.hop);
    F("audio", "%d Hz mono", hp.sample_rate);
    char names[400];
    const int nv = kokoro_voice_names(f, names, sizeof names);
    if (nv) F("voices", "%d: %s", nv, names);
    else field(user, "voices", "none (pass a voice file)");
#undef F
    return WGML_OK;
}

static wgml_status load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err) {
    kokoro_model *m = NULL;
    wgml_status st = kokoro_model_load(f, be, p, &m, err);
    *out = m;
    return st;
}

static void model_free(void *m) { kokoro_model_free(m); }

static wgml_weights *weights(void *m) { return kokoro_model_weights(m); }

static void get_info(const void *model, wgml_model_info *info) {
    const kokoro_model *m = model;
    const kokoro_hparams *hp = kokoro_model_hparams(m);
    const wgml_weights *w = kokoro_model_weights((kokoro_model *)m);
    info->architecture = "kokoro";
    info->n_params = w->n_params;
    info->weights_bytes = w->bytes;
    info->matmul_type = wgml_weights_main_type(w);
    info->sample_rate = hp->sample_rate;
    char names[8];
    info->n_voices = kokoro_voice_names(kokoro_model_file(m), names, sizeof names);
}

/* ---- the speaker interface ---- */

static const char *voice(const void *model, int i, char *buf, size_t cap) {
    const gguf_value *a;
    if (i < 0 || !cap ||
        gguf_get_arr(kokoro_model_file(model), "kokoro.voices", GGUF_TYPE_STRING, &a, NULL) != 1 ||
        (uint64_t)i >= a->v.arr.n)
        return NULL;
    /* the names are NUL-free strings in the file: hand out a copy that ends */
    const gguf_str *s = &a->v.arr.items[i].v.str;
    size_t n = s->len < cap - 1 ? (size_t)s->len : cap - 1;
    memcpy(buf, s->ptr, n);
    buf[n] = '\0';
    return buf;
}

static wgml_status spk_create(void *model, void **state, wgml_error *err) {
    kokoro_state *s = NULL;
    wgml_status st = kokoro_state_create(model, &s, err);
    *state = s;
    return st;
}

static void spk_free(void *state) { kokoro_state_free(state); }

static wgml_status speak(void *model, void *state, const wgml_speaker_input *in, const char *voice_spec,
                         const wgml_speak_params *p, wgml_audio_fn on_audio, void *user, int64_t *n_samples,
                         int *n_chunks, wgml_error *err) {
    (void)model; /* the state's */
    kokoro_words words = {in->text, in->words, in->n_words};
    kokoro_set_bf16(state, !p->full_precision);
    kokoro_set_split_sentences(state, p->split != WGML_SPLIT_NONE);
    return kokoro_speak(state, in->phonemes, in->text ? &words : NULL, voice_spec, p->speed, p->seed, on_audio, user,
                        n_samples, n_chunks, err);
}

static const wgml_speaker speaker = {
    .voice = voice,
    .create = spk_create,
    .free = spk_free,
    .speak = speak,
};

const wgml_family wgml_family_kokoro = {
    .name = "kokoro",
    .archs = archs,
    .tasks = WGML_TASK_SPEECH,
    .no_tokenizer = 1,
    .describe = describe,
    .load = load,
    .free = model_free,
    .weights = weights,
    .get_info = get_info,
    .speaker = &speaker,
};
