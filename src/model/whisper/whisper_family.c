/*
 * whisper_family.c - the Whisper family's registry entry (model/family.h):
 * architecture "whisper" (from whisper.cpp's ggml .bin files, converted in
 * memory, or our GGUF), task transcribe.
 */
#include <stdio.h>

#include "model/whisper/whisper.h"
#include "model/whisper/whisper_run.h"

static const char *const archs[] = {"whisper", NULL};

static const char *vocab_name(int n_vocab) {
    return n_vocab == 51864 ? "English-only" : n_vocab == 51866 ? "multilingual (v3)" : "multilingual";
}

static wgml_status describe(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err) {
    whisper_hparams hp;
    wgml_status st = whisper_read_hparams(f, &hp, err);
    if (st || !field) return st;
    char v[128];
#define F(key, ...) (snprintf(v, sizeof v, __VA_ARGS__), field(user, key, v))
    F("mel bands", "%d", hp.n_mels);
    F("encoder", "%d blocks, width %d, %d heads, %d positions", hp.n_audio_layer, hp.n_audio_state, hp.n_audio_head,
      hp.n_audio_ctx);
    F("decoder", "%d blocks, width %d, %d heads, %d positions", hp.n_text_layer, hp.n_text_state, hp.n_text_head,
      hp.n_text_ctx);
    F("head size", "%d", hp.head_dim);
    F("vocabulary", "%d ids, %s (%d BPE tokens)", hp.n_vocab, vocab_name(hp.n_vocab), hp.n_tokens);
#undef F
    return WGML_OK;
}

static wgml_status load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err) {
    whisper_model *m = NULL;
    wgml_status st = whisper_model_load(f, be, p, &m, err);
    *out = m;
    return st;
}

static void model_free(void *m) { whisper_model_free(m); }

static wgml_weights *weights(void *m) { return &((whisper_model *)m)->w; }

static void get_info(const void *model, wgml_model_info *info) {
    const whisper_model *m = model;
    const whisper_hparams *hp = &m->hp;
    info->architecture = "whisper";
    info->n_params = m->w.n_params;
    info->weights_bytes = m->w.bytes;
    info->matmul_type = wgml_weights_main_type(&m->w);
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_text_ctx;
    info->n_embd = hp->n_text_state;
    info->n_layer = hp->n_text_layer;
    info->n_head = info->n_head_kv = hp->n_text_head;
    info->n_ff = 4 * hp->n_text_state;
    info->head_dim = hp->head_dim;
    info->sample_rate = WHISPER_SAMPLE_RATE; /* of the audio it hears */
    info->bos = m->sp.sot;
    info->eos = m->sp.eot;
}

/* ---- the transcriber interface ---- */

static int tr_sample_rate(const void *model) {
    (void)model;
    return WHISPER_SAMPLE_RATE;
}

static wgml_status tr_create(void *model, void **state, wgml_error *err) {
    whisper_run *r = NULL;
    wgml_status st = whisper_run_create(model, WGML_KV_DEFAULT, &r, err);
    *state = r;
    return st;
}

static void tr_free(void *state) { whisper_run_free(state); }

static wgml_status tr_transcribe(void *model, void *state, const float *pcm, size_t n, const wgml_transcribe_params *p,
                                 wgml_segment_fn on_segment, void *user, wgml_transcribe_result *result,
                                 wgml_error *err) {
    (void)model;
    return whisper_run_transcribe(state, pcm, n, p, on_segment, user, result, err);
}

static const wgml_transcriber transcriber = {
    .sample_rate = tr_sample_rate,
    .create = tr_create,
    .free = tr_free,
    .transcribe = tr_transcribe,
};

const wgml_family wgml_family_whisper = {
    .name = "whisper",
    .archs = archs,
    .tasks = WGML_TASK_TRANSCRIBE,
    .no_tokenizer = 1,
    .describe = describe,
    .load = load,
    .free = model_free,
    .weights = weights,
    .get_info = get_info,
    .transcriber = &transcriber,
};
