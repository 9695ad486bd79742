/*
 * api_speech.c - the public API's speech (include/wgml.h: wgml_speak), for
 * models whose family has a speaker (model/family.h: Kokoro's today): text
 * through the G2P (text/g2p.h, espeak-ng as a separate program), then the
 * phonemes spoken piece by piece on a state of the request's own, each
 * piece handed to the caller as soon as it is made with the times of the
 * text's words in it. Two requests on one model may run from two threads.
 */
#include "api_internal.h"
#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"
#include "text/g2p.h"

#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

wgml_speak_params wgml_speak_default_params(void) {
    return (wgml_speak_params){.speed = 1.0f, .lang = "en-us", .seed = 0};
}

static const wgml_speaker *speaker(const wgml_model *m) { return m ? m->fam->speaker : NULL; }

const char *wgml_speech_voice(const wgml_model *model, int i) {
    static _Thread_local char name[64];
    return speaker(model) ? speaker(model)->voice(model->impl, i, name, sizeof name) : NULL;
}

typedef struct {
    wgml_audio_fn fn;
    void *user;
    double t0, first;
} relay;

static int on_chunk(void *user, const wgml_audio_chunk *c) {
    relay *r = user;
    if (r->first < 0) r->first = now_ms() - r->t0;
    return r->fn ? r->fn(r->user, c) : 0;
}

wgml_status wgml_speak_g2p(wgml_model *model, const char *input, const char *voice, const wgml_speak_params *params,
                           wgml_g2p *g2p, wgml_audio_fn on_audio, void *user, wgml_speak_result *result,
                           wgml_error *err) {
    if (result) memset(result, 0, sizeof *result);
    if (!model || !input) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_speak: NULL argument");
    const wgml_speaker *spk = speaker(model);
    if (!spk) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "a %s model does not speak (task speech)", model->fam->name);
    wgml_speak_params p = params ? *params : wgml_speak_default_params();
    if (!(p.speed >= 0.25f && p.speed <= 4.0f))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "speed %g is outside 0.25 .. 4", (double)p.speed);
    if (p.split != WGML_SPLIT_SENTENCES && p.split != WGML_SPLIT_NONE)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "split %d (sentences 0 or none 1)", (int)p.split);
    if (!voice || !*voice) voice = wgml_speech_voice(model, 0);
    if (!voice) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the model has no voices: name a voice file");
    char voice_copy[1024]; /* wgml_speech_voice's buffer is reused */
    if (strlen(voice) >= sizeof voice_copy) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "voice name too long");
    strcpy(voice_copy, voice);
    relay r = {on_audio, user, now_ms(), -1};
    char *phonemes = NULL;
    wgml_speaker_input in = {.phonemes = input};
    wgml_status st;
    if (p.phonemes) {
        if ((st = g2p_check_utf8(input, err))) return st;
    } else {
        wgml_g2p *g = g2p;
        if (!g && (st = wgml_g2p_open_espeak(p.espeak, &g, err))) return st;
        wgml_g2p_word *w = NULL;
        st = wgml_g2p_phonemize_words(g, p.lang ? p.lang : "en-us", input, &phonemes, &w, &in.n_words, err);
        in = (wgml_speaker_input){.phonemes = phonemes, .text = input, .words = w, .n_words = in.n_words};
        if (g != g2p) wgml_g2p_free(g);
        if (st) return st;
    }
    int64_t n_samples = 0;
    int n_chunks = 0;
    /* this request's state: the one waiting on the model, or a new one */
    void *state = wgml_model_take_state(model, WGML_STATE_SPEAKER);
    st = state ? WGML_OK : spk->create(model->impl, &state, err);
    if (!st) st = spk->speak(model->impl, state, &in, voice_copy, &p, on_chunk, &r, &n_samples, &n_chunks, err);
    wgml_model_give_state(model, WGML_STATE_SPEAKER, state, spk->free);
    wgml_free(phonemes);
    wgml_free((void *)in.words);
    if (result) {
        result->n_samples = n_samples;
        result->n_chunks = n_chunks;
        result->first_audio_ms = r.first;
        result->total_ms = now_ms() - r.t0;
    }
    return st;
}

wgml_status wgml_speak(wgml_model *model, const char *input, const char *voice, const wgml_speak_params *params,
                       wgml_audio_fn on_audio, void *user, wgml_speak_result *result, wgml_error *err) {
    return wgml_speak_g2p(model, input, voice, params, NULL, on_audio, user, result, err);
}
