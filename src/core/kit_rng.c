/*
 * kit_rng.c - the `kit` random stream (kit_rng.h).
 */
#include "core/kit_rng.h"

uint64_t wgml_kit_u64(uint64_t seed, uint64_t n) {
    uint64_t z = seed + (n + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double wgml_kit_uniform(uint64_t seed, uint64_t n) { return (double)(wgml_kit_u64(seed, n) >> 11) * 0x1p-53; }

float wgml_kit_normal(uint64_t seed, uint64_t n) {
    double a = wgml_kit_uniform(seed, n);
    for (uint64_t k = 1; k < 12; k++) a = a + wgml_kit_uniform(seed, n + k);
    return (float)(a - 6.0);
}
