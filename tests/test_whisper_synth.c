/*
 * test_whisper_synth.c - `wgml synth` for Whisper (tools/synth.c): the
 * weights are make_random_whisper.py's, bit for bit.
 *
 *   - whisper-micro, turned back into whisper.cpp's .bin layout here (a
 *     minimal writer: the header, the mel filters, the vocabulary of the
 *     donor, every tensor with the convolutions un-permuted from taps-major
 *     and their biases as [S][1]), is byte for byte
 *     ../shared/whisper/whisper-micro-random.bin;
 *   - whisper-tiny the same way has the sha256 README.md gives for
 *     `make_random_whisper.py tiny --donor whisper-micro-random.bin`;
 *   - the .bin read through format/model_file.h (the converter to the GGUF
 *     schema) has the same tensors, types, shapes and bytes as synth's GGUF;
 *   - the synthesized vocabulary (256 bytes, then distinct strings), the
 *     tensor lists of every size (counts, shapes of large-v3-turbo), the types
 *     of --type F32 / Q8_0 and a refused K-quant, --layers, and the CLI
 *     (the variant's own seed by default).
 */
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "format/gguf.h"
#include "format/model_file.h"
#include "testutil.h"
#include "tools/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MICRO_BIN    "whisper/whisper-micro-random.bin"
#define TINY_SHA256  "99e10839680f1f4914f86c928a03d735fd32ca0137af11ee46ce37b65057e55e"
#define MICRO_SHA256 "b187e016d6f9d6d70081ca88fa2ebb14be3d5ba0ddaf1eb4eab4895a7824b7ad"

/* ---- SHA-256 (FIPS 180-4) ---- */

typedef struct {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t n;
} sha256_ctx;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256_ctx *c, const unsigned char *p) {
    uint32_t w[64], a[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(a, c->h, sizeof a);
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25), ch = (a[4] & a[5]) ^ (~a[4] & a[6]);
        uint32_t t1 = a[7] + S1 + ch + K256[i] + w[i];
        uint32_t S0 = ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22), mj = (a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]);
        memmove(a + 1, a, 7 * sizeof *a);
        a[4] += t1;
        a[0] = t1 + S0 + mj;
    }
    for (int i = 0; i < 8; i++)
        c->h[i] += a[i];
}

static void sha256_init(sha256_ctx *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->len = 0;
    c->n = 0;
}

static void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    const unsigned char *p = data;
    c->len += n;
    while (n) {
        size_t k = 64 - c->n < n ? 64 - c->n : n;
        memcpy(c->buf + c->n, p, k);
        c->n += k;
        p += k;
        n -= k;
        if (c->n == 64) {
            sha256_block(c, c->buf);
            c->n = 0;
        }
    }
}

