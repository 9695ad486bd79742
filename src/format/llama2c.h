/*
 * llama2c.h - importing Karpathy's llama2.c checkpoints and tokenizers.
 *
 * Checkpoint formats (little-endian):
 *   legacy (v0): 7 x int32 header {dim, hidden_dim, n_layers, n_heads,
 *     n_kv_heads, vocab_size, seq_len}; vocab_size < 0 means the classifier
 *     is not shared with the embedding. Then fp32 tensors ([out][in]):
 *     tok_embeddings, attention_norm (all layers), wq, wk, wv, wo, ffn_norm,
 *     w1 (gate), w2 (down), w3 (up), final norm, two RoPE tables of
 *     seq_len * head_size/2 floats (skipped), then the classifier if unshared.
 *   v1: uint32 magic "ak42" (0x616b3432), int32 version 1, the same 7 int32
 *     (vocab_size positive), uint8 shared_classifier, zero padding to 256
 *     bytes, then attention_norm (all layers), ffn_norm, final norm,
 *     tok_embeddings, wq, wk, wv, wo, w1, w2, w3, classifier if unshared.
 * Tokenizer: int32 max_token_length, then per token {f32 score, int32 len,
 *   len bytes}; spaces stand for SentencePiece's U+2581 and BOS/EOS are
 *   written "\n<s>\n" and "\n</s>\n".
 */
#ifndef WGML_FORMAT_LLAMA2C_H
#define WGML_FORMAT_LLAMA2C_H

#include <stdint.h>

#include "wgml.h"

typedef int (*llama2c_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Writes a GGUF (architecture "llama", F32 tensors, SentencePiece vocabulary)
 * equivalent to the checkpoint + tokenizer. */
wgml_status llama2c_convert(const char *checkpoint, const char *tokenizer, const char *out_path,
                            llama2c_progress_fn progress, void *user, wgml_error *err);

#endif
