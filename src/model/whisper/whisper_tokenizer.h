/*
 * whisper_tokenizer.h - Whisper's text <-> token ids, as openai/whisper's
 * tokenizer.py (tiktoken over its rank files) does.
 *
 * The vocabulary is the GGUF's whisper.tokens: each BPE token's raw bytes in
 * rank order (id = rank), then the special tokens of whisper_vocab.h.
 *
 *   decode   ids -> text as Tokenizer.decode: timestamp ids (and any id past
 *            them) dropped, other special ids as their names ("<|en|>"),
 *            BPE ids as their bytes; the bytes concatenated and decoded as
 *            UTF-8 with each invalid sequence (maximal subpart) replaced by
 *            one U+FFFD, as Python's bytes.decode("utf-8", "replace").
 *            decode_with_timestamps keeps timestamps as "<|1.08|>".
 *   encode   text -> ids as tiktoken's encode_ordinary: GPT-2's
 *            pre-tokenizer expression cuts the text into pieces; a piece that
 *            is a token is that token, else its bytes merge pairwise, the
 *            pair whose concatenation has the lowest rank first (leftmost on
 *            ties). Special-token names in the text are plain text.
 *   non_speech_tokens, suppress_tokens_default: the official suppression
 *            lists (tokenizer.py non_speech_tokens; decoding.py's
 *            suppress_tokens "-1"), computed once at load.
 *
 * The tokenizer copies what it needs: it may outlive the gguf_file.
 */
#ifndef WGML_MODEL_WHISPER_TOKENIZER_H
#define WGML_MODEL_WHISPER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "model/whisper/whisper_vocab.h"
#include "wgml.h"

typedef struct whisper_tokenizer whisper_tokenizer;

/* From f's whisper.vocab_size and whisper.tokens. */
wgml_status whisper_tokenizer_load(const gguf_file *f, whisper_tokenizer **out, wgml_error *err);
/* From n_tokens raw tokens (tokens[i] of lens[i] bytes, rank order) for a
 * vocabulary of n_vocab ids: n_tokens must be its layout's n_text, and every
 * single byte must be a token (as in tiktoken's rank files). name labels
 * messages. */
wgml_status whisper_tokenizer_create(const char *const *tokens, const uint64_t *lens, int n_tokens, int n_vocab,
                                     const char *name, whisper_tokenizer **out, wgml_error *err);
void whisper_tokenizer_free(whisper_tokenizer *t);

const whisper_specials *whisper_tokenizer_specials(const whisper_tokenizer *t);

/* The bytes id stands for (a BPE token's raw bytes, a special token's name),
 * at most cap written; returns the length, or -1 for an id out of range. */
int whisper_token_bytes(const whisper_tokenizer *t, int32_t id, char *buf, int cap);

/* Decodes n ids to UTF-8 text: at most cap bytes written, NUL-terminated
 * when the text is shorter than cap. Returns the text's length (which may
 * exceed cap), or -1 for a negative id (decode) or an id past the vocabulary
 * (decode_with_timestamps), when out of memory, or for a text past 700 MB. */
int whisper_text_decode(const whisper_tokenizer *t, const int32_t *ids, int n, char *buf, int cap);
int whisper_text_decode_with_timestamps(const whisper_tokenizer *t, const int32_t *ids, int n, char *buf, int cap);

/* Encodes text[0..len) (invalid UTF-8 is kept byte for byte, never a
 * crash). Writes at most cap ids and returns the total count, which may
 * exceed cap; -1 with err filled on failure. */
int whisper_text_encode(const whisper_tokenizer *t, const char *text, size_t len, int32_t *out, int cap, wgml_error *err);

/* The official lists, ascending: *ids points into t; returns the count. */
int whisper_non_speech_tokens(const whisper_tokenizer *t, const int32_t **ids);
/* non_speech_tokens + translate, transcribe, sot, sot_prev, sot_lm, no_speech. */
int whisper_suppress_tokens_default(const whisper_tokenizer *t, const int32_t **ids);

#endif
