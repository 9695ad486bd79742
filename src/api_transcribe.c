/*
 * api_transcribe.c - the public API's speech recognition (include/wgml.h:
 * wgml_transcribe), for models whose family has a transcriber
 * (model/family.h: Whisper's): the audio resampled to the model's rate
 * (audio/resample.h), then transcribed on a state of the request's own.
 * Two requests on one model may run from two threads.
 */
#include "api_internal.h"
#include "api_model.h"
#include "audio/resample.h"
#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

wgml_transcribe_params wgml_transcribe_default_params(void) {
    return (wgml_transcribe_params){.beam_size = 0,
                                    .patience = 1.0f,
                                    .temperature = 0.0f,
                                    .temperature_increment = 0.2f,
                                    .compression_ratio_threshold = 2.4f,
                                    .logprob_threshold = -1.0f,
                                    .no_speech_threshold = 0.6f,
                                    .condition_on_previous_text = 1};
}

/* The longest audio one call takes: 24 hours (the official code has no
 * limit; this one keeps every count far from overflow). */
#define MAX_SECONDS (24.0 * 3600.0)

static wgml_status check_params(const wgml_transcribe_params *p, wgml_error *err) {
    if (p->beam_size < 0 || p->beam_size > 16)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam size %d is outside 0 .. 16", p->beam_size);
    if (!(p->patience > 0.0f && p->patience <= 16.0f))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "patience %g is outside (0, 16]", (double)p->patience);
    if (!(p->temperature >= 0.0f && p->temperature <= 2.0f))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "temperature %g is outside 0 .. 2", (double)p->temperature);
    if (!(p->temperature_increment >= 0.0f && p->temperature_increment <= 1.0f))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "temperature increment %g is outside 0 .. 1",
                         (double)p->temperature_increment);
    if (!isfinite(p->compression_ratio_threshold) || !isfinite(p->logprob_threshold) ||
        !isfinite(p->no_speech_threshold) || p->no_speech_threshold < 0 || p->no_speech_threshold > 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "a fallback threshold is not a finite value in range");
    if (p->max_tokens < 0 || p->max_tokens > 448)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "max tokens %d is outside 0 .. 448", p->max_tokens);
    if (p->language && strlen(p->language) > 16)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "language '%.16s...' is too long", p->language);
    return WGML_OK;
}

wgml_status wgml_transcribe(wgml_model *model, const float *pcm, size_t n, int sample_rate,
                            const wgml_transcribe_params *params, wgml_segment_fn on_segment, void *user,
                            wgml_transcribe_result *result, wgml_error *err) {
    const double t0 = now_ms();
    if (result) memset(result, 0, sizeof *result);
    if (!model || (!pcm && n)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_transcribe: NULL argument");
    const wgml_transcriber *tr = model->fam->transcriber;
    if (!tr)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "a %s model does not transcribe (task transcribe)",
                         model->fam->name);
    wgml_transcribe_params p = params ? *params : wgml_transcribe_default_params();
    wgml_status st = check_params(&p, err);
    if (st) return st;
    if (sample_rate < 1 || sample_rate > WGML_RESAMPLE_MAX_RATE)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "sample rate %d Hz is outside 1 .. %d", sample_rate,
                         WGML_RESAMPLE_MAX_RATE);
    if ((double)n / sample_rate > MAX_SECONDS)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%.0f s of audio is more than the %.0f s one call takes",
                         (double)n / sample_rate, MAX_SECONDS);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i]))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "audio sample %zu is not a finite number", i);
    const int rate = tr->sample_rate(model->impl);
    float *res = NULL;
    const float *audio = pcm;
    size_t n_audio = n;
    if (sample_rate != rate && n) {
        if ((st = wgml_resample(pcm, n, sample_rate, rate, &res, &n_audio, err))) return st;
        audio = res;
    }
    /* this request's state: the one waiting on the model, or a new one */
    void *state = wgml_model_take_state(model, WGML_STATE_TRANSCRIBER);
    st = state ? WGML_OK : tr->create(model->impl, &state, err);
    if (!st) st = tr->transcribe(model->impl, state, audio, n_audio, &p, on_segment, user, result, err);
    if (state) wgml_model_give_state(model, WGML_STATE_TRANSCRIBER, state, tr->free);
    wgml_free(res);
    if (result) {
        result->duration = (double)n / sample_rate;
        result->total_ms = now_ms() - t0;
    }
    return st;
}
