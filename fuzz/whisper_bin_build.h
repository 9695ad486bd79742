/*
 * whisper_bin_build.h - small synthetic whisper.cpp ggml .bin files, byte by
 * byte (format/ggml_whisper.h), for the seed corpus of fuzz_whisper_bin
 * (make_seeds.c) and the reader's tests (tests/test_whisper_bin.c).
 * Header-only; needs tests/support/gguf_bytes.h's byte buffer first.
 */
#ifndef WGML_FUZZ_WHISPER_BIN_BUILD_H
#define WGML_FUZZ_WHISPER_BIN_BUILD_H

#include <stdint.h>
#include <string.h>

#include "gguf_bytes.h"

/* Bytes per element row of the types a .bin holds (0 for others). */
static inline size_t wb_row_bytes(int32_t type, int32_t ne0) {
    switch (type) {
    case 0: return 4 * (size_t)ne0;
    case 1: return 2 * (size_t)ne0;
    case 2: return (size_t)ne0 / 32 * 18;
    case 3: return (size_t)ne0 / 32 * 20;
    case 6: return (size_t)ne0 / 32 * 22;
    case 7: return (size_t)ne0 / 32 * 24;
    case 8: return (size_t)ne0 / 32 * 34;
    }
    return 0;
}

/* The header: magic, the 10 hyper-parameters (hp[9] = n_mels), ftype, the
 * mel filters [n_mels][n_fft] (value i = i / 16), and n_tokens tokens: token
 * i is the byte i for i < 256, else the two bytes (i & 255, i >> 8 | 0x80). */
static inline void wb_header(gb *b, const int32_t hp[10], int32_t ftype, int32_t n_fft, int32_t n_tokens) {
    gb_u32(b, 0x67676d6cu);
    for (int i = 0; i < 10; i++)
        gb_u32(b, (uint32_t)hp[i]);
    gb_u32(b, (uint32_t)ftype);
    gb_u32(b, (uint32_t)hp[9]);
    gb_u32(b, (uint32_t)n_fft);
    for (int32_t i = 0; i < hp[9] * n_fft; i++)
        gb_f32(b, (float)i / 16.0f);
    gb_u32(b, (uint32_t)n_tokens);
    for (int32_t i = 0; i < n_tokens; i++) {
        uint8_t t[2] = {(uint8_t)i, (uint8_t)((i >> 8) | 0x80)};
        gb_u32(b, i < 256 ? 1u : 2u);
        gb_put(b, t, i < 256 ? 1 : 2);
    }
}

/* One tensor: its header, then data whose byte k is (k * 7 + seed) & 255
 * (any bits are valid F32/F16 data; quantized blocks get a small F16 scale).
 * Returns the data's offset in b. */
static inline size_t wb_tensor(gb *b, const char *name, int32_t type, int n_dims, const int32_t *ne, uint32_t seed) {
    gb_u32(b, (uint32_t)n_dims);
    gb_u32(b, (uint32_t)strlen(name));
    gb_u32(b, (uint32_t)type);
    size_t rows = 1;
    for (int d = 0; d < n_dims; d++) {
        gb_u32(b, (uint32_t)ne[d]);
        if (d) rows *= (size_t)ne[d];
    }
    gb_put(b, name, strlen(name));
    size_t at = b->n, size = wb_row_bytes(type, ne[0]) * rows;
    for (size_t k = 0; k < size; k++)
        gb_u8(b, (uint8_t)(k * 7 + seed));
    size_t block = type == 2 ? 18 : type == 3 ? 20 : type == 6 ? 22 : type == 7 ? 24 : type == 8 ? 34 : 0;
    for (size_t k = 0; block && k < size; k += block) { /* d = 2^-10 (F16 0x1400) */
        b->p[at + k] = 0x00;
        b->p[at + k + 1] = 0x14;
    }
    return at;
}

/* A small model of every type: hp {n_vocab 300, 1500, S 8, 2, 1, 448, 8, 2, 1,
 * n_mels 4}, n_fft 5, 260 tokens, ftype F16 of quantization version 2, and
 * the tensors: both convolutions (F16 / F32 weights, a [8][1] and a 1-D
 * bias), an F16 matrix, an F32 vector, one tensor of each quantized type.
 * Returns the tensor count. */
static inline int wb_small_model(gb *b) {
    static const int32_t hp[10] = {300, 1500, 8, 2, 1, 448, 8, 2, 1, 4};
    wb_header(b, hp, 2001, 5, 260);
    wb_tensor(b, "encoder.conv1.weight", 1, 3, (const int32_t[]){3, 4, 8}, 1);
    wb_tensor(b, "encoder.conv1.bias", 0, 2, (const int32_t[]){1, 8}, 2);
    wb_tensor(b, "encoder.conv2.weight", 0, 3, (const int32_t[]){3, 8, 8}, 3);
    wb_tensor(b, "encoder.conv2.bias", 0, 1, (const int32_t[]){8}, 4);
    wb_tensor(b, "encoder.blocks.0.attn.query.weight", 1, 2, (const int32_t[]){8, 8}, 5);
    wb_tensor(b, "encoder.blocks.0.attn.query.bias", 0, 1, (const int32_t[]){8}, 6);
    wb_tensor(b, "q4_0", 2, 2, (const int32_t[]){32, 2}, 7);
    wb_tensor(b, "q4_1", 3, 1, (const int32_t[]){64}, 8);
    wb_tensor(b, "q5_0", 6, 3, (const int32_t[]){32, 1, 2}, 9);
    wb_tensor(b, "q5_1", 7, 4, (const int32_t[]){32, 1, 1, 2}, 10);
    wb_tensor(b, "q8_0", 8, 2, (const int32_t[]){32, 3}, 11);
    return 11;
}

#endif
