/*
 * whisper_decode.h - Whisper's decoding rules over logits, without a model:
 * what the official decode() and transcribe() do between forward passes
 * (openai/whisper v20250625: whisper/decoding.py, whisper/transcribe.py,
 * whisper/utils.py; ../shared/whisper/README.md, "Greedy decoding in the
 * cases"). The model gives logits rows; these functions decide tokens.
 *
 * whisper_decode.c: the logit filters (SuppressBlank, SuppressTokens,
 *   ApplyTimestampRules), greedy / sampled token selection with the
 *   official sum of log-probabilities, beam search (BeamSearchDecoder) and
 *   the final ranking (MaximumLikelihoodRanker), the initial tokens.
 * whisper_transcribe.c: 30 s windows and seeking, segments from a window's
 *   tokens, the temperature fallback and the no-speech skip, and the output
 *   formats (txt, srt, vtt, tsv).
 *
 * One decoding step of a window (decode()): the model's logits of the last
 * position -> whisper_filters_apply -> whisper_greedy_pick (or, with a
 * beam, whisper_log_softmax of every hypothesis' filtered row ->
 * whisper_beam_step, and the caches reordered as it says). The loop ends
 * after sample_len steps (default n_text_ctx / 2 = 224), when every
 * sequence has ended (EOT), or when a sequence (initial tokens included)
 * is longer than n_text_ctx.
 *
 * Times are double seconds, computed with the official expressions in the
 * same order (so 0.02 steps add up to the same doubles); log-probabilities
 * are float32 as the official tensors hold them.
 */
#ifndef WGML_MODEL_WHISPER_DECODE_H
#define WGML_MODEL_WHISPER_DECODE_H

#include "model/whisper/whisper_vocab.h"
#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

#define WHISPER_TOKEN_BLANK                 220 /* tokenizer.encode(" "), every vocabulary */
#define WHISPER_SAMPLE_RATE                 16000
#define WHISPER_HOP_LENGTH                  160
#define WHISPER_FRAMES_PER_SECOND           100  /* SAMPLE_RATE / HOP_LENGTH */
#define WHISPER_N_FRAMES                    3000 /* mel frames of a 30 s window */
#define WHISPER_INPUT_STRIDE                2    /* mel frames per encoder position (3000 / 1500) */
#define WHISPER_TIME_PRECISION              0.02 /* seconds per timestamp step: 2 * 160 / 16000 */
#define WHISPER_MAX_INITIAL_TIMESTAMP_INDEX 50   /* max_initial_timestamp 1.0 s / 0.02 */

/* ---- logit filters (decoding.py: SuppressBlank, SuppressTokens, ApplyTimestampRules) ---- */

typedef struct whisper_filter_params {
    const whisper_specials *sp;
    int sample_begin;                /* initial tokens: the SOT sequence (+ <|startofprev|> and prompt, + prefix) */
    int suppress_blank;              /* SuppressBlank: at the first sampled step, " " (220) and EOT */
    const int32_t *suppress;         /* SuppressTokens: these ids (the tokenizer's whisper_suppress_tokens_default, */
    int n_suppress;                  /*   or whisper_suppress_tokens for a user's list); NULL/0: off */
    int without_timestamps;          /* 1: no ApplyTimestampRules (the SOT sequence ends with <|notimestamps|>) */
    int max_initial_timestamp_index; /* the last timestamp allowed first (50 = 1.0 s); < 0: no limit */
} whisper_filter_params;

/* Checks the parameters: specials set, suppress ids in [0, n_vocab). */
wgml_status whisper_filters_check(const whisper_filter_params *p, wgml_error *err);

/* Applies the filters in the official order, in place, to logits[n_vocab]
 * (float32, the last position's row). tokens[0 .. n_tokens) are every token
 * of the sequence so far, the sample_begin initial ones included
 * (n_tokens >= sample_begin; n_tokens == sample_begin is the first step).
 * Masked ids become -INFINITY. The last timestamp rule ("the timestamps'
 * total probability beats every text token") is computed in float32 from
 * log_softmax of the masked row as the official code does (sums of exp
 * accumulated in double: a closer value than a float32 sum, equal to it up
 * to rounding). Ids in the suppress list outside the vocabulary are skipped
 * (whisper_filters_check refuses them). */
void whisper_filters_apply(const whisper_filter_params *p, const int32_t *tokens, int n_tokens, float *logits);

