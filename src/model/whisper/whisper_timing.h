/*
 * whisper_timing.h - word-level timestamps, as openai/whisper's timing.py
 * (v20250625: add_word_timestamps, find_alignment, dtw, median_filter,
 * merge_punctuations) and tokenizer.py (split_to_word_tokens) do, in plain
 * C over numbers: the model is not here. The model side computes, for a
 * window, one forward pass of the decoder over
 *
 *     tokens = sot_sequence + [<|notimestamps|>] + text_tokens + [<|endoftext|>]
 *
 * (whisper_alignment_tokens; no prompt, a fresh self-attention cache,
 * positions from 0, the window's encoder output) and hands over
 *
 *   - for each alignment head (whisper_alignment_heads: {text layer, head}),
 *     the cross-attention of every one of those rows over the first
 *     num_frames / 2 audio positions (num_frames = the window's segment_size
 *     in mel frames): the pre-softmax scores q.k / sqrt(head_dim) (what the
 *     official hook records, `qk`), or the softmax over all 1500 positions
 *     (see whisper_alignment.probabilities). whisper_cross_weights
 *     (whisper.h) gives the latter, out[n_heads][n][n_audio_ctx]: pass it
 *     with probabilities = 1, n_rows = n, row_stride = n_audio_ctx,
 *     n_frames = segment_size / 2;
 *   - text_token_probs[i] = softmax(logits[n_sot + i][0 .. EOT))[text_tokens[i]]
 *     of the same pass's unfiltered logits (whisper_text_token_prob).
 *
 * The steps (find_alignment): softmax of each head's rows over the kept
 * frames (x qk_scale), z-score of each head along the token axis (population
 * std: the official torch.std_mean(..., unbiased=False)), a median filter of
 * width 7 along the frames (reflect padding), the mean over heads, the rows
 * [n_sot, n_rows - 1) (the <|notimestamps|> row, which predicts the first
 * text token, through the last text token's row, which predicts EOT), DTW
 * of the negated matrix (dtw_cpu's ties), the first frame of each token on
 * the path / 50 as its time, words from split_to_word_tokens; then
 * (add_word_timestamps) the long-word truncation at sentence ends,
 * merge_punctuations, each segment's words, and the first/last word
 * adjustments against the segment's times.
 *
 * Times are double seconds computed with the official expressions;
 * intermediate weights are float32 as the official tensors (sums in double,
 * so a last bit may differ from torch's float32 reductions).
 */
#ifndef WGML_MODEL_WHISPER_TIMING_H
#define WGML_MODEL_WHISPER_TIMING_H

#include "model/whisper/whisper_tokenizer.h"
#include "model/whisper/whisper_vocab.h"
#include "wgml.h"

#include <stdint.h>

#define WHISPER_TOKENS_PER_SECOND 50 /* audio positions per second: 16000 / (160 * 2) */
#define WHISPER_MEDFILT_WIDTH     7
/* add_word_timestamps' defaults (UTF-8) */
#define WHISPER_PREPEND_PUNCTUATIONS "\"'\xE2\x80\x9C\xC2\xBF([{-"
#define WHISPER_APPEND_PUNCTUATIONS                                                                                    \
    "\"'.\xE3\x80\x82,\xEF\xBC\x8C!\xEF\xBC\x81?\xEF\xBC\x9F:\xEF\xBC\x9A\xE2\x80\x9D)]}\xE3\x80\x81"

/* ---- alignment heads ---- */

/* The cross-attention heads whose weights follow the audio: {text layer,
 * head} pairs in (layer, head) order. The official preset (whisper/__init__.py
 * _ALIGNMENT_HEADS, the same as whisper.cpp's g_aheads_*) of the size these
 * shapes are: tiny.en, tiny, base.en, base, small.en, small, medium.en,
 * medium, large-v2, large-v3, large-v3-turbo (an .en size by its vocabulary
 * of 51864, large-v3 and turbo by 128 mels and 51866). large-v1 and large-v2
 * have the same shapes: they get large-v2's heads (the checkpoint that was
 * "large" from Dec. 2022 until v3, and the more common file; name "large-v1"
 * in whisper_alignment_heads_preset for v1). Other shapes get the official
 * default of a model without a preset (model.py): every head of the second
 * half of the text layers, layers n_text_layer / 2 .. n_text_layer - 1.
 * Writes at most cap pairs; returns the number of heads (may exceed cap; -1
 * for shapes that are not a model: a non-positive layer or head count).
 * *preset (may be NULL) gets the preset's name, or NULL for the default. */
