/*
 * tokenizer.h - text <-> token ids, driven by a GGUF file's tokenizer metadata.
 *
 * Supported `tokenizer.ggml.model` values:
 *   llama  SentencePiece: score-ordered merges of adjacent pieces, byte fallback
 *          (<0xXX> tokens) for text the vocabulary lacks, "▁" for spaces.
 *   gpt2   byte-level BPE with ranked merges (tokenizer.ggml.merges) after the
 *          pre-tokenizer that `tokenizer.ggml.pre` names splits the text.
 *   bert   WordPiece (lower-casing, accent stripping, ## continuations).
 *   t5     SentencePiece's unigram model: the segmentation with the highest
 *          sum of piece log-probabilities (tokenizer.ggml.scores), "▁" for
 *          spaces; tokenizer.ggml.pre = "siglip" adds SigLIP's text
 *          canonicalization (lower-case, no ASCII punctuation) in front.
 * gpt2 with tokenizer.ggml.pre = "clip" is CLIP's BPE: lower-cased words
 * whose last symbol carries "</w>" (unigram.c and bpe.c say more).
 * Special/control tokens written literally in the text (e.g. "<|im_start|>")
 * are recognised as single tokens.
 *
 * The tokenizer copies what it needs from the file: it does not borrow the
 * GGUF mapping and may outlive it.
 */
#ifndef WGML_TEXT_TOKENIZER_H
#define WGML_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "wgml.h"

typedef struct wgml_tokenizer wgml_tokenizer;

typedef enum wgml_vocab_kind {
    WGML_VOCAB_SPM = 1,
    WGML_VOCAB_BPE,
    WGML_VOCAB_WPM,
    WGML_VOCAB_UGM, /* SentencePiece unigram ("t5") */
} wgml_vocab_kind;

/* Reads tokenizer.ggml.* from f. Unknown model or pre-tokenizer names are
 * errors (WGML_ERR_UNSUPPORTED) that name the value. */
wgml_status wgml_tokenizer_load(const gguf_file *f, wgml_tokenizer **out, wgml_error *err);
void wgml_tokenizer_free(wgml_tokenizer *tok);

wgml_vocab_kind wgml_tokenizer_kind(const wgml_tokenizer *tok);
int wgml_tokenizer_n_vocab(const wgml_tokenizer *tok);
int32_t wgml_tokenizer_bos(const wgml_tokenizer *tok); /* -1 if none */
int32_t wgml_tokenizer_eos(const wgml_tokenizer *tok); /* -1 if none */
/* Whether the vocabulary asks for BOS in front of a prompt (tokenizer.ggml.add_bos_token,
 * defaulting as llama.cpp does per model type). */
int wgml_tokenizer_wants_bos(const wgml_tokenizer *tok);
/* End-of-generation tokens: EOS, EOT and the like. */
int wgml_tokenizer_is_eog(const wgml_tokenizer *tok, int32_t id);

/* Encodes UTF-8 text (invalid bytes are handled, never a crash). add_bos
 * prepends BOS (if the vocabulary has one); for WordPiece it adds [CLS]/[SEP];
 * when the vocabulary sets tokenizer.ggml.add_eos_token it also appends EOS
 * (CLIP: <|startoftext|> .. <|endoftext|>; SigLIP, without a BOS: .. </s>).
 * Writes at most cap ids and returns the total count, which may exceed cap;
 * returns -1 with err filled on failure. */
int wgml_tokenizer_encode(const wgml_tokenizer *tok, const char *text, size_t len, int add_bos, int32_t *out,
                          int cap, wgml_error *err);

/* The bytes a token stands for when decoding ("▁" becomes a space, <0x0A> a
 * newline byte, byte-level BPE symbols their bytes). Control tokens (BOS/EOS)
 * render as nothing. Returns the length (may exceed cap; only cap written), or
 * -1 for an id out of range. */
int wgml_tokenizer_piece(const wgml_tokenizer *tok, int32_t id, char *buf, int cap);

/* The token's text as stored in the vocabulary (e.g. "▁Once"), or NULL. */
const char *wgml_tokenizer_token_text(const wgml_tokenizer *tok, int32_t id);

/* Decodes ids to text, as detokenizing a whole sequence does (SentencePiece
 * drops the leading space of the first piece when it was added by the dummy
 * prefix; WordPiece the space before the first word). Returns the length (may
 * exceed cap; only cap written), or -1 when an id is out of range. */
int wgml_tokenizer_decode(const wgml_tokenizer *tok, const int32_t *ids, int n, char *buf, int cap);

#endif