/* The default suppress list (DecodingOptions.suppress_tokens "-1"): extra
 * ids (a user's list without -1; may be NULL), non_speech ids (from the
 * tokenizer), then transcribe, translate, SOT, startofprev, startoflm and
 * nospeech, sorted, without duplicates. Writes at most cap ids to out and
 * returns the number of ids of the list (more than cap: out is too small). */
int whisper_suppress_tokens(const whisper_specials *sp, const int32_t *extra, int n_extra, const int32_t *non_speech,
                            int n_non_speech, int32_t *out, int cap);

/* max_initial_timestamp (seconds) as an index: Python's round(seconds / 0.02)
 * (half to even); 0 or less gives -1 (no limit: the official code treats 0.0
 * as None). */
int whisper_max_initial_timestamp_index(double seconds);

/* ---- initial tokens (DecodingTask._get_initial_tokens) ---- */

/* The SOT sequence: multilingual [SOT, language, transcribe|translate],
 * English-only [SOT]; + <|notimestamps|> when without_timestamps. lang_token
 * is an id (whisper_lang_token), ignored for English-only models. Writes up
 * to 4 ids; returns how many. */
int whisper_sot_sequence(const whisper_specials *sp, int lang_token, int translate, int without_timestamps,
                         int32_t out[4]);

/* The initial tokens: [<|startofprev|>, prompt[-(n_ctx/2 - 1):]] (when
 * n_prompt > 0) + sot + prefix, where the prefix keeps Python's
 * prefix[-(n_ctx/2 - sample_len):] (with the default sample_len n_ctx/2 that
 * slice is the whole prefix: [-0:]). Returns the count (= sample_begin), or
 * -1 when cap is too small. */
int whisper_initial_tokens(const whisper_specials *sp, const int32_t *sot, int n_sot, const int32_t *prompt,
                           int n_prompt, const int32_t *prefix, int n_prefix, int n_ctx, int sample_len, int32_t *out,
                           int cap);

/* ---- token selection (GreedyDecoder) ---- */

/* out[i] = log_softmax(x)[i] in float32: (x[i] - max) - log(sum exp(x - max))
 * (the sum in double). A row of -inf only gives NaN, as torch does. */
void whisper_log_softmax(const float *x, int n, float *out);
/* log_softmax(x)[id] alone, the same float32 value. */
float whisper_logprob_of(const float *x, int n, int id);
/* The first index of the largest value (torch.argmax; NaN never wins). */
int whisper_argmax(const float *x, int n);
/* softmax(x)[id] in float32 (no_speech_prob: x = the logits at the SOT
 * position of the first forward pass, unfiltered; id = <|nospeech|>). */
float whisper_softmax_at(const float *x, int n, int id);

/* One sequence's token choice at temperature 0 (argmax) or T > 0 (a draw
 * from softmax(logits / T): the project's sampler, src/text/sampler.c,
 * xoshiro256** seeded by seed; probabilities below e^-30 of the best are
 * never drawn, as there). */
typedef struct whisper_picker whisper_picker;
wgml_status whisper_picker_create(float temperature, uint64_t seed, int n_vocab, whisper_picker **out, wgml_error *err);
void whisper_picker_free(whisper_picker *p);
/* The next token after `last` (the sequence's last token) from the filtered
 * logits: EOT again when last is EOT (nothing added), else the pick, and
 * *sum_logprob += log_softmax(logits)[pick] in float32 (the filtered
 * logits, not divided by the temperature: GreedyDecoder.update). */
int32_t whisper_picker_next(whisper_picker *p, const float *logits, int32_t last, int eot, float *sum_logprob);

/* DecodingResult.avg_logprob: sum / (n_tokens + 1), n_tokens the sampled
 * tokens before EOT (the +1 counts the EOT). */
double whisper_avg_logprob(float sum_logprob, int n_tokens);

/* ---- ranking (MaximumLikelihoodRanker) ---- */

/* The index of the best candidate: the first largest sum_logprob[i] /
 * penalty, penalty = length[i] (length_penalty < 0: None, a plain length
 * norm) or ((5 + length) / 6) ^ length_penalty (Google NMT's alpha, 0..1).
 * length = the sampled tokens before EOT. (The official code raises
 * ZeroDivisionError for a length 0 without alpha; here it counts as 1.) */
int whisper_rank(const float *sum_logprob, const int *length, int n, double length_penalty);

/* ---- beam search (BeamSearchDecoder, one audio) ---- */

typedef struct whisper_beam whisper_beam;

