/*
 * dtype.h - tensor element types, numbered and laid out exactly as GGUF/ggml.
 *
 * Quantized types store elements in blocks: `block_size` elements packed into
 * `type_size` bytes. A row of n elements (n a multiple of block_size) takes
 * n / block_size * type_size bytes. The block structs below are the on-disk
 * layouts, little-endian; fp16 fields are raw uint16_t bits.
 */
#ifndef WGML_CORE_DTYPE_H
#define WGML_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

typedef enum wgml_dtype {
    WGML_F32 = 0,
    WGML_F16 = 1,
    WGML_Q4_0 = 2,
    WGML_Q4_1 = 3,
    WGML_Q5_0 = 6,
    WGML_Q5_1 = 7,
    WGML_Q8_0 = 8,
    WGML_Q8_1 = 9,
    WGML_Q2_K = 10,
    WGML_Q3_K = 11,
    WGML_Q4_K = 12,
    WGML_Q5_K = 13,
    WGML_Q6_K = 14,
    WGML_Q8_K = 15,
    WGML_I8 = 24,
    WGML_I16 = 25,
    WGML_I32 = 26,
    WGML_I64 = 27,
    WGML_F64 = 28,
    WGML_BF16 = 30,
    WGML_DTYPE_COUNT = 40, /* one past the largest id the table below knows */
} wgml_dtype;

typedef struct wgml_dtype_traits {
    const char *name;  /* as llama.cpp spells it: "F32", "Q4_K", ... */
    int block_size;    /* elements per block (1 for plain types) */
    int type_size;     /* bytes per block */
    int quantized;     /* 1 for block-quantized types */
    int weight_type;   /* 1 if models may store weights in it (we can compute with it) */
} wgml_dtype_traits;

/* NULL for ids GGUF defines that we do not know (IQ types, ...) or garbage. */
const wgml_dtype_traits *wgml_dtype_get(uint32_t type);
const char *wgml_dtype_name(uint32_t type); /* "unknown" when not known */
/* Case-insensitive lookup by name; returns -1 when unknown. */
int wgml_dtype_from_name(const char *name);

/* Bytes of a row of n elements; 0 if n is not a multiple of the block size,
 * the type is unknown, or the size overflows. */
size_t wgml_row_size(uint32_t type, int64_t n);

/* ---- block layouts ---- */
#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct { uint16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
typedef struct { uint16_t d; int8_t qs[QK8_0]; } block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[QK8_1]; } block_q8_1; /* s = d * sum(qs) */

typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; } block_q2_K;
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; } block_q3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; } block_q6_K;
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;

#endif
