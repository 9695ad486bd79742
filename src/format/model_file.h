/*
 * model_file.h - opening a model file of any format wgml reads, as a GGUF.
 *
 * Every place that opens a model by path or from bytes goes through here
 * (api.c, `wgml info`, `bench`, `template`, `tokenize`): a GGUF is opened as
 * it is (gguf_open, memory-mapped); a whisper.cpp ggml .bin (its magic
 * 0x67676d6c) is converted to the GGUF of model/whisper/whisper_vocab.h in
 * memory first (format/ggml_whisper.h); a Hugging Face folder (config.json
 * with model.safetensors, or shards), given as the folder or one of its
 * safetensors files, by its family's converter (model/hf.h). Anything else is a GGUF error (its
 * message says the magic was not recognised).
 */
#ifndef WGML_FORMAT_MODEL_FILE_H
#define WGML_FORMAT_MODEL_FILE_H

#include <stddef.h>

#include "format/gguf.h"
#include "wgml.h"

typedef enum wgml_model_format {
    WGML_MODEL_FORMAT_UNKNOWN = 0,
    WGML_MODEL_FORMAT_GGUF,        /* "GGUF" */
    WGML_MODEL_FORMAT_WHISPER_BIN, /* whisper.cpp's ggml .bin */
    WGML_MODEL_FORMAT_HF,          /* a Hugging Face folder: config.json + safetensors (model/hf.h) */
} wgml_model_format;

/* The format that bytes starting with head[0..n) are in (n may be < 4). */
wgml_model_format wgml_model_format_detect(const void *head, size_t n);
/* "GGUF", "whisper.cpp ggml", "unknown". */
const char *wgml_model_format_name(wgml_model_format fmt);

/* Opens the model file at path; messages name it. */
wgml_status wgml_model_file_open(const char *path, gguf_file **out, wgml_error *err);
/* The same, and *format (may be NULL) says what the file was. */
wgml_status wgml_model_file_open_format(const char *path, gguf_file **out, wgml_model_format *format,
                                        wgml_error *err);
/* From bytes: a GGUF is read in place (data must outlive *out, as with
 * gguf_open_memory); a .bin is converted and *out owns the result (data may
 * go once this returns). name labels messages (NULL: "<memory>"). */
wgml_status wgml_model_file_open_memory(const void *data, size_t size, const char *name, gguf_file **out,
                                        wgml_error *err);

#endif