/* beam_size in [1, 1024] hypotheses; patience <= 0 means 1.0 (the official
 * `patience or 1.0`); the search is complete once round(beam_size *
 * patience) (half to even, >= 1) sequences have finished. max_tokens: the
 * longest sequence kept, initial tokens included (n_text_ctx + 1 suffices
 * for the official loop). */
wgml_status whisper_beam_create(int beam_size, double patience, int eot, int max_tokens, whisper_beam **out,
                                wgml_error *err);
void whisper_beam_free(whisper_beam *b);
/* Starts a search: every hypothesis is `initial` (n_initial = sample_begin),
 * sum of log-probabilities 0, no finished sequence. */
wgml_status whisper_beam_start(whisper_beam *b, const int32_t *initial, int n_initial, wgml_error *err);
int whisper_beam_size(const whisper_beam *b);
/* Hypothesis j's tokens (initial tokens included; for the filters), their
 * count, and its sum of log-probabilities. */
const int32_t *whisper_beam_tokens(const whisper_beam *b, int j, int *n_tokens);
float whisper_beam_sum_logprob(const whisper_beam *b, int j);
/* One step: logprobs holds beam_size rows of n_vocab log-probabilities
 * (whisper_log_softmax of hypothesis j's filtered logits in row j). Each
 * hypothesis proposes its beam_size + 1 most likely tokens (equal values:
 * the lower id first); candidates (identical sequences counted once, as the
 * official dict does) are ranked by their float32 sums (ties: in proposal
 * order); those ending in EOT join the finished list (until it holds
 * round(beam_size * patience)), the best beam_size others become the new
 * hypotheses. source[j]: which old hypothesis the new hypothesis j extends
 * (reorder the caches: new cache j = old cache source[j]); token[j]: its
 * new token (the next step's input). *completed: enough have finished. */
wgml_status whisper_beam_step(whisper_beam *b, const float *logprobs, int n_vocab, int *source, int32_t *token,
                              int *completed, wgml_error *err);
/* Ends the search (BeamSearchDecoder.finalize): fewer than beam_size
 * finished sequences are topped up with the live hypotheses, best sum
 * first (equal sums: the later hypothesis first, as np.argsort reversed).
 * Then the candidates, in the official order. */
wgml_status whisper_beam_finish(whisper_beam *b, wgml_error *err);
int whisper_beam_n_candidates(const whisper_beam *b);
/* Candidate i's sampled tokens (after the initial ones, before EOT), their
 * count and its sum of log-probabilities. */
const int32_t *whisper_beam_candidate(const whisper_beam *b, int i, int *n_tokens, float *sum_logprob);
/* The candidate whisper_rank picks. */
int whisper_beam_best(const whisper_beam *b, double length_penalty);

/* ---- 30 s windows (transcribe.py's seek loop) ---- */

/* clip_timestamps (seconds: start, end, start, end, ...) as frame pairs:
 * round(t * 100) each (half to even); none gives [0, content_frames]; an
 * odd count ends with content_frames. Writes up to cap pairs into
 * clips[2 * cap]; returns the number of pairs (may exceed cap). */
int whisper_seek_clips(const double *timestamps, int n, int content_frames, int *clips, int cap);

typedef struct whisper_window {
    int seek;                /* first mel frame */
    int segment_size;        /* frames of audio in it: min(3000, content - seek, clip_end - seek) */
    double time_offset;      /* seek * 160 / 16000 */
    double window_end_time;  /* (seek + 3000) * 160 / 16000 */
    double segment_duration; /* segment_size * 160 / 16000 */
} whisper_window;

/* The next window to decode, as the official loop moves through the clips
 * (n_clips pairs): *clip_idx and *seek are the loop's state (start them at
 * 0 and clips[0]); returns 1 and fills w, or 0 when every clip is done.
 * After decoding, move *seek by whisper_segments' advance (or by
 * segment_size when the window is skipped). */
int whisper_next_window(const int *clips, int n_clips, int *clip_idx, int *seek, int content_frames, whisper_window *w);

/* ---- segments of a window (transcribe.py) ---- */

typedef struct whisper_segment {
    int begin, end;         /* the tokens [begin, end) of the window's list, timestamps included */
    double start, end_time; /* seconds: time_offset + (timestamp - ts_begin) * 0.02 */
} whisper_segment;

