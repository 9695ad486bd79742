/*
 * fuzz_whisper_bin.c - libFuzzer target: whisper.cpp's ggml .bin reader
 * (format/ggml_whisper.h) and the GGUF it writes.
 *
 * The input is converted from memory. A rejected input must come back as an
 * error naming the file. An accepted one is checked against a walk of the
 * input of our own: the hyper-parameters and tokens are the whisper.* keys,
 * mel_filters comes first with the filter bytes, and every tensor follows in
 * file order with its bytes (the convolutions permuted taps-major, their
 * biases made 1-D). The vocabulary then goes to the Whisper tokenizer (which
 * must refuse it cleanly unless it is a whole one). A crash, a sanitizer
 * report or a check that fails is a finding.
 */
#include "format/ggml_whisper.h"
#include "model/whisper/whisper_tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_whisper_bin: check failed: %s (line %d)\n", #c, __LINE__);                           \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static int32_t rd(const uint8_t *data, size_t size, size_t *o) {
    CHECK(*o <= size && size - *o >= 4); /* the reader accepted the file: it holds every field */
    int32_t v;
    memcpy(&v, data + *o, 4);
    *o += 4;
    return v;
}

static size_t row_bytes(int32_t type, int64_t ne0) {
    static const int block_bytes[9] = {4, 2, 18, 20, 0, 0, 22, 24, 34};
    CHECK(type >= 0 && type <= 8 && block_bytes[type]);
    return type <= 1 ? (size_t)ne0 * (size_t)block_bytes[type] : (size_t)ne0 / 32 * (size_t)block_bytes[type];
}

static int64_t key(const gguf_file *f, const char *k) {
    int64_t v = -1;
    wgml_error err;
    CHECK(gguf_get_int(f, k, 0, INT32_MAX, &v, &err) == 1);
    return v;
}

static void check_against_input(const gguf_file *f, const uint8_t *data, size_t size) {
    static const char *const keys[10] = {
        "whisper.vocab_size",          "whisper.audio.context_length", "whisper.audio.embedding_length",
        "whisper.audio.head_count",    "whisper.audio.block_count",    "whisper.text.context_length",
        "whisper.text.embedding_length", "whisper.text.head_count",    "whisper.text.block_count",
        "whisper.n_mels"};
    size_t o = 4;
    for (int i = 0; i < 10; i++)
        CHECK(key(f, keys[i]) == rd(data, size, &o));
    CHECK(key(f, "general.file_type") == rd(data, size, &o) % 1000);
    int32_t n_mel = rd(data, size, &o), n_fft = rd(data, size, &o);
    const gguf_tensor *mf = gguf_tensor_at(f, 0);
    CHECK(mf && !strcmp(mf->name, "mel_filters") && mf->type == 0 && mf->n_dims == 2);
    CHECK(mf->ne[0] == n_fft && mf->ne[1] == n_mel && mf->size == (size_t)n_mel * (size_t)n_fft * 4);
    CHECK(size - o >= mf->size && memcmp(mf->data, data + o, mf->size) == 0);
    o += mf->size;
    int32_t n_tok = rd(data, size, &o);
    const gguf_value *toks;
    wgml_error err;
    CHECK(gguf_get_arr(f, "whisper.tokens", GGUF_TYPE_STRING, &toks, &err) == 1 && toks->v.arr.n == (uint64_t)n_tok);
    for (int32_t i = 0; i < n_tok; i++) {
        int32_t len = rd(data, size, &o);
        CHECK(len >= 0 && (size_t)len <= size - o && toks->v.arr.items[i].v.str.len == (uint64_t)len);
        CHECK(len == 0 || memcmp(toks->v.arr.items[i].v.str.ptr, data + o, (size_t)len) == 0);
        o += (size_t)len;
    }
    int64_t k = 1;
    while (o < size) {
        const gguf_tensor *t = gguf_tensor_at(f, k++);
        CHECK(t != NULL);
        int32_t n_dims = rd(data, size, &o), len = rd(data, size, &o), type = rd(data, size, &o);
        CHECK(n_dims >= 1 && n_dims <= 4 && (uint32_t)type == t->type);
        int64_t ne[4] = {1, 1, 1, 1};
        size_t n_el = 1;
        for (int d = 0; d < n_dims; d++)
            ne[d] = rd(data, size, &o), n_el *= (size_t)ne[d];
        CHECK(len > 0 && (size_t)len <= size - o && strlen(t->name) == (size_t)len);
        CHECK(memcmp(t->name, data + o, (size_t)len) == 0);
        o += (size_t)len;
        size_t bytes = row_bytes(type, ne[0]) * (n_el / (size_t)ne[0]);
        CHECK(bytes == t->size && bytes <= size - o);
        const uint8_t *src = data + o, *dst = t->data;
        o += bytes;
        int conv_w = !strcmp(t->name, "encoder.conv1.weight") || !strcmp(t->name, "encoder.conv2.weight");
        int conv_b = !strcmp(t->name, "encoder.conv1.bias") || !strcmp(t->name, "encoder.conv2.bias");
        if (conv_w) {
            CHECK(type <= 1 && n_dims == 3 && ne[0] == 3 && t->n_dims == 2 && t->ne[0] == 3 * ne[1] &&
                  t->ne[1] == ne[2]);
            const size_t es = type == 0 ? 4 : 2;
            for (int64_t r = 0; r < ne[2]; r++)
                for (int64_t c = 0; c < ne[1]; c++)
                    for (int64_t j = 0; j < 3; j++)
                        CHECK(!memcmp(dst + (size_t)((r * 3 + j) * ne[1] + c) * es,
                                      src + (size_t)((r * ne[1] + c) * 3 + j) * es, es));
            continue;
        }
        if (conv_b && n_dims == 2)
            CHECK(ne[0] == 1 && t->n_dims == 1 && t->ne[0] == ne[1]);
        else
            CHECK(t->n_dims == n_dims && !memcmp(t->ne, ne, sizeof ne));
        CHECK(memcmp(dst, src, bytes) == 0);
    }
    CHECK(k == gguf_n_tensors(f) && k >= 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    wgml_error err;
    wgml_status st = ggml_whisper_open_memory(data, size, "fuzz.bin", &f, &err);
    if (st) {
        CHECK(f == NULL && err.code == st && err.message[0]);
        CHECK(strncmp(err.message, "fuzz.bin: ", 10) == 0);
        return 0;
    }
    CHECK(ggml_whisper_detect(data, size));
    gguf_str arch;
    CHECK(gguf_get_str(f, "general.architecture", &arch, &err) == 1 && gguf_str_eq(arch, "whisper"));
    check_against_input(f, data, size);
    whisper_tokenizer *t = NULL;
    st = whisper_tokenizer_load(f, &t, &err);
    if (st) {
        CHECK(t == NULL && err.message[0]);
    } else { /* a whole vocabulary: the tokenizer runs on a bit of the input */
        int32_t ids[64];
        int n = whisper_text_encode(t, (const char *)data, size < 64 ? size : 64, ids, 64, &err);
        CHECK(n >= 0);
        char text[512];
        CHECK(whisper_text_decode_with_timestamps(t, ids, n < 64 ? n : 64, text, sizeof text) >= 0);
        whisper_tokenizer_free(t);
    }
    gguf_close(f);
    return 0;
}
