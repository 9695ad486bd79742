/*
 * wg_repack.c - GGUF weight blocks to the GPU layout.
 *
 * WGSL storage buffers are arrays of 32-bit words, but many GGUF blocks are
 * not a multiple of 4 bytes (Q4_0 is 18 bytes: an f16 scale and 16 bytes of
 * nibbles), so blocks straddle words. At upload each such block is split:
 * its quant bytes (a multiple of 4) go to a main region, block after block,
 * and its f16 scale fields to a scale region after it. Byte count and thus
 * bandwidth are unchanged; every load in the shaders is an aligned word.
 * Types whose blocks are already whole words (F32, F16, BF16, Q2_K, Q4_K,
 * Q5_K) keep their bytes (Q4_K's nibbles reordered, see below).
 *
 *   type  block  main words (bytes of the block)       scale bytes (offset)
 *   Q4_0  18     4 (qs 2..17)                          2 (d at 0)
 *   Q4_1  20     4 (qs 4..19)                          4 (d, m at 0)
 *   Q5_0  22     5 (qh 2..5, qs 6..21)                 2 (d at 0)
 *   Q5_1  24     5 (qh 4..7, qs 8..23)                 4 (d, m at 0)
 *   Q8_0  34     8 (qs 2..33)                          2 (d at 0)
 *   Q3_K  110    27 (hmask, qs, scales: 0..107)        2 (d at 108)
 *   Q6_K  210    52 (ql, qh, scales: 0..207)           2 (d at 208)
 *
 * Q6_K's main words are also regrouped (q6k_regroup): GGUF interleaves a
 * group of 32 weights over 32 bytes of low nibbles and 32 of high bits, so a
 * decoder reads 16 words for 32 weights; regrouped, each group's nibbles,
 * high bits and scales are contiguous (w_q6_k.wgsl) and it reads 6. Q4_K
 * keeps its block but its nibbles are regrouped the same way (q4k_regroup):
 * 4 words per group of 32 instead of 8.
 */
#include <string.h>

#include "backend/webgpu/wg_internal.h"
#include "core/dtype.h"

typedef struct {
    uint32_t type;
    int main_words, main_from; /* main bytes start at main_from in the block */
    int scale_bytes, scale_from;
} layout;

static const layout layouts[] = {
    {WGML_Q4_0, 4, 2, 2, 0},   {WGML_Q4_1, 4, 4, 4, 0},    {WGML_Q5_0, 5, 2, 2, 0}, {WGML_Q5_1, 5, 4, 4, 0},
    {WGML_Q8_0, 8, 2, 2, 0},   {WGML_Q3_K, 27, 0, 2, 108}, {WGML_Q6_K, 52, 0, 2, 208},
};

static const layout *find(uint32_t type) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].type == type) return &layouts[i];
    return NULL;
}

/* One Q6_K block's 208 main bytes (ql[128], qh[64], scales[16]) in the
 * grouped order of w_q6_k.wgsl. Element e: half n = e / 128, quarter
 * qd = (e % 128) / 32, l = e % 32; GGUF keeps its low 4 bits in ql byte
 * 64n + 32(qd & 1) + l (high nibble when qd >= 2), its high 2 bits in qh byte
 * 32n + l at bit 2qd, and its scale at 8n + l / 16 + 2qd. */
static void q6k_regroup(const uint8_t *src, uint8_t *dst) {
    const uint8_t *ql = src, *qh = src + 128, *sc = src + 192;
    memset(dst, 0, 208);
    for (int e = 0; e < 256; e++) {
        int n = e / 128, qd = (e % 128) / 32, l = e % 32, j = e / 32;
        int lo = (ql[64 * n + 32 * (qd & 1) + l] >> (qd >= 2 ? 4 : 0)) & 15;
        int hi = (qh[32 * n + l] >> (2 * qd)) & 3;
        dst[16 * j + (l % 16)] |= (uint8_t)(lo << (l >= 16 ? 4 : 0));
        int f = l % 16, hw = 128 + 8 * j + 4 * (l / 16); /* byte of word 32 + 2j + l/16 */
        dst[hw + f / 4] |= (uint8_t)(hi << (2 * (f % 4)));
    }
    for (int j = 0; j < 8; j++) {
        int n = j / 4, qd = j % 4;
        dst[192 + 2 * j] = sc[8 * n + 2 * qd];
        dst[192 + 2 * j + 1] = sc[8 * n + 1 + 2 * qd];
    }
}

