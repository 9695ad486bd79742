/*
 * whisper_run.h - a transcription request on a Whisper model (whisper_run.c):
 * the family's transcriber state and the official transcribe() loop.
 */
#ifndef WGML_MODEL_WHISPER_RUN_H
#define WGML_MODEL_WHISPER_RUN_H

#include "model/whisper/whisper.h"
#include "wgml.h"

#define WHISPER_MAX_TEXT_CTX 448 /* the decoder's positions in every Whisper (whisper.text.context_length) */
#define WHISPER_MAX_BEAM 16

typedef struct whisper_run whisper_run;

/* What decoding one window gives (the official DecodingResult). */
typedef struct whisper_window_result {
    int32_t tokens[WHISPER_MAX_TEXT_CTX]; /* sampled, before EOT */
    int n_tokens;
    float sum_logprob;
    double avg_logprob, no_speech_prob, compression_ratio; /* compression_ratio: NAN (not computed) */
    float temperature; /* of the try that was kept */
} whisper_window_result;

/* kv: how its states keep a window's cross keys and values (whisper_kv_f16;
 * a transcription sets it again from its parameters). */
wgml_status whisper_run_create(whisper_model *m, wgml_kv_type kv, whisper_run **out, wgml_error *err);
void whisper_run_free(whisper_run *r);

/* Transcribes pcm[0..n) (16 kHz mono) as wgml_transcribe does (include/wgml.h). */
wgml_status whisper_run_transcribe(whisper_run *r, const float *pcm, size_t n, const wgml_transcribe_params *p,
                                   wgml_segment_fn on_segment, void *user, wgml_transcribe_result *result,
                                   wgml_error *err);

/* len(text) / len(zlib.compress(text)) (transcribe()'s repetition check);
 * NAN in a build without zlib. */
double whisper_compression_ratio(const char *text, size_t len);

/* Decodes one window: mel [n_mels][3000] (a window as transcribe() cuts
 * it; NULL: the window of the last call again, not encoded again), with p's decoding options (temperatures, beam, timestamps, the
 * fallback checks), the language's token (whisper_lang_token; -1 for an
 * English-only model) and the prompt's tokens. For tests and benchmarks. */
wgml_status whisper_run_window(whisper_run *r, const float *mel, const wgml_transcribe_params *p, int lang_token,
                               const int32_t *prompt, int n_prompt, whisper_window_result *res, wgml_error *err);

#endif