static void sha256_hex(sha256_ctx *c, char out[65]) {
    uint64_t bits = c->len * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    sha256_update(c, &pad, 1);
    while (c->n != 56)
        sha256_update(c, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(c, len, 8);
    for (int i = 0; i < 8; i++)
        snprintf(out + 8 * i, 9, "%08x", c->h[i]);
}

/* ---- a GGUF of the Whisper schema back to whisper.cpp's .bin ---- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_i32(bytes *b, int32_t v) { put(b, &v, 4); }

static int64_t get_u32(const gguf_file *f, const char *key) {
    int64_t v = -1;
    wgml_error err;
    if (gguf_get_int(f, key, 0, INT32_MAX, &v, &err) != 1) fail_msg("missing %s", key);
    return v;
}

static bytes to_bin(const gguf_file *f) {
    bytes b = {0};
    static const char *const keys[10] = {"whisper.vocab_size",
                                         "whisper.audio.context_length",
                                         "whisper.audio.embedding_length",
                                         "whisper.audio.head_count",
                                         "whisper.audio.block_count",
                                         "whisper.text.context_length",
                                         "whisper.text.embedding_length",
                                         "whisper.text.head_count",
                                         "whisper.text.block_count",
                                         "whisper.n_mels"};
    put_i32(&b, 0x67676d6c);
    for (int i = 0; i < 10; i++)
        put_i32(&b, (int32_t)get_u32(f, keys[i]));
    put_i32(&b, 1); /* use_f16 */
    const gguf_tensor *mf = gguf_find_tensor(f, "mel_filters");
    assert_non_null(mf);
    assert_int_equal(mf->type, WGML_F32);
    put_i32(&b, (int32_t)mf->ne[1]);
    put_i32(&b, (int32_t)mf->ne[0]);
    put(&b, mf->data, mf->size);
    const gguf_value *toks;
    wgml_error err;
    assert_int_equal(gguf_get_arr(f, "whisper.tokens", GGUF_TYPE_STRING, &toks, &err), 1);
    put_i32(&b, (int32_t)toks->v.arr.n);
    for (uint64_t i = 0; i < toks->v.arr.n; i++) {
        put_i32(&b, (int32_t)toks->v.arr.items[i].v.str.len);
        put(&b, toks->v.arr.items[i].v.str.ptr, toks->v.arr.items[i].v.str.len);
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (!strcmp(t->name, "mel_filters")) continue;
        assert_true(t->type == WGML_F32 || t->type == WGML_F16);
        const size_t es = t->type == WGML_F32 ? 4 : 2;
        const int conv_w = !strcmp(t->name, "encoder.conv1.weight") || !strcmp(t->name, "encoder.conv2.weight");
        const int conv_b = !strcmp(t->name, "encoder.conv1.bias") || !strcmp(t->name, "encoder.conv2.bias");
        const size_t name_len = strlen(t->name);
        if (conv_w) {
            const int64_t C = t->ne[0] / 3, S = t->ne[1];
            put_i32(&b, 3);
            put_i32(&b, (int32_t)name_len);
            put_i32(&b, t->type == WGML_F16);
            put_i32(&b, 3);
            put_i32(&b, (int32_t)C);
            put_i32(&b, (int32_t)S);
            put(&b, t->name, name_len);
            const unsigned char *src = t->data;
            for (int64_t o = 0; o < S; o++) /* w[o][c][j] = row o, element j C + c */
                for (int64_t c = 0; c < C; c++)
                    for (int j = 0; j < 3; j++)
                        put(&b, src + ((size_t)o * 3 * (size_t)C + (size_t)j * (size_t)C + (size_t)c) * es, es);
            continue;
        }
        const int n_dims = conv_b ? 2 : t->n_dims;
        put_i32(&b, n_dims);
        put_i32(&b, (int32_t)name_len);
        put_i32(&b, t->type == WGML_F16);
        if (conv_b) {
            put_i32(&b, 1);
            put_i32(&b, (int32_t)t->ne[0]);
        } else {
            for (int d = 0; d < t->n_dims; d++)
                put_i32(&b, (int32_t)t->ne[d]);
        }
        put(&b, t->name, name_len);
        put(&b, t->data, t->size);
    }
    return b;
}

static void synth_ok(const char *arch, const char *type, const char *vocab, int layers, const char *out,
                     synth_result *r) {
    synth_params p = {.arch = arch, .type = type, .vocab = vocab, .n_layer = layers, .n_threads = 2};
    wgml_error err;
    wgml_status st = synth_write(out, &p, r, &err);
    if (st) fail_msg("synth %s %s: %s", arch, type, err.message);
}

static gguf_file *open_gguf(const char *path) {
    gguf_file *f;
    wgml_error err;
    if (gguf_open(path, &f, &err)) fail_msg("%s: %s", path, err.message);
    return f;
}

/* whisper-micro with the .bin's vocabulary: the .bin again, byte for byte. */
static void test_micro_bin(void **state) {
    (void)state;
    const char *bin_path = tu_shared(MICRO_BIN);
    const char *out = tu_tmp_path("micro.gguf");
    synth_result r;
    synth_ok("whisper-micro", "F16", bin_path, 0, out, &r);
    assert_int_equal(r.n_tensors, 129);
    assert_int_equal(r.file_type, 1);
    gguf_file *f = open_gguf(out);
    bytes b = to_bin(f);
    size_t size;
    unsigned char *want = tu_read_file(bin_path, &size);
    assert_non_null(want);
    printf("  whisper-micro as a .bin: %zu bytes (the shared file: %zu)\n", b.n, size);
    if (b.n != size || memcmp(b.p, want, size)) {
        size_t i = 0;
        while (i < b.n && i < size && b.p[i] == want[i])
            i++;
        fail_msg("whisper-micro differs from %s at byte %zu", MICRO_BIN, i);
    }
    sha256_ctx c;
    char hex[65];
    sha256_init(&c);
    sha256_update(&c, b.p, b.n);
    sha256_hex(&c, hex);
    assert_string_equal(hex, MICRO_SHA256);
    free(want);
    free(b.p);
    gguf_close(f);
}