/* One Q4_K block (144 bytes) with its nibbles in the grouped order of
 * w_q4_k.wgsl: GGUF's 32 bytes at 16 + 32p hold sub-block 2p (low nibbles)
 * and 2p + 1 (high); regrouped, sub-block j has 16 bytes at 16 + 16j, byte i
 * holding its element i (low nibble) and i + 16 (high). */
static void q4k_regroup(const uint8_t *src, uint8_t *dst) {
    memcpy(dst, src, 16);
    memset(dst + 16, 0, 128);
    for (int e = 0; e < 256; e++) {
        int j = e / 32, l = e % 32;
        int q = (src[16 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
        dst[16 + 16 * j + l % 16] |= (uint8_t)(q << (l >= 16 ? 4 : 0));
    }
}

/* The main bytes of a block in the order its decoder reads them: NULL when
 * GGUF's order is kept. */
typedef void (*regroup_fn)(const uint8_t *src, uint8_t *dst);
static regroup_fn regroup_of(uint32_t type) {
    switch (type) {
    case WGML_Q4_K: return q4k_regroup;
    case WGML_Q6_K: return q6k_regroup;
    default: return NULL;
    }
}

int wg_repack_layout(uint32_t type, int *main_words, int *scale_bytes) {
    const layout *l = find(type);
    *main_words = l ? l->main_words : 0;
    *scale_bytes = l ? l->scale_bytes : 0;
    switch (type) {
    case WGML_F32: case WGML_F16: case WGML_BF16: case WGML_Q2_K: case WGML_Q4_K: case WGML_Q5_K: return 1;
    default: return l != NULL;
    }
}

uint64_t wg_repack_size(uint32_t type, int64_t ne0, int64_t rows, uint32_t *sb_word) {
    const layout *l = find(type);
    const wgml_dtype_traits *tr = wgml_dtype_get(type);
    *sb_word = 0;
    if (!tr) return 0;
    if (!l) return ((uint64_t)wgml_row_size(type, ne0) * (uint64_t)rows + 3) & ~(uint64_t)3;
    uint64_t blocks = (uint64_t)(ne0 / tr->block_size) * (uint64_t)rows;
    uint64_t main_bytes = blocks * (uint64_t)l->main_words * 4;
    *sb_word = (uint32_t)(main_bytes / 4);
    return main_bytes + ((blocks * (uint64_t)l->scale_bytes + 3) & ~(uint64_t)3);
}

void wg_repack(uint32_t type, int64_t ne0, int64_t rows, const void *src, void *dst, uint32_t sb_word) {
    const layout *l = find(type);
    const wgml_dtype_traits *tr = wgml_dtype_get(type);
    regroup_fn regroup = regroup_of(type);
    if (!l) {
        size_t n = wgml_row_size(type, ne0) * (size_t)rows;
        if (regroup) {
            for (size_t b = 0; b < n / tr->type_size; b++)
                regroup((const uint8_t *)src + b * tr->type_size, (uint8_t *)dst + b * tr->type_size);
        } else {
            memcpy(dst, src, n);
        }
        memset((uint8_t *)dst + n, 0, ((n + 3) & ~(size_t)3) - n);
        return;
    }
    uint64_t blocks = (uint64_t)(ne0 / tr->block_size) * (uint64_t)rows;
    const uint8_t *s = src;
    uint8_t *main = dst, *scales = (uint8_t *)dst + (size_t)sb_word * 4;
    size_t mb = (size_t)l->main_words * 4;
    for (uint64_t b = 0; b < blocks; b++, s += tr->type_size) {
        if (regroup)
            regroup(s + l->main_from, main + b * mb);
        else
            memcpy(main + b * mb, s + l->main_from, mb);
        memcpy(scales + b * (size_t)l->scale_bytes, s + l->scale_from, (size_t)l->scale_bytes);
    }
    size_t used = (size_t)(blocks * (uint64_t)l->scale_bytes);
    memset(scales + used, 0, ((used + 3) & ~(size_t)3) - used);
}
