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
 * feed it the official float32 asr, F0 and N). The steps run on a
 * kokoro_state (one per request); every intermediate a test compares stays
 * readable in it by name (kokoro_act) until its next call.
 */
#ifndef WGML_MODEL_KOKORO_MODEL_H
#define WGML_MODEL_KOKORO_MODEL_H

#include "model/kokoro/kokoro.h"
#include "text/g2p.h"

typedef struct kokoro_model kokoro_model;
/* A request's state (the family's speaker state, model/family.h): the
 * activations of its steps and what step 1 leaves for step 2, in one arena
 * of device memory reserved before each step and grown only between steps
 * (a second utterance no longer than the first makes no buffer; kokoro.c).
 * The model is read-only while states use it: two states may run from two
 * threads at once, their steps taking turns on the backend. */
typedef struct kokoro_state kokoro_state;

wgml_status kokoro_read_hparams(const gguf_file *f, kokoro_hparams *hp, wgml_error *err);
/* The phoneme vocabulary (kokoro.vocab): vocab[id] the symbol, "" unused. */
wgml_status kokoro_read_vocab(const gguf_file *f, int n_token, char vocab[][8], wgml_error *err);
wgml_status kokoro_model_load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p,
                              kokoro_model **out, wgml_error *err);
void kokoro_model_free(kokoro_model *m);
const kokoro_hparams *kokoro_model_hparams(const kokoro_model *m);
wgml_weights *kokoro_model_weights(kokoro_model *m);
const char *kokoro_model_symbol(const kokoro_model *m, int id); /* "" for an unused id */
const gguf_file *kokoro_model_file(const kokoro_model *m);

wgml_status kokoro_state_create(kokoro_model *m, kokoro_state **out, wgml_error *err);
void kokoro_state_free(kokoro_state *s);
kokoro_model *kokoro_state_model(const kokoro_state *s);

/* Whether the decoder's and vocoder's matrix products may round their
 * operands to bf16 (bf16_act: the CPU's bf16 pairs, about twice its f32
 * rate; other backends compute in f32). Off after loading; the prosody
 * path and conv_post are always f32. */
void kokoro_set_bf16(kokoro_state *s, int on);
/* 1 (the default): kokoro_speak cuts at sentences; 0: one pass where it fits (WGML_SPLIT_NONE). */
void kokoro_set_split_sentences(kokoro_state *s, int on);
int kokoro_split_sentences(const kokoro_state *s);

/* Step 1. ids: T token ids, pads included (0, phonemes..., 0); style: the
 * voice row (2*S floats: the decoder's S, then the predictor's); speed > 0.
 * dur: T frame counts (round half to even of the predicted durations, at
 * least 1). */
wgml_status kokoro_text(kokoro_state *s, const int32_t *ids, int T, const float *style, float speed, int32_t *dur,
                        wgml_error *err);
/* Step 2, after kokoro_text: the audio of those durations (600 samples per
 * frame at 24 kHz: n_audio = hop * upsampling * 2 * frames), noise from seed
 * (the kit stream). audio: the caller's buffer of kokoro_audio_len floats, or
 * NULL for the prosody alone (F0_pred and N_pred, kokoro_act; no readback). */
int64_t kokoro_audio_len(const kokoro_model *m, int64_t frames);
wgml_status kokoro_audio(kokoro_state *s, const int32_t *dur, int T, uint64_t seed, float *audio, wgml_error *err);
/* The decoder and generator alone: asr [F][D], f0 and n [2F], style the
 * decoder's S floats. */
wgml_status kokoro_decode(kokoro_state *s, const float *asr, const float *f0, const float *n, int F, const float *style,
                          uint64_t seed, float *audio, wgml_error *err);

/* The intermediate named `name` of the last call ("d_en", "F0_pred", ...:
 * kokoro.c's names), f32 [rows][cols] as the model holds it (time-major);
 * NULL when there is none. */
const wgml_tensor *kokoro_act(const kokoro_state *s, const char *name);
/* Every intermediate of the last call, in the order computed (0 .. count-1;
 * names repeat: "col", "rb.t"): for comparing two backends stage by stage. */
int kokoro_act_count(const kokoro_state *s);
const wgml_tensor *kokoro_act_at(const kokoro_state *s, int i);

/* ---- speaking (kokoro_speak.c) ---- */

/* The ids of the phonemes in ph[0..len) that the vocabulary has (others
 * dropped); returns their count (ids holds the first cap; ids may be NULL
 * with cap 0 to count). */
int kokoro_encode(const kokoro_model *m, const char *ph, size_t len, int32_t *ids, int cap);

/* A piece of a phoneme string: bytes [off, off + len). */
typedef struct kokoro_piece {
    size_t off, len;
} kokoro_piece;
/* Cuts a phoneme string into the pieces spoken one at a time: sentences
 * (sentences = 1; else only where a piece would pass max), none over max
 * phonemes (kokoro_speak.c says where it cuts). *out is wgml_malloc'ed;
 * pieces without a phoneme of the vocabulary are left out. */
wgml_status kokoro_split(const kokoro_model *m, const char *ph, int max, int sentences, kokoro_piece **out,
                         int *n_out, wgml_error *err);

/* The names of f's voices (kokoro.voices) as "a, b, c" into buf (cut with
 * ", ..." when it is too small; "" when none); returns how many there are. */
int kokoro_voice_names(const gguf_file *f, char *buf, size_t cap);

/* The style row (256 floats) of voice spec for an utterance of n_phonemes
 * code points: a voice of the model ("af_heart"), a voice file (.bin or
 * .pt), or a blend of them ("af_heart:0.6,am_adam:0.4"). */
wgml_status kokoro_style(const kokoro_model *m, const char *spec, int n_phonemes, float *style, wgml_error *err);

/* The words of the text the phonemes were made from and where they are
 * in them (wgml_g2p_phonemize_words), for word times. */
typedef struct kokoro_words {
    const char *text;
    const wgml_g2p_word *words;
    size_t n;
} kokoro_words;

/* Speaks a phoneme string piece by piece: on_audio gets each piece's audio
 * and word times as soon as it is made (non-zero stops); the piece i's noise
 * comes from seed + i. words: the text's words (a word then belongs to the
 * piece its first phoneme is in); NULL: the phoneme string's own words,
 * runs between spaces. */
wgml_status kokoro_speak(kokoro_state *s, const char *phonemes, const kokoro_words *words, const char *voice,
                         float speed, uint64_t seed, wgml_audio_fn on_audio, void *user, int64_t *n_samples,
                         int *n_chunks, wgml_error *err);

#endif
