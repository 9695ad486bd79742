/*
 * synth_vocab.h - the tokenizer metadata of a synthetic model: copied from a
 * vocabulary GGUF and made exactly n_vocab tokens long, so that wgml and
 * llama.cpp (which both want the token list to match token_embd) load it.
 *
 *   same size  all tokenizer.* keys copied as they are (but those the writer
 *              already has: the model's own, e.g. an encoder's token_type_count).
 *   larger     tokens appended as "[PAD<i>]" of type UNUSED (5) with score
 *              -1000, as llama.cpp's converter pads vocabularies that are
 *              shorter than the embedding (Qwen2.5 itself does).
 *   smaller    the first n_vocab tokens are kept; special tokens named by a
 *              tokenizer.ggml.*_token_id key that would be cut off move into
 *              the last slots (replacing what was there) and their ids are
 *              rewritten; BPE merges whose left part, right part or result
 *              is no longer a token are dropped, so that every merge still
 *              produces a token.
 */
#ifndef WGML_TOOLS_SYNTH_VOCAB_H
#define WGML_TOOLS_SYNTH_VOCAB_H

#include "format/gguf.h"

#include <stdint.h>

wgml_status synth_vocab_copy(gguf_writer *w, const gguf_file *vocab, int64_t n_vocab,
                             void (*log)(void *user, const char *line), void *log_user, wgml_error *err);

/* Whisper's vocabulary, the key whisper.tokens (model/whisper/whisper_vocab.h):
 * n_text BPE tokens (50257; 50256 for an English-only model), raw bytes in
 * rank order.
 *   donor  a Whisper model (GGUF, or whisper.cpp .bin through
 *          format/model_file.h) whose whisper.tokens are copied; it must
 *          have n_text of them (a multilingual donor for a multilingual
 *          model, an English-only one for English-only).
 *   NULL   a synthesized list: the 256 single bytes 0..255 first (ids =
 *          byte values), then distinct made-up syllable strings (" ka",
 *          "lo", " mire", ...; every other one with a leading space), so
 *          that decoded ids give readable text that is not real words. */
wgml_status synth_whisper_tokens(gguf_writer *w, const char *donor, int n_text,
                                 void (*log)(void *user, const char *line), void *log_user, wgml_error *err);

/* Made-up text vocabularies in the shapes of the vision family's text towers
 * (src/tools/synth_text_vocab.c), written as the tokenizer.ggml.* keys that
 * the Hugging Face converter writes for real ones (model/hf_tokenizer.h).
 *
 * synth_vocab_clip: CLIP's byte-level BPE with "</w>" word ends, exactly
 *   n_vocab tokens (49408 for CLIP, at least 514): ids 0..255 the byte
 *   symbols in CLIP's order, 256..511 the same with "</w>", then the result
 *   of each merge in rank order (merges built on a built-in English word
 *   list and then on made-up syllable words, each word's symbols joined left
 *   to right), <|startoftext|> (BOS) at n_vocab - 2 and <|endoftext|> (EOS,
 *   also unknown and padding) at n_vocab - 1; add_bos and add_eos set.
 * synth_vocab_unigram: SigLIP's SentencePiece unigram vocabulary, exactly
 *   n_vocab pieces (32000 for SigLIP, at least 64): 0 <pad>, 1 </s> (EOS and
 *   padding, as Hugging Face's SiglipTokenizer pads with </s>), 2 <unk>, then
 *   "▁", words with and without "▁", and single characters, with scores
 *   (log-probabilities) strictly decreasing by id; pre "siglip", add_eos set
 *   and no BOS. */
wgml_status synth_vocab_clip(gguf_writer *w, int n_vocab, wgml_error *err);
wgml_status synth_vocab_unigram(gguf_writer *w, int n_vocab, wgml_error *err);

#endif
