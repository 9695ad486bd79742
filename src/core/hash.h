/*
 * hash.h - FNV-1a, 64 bits: a small, fast, non-cryptographic hash for cache
 * keys and file names (not for anything an attacker may choose to collide
 * with: callers that trust a match compare the data too).
 */
#ifndef WGML_CORE_HASH_H
#define WGML_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define WGML_FNV64_BASIS 0xcbf29ce484222325ull

/* Continues hash h (start with WGML_FNV64_BASIS) over n bytes. */
static inline uint64_t wgml_fnv64(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#endif
