/*
 * kit_rng.h - the `kit` random stream: the draws of Kokoro's vocoder noise
 * (issue 21; ../shared/kokoro/README.md, "Random draws"), reproducible bit
 * for bit on every backend.
 *
 * It is splitmix64 seeded with `seed`, made counter-based: output n (from 0)
 * is the mix of seed + (n + 1) * 0x9E3779B97F4A7C15, so any output is
 * computed on its own (a GPU invocation per value, no sequential state). A
 * uniform takes one output, u = (output >> 11) * 2^-53 in [0, 1); a normal
 * takes twelve consecutive outputs, (u1 + ... + u12) - 6 summed left to right
 * in double, then rounded to float. The decoder's draws, in order: 9
 * uniforms (outputs 0..8), then L*9 normals (sample-major), then L normals.
 */
#ifndef WGML_CORE_KIT_RNG_H
#define WGML_CORE_KIT_RNG_H

#include <stdint.h>

/* Output n of the stream. */
uint64_t wgml_kit_u64(uint64_t seed, uint64_t n);
/* A uniform in [0, 1) from output n. */
double wgml_kit_uniform(uint64_t seed, uint64_t n);
/* A normal (sum of 12 uniforms minus 6) from outputs n .. n + 11. */
float wgml_kit_normal(uint64_t seed, uint64_t n);

/* The first output of the decoder's draws: normal i of the sine noise (draw
 * 2), and normal i of the source noise (draw 3) for L audio samples. */
static inline uint64_t wgml_kit_sine_noise_at(uint64_t i) { return 9 + 12 * i; }
static inline uint64_t wgml_kit_source_noise_at(uint64_t L, uint64_t i) { return 9 + 12 * (9 * L + i); }

#endif
