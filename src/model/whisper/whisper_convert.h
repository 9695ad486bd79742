/*
 * whisper_convert.h - the official Whisper checkpoint (`.pt`) to wgml's
 * Whisper GGUF (`wgml convert whisper`).
 *
 * The checkpoint is what openai/whisper's load_model reads: a torch.save zip
 * of {"dims": {10 ints}, "model_state_dict": {name: tensor}}
 * (../shared/whisper/README.md, "Checkpoint formats"). Its tensors are read
 * through the project's pth reader (format/pth.h); the dims dict, which the
 * pth reader skips (it keeps tensors only), is read from the pickle's first
 * bytes by whisper_pt_dims below.
 *
 * The GGUF written is the one format/ggml_whisper.c makes of the equivalent
 * whisper.cpp .bin (whisper_vocab.h): the same keys in the same order
 * (general.architecture, general.file_type, the ten whisper.* hyper-parameters,
 * whisper.tokens), the F32 tensor mel_filters first, then every tensor of the
 * state dict in the checkpoint's order under its own name, the convolution
 * weights taps-major {3 C_in, S}, their biases 1-D. Types, as `wgml synth`
 * writes Whisper (and whisper.cpp's converter and quantizer):
 *   - 1-D tensors, both positional embeddings and mel_filters: F32;
 *   - the two convolution weights: F16 (F32 with --type F32);
 *   - every other matrix (the token embedding too: it is also the output
 *     projection): the type asked for (F16 by default; F32, Q8_0, Q5_0, Q5_1,
 *     Q4_0, Q4_1), or F16 when its rows are not whole blocks of it.
 * Stored float16 values convert exactly (to F16 or F32); float32 and bfloat16
 * tensors are accepted too (rounded to the type, as whisper.cpp's converter
 * rounds them to float16).
 *
 * The checkpoint holds no vocabulary and no mel filters. The filters are
 * wgml_mel_filters_slaney's for the dims' n_mels (bit for bit the official
 * mel_filters.npz). The vocabulary comes from opt->vocab: a Whisper model
 * (whisper.cpp .bin or a Whisper GGUF: its whisper.tokens) or an official
 * tiktoken rank file (multilingual.tiktoken, gpt2.tiktoken from openai/whisper's
 * assets). Its size must be the dims' n_vocab layout's: 50257 BPE tokens for a
 * multilingual model (n_vocab 51865, 51866), 50256 for an English-only one
 * (51864).
 *
 * Every check names the file and the tensor: the dims (positive, within the
 * loader's limits, n_vocab one of Whisper's three sizes, widths that split
 * into the heads), every expected tensor present, no other, each with the
 * dims' shape and a float dtype.
 */
#ifndef WGML_MODEL_WHISPER_CONVERT_H
#define WGML_MODEL_WHISPER_CONVERT_H

#include "model/weights.h" /* wgml_load_progress_fn */
#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

/* The dims, in the .bin header's (and GGUF keys') order. */
enum {
    WHISPER_DIM_N_VOCAB,
    WHISPER_DIM_N_AUDIO_CTX,
    WHISPER_DIM_N_AUDIO_STATE,
    WHISPER_DIM_N_AUDIO_HEAD,
    WHISPER_DIM_N_AUDIO_LAYER,
    WHISPER_DIM_N_TEXT_CTX,
    WHISPER_DIM_N_TEXT_STATE,
    WHISPER_DIM_N_TEXT_HEAD,
    WHISPER_DIM_N_TEXT_LAYER,
    WHISPER_DIM_N_MELS,
    WHISPER_N_DIMS
};

typedef struct whisper_convert_options {
    uint32_t type;                  /* the matrices' type: WGML_F16 (what whisper.cpp's converter writes; the CLI's
                                       default), WGML_F32 (= 0), Q8_0, Q5_0, Q5_1, Q4_0 or Q4_1 */
    const char *vocab;              /* the vocabulary's file (required): .bin, Whisper GGUF or .tiktoken */
    wgml_load_progress_fn progress; /* optional: (user, bytes done, total); non-zero cancels */
    void *user;
} whisper_convert_options;

/* Converts the checkpoint at pt_path into a GGUF at `path` (written under a
 * temporary name, renamed into place when complete), or into memory when path
 * is NULL (*mem, *mem_size: free() it). */
wgml_status whisper_convert(const char *pt_path, const whisper_convert_options *opt, const char *path, void **mem,
                            size_t *mem_size, wgml_error *err);

/* ---- the two parsers of their own (fuzz/fuzz_tiktoken.c) ---- */

/* The dims dict at the start of the checkpoint's pickle (data.pkl), as
 * torch.save writes whisper's {"dims": {...}, ...}: PROTO, the root dict
 * (EMPTY_DICT, MARK), the key "dims", a dict of string keys and int values
 * (BININT1/2, BININT, LONG1; memo puts anywhere), SETITEMS. The ten keys
 * n_mels, n_vocab, n_audio_ctx, ... must each be there once, with an int in
 * [1, 2^31); others are ignored. out[WHISPER_DIM_*]. Anything else is
 * WGML_ERR_FORMAT naming `name` and the pickle offset. */
wgml_status whisper_pt_dims(const void *pickle, size_t size, const char *name, int32_t out[WHISPER_N_DIMS],
                            wgml_error *err);

/* A vocabulary: n tokens, token i's bytes at tok[i] (len[i] bytes, not
 * NUL-terminated), in rank order. */
typedef struct whisper_token_list {
    int64_t n;
    const char **tok;
    uint64_t *len;
    char *bytes; /* the decoded tokens, back to back (owned) */
} whisper_token_list;

/* An official tiktoken rank file: lines "BASE64 RANK" (standard base64 with
 * padding, or "=" for the empty token as in multilingual.tiktoken's last line
 * "= 50256"; one space; the rank in decimal), ending in
 * "\n" or "\r\n" (the last line's end may be missing), ranks 0, 1, ... in
 * order, no token twice, at least one line. Errors name `name` and the line. */
wgml_status whisper_tiktoken_parse(const void *data, size_t size, const char *name, whisper_token_list *out,
                                   wgml_error *err);
void whisper_token_list_free(whisper_token_list *l);

#endif