/* whisper-tiny with the micro file's vocabulary: make_random_whisper.py tiny's file. */
static void test_tiny_sha256(void **state) {
    (void)state;
    const char *out = tu_tmp_path("tiny.gguf");
    synth_result r;
    synth_ok("whisper-tiny", "F16", tu_shared(MICRO_BIN), 0, out, &r);
    assert_int_equal(r.n_tensors, 12 + 15 * 4 + 24 * 4);
    gguf_file *f = open_gguf(out);
    bytes b = to_bin(f);
    sha256_ctx c;
    char hex[65];
    sha256_init(&c);
    sha256_update(&c, b.p, b.n);
    sha256_hex(&c, hex);
    printf("  whisper-tiny as a .bin: %zu bytes (README: 77691713), %.2f M parameters, sha256 %s\n", b.n,
           r.n_params / 1e6, hex);
    assert_int_equal(b.n, 77691713);
    assert_string_equal(hex, TINY_SHA256);
    assert_int_equal(get_u32(f, "whisper.audio.embedding_length"), 384);
    assert_int_equal(get_u32(f, "whisper.text.head_count"), 6);
    free(b.p);
    gguf_close(f);
}

/* The .bin through the converter (format/model_file.h) and synth's GGUF: the same schema, the same bytes. */
static void test_against_converter(void **state) {
    (void)state;
    const char *out = tu_tmp_path("micro-synthvocab.gguf");
    synth_ok("whisper-micro", "F16", NULL, 0, out, NULL);
    gguf_file *s = open_gguf(out), *c;
    wgml_error err;
    if (wgml_model_file_open(tu_shared(MICRO_BIN), &c, &err)) fail_msg("%s: %s", MICRO_BIN, err.message);
    assert_int_equal(gguf_n_tensors(c), gguf_n_tensors(s));
    for (int64_t i = 0; i < gguf_n_tensors(c); i++) {
        const gguf_tensor *a = gguf_tensor_at(c, i), *b = gguf_find_tensor(s, a->name);
        if (!b) fail_msg("synth has no %s", a->name);
        assert_string_equal(gguf_tensor_at(s, i)->name, a->name); /* the same order */
        if (a->type != b->type || a->n_dims != b->n_dims || a->ne[0] != b->ne[0] || a->ne[1] != b->ne[1])
            fail_msg("%s: converter %s %d dims {%lld, %lld}, synth %s %d dims {%lld, %lld}", a->name,
                     wgml_dtype_name(a->type), a->n_dims, (long long)a->ne[0], (long long)a->ne[1],
                     wgml_dtype_name(b->type), b->n_dims, (long long)b->ne[0], (long long)b->ne[1]);
        assert_int_equal(a->size, b->size);
        if (memcmp(a->data, b->data, a->size)) fail_msg("%s: the values differ", a->name);
    }
    static const char *const keys[] = {"whisper.vocab_size",
                                       "whisper.audio.context_length",
                                       "whisper.audio.embedding_length",
                                       "whisper.audio.head_count",
                                       "whisper.audio.block_count",
                                       "whisper.text.context_length",
                                       "whisper.text.embedding_length",
                                       "whisper.text.head_count",
                                       "whisper.text.block_count",
                                       "whisper.n_mels",
                                       "general.file_type"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        assert_int_equal(get_u32(c, keys[k]), get_u32(s, keys[k]));
    gguf_str arch;
    assert_int_equal(gguf_get_str(s, "general.architecture", &arch, &err), 1);
    assert_true(gguf_str_eq(arch, "whisper"));

    /* the synthesized vocabulary: as many tokens, the bytes first, all distinct */
    const gguf_value *tv, *cv;
    assert_int_equal(gguf_get_arr(s, "whisper.tokens", GGUF_TYPE_STRING, &tv, &err), 1);
    assert_int_equal(gguf_get_arr(c, "whisper.tokens", GGUF_TYPE_STRING, &cv, &err), 1);
    assert_int_equal(tv->v.arr.n, 50257);
    assert_int_equal(cv->v.arr.n, 50257);
    for (int i = 0; i < 256; i++) {
        assert_int_equal(tv->v.arr.items[i].v.str.len, 1);
        assert_int_equal((unsigned char)tv->v.arr.items[i].v.str.ptr[0], i);
    }
    /* distinct: an open-addressing set of the strings */
    const size_t cap = 1 << 17;
    const gguf_str **set = calloc(cap, sizeof *set);
    for (uint64_t i = 0; i < tv->v.arr.n; i++) {
        const gguf_str *t = &tv->v.arr.items[i].v.str;
        assert_true(t->len >= 1 && t->len <= 16);
        uint64_t h = 1469598103934665603ull;
        for (uint64_t k = 0; k < t->len; k++)
            h = (h ^ (unsigned char)t->ptr[k]) * 1099511628211ull;
        for (size_t j = h & (cap - 1);; j = (j + 1) & (cap - 1)) {
            if (!set[j]) {
                set[j] = t;
                break;
            }
            if (set[j]->len == t->len && !memcmp(set[j]->ptr, t->ptr, t->len))
                fail_msg("token %llu repeats another", (unsigned long long)i);
        }
    }
    free(set);
    printf("  synthesized tokens: 256 \"%.*s\" 257 \"%.*s\" 50256 \"%.*s\"\n", (int)tv->v.arr.items[256].v.str.len,
           tv->v.arr.items[256].v.str.ptr, (int)tv->v.arr.items[257].v.str.len, tv->v.arr.items[257].v.str.ptr,
           (int)tv->v.arr.items[50256].v.str.len, tv->v.arr.items[50256].v.str.ptr);
    gguf_close(c);
    gguf_close(s);
}

/* Counts and shapes of every size, without writing. */
static void test_tensor_lists(void **state) {
    (void)state;
    const struct {
        const char *name;
        int enc, dec, S, mels, vocab;
    } sizes[] = {{"whisper-micro", 3, 3, 128, 80, 51865},   {"whisper-micro-v3", 4, 2, 192, 128, 51866},
                 {"whisper-tiny", 4, 4, 384, 80, 51865},    {"whisper-base", 6, 6, 512, 80, 51865},
                 {"whisper-small", 12, 12, 768, 80, 51865}, {"whisper-large-v3-turbo", 32, 4, 1280, 128, 51866}};
    static synth_tensor ts[2048];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const synth_arch *a = synth_arch_find(sizes[i].name);
        assert_non_null(a);
        assert_int_equal(a->kind, SYNTH_WHISPER);
        assert_int_equal(synth_arch_max_layers(a), sizes[i].enc > sizes[i].dec ? sizes[i].enc : sizes[i].dec);
        const int n = synth_tensor_list(a, 0, ts, 2048);
        assert_int_equal(n, 12 + 15 * sizes[i].enc + 24 * sizes[i].dec);
        const int64_t S = sizes[i].S;
        uint64_t params = 0;
        for (int k = 0; k < n; k++) {
            if (strcmp(ts[k].name, "mel_filters")) params += (uint64_t)(ts[k].ne[0] * ts[k].ne[1]);
            if (!strcmp(ts[k].name, "encoder.conv1.weight")) {
                assert_int_equal(ts[k].ne[0], 3 * sizes[i].mels);
                assert_int_equal(ts[k].ne[1], S);
            }
            if (!strcmp(ts[k].name, "decoder.token_embedding.weight")) {
                assert_int_equal(ts[k].ne[0], S);
                assert_int_equal(ts[k].ne[1], sizes[i].vocab);
            }
            if (!strcmp(ts[k].name, "mel_filters")) {
                assert_int_equal(ts[k].ne[0], 201);
                assert_int_equal(ts[k].ne[1], sizes[i].mels);
            }
        }
        printf("  %-22s %4d tensors, %7.2f M parameters\n", sizes[i].name, n, params / 1e6);
        /* --layers 2 keeps two blocks of each stack */
        assert_int_equal(synth_tensor_list(a, 2, NULL, 0), 12 + 15 * 2 + 24 * 2);
    }
}

