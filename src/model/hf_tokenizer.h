/*
 * hf_tokenizer.h - a Hugging Face folder's text tokenizer as GGUF metadata
 * (tokenizer.ggml.*, read by text/tokenizer.h).
 *
 * Files read from the folder:
 *   tokenizer.json          model.type "BPE" with end_of_word_suffix "</w>"
 *                           (CLIP: vocab, merges as "a b" or ["a", "b"]), or
 *                           "Unigram" (vocab [[piece, score], ...], unk_id,
 *                           byte_fallback); added_tokens (special: CONTROL,
 *                           else USER_DEFINED); post_processor (Roberta /
 *                           Bert / TemplateProcessing) for BOS and EOS;
 *   spiece.model            when there is no tokenizer.json: SentencePiece's
 *                           ModelProto (pieces with scores and types; the
 *                           trainer's model type and special ids; the
 *                           normalizer's add_dummy_prefix and
 *                           remove_extra_whitespaces);
 *   tokenizer_config.json,  bos/eos/unk/pad_token (a string or {"content": ..}),
 *   special_tokens_map.json add_bos_token, add_eos_token; what the first file
 *                           does not say.
 * Keys written: tokenizer.ggml.model ("gpt2" for CLIP's BPE, "t5" for a
 * unigram model, "llama" for a SentencePiece BPE spiece.model), .pre ("clip"
 * for CLIP's BPE; "siglip" for a unigram model of model_type siglip or
 * siglip_*), .tokens,
 * .token_type, .scores (unigram, SentencePiece), .merges (BPE),
 * .bos/.eos/.unknown/.padding_token_id (those known), .add_bos_token,
 * .add_eos_token, and for unigram .add_space_prefix and
 * .remove_extra_whitespaces.
 *
 * Defaults where the files say nothing: CLIP adds BOS and EOS; SigLIP
 * (and any unigram model) EOS only, without BOS.
 */
#ifndef WGML_MODEL_HF_TOKENIZER_H
#define WGML_MODEL_HF_TOKENIZER_H

#include "format/gguf.h"
#include "model/hf.h"

/* Writes the tokenizer of hf->dir into w (model_type: config.json's). A
 * folder without tokenizer.json and spiece.model writes nothing and gives
 * WGML_OK; so does a tokenizer.json of a kind not read here (e.g. a BPE
 * without "</w>"), since the folder's model may not need it. Malformed files
 * are errors naming the file and the field. Keys already in w are left. */
wgml_status wgml_hf_tokenizer_write(const wgml_hf_model *hf, const char *model_type, gguf_writer *w, wgml_error *err);

/* 1 when folder dir holds tokenizer.json or spiece.model. */
int wgml_hf_tokenizer_detect(const char *dir);

/* The tokenizer files of folder dir alone as a vocabulary-only GGUF in
 * memory (what `wgml tokenize -m DIR` reads); the model type comes from
 * config.json when there is one, else from tokenizer_config.json's
 * tokenizer_class (CLIPTokenizer: clip, SiglipTokenizer: siglip). Here a
 * kind not read is an error. */
wgml_status wgml_hf_tokenizer_open(const char *dir, gguf_file **out, wgml_error *err);

#endif
