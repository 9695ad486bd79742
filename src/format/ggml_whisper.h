/*
 * ggml_whisper.h - whisper.cpp's ggml model files (.bin), read as the GGUF a
 * Whisper model is inside wgml (model/whisper/whisper_vocab.h).
 *
 * Layout (little-endian, no alignment; ../shared/whisper/README.md,
 * "Checkpoint formats"):
 *   i32 magic 0x67676d6c ("ggml")
 *   i32 n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
 *       n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels
 *   i32 ftype           (ftype % 1000: ggml's file type; ftype / 1000: the
 *                        quantization version)
 *   i32 n_mel, i32 n_fft (201), f32 filters[n_mel][n_fft]
 *   i32 n_tokens, then per token i32 length + its raw bytes, in rank order
 *   until the end of the file, per tensor:
 *     i32 n_dims, i32 name length, i32 type (0 F32, 1 F16, 2 Q4_0, 3 Q4_1,
 *     6 Q5_0, 7 Q5_1, 8 Q8_0: wgml_dtype's ids), i32 ne[n_dims] (ne[0] the
 *     innermost, PyTorch's last dimension), the name, the data
 *
 * Every count, length, size and offset is checked against the bytes that
 * remain (without overflow) before it is used; a duplicate tensor name, an
 * unknown type or a bad shape is an error that names the file and the
 * tensor. Shapes are only checked for internal consistency (the family
 * loader checks them against the hyper-parameters).
 *
 * The conversion writes (through the GGUF writer): general.architecture
 * "whisper", general.file_type (ftype % 1000), the whisper.* keys of
 * whisper_vocab.h, whisper.tokens, the F32 tensor "mel_filters" {n_fft,
 * n_mel}, and every tensor under its name and type, except that
 * encoder.conv{1,2}.weight are permuted to taps-major [S][3][C_in] (ne {3
 * C_in, S}; F16 or F32 only) and their biases, stored [S][1], become 1-D {S}.
 */
#ifndef WGML_FORMAT_GGML_WHISPER_H
#define WGML_FORMAT_GGML_WHISPER_H

#include <stddef.h>

#include "format/gguf.h"
#include "wgml.h"

#define GGML_WHISPER_MAGIC 0x67676d6cu /* "lmgg" on disk: "ggml" as a little-endian i32 */

/* 1 when data (size bytes, any size) starts with the ggml magic. */
int ggml_whisper_detect(const void *data, size_t size);

/* Converts the .bin in data[0..size) and opens the result: *out owns the
 * GGUF's bytes (data may be freed once this returns). name labels messages
 * and becomes the gguf_file's name. */
wgml_status ggml_whisper_open_memory(const void *data, size_t size, const char *name, gguf_file **out,
                                     wgml_error *err);
/* The same for the file at path (messages name it). */
wgml_status ggml_whisper_open(const char *path, gguf_file **out, wgml_error *err);
/* Converts the .bin in data[0..size) to a GGUF file at out_path (written
 * under a temporary name, renamed into place when complete). */
wgml_status ggml_whisper_convert(const void *data, size_t size, const char *name, const char *out_path,
                                 wgml_error *err);

#endif
