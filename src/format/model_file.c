/*
 * model_file.c - a model file of any format as a GGUF (model_file.h).
 */
#include "format/model_file.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "format/ggml_whisper.h"
#include "model/hf.h"

wgml_model_format wgml_model_format_detect(const void *head, size_t n) {
    if (head && n >= 4 && memcmp(head, "GGUF", 4) == 0) return WGML_MODEL_FORMAT_GGUF;
    if (ggml_whisper_detect(head, n)) return WGML_MODEL_FORMAT_WHISPER_BIN;
    return WGML_MODEL_FORMAT_UNKNOWN;
}

const char *wgml_model_format_name(wgml_model_format fmt) {
    switch (fmt) {
    case WGML_MODEL_FORMAT_GGUF: return "GGUF";
    case WGML_MODEL_FORMAT_WHISPER_BIN: return "whisper.cpp ggml";
    case WGML_MODEL_FORMAT_HF: return "Hugging Face (safetensors)";
    case WGML_MODEL_FORMAT_UNKNOWN: break;
    }
    return "unknown";
}

/* The first bytes of path; an unreadable file is left to the reader's message. */
static wgml_model_format sniff(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return WGML_MODEL_FORMAT_UNKNOWN;
    unsigned char head[4];
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    return wgml_model_format_detect(head, n);
}

wgml_status wgml_model_file_open_format(const char *path, gguf_file **out, wgml_model_format *format,
                                        wgml_error *err) {
    *out = NULL;
#if !defined(__wasm__)
    /* a model by URL or Hugging Face name (net/hub.h): its copy in the cache, fetched first when needed */
    char *local = NULL;
    if (path && wgml_model_is_remote(path)) {
        if (!(local = wgml_malloc(4096))) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        wgml_status st = wgml_model_fetch(path, NULL, local, 4096, err);
        if (!st) st = wgml_model_file_open_format(local, out, format, err);
        wgml_free(local);
        return st;
    }
#endif
    if (wgml_hf_detect(path)) { /* a Hugging Face folder (or its safetensors): converted by its family */
        if (format) *format = WGML_MODEL_FORMAT_HF;
        return wgml_hf_open(path, out, err);
    }
    wgml_model_format fmt = sniff(path);
    if (format) *format = fmt;
    if (fmt == WGML_MODEL_FORMAT_WHISPER_BIN) return ggml_whisper_open(path, out, err);
    return gguf_open(path, out, err); /* a GGUF, or the GGUF reader's message for anything else */
}

wgml_status wgml_model_file_open(const char *path, gguf_file **out, wgml_error *err) {
    return wgml_model_file_open_format(path, out, NULL, err);
}

wgml_status wgml_model_file_open_memory(const void *data, size_t size, const char *name, gguf_file **out,
                                        wgml_error *err) {
    *out = NULL;
    if (wgml_model_format_detect(data, size) == WGML_MODEL_FORMAT_WHISPER_BIN)
        return ggml_whisper_open_memory(data, size, name, out, err);
    return gguf_open_memory(data, size, name, out, err);
}