int whisper_alignment_heads(int n_mels, int n_vocab, int n_audio_layer, int n_text_layer, int n_text_state,
                            int n_text_head, int (*heads)[2], int cap, const char **preset);
/* The preset of an official name ("tiny.en", ..., "large-v1", "large-v2",
 * "large-v3", "large", "large-v3-turbo", "turbo"): as above; -1 for an
 * unknown name. */
int whisper_alignment_heads_preset(const char *name, int (*heads)[2], int cap);

/* ---- the model side's inputs ---- */

/* The alignment pass's tokens: sot[0 .. n_sot) (the tokenizer's
 * sot_sequence: [SOT, language, task], or [SOT] English-only), then
 * <|notimestamps|>, text[0 .. n_text) (ids < EOT), EOT. Writes at most cap
 * ids; returns n_sot + n_text + 2. */
int whisper_alignment_tokens(const whisper_specials *sp, const int32_t *sot, int n_sot, const int32_t *text, int n_text,
                             int32_t *out, int cap);
/* softmax(logits[0 .. eot))[token] as a float32 (the sum in double):
 * text_token_probs of the row that predicts token. */
float whisper_text_token_prob(const float *logits, int eot, int32_t token);

/* ---- the steps (exposed for tests) ---- */

/* One head's weights w[n_rows][n_frames], in place: each frame's column
 * becomes (w - mean) / std over the rows (population std, mean and std in
 * double rounded to float32, then the float32 expression). */
void whisper_zscore_tokens(float *w, int n_rows, int n_frames);
/* The official median_filter along one row x[0 .. n) into out[0 .. n)
 * (out != x): width odd, 1 .. 63 (another width copies the row); reflect padding of width / 2 (x[-k] = x[k],
 * x[n - 1 + k] = x[n - 1 - k]); the middle of the sorted window, NaN sorting
 * above everything (torch.sort). When n <= width / 2 the row is copied
 * unfiltered, as the official code returns x. */
void whisper_median_filter(const float *x, int n, int width, float *out);
/* dtw_cpu on the cost matrix x[n][m] (float32 costs accumulated as the
 * official float32 table, each step x + the chosen predecessor): the path
 * from (0, 0) to (n - 1, m - 1) as rows text_idx[k] and columns time_idx[k],
 * k < *len <= n + m. Ties: the diagonal only when strictly below both
 * others, then the row above when strictly below both, else the column to
 * the left (also when the diagonal and the row above tie below it). Off the
 * table's edge (non-finite costs, or m = 0) the path goes as the official
 * backtrace: along row 0 leftwards, down column 0 upwards, with index -1. */
wgml_status whisper_dtw(const float *x, int n, int m, int *text_idx, int *time_idx, int *len, wgml_error *err);

/* ---- words ---- */

typedef struct whisper_word {
    char *text;         /* UTF-8, NUL-terminated, as the official word: " Hello," (leading space kept) */
    int token_begin;    /* its tokens: text_tokens[token_begin .. token_begin + n_tokens) */
    int n_tokens;       /* (0 for a word emptied by merge_punctuations) */
    double start, end;  /* seconds */
    double probability; /* the mean of its tokens' probabilities (before punctuation was merged in) */
} whisper_word;

typedef struct whisper_words {
    whisper_word *w;
    int n, cap;
} whisper_words; /* zero-initialize; free with whisper_words_free */

void whisper_words_free(whisper_words *ws);

/* 1 for the languages split_to_word_tokens splits at code-point boundaries
 * (zh, ja, th, lo, my, yue); 0 for the others and NULL (English-only). */
