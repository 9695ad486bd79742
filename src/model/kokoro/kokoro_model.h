/*
 * kokoro_model.h - a loaded Kokoro model and its forward pass (kokoro.c),
 * in two steps, each one submit of backend ops:
 *   1. kokoro_text: phoneme ids and the voice's style row -> durations (the
 *      step's one readback: the duration logits), keeping on the device the
 *      prosody features d and the text features t_en;
 *   2. kokoro_audio: the frames (each token's rows repeated by its duration:
 *      a gather, no alignment matrix) -> F0 and energy, the decoder, the
 *      iSTFTNet generator -> audio (the readback).
 * kokoro_decode runs the decoder alone on given inputs (the reference tests
 * feed it the official float32 asr, F0 and N). Every intermediate a test
 * compares stays readable by name (kokoro_act) until the next call.
 */
#ifndef WGML_MODEL_KOKORO_MODEL_H
#define WGML_MODEL_KOKORO_MODEL_H

#include "model/kokoro/kokoro.h"

typedef struct kokoro_model kokoro_model;

wgml_status kokoro_read_hparams(const gguf_file *f, kokoro_hparams *hp, wgml_error *err);
wgml_status kokoro_model_load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p,
                              kokoro_model **out, wgml_error *err);
void kokoro_model_free(kokoro_model *m);
const kokoro_hparams *kokoro_model_hparams(const kokoro_model *m);
wgml_weights *kokoro_model_weights(kokoro_model *m);

/* Step 1. ids: T token ids, pads included (0, phonemes..., 0); style: the
 * voice row (2*S floats: the decoder's S, then the predictor's); speed > 0.
 * dur: T frame counts (round half to even of the predicted durations, at
 * least 1). */
wgml_status kokoro_text(kokoro_model *m, const int32_t *ids, int T, const float *style, float speed, int32_t *dur,
                        wgml_error *err);
/* Step 2, after kokoro_text: the audio of those durations (600 samples per
 * frame at 24 kHz: n_audio = hop * upsampling * 2 * frames), noise from seed
 * (the kit stream). audio: the caller's buffer of kokoro_audio_len floats. */
int64_t kokoro_audio_len(const kokoro_model *m, int64_t frames);
wgml_status kokoro_audio(kokoro_model *m, const int32_t *dur, int T, uint64_t seed, float *audio, wgml_error *err);
/* The decoder and generator alone: asr [F][D], f0 and n [2F], style the
 * decoder's S floats. */
wgml_status kokoro_decode(kokoro_model *m, const float *asr, const float *f0, const float *n, int F, const float *style,
                          uint64_t seed, float *audio, wgml_error *err);

/* The intermediate named `name` of the last call ("d_en", "F0_pred", ...:
 * kokoro.c's names), f32 [rows][cols] as the model holds it (time-major);
 * NULL when there is none. */
const wgml_tensor *kokoro_act(const kokoro_model *m, const char *name);

#endif
