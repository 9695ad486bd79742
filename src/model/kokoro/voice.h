/*
 * voice.h - Kokoro voices (issue 21): a voice is a pack of 510 style rows of
 * 256 floats (the decoder's 128, then the predictor's 128), one per phoneme
 * count; an utterance of n phonemes takes row n - 1 (the official
 * pipeline's rule: n in code points of the phoneme string, characters outside
 * the vocabulary included; ../shared/kokoro/README.md, "Voice").
 *
 * Sources: kokoro-js's `.bin` (raw little-endian float32 [510][1][256]);
 * the official `.pt` and the GGUF's voice tensors come to the same rows.
 * A blend ("af_heart:0.6,am_adam:0.4") is the weighted mean of its voices'
 * packs, weights normalized to sum 1.
 */
#ifndef WGML_MODEL_KOKORO_VOICE_H
#define WGML_MODEL_KOKORO_VOICE_H

#include <stddef.h>

#include "wgml.h"

#define KOKORO_VOICE_ROWS 510
#define KOKORO_VOICE_DIM 256

typedef struct kokoro_voice {
    float rows[KOKORO_VOICE_ROWS][KOKORO_VOICE_DIM];
} kokoro_voice;

/* The rows of a `.bin` voice: exactly 510 x 256 little-endian floats (522,240
 * bytes); `what` names it in errors. Non-finite values are refused. */
wgml_status kokoro_voice_from_bin(const void *data, size_t size, const char *what, kokoro_voice *out, wgml_error *err);

/* A voice file: kokoro-js's .bin, or the official .pt (a torch-saved
 * tensor [510][1][256]), told apart by their bytes. */
wgml_status kokoro_voice_load(const char *path, kokoro_voice *out, wgml_error *err);

/* The style row for an utterance of n_phonemes (1 .. 510) phonemes. */
const float *kokoro_voice_row(const kokoro_voice *v, int n_phonemes);

/* A parsed blend: up to KOKORO_BLEND_MAX names with weights summing to 1. */
#define KOKORO_BLEND_MAX 8
typedef struct kokoro_blend {
    int n;
    char name[KOKORO_BLEND_MAX][64];
    float weight[KOKORO_BLEND_MAX];
} kokoro_blend;

/* "af_heart", or "af_heart:0.6,am_adam:0.4" (weights > 0; a name without
 * one weighs 1): names, and weights normalized to sum 1. Empty names, bad or
 * non-positive weights, too many voices or too long names are errors. */
wgml_status kokoro_blend_parse(const char *spec, kokoro_blend *out, wgml_error *err);

/* out = sum_i weight_i * voices[i] (the blend's voices, in its order). */
void kokoro_voice_mix(const kokoro_blend *b, const kokoro_voice *const *voices, kokoro_voice *out);

#endif
