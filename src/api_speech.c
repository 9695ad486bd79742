/*
 * api_speech.c - the public API's speech (include/wgml.h: wgml_speak), for
 * models of the kokoro family (model/kokoro/): text through the G2P
 * (text/g2p.h, espeak-ng as a separate program), then the phonemes spoken
 * piece by piece (kokoro_speak), each piece handed to the caller as soon as
 * it is made with the times of the text's words in it.
 */
#include "api_internal.h"
#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"
#include "model/kokoro/kokoro_model.h"
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

static kokoro_model *speaker(const wgml_model *m) { return m && m->fam == &wgml_family_kokoro ? m->impl : NULL; }

const char *wgml_speech_voice(const wgml_model *model, int i) {
    const gguf_value *a;
    if (!speaker(model) || i < 0 || gguf_get_arr(model->gguf, "kokoro.voices", GGUF_TYPE_STRING, &a, NULL) != 1 ||
        (uint64_t)i >= a->v.arr.n)
        return NULL;
    /* the names are NUL-free strings in the file: hand out a copy that ends */
    static _Thread_local char name[64];
    const gguf_str *s = &a->v.arr.items[i].v.str;
    size_t n = s->len < sizeof name - 1 ? (size_t)s->len : sizeof name - 1;
    memcpy(name, s->ptr, n);
    name[n] = '\0';
    return name;
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
    kokoro_model *k = speaker(model);
    if (!k) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "a %s model does not speak (task speech)", model->fam->name);
    wgml_speak_params p = params ? *params : wgml_speak_default_params();
    if (!(p.speed >= 0.25f && p.speed <= 4.0f))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "speed %g is outside 0.25 .. 4", (double)p.speed);
    if (!voice || !*voice) voice = wgml_speech_voice(model, 0);
    if (!voice) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the model has no voices: name a voice file");
    char voice_copy[1024]; /* wgml_speech_voice's buffer is reused */
    if (strlen(voice) >= sizeof voice_copy) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "voice name too long");
    strcpy(voice_copy, voice);
    relay r = {on_audio, user, now_ms(), -1};
    char *phonemes = NULL;
    kokoro_words words = {input, NULL, 0};
    wgml_status st;
    if (p.phonemes) {
        if ((st = g2p_check_utf8(input, err))) return st;
    } else {
        wgml_g2p *g = g2p;
        if (!g && (st = wgml_g2p_open_espeak(p.espeak, &g, err))) return st;
        wgml_g2p_word *w = NULL;
        st = wgml_g2p_phonemize_words(g, p.lang ? p.lang : "en-us", input, &phonemes, &w, &words.n, err);
        words.words = w;
        if (g != g2p) wgml_g2p_free(g);
        if (st) return st;
    }
    int64_t n_samples = 0;
    int n_chunks = 0;
    kokoro_set_bf16(k, !p.full_precision);
    st = kokoro_speak(k, phonemes ? phonemes : input, phonemes ? &words : NULL, voice_copy, p.speed, p.seed, on_chunk,
                      &r, &n_samples, &n_chunks, err);
    wgml_free(phonemes);
    wgml_free((void *)words.words);
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