int whisper_splits_on_unicode(const char *language);
/* split_to_word_tokens: tokens[0 .. n) (text tokens, usually + EOT) into
 * words, appended to out (times and probability 0). On unicode: a word ends
 * at each token after which the text decoded so far has no U+FFFD, or only
 * where the whole text has one too (tokens left over at the end are dropped,
 * as the official loop drops them); on spaces: those pieces joined unless a
 * piece starts with a special token (>= EOT) or a space, or strips to a
 * substring of string.punctuation. */
wgml_status whisper_split_words(const whisper_tokenizer *t, const char *language, const int32_t *tokens, int n,
                                whisper_words *out, wgml_error *err);
/* merge_punctuations: a word that starts with a space and strips to a
 * substring of `prepended` (NULL: the default) moves into the word after it;
 * a word that is a substring of `appended` moves into the word before it
 * unless that one ends with a space. The emptied words stay (text "",
 * n_tokens 0); the receiving word keeps its times and probability. */
wgml_status whisper_merge_punctuations(whisper_words *ws, const char *prepended, const char *appended, wgml_error *err);

/* ---- find_alignment and add_word_timestamps ---- */

typedef struct whisper_alignment {
    const whisper_tokenizer *tok;
    const char *language;       /* the window's language code: its words split on unicode or spaces; NULL: spaces */
    int n_sot;                  /* len(sot_sequence): 3 multilingual, 1 English-only */
    const int32_t *text_tokens; /* the window's text tokens (every segment's ids < EOT, in order) */
    int n_text;
    const float *text_token_probs; /* [n_text] */
    /* the alignment heads' cross-attention: weights[(h * n_rows + r) * row_stride + f], h < n_heads,
     * r < n_rows = n_sot + 1 + n_text + 1 (every row of the pass), f < n_frames = num_frames / 2 */
    const float *weights;
    int n_heads, n_rows, n_frames, row_stride;
    int probabilities; /* 0: pre-softmax scores (q.k / sqrt(head_dim)), softmaxed here over the n_frames as the
                          official code does; 1: softmax rows over all positions, renormalized here over the
                          n_frames kept (the same numbers up to rounding; a row whose kept mass underflows to 0
                          gives NaN) */
    float qk_scale;    /* find_alignment's qk_scale (scores only); 0: 1.0 */
    int medfilt_width; /* 0: 7 */
    const char *prepend_punctuations, *append_punctuations; /* NULL: the defaults */
} whisper_alignment;

/* find_alignment: the words of the text tokens (the final EOT word dropped),
 * start and end relative to the window (seconds), appended to out. No text
 * tokens, or a single word: none. */
wgml_status whisper_find_alignment(const whisper_alignment *a, whisper_words *out, wgml_error *err);

typedef struct whisper_word_segment {
    const int32_t *tokens; /* in: the segment's tokens (timestamps included: ids >= EOT do not count) */
    int n_tokens;
    double start, end;       /* in: the segment's times (seconds, time_offset included); out: as updated */
    int word_begin, n_words; /* out: its words in the list */
} whisper_word_segment;

/* add_word_timestamps after find_alignment: ws holds find_alignment's words
 * (window-relative times); the median and maximum word durations, the
 * truncation of long words at sentence ends, merge_punctuations, then each
 * segment in turn takes the words whose tokens it holds (a word that spans
 * two segments goes to the first), each word's times
 * round(time_offset + t, 2), and the first and last words and the
 * segment's times are adjusted as the official code does, with
 * last_speech_timestamp (the transcript's, before this window) updated per
 * segment inside. On return ws holds only the segments' words, in order
 * (segment s: ws->w[word_begin .. word_begin + n_words)). eot: the EOT id. */
wgml_status whisper_words_to_segments(whisper_words *ws, int eot, whisper_word_segment *segs, int n_segs,
                                      double time_offset, double last_speech_timestamp, const char *prepended,
                                      const char *appended, wgml_error *err);

/* add_word_timestamps: find_alignment then whisper_words_to_segments. The
 * segments' text tokens, concatenated, must be a->text_tokens. time_offset:
 * the window's (seek * 160 / 16000). out is emptied first. */
wgml_status whisper_add_word_timestamps(const whisper_alignment *a, whisper_word_segment *segs, int n_segs,
                                        double time_offset, double last_speech_timestamp, whisper_words *out,
                                        wgml_error *err);

#endif
