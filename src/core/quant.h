/*
 * quant.h - reference (portable, scalar) conversion between f32 and every
 * tensor type, bit-compatible with GGUF/ggml block layouts.
 *
 * These are the numerical definition of each type: the SIMD CPU kernels and
 * the WGSL kernels are tested against them. Quantization picks per-block
 * scales as ggml's reference quantizers do (round-to-nearest with the block
 * maximum for the simple types; a small search over scales and mins for the
 * K-quants), so files we write decode identically in other GGUF tools.
 */
#ifndef WGML_CORE_QUANT_H
#define WGML_CORE_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* Converts n elements (a multiple of the type's block size) of a row to f32.
 * Returns 0, or -1 for a type without a decoder. */
int wgml_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* Converts n f32 elements (a multiple of the block size) to `type`; returns the
 * number of bytes written (wgml_row_size(type, n)), or 0 if the type cannot be
 * produced. Works for F32, F16, BF16 and every quantized type incl. Q8_1/Q8_K. */
size_t wgml_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

/* Whether wgml_quantize_row can produce this type. */
int wgml_can_quantize(uint32_t type);

#endif