/* --type: F32 holds the F16 numbers; Q8_0 quantizes the matrices (not the convolutions, positions or vectors);
 * a K-quant is refused; --layers cuts both stacks. */
static void test_types(void **state) {
    (void)state;
    const char *f16p = tu_tmp_path("m16.gguf"), *f32p = tu_tmp_path("m32.gguf"), *q8p = tu_tmp_path("mq8.gguf");
    synth_result r;
    synth_ok("whisper-micro", "F16", NULL, 1, f16p, &r);
    assert_int_equal(r.n_tensors, 12 + 15 + 24);
    synth_ok("whisper-micro", "F32", NULL, 1, f32p, &r);
    assert_int_equal(r.file_type, 0);
    synth_ok("whisper-micro", "Q8_0", NULL, 1, q8p, &r);
    assert_int_equal(r.file_type, 7);
    gguf_file *a = open_gguf(f16p), *b = open_gguf(f32p), *q = open_gguf(q8p);
    assert_int_equal(get_u32(a, "whisper.audio.block_count"), 1);
    assert_int_equal(get_u32(a, "whisper.text.block_count"), 1);
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const gguf_tensor *t16 = gguf_tensor_at(a, i), *t32 = gguf_find_tensor(b, t16->name),
                          *tq = gguf_find_tensor(q, t16->name);
        assert_non_null(t32);
        assert_non_null(tq);
        assert_int_equal(t32->type, WGML_F32);
        const int conv = strstr(t16->name, "conv") && strstr(t16->name, ".weight");
        const int pos = strstr(t16->name, "positional_embedding") != NULL;
        const int vec = t16->n_dims == 1 || !strcmp(t16->name, "mel_filters");
        assert_int_equal(t16->type, vec || pos ? WGML_F32 : WGML_F16);
        assert_int_equal(tq->type, vec || pos ? WGML_F32 : conv ? WGML_F16 : WGML_Q8_0);
        for (int64_t k = 0; k < t16->n_elements; k++) {
            float v16 = t16->type == WGML_F16 ? wgml_f16_to_f32(((const uint16_t *)t16->data)[k])
                                              : ((const float *)t16->data)[k];
            if (v16 != ((const float *)t32->data)[k])
                fail_msg("%s[%lld]: F32 differs from F16", t16->name, (long long)k);
        }
    }
    gguf_close(a);
    gguf_close(b);
    gguf_close(q);
    synth_params p = {.arch = "whisper-micro", .type = "Q4_K_M"};
    wgml_error err;
    assert_int_equal(synth_write(tu_tmp_path("bad.gguf"), &p, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "Q4_0"));
    p.type = "F16";
    p.n_layer = 4;
    assert_int_equal(synth_write(tu_tmp_path("bad.gguf"), &p, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    /* a donor that is not a Whisper model */
    p.n_layer = 1;
    p.vocab = tu_shared("vocab/ggml-vocab-gpt-2.gguf");
    assert_int_equal(synth_write(tu_tmp_path("bad.gguf"), &p, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "whisper.tokens"));
}

/* The CLI: the variant's own seed without --seed; the file synth_write makes. */
static void test_cli(void **state) {
    (void)state;
    const char *cli = getenv("WGML_CLI");
    if (!cli || !*cli) skip();
    const char *a = tu_tmp_path("cli-micro.gguf"), *b = tu_tmp_path("api-micro.gguf");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' synth --arch whisper-micro --type F16 --layers 2 -o '%s' 2>/dev/null", cli, a);
    assert_int_equal(system(cmd), 0);
    synth_ok("whisper-micro", "F16", NULL, 2, b, NULL);
    size_t na, nb;
    unsigned char *da = tu_read_file(a, &na), *db = tu_read_file(b, &nb);
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da);
    free(db);
    snprintf(cmd, sizeof cmd, "'%s' synth --arch whisper-micro --type Q4_K_M -o '%s' 2>/dev/null", cli, a);
    assert_int_not_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_micro_bin),
        cmocka_unit_test(test_tiny_sha256),
        cmocka_unit_test(test_against_converter),
        cmocka_unit_test(test_tensor_lists),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