/* Splits a window's tokens (DecodingResult.tokens: sampled, before EOT)
 * into segments: after every pair of consecutive timestamps (and the tail
 * when the list ends with a single timestamp), each segment timed by its
 * first and last token; then *seek_advance = segment_size when the list
 * ends with a single timestamp, else the last pair's timestamp * 2 frames.
 * With no consecutive timestamps: one segment of every token from
 * time_offset, lasting the last timestamp (unless it is <|0.00|>) or else
 * segment_duration, and *seek_advance = segment_size. Writes up to cap
 * segments; returns their number (may exceed cap). A segment whose start
 * equals its end, or whose text strips to nothing, is then emptied by the
 * caller (its text and tokens cleared, as transcribe() does). */
int whisper_segments(const whisper_specials *sp, const int32_t *tokens, int n_tokens, const whisper_window *w,
                     whisper_segment *out, int cap, int *seek_advance);

/* ---- fallback and skipping (transcribe.py: decode_with_fallback) ---- */

/* A threshold NAN means None (that check is off). The compression ratio is
 * len(utf8) / len(zlib.compress(utf8)) of the window's text in the official
 * code; wgml has no zlib, so the caller gives it (NAN: unknown, that check
 * never asks for a fallback). */
typedef struct whisper_fallback_params {
    double compression_ratio_threshold; /* 2.4 */
    double logprob_threshold;           /* -1.0 */
    double no_speech_threshold;         /* 0.6 */
} whisper_fallback_params;

extern const whisper_fallback_params whisper_fallback_defaults;
/* The default temperature ladder 0.0, 0.2, ..., 1.0 (each tried in turn). */
#define WHISPER_N_TEMPERATURES 6
extern const float whisper_temperatures[WHISPER_N_TEMPERATURES];

/* 1: decode this window again at the next temperature (too repetitive, or
 * avg_logprob too low, unless it is silence: no_speech_prob above its
 * threshold with a low avg_logprob). */
int whisper_needs_fallback(const whisper_fallback_params *p, double compression_ratio, double avg_logprob,
                           double no_speech_prob);
/* 1: the final result of a window is silence: skip it (move by
 * segment_size, no segments): no_speech_prob above its threshold and
 * avg_logprob not above logprob_threshold. */
int whisper_should_skip(const whisper_fallback_params *p, double avg_logprob, double no_speech_prob);
/* 1: later windows get no previous text as their prompt
 * (prompt_reset_since = all tokens so far). */
int whisper_prompt_reset(int condition_on_previous_text, float temperature);

/* ---- output formats (utils.py: WriteTXT, WriteSRT, WriteVTT, WriteTSV) ---- */

/* A growing string: zero-initialize; NUL-terminated when len > 0; a
 * failed allocation sets oom and drops later writes. Free with
 * whisper_str_free. */
typedef struct whisper_str {
    char *data;
    size_t len, cap;
    int oom;
} whisper_str;
void whisper_str_free(whisper_str *s);
void whisper_str_put(whisper_str *s, const char *bytes, size_t n);

/* Python's str.strip() of the NUL-terminated UTF-8 s: the bytes [*b, *e)
 * without the leading and trailing (Unicode) whitespace. */
void whisper_strip(const char *s, size_t *b, size_t *e);

/* format_timestamp: round(seconds * 1000) ms (half to even), "[HH:]MM:SS" +
 * marker + "mmm", hours when always_hours or > 0 (two digits or more).
 * Writes a NUL-terminated string into out (32 bytes suffice) and returns
 * its length, or -1 for a negative or non-finite time (the official code
 * asserts). */
int whisper_format_timestamp(double seconds, int always_hours, char marker, char out[32]);

/* A segment to write: its times and its text (UTF-8, as decoded). */
typedef struct whisper_caption {
    double start, end;
    const char *text;
} whisper_caption;

typedef enum whisper_format {
    WHISPER_FORMAT_TXT, /* each text stripped, one per line */
    WHISPER_FORMAT_SRT, /* "1\n00:00:00,000 --> 00:00:02,500\ntext\n\n" ... */
    WHISPER_FORMAT_VTT, /* "WEBVTT\n\n" then "00:00.000 --> 00:02.500\ntext\n\n" ... */
    WHISPER_FORMAT_TSV, /* "start\tend\ttext\n", then integer milliseconds */
} whisper_format;

/* Appends the whole file of n captions to out, byte for byte as the
 * official writer (segment level: no word timings). Texts are stripped as
 * Python's str.strip() (Unicode whitespace); SRT and VTT replace "-->" by
 * "->", TSV tabs by spaces. Fails on a negative (SRT, VTT) or non-finite time, or
 * when memory runs out. */
wgml_status whisper_write_captions(whisper_str *out, whisper_format fmt, const whisper_caption *c, int n,
                                   wgml_error *err);

#endif
