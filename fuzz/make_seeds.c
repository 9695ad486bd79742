/*
 * make_seeds.c - writes the seed corpora of the fuzz targets.
 *
 *   wgml_fuzz_seeds SHARED_DIR OUT_DIR
 *
 * fills OUT_DIR/{gguf,model_load,llama2c,tokenizer,pth,whisper_bin,safetensors}/ with small inputs that
 * reach deep into each parser: GGUFs with every value type, nested arrays,
 * tensors of many types, other alignments and v2; tiny Llama and Qwen2
 * models (F32, F16, Q8_0, Q4_0, tied and untied, biases, rope_freqs); the
 * shared vocabularies cut down to a few hundred tokens; tiny llama2.c
 * checkpoint + tokenizer pairs in every layout; the shared tokenizer test
 * strings prefixed with a vocabulary selector; and small PyTorch checkpoints
 * (a voice tensor, state dicts with views and every storage type, Kokoro's
 * dict of state dicts), whole and as bare pickles; small whisper.cpp ggml
 * .bin files (every tensor type, Whisper's tensor names at a tiny width, the
 * start of the shared micro model's vocabulary); small safetensors files (every
 * dtype, metadata, 0-d and empty tensors, fields out of order) and shard
 * indexes for fuzz_safetensors' folder mode. The fuzzers mutate from there.
 * Built with the regular library (no fuzzing flags) by cmake/fuzz.cmake.
 */
#include "core/dtype.h"
#include "core/fp16.h"
#include "format/gguf.h"
#include "gguf_bytes.h"
#include "whisper_bin_build.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *g_out;
static int g_count;

static void die(const char *what, const char *msg) {
    fprintf(stderr, "wgml_fuzz_seeds: %s: %s\n", what, msg);
    exit(1);
}

static const char *out_path(const char *dir, const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s/%s", g_out, dir, name);
    return buf;
}

static void write_bytes(const char *dir, const char *name, const void *p, size_t n) {
    const char *path = out_path(dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) die(path, strerror(errno));
    g_count++;
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    if (!p || (len > 0 && fread(p, 1, (size_t)len, f) != (size_t)len)) die(path, "read failed");
    fclose(f);
    *n = (size_t)len;
    return p;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static float rnd_normal(void) {
    float u = ((float)(rnd() >> 40) + 0.5f) / 16777216.0f, v = (float)(rnd() >> 40) / 16777216.0f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static void ok(wgml_status st, const wgml_error *err) {
    if (st) die("writer", err->message);
}

/* ---- GGUF built byte by byte ---- */

static void seed_all_types(void) {
    gb b = {0};
    gb_header(&b, 3, 0, 15);
    gb_key(&b, "general.architecture", GGUF_TYPE_STRING), gb_str(&b, "llama");
    gb_key(&b, "t.u8", GGUF_TYPE_UINT8), gb_u8(&b, 200);
    gb_key(&b, "t.i8", GGUF_TYPE_INT8), gb_u8(&b, 0xfb);
    gb_key(&b, "t.u16", GGUF_TYPE_UINT16), gb_u8(&b, 1), gb_u8(&b, 2);
    gb_key(&b, "t.i16", GGUF_TYPE_INT16), gb_u8(&b, 0), gb_u8(&b, 0x80);
    gb_key(&b, "t.i32", GGUF_TYPE_INT32), gb_u32(&b, (uint32_t)-7);
    gb_key(&b, "t.f32", GGUF_TYPE_FLOAT32), gb_f32(&b, 0.5f);
    gb_key(&b, "t.bool", GGUF_TYPE_BOOL), gb_u8(&b, 1);
    gb_key(&b, "t.u64", GGUF_TYPE_UINT64), gb_u64(&b, 1ull << 40);
    gb_key(&b, "t.i64", GGUF_TYPE_INT64), gb_u64(&b, (uint64_t)-2);
    double d = 2.5;
    gb_key(&b, "t.f64", GGUF_TYPE_FLOAT64), gb_put(&b, &d, 8);
    gb_key(&b, "a.bool", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_BOOL), gb_u64(&b, 2), gb_u8(&b, 0), gb_u8(&b, 1);
    gb_key(&b, "a.str", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_STRING), gb_u64(&b, 2), gb_str(&b, "x"), gb_str(&b, "");
    gb_key(&b, "a.arr", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_ARRAY), gb_u64(&b, 2);
    gb_u32(&b, GGUF_TYPE_STRING), gb_u64(&b, 1), gb_str(&b, "yy");
    gb_u32(&b, GGUF_TYPE_ARRAY), gb_u64(&b, 1), gb_u32(&b, GGUF_TYPE_UINT16), gb_u64(&b, 1), gb_u8(&b, 3), gb_u8(&b, 0);
    gb_key(&b, "a.empty", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_FLOAT64), gb_u64(&b, 0);
    write_bytes("gguf", "all-types.gguf", b.p, b.n);
    gb_free(&b);
}

/* Tensors of every layout family, with general.alignment (0 = unset). */
static void seed_tensors(const char *name, uint32_t alignment, uint32_t version) {
    static const struct {
        const char *name;
        uint32_t type;
        int n_dims;
        int64_t ne[4];
    } ts[] = {
        {"f32", WGML_F32, 1, {3, 1, 1, 1}},     {"f16", WGML_F16, 2, {2, 3, 1, 1}},
        {"q8_0", WGML_Q8_0, 2, {32, 2, 1, 1}},  {"q4_0", WGML_Q4_0, 3, {32, 1, 2, 1}},
        {"q4_k", WGML_Q4_K, 1, {256, 1, 1, 1}}, {"q6_k", WGML_Q6_K, 1, {256, 1, 1, 1}},
        {"i32", WGML_I32, 4, {1, 2, 1, 2}},     {"bf16", WGML_BF16, 1, {5, 1, 1, 1}},
    };
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    ok(gguf_writer_set_str(w, "general.architecture", "test", &err), &err);
    if (alignment) ok(gguf_writer_set_u32(w, "general.alignment", alignment, &err), &err);
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        ok(gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, &err), &err);
    const char *path = out_path("gguf", name);
    ok(gguf_writer_begin(w, path, &err), &err);
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        size_t size = wgml_row_size(ts[i].type, ts[i].ne[0]) * (size_t)(ts[i].ne[1] * ts[i].ne[2] * ts[i].ne[3]);
        uint8_t *p = calloc(1, size);
        for (size_t k = 0; k < size; k++)
            p[k] = (uint8_t)rnd();
        ok(gguf_writer_write_tensor(w, p, size, &err), &err);
        free(p);
    }
    ok(gguf_writer_finish(w, &err), &err);
    gguf_writer_free(w);
    g_count++;
    if (version != 3) {
        size_t n;
        uint8_t *p = read_all(path, &n);
        put_u32_at(p, 4, version);
        write_bytes("gguf", name, p, n);
        g_count--;
        free(p);
    }
}

/* A shared vocabulary with its arrays cut to `keep` entries. */
static void seed_small_vocab(const char *shared, const char *file, uint64_t keep) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s", shared, file);
    gguf_file *f = NULL;
    wgml_error err;
    if (gguf_open(path, &f, &err)) die(path, err.message);
    gguf_writer *w = gguf_writer_create();
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        const gguf_value *v = &kv->value;
        if (v->type == GGUF_TYPE_ARRAY && v->v.arr.n > keep && v->v.arr.elem_type == GGUF_TYPE_STRING) {
            const char **s = calloc(keep, sizeof *s);
            uint64_t *l = calloc(keep, sizeof *l);
            for (uint64_t k = 0; k < keep; k++)
                s[k] = v->v.arr.items[k].v.str.ptr, l[k] = v->v.arr.items[k].v.str.len;
            ok(gguf_writer_set_arr_str(w, kv->key, s, l, keep, &err), &err);
            free(s);
            free(l);
        } else if (v->type == GGUF_TYPE_ARRAY && v->v.arr.n > keep && !v->v.arr.items) {
            ok(gguf_writer_set_arr(w, kv->key, v->v.arr.elem_type, v->v.arr.raw, keep, &err), &err);
        } else {
            ok(gguf_writer_copy_kv(w, kv, &err), &err);
        }
    }
    char name[256];
    snprintf(name, sizeof name, "small-%s", file);
    ok(gguf_writer_begin(w, out_path("gguf", name), &err), &err);
    ok(gguf_writer_finish(w, &err), &err);
    gguf_writer_free(w);
    gguf_close(f);
    g_count++;
}

/* ---- tiny models ---- */

typedef struct {
    const char *arch;
    uint32_t type; /* of the 2-D weights */
    int tied, bias, rope_freqs, n_layer;
    int encoder; /* 0: a llama decoder; 1: bert (2: a reranker); 3: nomic-bert */
} tiny;

enum { DIM = 32, HEADS = 4, KV = 2, HD = 8, FF = 64, VOCAB = 32 };

static size_t fill(uint32_t type, int64_t ne0, int64_t rows, uint8_t **out) {
    size_t row = wgml_row_size(type, ne0), size = row * (size_t)rows;
    uint8_t *p = calloc(1, size);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *d = p + (size_t)r * row;
        for (int64_t i = 0; i < ne0; i++) {
            float x = rnd_normal() * 0.1f;
            if (type == WGML_F32)
                memcpy(d + 4 * i, &x, 4);
            else if (type == WGML_F16) {
                uint16_t h = wgml_f32_to_f16(x);
                memcpy(d + 2 * i, &h, 2);
            }
        }
        if (type == WGML_Q8_0 || type == WGML_Q4_0) { /* blocks: fp16 scale, then random quants */
            size_t bs = type == WGML_Q8_0 ? 34 : 18;
            for (int64_t k = 0; k < ne0 / 32; k++) {
                uint16_t h = wgml_f32_to_f16(0.01f);
                memcpy(d + (size_t)k * bs, &h, 2);
                for (size_t j = 2; j < bs; j++)
                    d[(size_t)k * bs + j] = (uint8_t)rnd();
            }
        }
    }
    *out = p;
    return size;
}

static void seed_tiny_model(const char *name, const tiny *t) {
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    char k[128];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", t->arch, suffix), k)
    ok(gguf_writer_set_str(w, "general.architecture", t->arch, &err), &err);
    ok(gguf_writer_set_str(w, "general.name", name, &err), &err);
    ok(gguf_writer_set_u32(w, KEY("context_length"), 64, &err), &err);
    ok(gguf_writer_set_u32(w, KEY("embedding_length"), DIM, &err), &err);
    ok(gguf_writer_set_u32(w, KEY("feed_forward_length"), FF, &err), &err);
    ok(gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)t->n_layer, &err), &err);
    ok(gguf_writer_set_u32(w, KEY("attention.head_count"), HEADS, &err), &err);
    if (t->encoder) {
        ok(gguf_writer_set_f32(w, KEY("attention.layer_norm_epsilon"), 1e-12f, &err), &err);
        ok(gguf_writer_set_bool(w, KEY("attention.causal"), 0, &err), &err);
        ok(gguf_writer_set_u32(w, KEY("pooling_type"), t->encoder == 2 ? 4 : 1, &err), &err);
        ok(gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", 2, &err), &err);
        if (t->encoder == 3) ok(gguf_writer_set_f32(w, KEY("rope.freq_base"), 1000.0f, &err), &err);
    } else {
        ok(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), KV, &err), &err);
        ok(gguf_writer_set_u32(w, KEY("rope.dimension_count"), HD, &err), &err);
        ok(gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f, &err), &err);
        ok(gguf_writer_set_f32(w, KEY("rope.freq_base"), 10000.0f, &err), &err);
    }
    if (t->rope_freqs) {
        ok(gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear", &err), &err);
        ok(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 2.0f, &err), &err);
    }
#undef KEY
    ok(gguf_writer_set_str(w, "tokenizer.ggml.model",
                           t->encoder ? "bert" : strcmp(t->arch, "qwen2") == 0 ? "gpt2" : "llama", &err),
       &err);
    const char *toks[VOCAB];
    char store[VOCAB][16];
    float scores[VOCAB];
    int32_t types[VOCAB];
    for (int i = 0; i < VOCAB; i++) {
        if (t->encoder && i < 4) /* WordPiece: [CLS] and [SEP] set below */
            snprintf(store[i], sizeof store[i], "%s", (const char *[]){"[PAD]", "[UNK]", "[CLS]", "[SEP]"}[i]);
        else if (i < 3)
            snprintf(store[i], sizeof store[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < 6)
            snprintf(store[i], sizeof store[i], "<0x%02X>", i + 7);
        else
            snprintf(store[i], sizeof store[i], "\xe2\x96\x81%c%c", 'a' + i % 26, 'a' + (i * 7) % 26);
        toks[i] = store[i];
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 6 ? 6 : 1;
    }
    ok(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, VOCAB, &err), &err);
    ok(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, VOCAB, &err), &err);
    ok(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, VOCAB, &err), &err);
    if (t->encoder) {
        ok(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1, &err), &err);
        ok(gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 2, &err), &err);
        ok(gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3, &err), &err);
    } else {
        ok(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, &err), &err);
        ok(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2, &err), &err);
    }

    /* the tensor list: name, type, ne0, ne1 (0 = vector) */
    struct {
        char name[64];
        uint32_t type;
        int64_t ne0, ne1;
    } tl[64];
    int n = 0;
#define ADD(nm, ty, a, b_)                                                                                             \
    (snprintf(tl[n].name, sizeof tl[n].name, "%s", nm), tl[n].type = (ty), tl[n].ne0 = (a), tl[n].ne1 = (b_), n++)
    ADD("token_embd.weight", t->type, DIM, VOCAB);
    if (t->encoder) { /* bert and nomic-bert, as llama.cpp's converter names them */
        ADD("token_types.weight", WGML_F32, DIM, 2);
        if (t->encoder != 3) ADD("position_embd.weight", t->type, DIM, 64);
        ADD("token_embd_norm.weight", WGML_F32, DIM, 0);
        ADD("token_embd_norm.bias", WGML_F32, DIM, 0);
        for (int l = 0; l < t->n_layer; l++) {
            char nm[64];
#define LADD(suffix, ty, a, b_) (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), ADD(nm, ty, a, b_))
            if (t->encoder == 3) {
                LADD("attn_qkv.weight", t->type, DIM, 3 * DIM);
            } else {
                LADD("attn_q.weight", t->type, DIM, DIM);
                LADD("attn_q.bias", WGML_F32, DIM, 0);
                LADD("attn_k.weight", t->type, DIM, DIM);
                LADD("attn_k.bias", WGML_F32, DIM, 0);
                LADD("attn_v.weight", t->type, DIM, DIM);
                LADD("attn_v.bias", WGML_F32, DIM, 0);
            }
            LADD("attn_output.weight", t->type, DIM, DIM);
            LADD("attn_output_norm.weight", WGML_F32, DIM, 0);
            LADD("attn_output_norm.bias", WGML_F32, DIM, 0);
            LADD("ffn_up.weight", t->type, DIM, FF);
            if (t->encoder == 3) LADD("ffn_gate.weight", t->type, DIM, FF);
            LADD("ffn_down.weight", t->type, FF, DIM);
            LADD("layer_output_norm.weight", WGML_F32, DIM, 0);
            LADD("layer_output_norm.bias", WGML_F32, DIM, 0);
#undef LADD
        }
        if (t->encoder == 2) {
            ADD("cls.weight", t->type, DIM, DIM);
            ADD("cls.bias", WGML_F32, DIM, 0);
            ADD("cls.output.weight", WGML_F32, DIM, 1);
            ADD("cls.output.bias", WGML_F32, 1, 0);
        }
    }
    if (!t->encoder) ADD("output_norm.weight", WGML_F32, DIM, 0);
    if (!t->tied && !t->encoder) ADD("output.weight", t->type, DIM, VOCAB);
    if (t->rope_freqs) ADD("rope_freqs.weight", WGML_F32, HD / 2, 0);
    for (int l = 0; !t->encoder && l < t->n_layer; l++) {
        char nm[64];
#define LADD(suffix, ty, a, b_) (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), ADD(nm, ty, a, b_))
        LADD("attn_norm.weight", WGML_F32, DIM, 0);
        LADD("attn_q.weight", t->type, DIM, HEADS * HD);
        LADD("attn_k.weight", t->type, DIM, KV * HD);
        LADD("attn_v.weight", t->type, DIM, KV * HD);
        if (t->bias) {
            LADD("attn_q.bias", WGML_F32, HEADS * HD, 0);
            LADD("attn_k.bias", WGML_F32, KV * HD, 0);
            LADD("attn_v.bias", WGML_F32, KV * HD, 0);
        }
        LADD("attn_output.weight", t->type, HEADS * HD, DIM);
        LADD("ffn_norm.weight", WGML_F32, DIM, 0);
        LADD("ffn_gate.weight", t->type, DIM, FF);
        LADD("ffn_up.weight", t->type, DIM, FF);
        LADD("ffn_down.weight", t->type, FF, DIM);
#undef LADD
    }
#undef ADD
    for (int i = 0; i < n; i++) {
        int64_t ne[2] = {tl[i].ne0, tl[i].ne1};
        ok(gguf_writer_add_tensor(w, tl[i].name, tl[i].type, tl[i].ne1 ? 2 : 1, ne, &err), &err);
    }
    ok(gguf_writer_begin(w, out_path("model_load", name), &err), &err);
    for (int i = 0; i < n; i++) {
        uint8_t *p;
        size_t size = fill(tl[i].type, tl[i].ne0, tl[i].ne1 ? tl[i].ne1 : 1, &p);
        if (!tl[i].ne1 && strstr(tl[i].name, "norm")) /* norms near 1 */
            for (int64_t e = 0; e < tl[i].ne0; e++) {
                float one = 1.0f;
                memcpy(p + 4 * e, &one, 4);
            }
        ok(gguf_writer_write_tensor(w, p, size, &err), &err);
        free(p);
    }
    ok(gguf_writer_finish(w, &err), &err);
    gguf_writer_free(w);
    g_count++;
    /* the models are GGUF seeds too */
    size_t len;
    uint8_t *bytes = read_all(out_path("model_load", name), &len);
    write_bytes("gguf", name, bytes, len);
    free(bytes);
}

/* ---- llama2.c pairs ---- */

/* u32 checkpoint size, checkpoint, tokenizer - the fuzz_llama2c input layout. */
static void seed_llama2c(const char *name, int v1, int shared, int vocab, const uint8_t *tok, size_t tok_n) {
    const int32_t dim = 8, hidden = 16, layers = 1, heads = 2, kv = 1, seq = 4, hd = dim / heads;
    gb ck = {0};
    int32_t hdr[7] = {dim, hidden, layers, heads, kv, v1 || shared ? vocab : -vocab, seq};
    if (v1) {
        gb_u32(&ck, 0x616b3432u);
        gb_u32(&ck, 1);
        gb_put(&ck, hdr, sizeof hdr);
        gb_u8(&ck, (uint8_t)shared);
        gb_zeros(&ck, 256 - ck.n);
    } else {
        gb_put(&ck, hdr, sizeof hdr);
    }
    size_t floats = (size_t)vocab * dim +
                    (size_t)layers * (2 * dim + 2 * dim * dim + 2 * dim * kv * hd + 3 * dim * hidden) + dim +
                    (v1 ? 0 : (size_t)seq * hd) + (shared ? 0 : (size_t)vocab * dim);
    for (size_t i = 0; i < floats; i++)
        gb_f32(&ck, rnd_normal() * 0.1f);
    gb in = {0};
    gb_u32(&in, (uint32_t)ck.n);
    gb_put(&in, ck.p, ck.n);
    gb_put(&in, tok, tok_n);
    write_bytes("llama2c", name, in.p, in.n);
    gb_free(&in);
    gb_free(&ck);
}

static void tiny_tokenizer(gb *t, int vocab) {
    gb_u32(t, 7);
    for (int i = 0; i < vocab; i++) {
        char s[16];
        if (i == 0)
            snprintf(s, sizeof s, "<unk>");
        else if (i == 1)
            snprintf(s, sizeof s, "\n<s>\n");
        else if (i == 2)
            snprintf(s, sizeof s, "\n</s>\n");
        else if (i < 5)
            snprintf(s, sizeof s, "<0x%02X>", i + 7);
        else
            snprintf(s, sizeof s, "%s%c", i % 2 ? " " : "", 'a' + i % 26);
        gb_f32(t, -(float)i);
        gb_u32(t, (uint32_t)strlen(s));
        gb_put(t, s, strlen(s));
    }
}

/* ---- tokenizer texts ---- */

/* ---- PyTorch checkpoints (fuzz_pth): a ZIP + pickle writer of our own ---- */

static uint32_t crc32_bytes(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void gb_u16(gb *b, uint16_t v) { gb_put(b, &v, 2); }

/* torch.save's layout: data descriptors, data aligned to 64 by an "FB" extra
 * field; with zip64, ZIP64 extra fields and end records. */
typedef struct zipw {
    gb out, cd;
    int n, zip64;
} zipw;

static void zipw_add(zipw *z, const char *name, const void *data, size_t n) {
    size_t nlen = strlen(name), pad = (64 - (z->out.n + 30 + nlen + 4) % 64) % 64;
    uint32_t crc = crc32_bytes(data, n), lho = (uint32_t)z->out.n;
    gb_u32(&z->out, 0x04034b50u);
    gb_u16(&z->out, 20);
    gb_u16(&z->out, 0x0808);
    gb_zeros(&z->out, 6 + 12);
    gb_u16(&z->out, (uint16_t)nlen);
    gb_u16(&z->out, (uint16_t)(pad + 4));
    gb_put(&z->out, name, nlen);
    gb_u16(&z->out, 0x4246);
    gb_u16(&z->out, (uint16_t)pad);
    gb_zeros(&z->out, pad);
    gb_put(&z->out, data, n);
    gb_u32(&z->out, 0x08074b50u);
    gb_u32(&z->out, crc);
    gb_u32(&z->out, (uint32_t)n);
    gb_u32(&z->out, (uint32_t)n);
    gb_u32(&z->cd, 0x02014b50u);
    gb_u16(&z->cd, 0x031e);
    gb_u16(&z->cd, 45);
    gb_u16(&z->cd, 0x0808);
    gb_zeros(&z->cd, 6);
    gb_u32(&z->cd, crc);
    gb_u32(&z->cd, z->zip64 ? 0xffffffffu : (uint32_t)n);
    gb_u32(&z->cd, z->zip64 ? 0xffffffffu : (uint32_t)n);
    gb_u16(&z->cd, (uint16_t)nlen);
    gb_u16(&z->cd, z->zip64 ? 28 : 0);
    gb_zeros(&z->cd, 10);
    gb_u32(&z->cd, z->zip64 ? 0xffffffffu : lho);
    gb_put(&z->cd, name, nlen);
    if (z->zip64) {
        gb_u16(&z->cd, 1);
        gb_u16(&z->cd, 24);
        gb_u64(&z->cd, n);
        gb_u64(&z->cd, n);
        gb_u64(&z->cd, lho);
    }
    z->n++;
}

static void zipw_finish(zipw *z) {
    uint64_t cd_at = z->out.n;
    gb_put(&z->out, z->cd.p, z->cd.n);
    if (z->zip64) {
        uint64_t rec = z->out.n;
        gb_u32(&z->out, 0x06064b50u);
        gb_u64(&z->out, 44);
        gb_u16(&z->out, 0x031e);
        gb_u16(&z->out, 45);
        gb_zeros(&z->out, 8);
        gb_u64(&z->out, (uint64_t)z->n);
        gb_u64(&z->out, (uint64_t)z->n);
        gb_u64(&z->out, z->cd.n);
        gb_u64(&z->out, cd_at);
        gb_u32(&z->out, 0x07064b50u);
        gb_u32(&z->out, 0);
        gb_u64(&z->out, rec);
        gb_u32(&z->out, 1);
    }
    gb_u32(&z->out, 0x06054b50u);
    gb_zeros(&z->out, 4);
    gb_u16(&z->out, z->zip64 ? 0xffff : (uint16_t)z->n);
    gb_u16(&z->out, z->zip64 ? 0xffff : (uint16_t)z->n);
    gb_u32(&z->out, z->zip64 ? 0xffffffffu : (uint32_t)z->cd.n);
    gb_u32(&z->out, z->zip64 ? 0xffffffffu : (uint32_t)cd_at);
    gb_u16(&z->out, 0);
    gb_free(&z->cd);
}

/* A pickler that memoizes strings and globals as Python's does (BINPUT after
 * each, BINGET when seen again), so the seeds hold the same opcode patterns
 * as real checkpoints. */
typedef struct pkw {
    gb b;
    uint32_t memo;
    const char *seen[64];
    uint32_t seen_at[64];
    int n_seen;
} pkw;

static void pk_put(pkw *p) {
    if (p->memo < 256) {
        gb_u8(&p->b, 'q');
        gb_u8(&p->b, (uint8_t)p->memo);
    } else {
        gb_u8(&p->b, 'r');
        gb_u32(&p->b, p->memo);
    }
    p->memo++;
}
static int pk_get(pkw *p, const char *key) {
    for (int i = 0; i < p->n_seen; i++)
        if (strcmp(p->seen[i], key) == 0) {
            gb_u8(&p->b, 'h');
            gb_u8(&p->b, (uint8_t)p->seen_at[i]);
            return 1;
        }
    if (p->n_seen < 64 && p->memo < 256) {
        p->seen[p->n_seen] = key;
        p->seen_at[p->n_seen++] = p->memo;
    }
    return 0;
}
static void pk_s(pkw *p, const char *s) {
    if (pk_get(p, s)) return;
    gb_u8(&p->b, 'X');
    gb_u32(&p->b, (uint32_t)strlen(s));
    gb_put(&p->b, s, strlen(s));
    pk_put(p);
}
static void pk_i(pkw *p, int64_t v) {
    if (v >= 0 && v < 256) {
        gb_u8(&p->b, 'K');
        gb_u8(&p->b, (uint8_t)v);
    } else if (v >= 0 && v < 65536) {
        gb_u8(&p->b, 'M');
        gb_u16(&p->b, (uint16_t)v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        gb_u8(&p->b, 'J');
        gb_u32(&p->b, (uint32_t)(int32_t)v);
    } else {
        gb_u8(&p->b, 0x8a);
        gb_u8(&p->b, 8);
        gb_u64(&p->b, (uint64_t)v);
    }
}
static void pk_g(pkw *p, const char *module_and_name) { /* "module\nname\n" */
    if (pk_get(p, module_and_name)) return;
    gb_u8(&p->b, 'c');
    gb_put(&p->b, module_and_name, strlen(module_and_name));
    pk_put(p);
}
static void pk_tup(pkw *p, int n, const int64_t *v) {
    if (n == 0) {
        gb_u8(&p->b, ')');
        return;
    }
    if (n > 3) gb_u8(&p->b, '(');
    for (int i = 0; i < n; i++) pk_i(p, v[i]);
    gb_u8(&p->b, n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 't');
    pk_put(p);
}
static void pk_od(pkw *p) {
    pk_g(p, "collections\nOrderedDict\n");
    gb_u8(&p->b, ')');
    gb_u8(&p->b, 'R');
    pk_put(p);
}

typedef struct pt {
    const char *name, *type, *key;
    int64_t numel, offset;
    int ndim;
    int64_t size[4], stride[4];
} pt;

static void pk_t(pkw *p, const pt *t) {
    pk_g(p, "torch._utils\n_rebuild_tensor_v2\n");
    gb_u8(&p->b, '(');
    gb_u8(&p->b, '(');
    pk_s(p, "storage");
    pk_g(p, t->type);
    pk_s(p, t->key);
    pk_s(p, "cpu");
    pk_i(p, t->numel);
    gb_u8(&p->b, 't');
    pk_put(p);
    gb_u8(&p->b, 'Q');
    pk_i(p, t->offset);
    pk_tup(p, t->ndim, t->size);
    pk_tup(p, t->ndim, t->stride);
    gb_u8(&p->b, 0x89);
    pk_od(p);
    gb_u8(&p->b, 't');
    pk_put(p);
    gb_u8(&p->b, 'R');
    pk_put(p);
}

/* A state dict: OrderedDict() with SETITEMS, then BUILD of {'_metadata': OrderedDict(...)}. */
static void pk_state_dict(pkw *p, const pt *ts, int n) {
    pk_od(p);
    gb_u8(&p->b, '(');
    for (int i = 0; i < n; i++) {
        pk_s(p, ts[i].name);
        pk_t(p, &ts[i]);
    }
    gb_u8(&p->b, 'u');
    gb_u8(&p->b, '}');
    pk_put(p);
    pk_s(p, "_metadata");
    pk_od(p);
    pk_s(p, "");
    gb_u8(&p->b, '}');
    pk_put(p);
    pk_s(p, "version");
    pk_i(p, 1);
    gb_u8(&p->b, 's');
    gb_u8(&p->b, 's');
    gb_u8(&p->b, 's');
    gb_u8(&p->b, 'b');
}

/* Writes the checkpoint (and, for the bare-pickle mode of fuzz_pth, the pickle alone when its
 * storages are those fuzz_pth provides: "0" of 96 bytes, "1" of 4096, "2" empty). */
static void seed_pth(const char *name, const pkw *p, const char *const *keys, const size_t *sizes, int n, int zip64,
                     int bare) {
    zipw z;
    memset(&z, 0, sizeof z);
    z.zip64 = zip64;
    zipw_add(&z, "ckpt/data.pkl", p->b.p, p->b.n);
    for (int i = 0; i < n; i++) {
        char entry[64];
        snprintf(entry, sizeof entry, "ckpt/data/%s", keys[i]);
        uint8_t *d = malloc(sizes[i] ? sizes[i] : 1);
        if (!d) die(name, "out of memory");
        for (size_t k = 0; k < sizes[i]; k++) d[k] = (uint8_t)(rnd() >> 32);
        zipw_add(&z, entry, d, sizes[i]);
        free(d);
    }
    zipw_add(&z, "ckpt/version", "3\n", 2);
    zipw_finish(&z);
    write_bytes("pth", name, z.out.p, z.out.n);
    gb_free(&z.out);
    if (bare) {
        char bn[128];
        snprintf(bn, sizeof bn, "bare-%s", name);
        write_bytes("pth", bn, p->b.p, p->b.n);
    }
}

static void seed_pths(void) {
    static const char *const keys[] = {"0", "1", "2"};
    static const size_t sizes[] = {96, 4096, 0};
    /* a voice .pt: one tensor as the root */
    pkw p = {0};
    gb_u8(&p.b, 0x80);
    gb_u8(&p.b, 2);
    pk_t(&p, &(pt){"", "torch\nFloatStorage\n", "1", 1024, 0, 3, {4, 1, 256}, {256, 256, 1}});
    gb_u8(&p.b, '.');
    seed_pth("voice.pt", &p, keys, sizes, 3, 0, 1);
    seed_pth("voice-zip64.pt", &p, keys, sizes, 3, 1, 0);
    gb_free(&p.b);
    /* a state dict: views of shared storages, every storage type, a scalar, an empty tensor */
    pt ts[] = {
        {"w", "torch\nFloatStorage\n", "0", 24, 0, 2, {4, 6}, {6, 1}},
        {"w_t", "torch\nFloatStorage\n", "0", 24, 0, 2, {6, 4}, {1, 6}},
        {"slice", "torch\nFloatStorage\n", "0", 24, 7, 2, {2, 3}, {12, 2}},
        {"bcast", "torch\nFloatStorage\n", "0", 24, 6, 2, {3, 2}, {0, 1}},
        {"scalar", "torch\nFloatStorage\n", "0", 24, 23, 0, {0}, {0}},
        {"empty", "torch\nFloatStorage\n", "0", 24, 24, 2, {0, 5}, {5, 1}},
        {"none", "torch\nFloatStorage\n", "2", 0, 0, 1, {0}, {1}},
        {"half", "torch\nHalfStorage\n", "1", 2048, 100, 3, {2, 3, 4}, {12, 4, 1}},
        {"bf16", "torch\nBFloat16Storage\n", "1", 2048, 1, 2, {3, 5}, {1, 3}},
        {"f64", "torch\nDoubleStorage\n", "1", 512, 0, 1, {512}, {1}},
        {"i64", "torch\nLongStorage\n", "1", 512, 3, 2, {2, 2}, {2, 1}},
        {"i32", "torch\nIntStorage\n", "1", 1024, 0, 4, {2, 2, 2, 2}, {8, 4, 2, 1}},
        {"i16", "torch\nShortStorage\n", "1", 2048, 0, 1, {5}, {3}},
        {"i8", "torch\nCharStorage\n", "1", 4096, 9, 1, {7}, {1}},
    };
    memset(&p, 0, sizeof p);
    gb_u8(&p.b, 0x80);
    gb_u8(&p.b, 2);
    pk_state_dict(&p, ts, 7);
    gb_u8(&p.b, '.');
    seed_pth("state-dict.pth", &p, keys, sizes, 3, 0, 1);
    gb_free(&p.b);
    for (int k = 7; k < 14; k++) { /* one tensor each: storage "1" as each type */
        memset(&p, 0, sizeof p);
        gb_u8(&p.b, 0x80);
        gb_u8(&p.b, 2);
        pk_state_dict(&p, &ts[k], 1);
        gb_u8(&p.b, '.');
        char nm[64];
        snprintf(nm, sizeof nm, "type-%s.pth", ts[k].name);
        seed_pth(nm, &p, keys, sizes, 3, 0, 1);
        gb_free(&p.b);
    }
    /* Kokoro's layout: a dict of state dicts */
    memset(&p, 0, sizeof p);
    gb_u8(&p.b, 0x80);
    gb_u8(&p.b, 2);
    gb_u8(&p.b, '}');
    pk_put(&p);
    gb_u8(&p.b, '(');
    pk_s(&p, "bert");
    pt bert[] = {{"module.embeddings.word_embeddings.weight", "torch\nFloatStorage\n", "0", 24, 0, 2, {6, 4}, {4, 1}},
                 {"module.embeddings.LayerNorm.weight", "torch\nFloatStorage\n", "0", 24, 4, 1, {4}, {1}}};
    pk_state_dict(&p, bert, 2);
    pk_s(&p, "decoder");
    pt dec[] = {{"module.generator.conv_post.weight_v", "torch\nFloatStorage\n", "1", 1024, 0, 3, {8, 4, 7}, {28, 7, 1}},
                {"module.lstm.weight_ih_l0", "torch\nFloatStorage\n", "1", 1024, 224, 2, {16, 8}, {8, 1}},
                {"module.lstm.weight_hh_l0", "torch\nFloatStorage\n", "1", 1024, 352, 2, {16, 4}, {4, 1}}};
    pk_state_dict(&p, dec, 3);
    gb_u8(&p.b, 'u');
    gb_u8(&p.b, '.');
    seed_pth("kokoro-like.pth", &p, keys, sizes, 3, 0, 1);
    gb_free(&p.b);
}

static void seed_texts(const char *shared) {
    static const char *vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf",
                                   "ggml-vocab-bert-bge.gguf"};
    static const char sep[] = "\n__ggml_vocab_test__\n";
    for (int v = 0; v < 4; v++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/vocab/%s.inp", shared, vocabs[v]);
        size_t n;
        uint8_t *p = read_all(path, &n);
        if (!p) die(path, "cannot read");
        size_t start = 0;
        int k = 0;
        while (start < n) {
            const uint8_t *e = NULL;
            for (size_t i = start; i + sizeof sep - 1 <= n; i++)
                if (memcmp(p + i, sep, sizeof sep - 1) == 0) {
                    e = p + i;
                    break;
                }
            size_t end = e ? (size_t)(e - p) : n;
            size_t len = end - start > 200 ? 200 : end - start;
            gb in = {0};
            gb_u8(&in, (uint8_t)v);
            gb_u8(&in, (uint8_t)(k & 1));
            gb_put(&in, p + start, len);
            char name[64];
            snprintf(name, sizeof name, "v%d-%03d.txt", v, k++);
            write_bytes("tokenizer", name, in.p, in.n);
            gb_free(&in);
            start = e ? end + sizeof sep - 1 : n;
        }
        free(p);
    }
}

/* ---- safetensors (fuzz_safetensors) ---- */

/* A file: the header's length, the header (single quotes stand for double
 * quotes), then data_len bytes of a pattern. */
static void st_seed(const char *name, const char *header, size_t data_len) {
    gb b = {0};
    size_t hn = strlen(header);
    gb_u64(&b, hn);
    for (size_t i = 0; i < hn; i++) gb_u8(&b, header[i] == '\'' ? '"' : (uint8_t)header[i]);
    for (size_t i = 0; i < data_len; i++) gb_u8(&b, (uint8_t)(i * 37 + 5));
    write_bytes("safetensors", name, b.p, b.n);
    gb_free(&b);
}

/* An index for fuzz_safetensors' folder mode (it starts with '{'): the target
 * provides model-00001-of-00002.safetensors (x, y), model-00002-of-00002.safetensors
 * (z, w) and other.safetensors (x, v). */
static void st_index_seed(const char *name, const char *json) {
    gb b = {0};
    for (const char *c = json; *c; c++) gb_u8(&b, *c == '\'' ? '"' : (uint8_t)*c);
    write_bytes("safetensors", name, b.p, b.n);
    gb_free(&b);
}

static void seed_safetensors(void) {
    static const struct {
        const char *name;
        int size;
    } types[] = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"I16", 2}, {"U16", 2}, {"F16", 2},     {"BF16", 2},    {"I32", 4},
                 {"U32", 4},  {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
                 {"C64", 8}};
    gb h = {0};
    char item[160];
    size_t at = 0;
    gb_put(&h, "{", 1);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        int n = snprintf(item, sizeof item, "%s'%s':{'dtype':'%s','shape':[3,1],'data_offsets':[%zu,%zu]}", i ? "," : "",
                         types[i].name, types[i].name, at, at + 3 * (size_t)types[i].size);
        gb_put(&h, item, (size_t)n);
        at += 3 * (size_t)types[i].size;
    }
    gb_put(&h, "}", 1);
    while ((h.n + 8) % 8) gb_u8(&h, ' ');
    gb_u8(&h, 0);
    st_seed("all-dtypes.safetensors", (const char *)h.p, at);
    gb_free(&h);
    st_seed("metadata.safetensors",
            "{'__metadata__':{'format':'pt','note':'\\u00e9\\ud83d\\ude00 \\\"q\\\" \\n'},"
            "'model.embed.weight':{'dtype':'F32','shape':[2,3],'data_offsets':[0,24]},"
            "'model.norm.weight':{'dtype':'F16','shape':[3],'data_offsets':[24,30]},"
            "'model.head.weight':{'dtype':'BF16','shape':[1,1,3],'data_offsets':[30,36]}}    ",
            36);
    st_seed("scalar-empty.safetensors",
            "{'e':{'dtype':'F16','shape':[0,4],'data_offsets':[0,0]},'s':{'dtype':'F32','shape':[],'data_offsets':[0,4]},"
            "'pos':{'dtype':'I64','shape':[1,2],'data_offsets':[4,20]},'z':{'dtype':'U8','shape':[0],'data_offsets':[20,20]}}",
            20);
    st_seed("unordered.safetensors",
            "\n { 'b' : {'shape':[2],'data_offsets':[4,6],'dtype':'U8','extra':[1,-2.5e3,true,null,{'k':'v'}]},\n"
            "   'a' : {'dtype':'I32','shape':[1],'data_offsets':[0,4]}, '__metadata__':null }\t",
            6);
    st_seed("empty.safetensors", "{}      ", 0);
    st_index_seed("index-ok.json",
                  "{'metadata':{'total_size':38},'weight_map':{'x':'model-00001-of-00002.safetensors',"
                  "'y':'model-00001-of-00002.safetensors','z':'model-00002-of-00002.safetensors',"
                  "'w':'model-00002-of-00002.safetensors'}}");
    st_index_seed("index-other.json", "{'weight_map':{'x':'other.safetensors','v':'other.safetensors'}}");
    st_index_seed("index-wrong-shard.json",
                  "{'weight_map':{'x':'model-00002-of-00002.safetensors','y':'model-00001-of-00002.safetensors'}}");
    st_index_seed("index-two-shards.json",
                  "{'weight_map':{'x':'model-00001-of-00002.safetensors','y':'model-00001-of-00002.safetensors',"
                  "'v':'other.safetensors'}}");
    st_index_seed("index-traversal.json", "{'weight_map':{'x':'../model-00001-of-00002.safetensors'}}");
}

/* ---- whisper.cpp ggml .bin (fuzz_whisper_bin) ---- */

/* Whisper's tensors at width S (n_mels mel bands, one block a stack): the
 * names and shapes the official state dict has, F16 matrices and
 * convolution weights (type wtype), F32 vectors; biases [S][1] or 1-D. */
static void whisper_tensors(gb *b, int32_t S, int32_t n_mels, int32_t n_vocab, int32_t wtype, int bias_2d) {
    uint32_t seed = 1;
    const int32_t F = 4 * S;
#define WT(name, type, nd, ...) wb_tensor(b, name, type, nd, (const int32_t[]){__VA_ARGS__}, seed++)
    WT("encoder.positional_embedding", 0, 2, S, 3);
    WT("encoder.conv1.weight", wtype == 0 ? 0 : 1, 3, 3, n_mels, S);
    if (bias_2d) WT("encoder.conv1.bias", 0, 2, 1, S);
    else WT("encoder.conv1.bias", 0, 1, S);
    WT("encoder.conv2.weight", wtype == 0 ? 0 : 1, 3, 3, S, S);
    if (bias_2d) WT("encoder.conv2.bias", 0, 2, 1, S);
    else WT("encoder.conv2.bias", 0, 1, S);
    static const char *const stacks[2] = {"encoder", "decoder"};
    for (int s = 0; s < 2; s++) {
        static const char *const attn[2] = {"attn", "cross_attn"};
        char n[96];
        for (int a = 0; a < 1 + s; a++) {
            snprintf(n, sizeof n, "%s.blocks.0.%s.query.weight", stacks[s], attn[a]), WT(n, wtype, 2, S, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s.query.bias", stacks[s], attn[a]), WT(n, 0, 1, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s.key.weight", stacks[s], attn[a]), WT(n, wtype, 2, S, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s.value.weight", stacks[s], attn[a]), WT(n, wtype, 2, S, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s.value.bias", stacks[s], attn[a]), WT(n, 0, 1, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s.out.weight", stacks[s], attn[a]), WT(n, wtype, 2, S, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s.out.bias", stacks[s], attn[a]), WT(n, 0, 1, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s_ln.weight", stacks[s], attn[a]), WT(n, 0, 1, S);
            snprintf(n, sizeof n, "%s.blocks.0.%s_ln.bias", stacks[s], attn[a]), WT(n, 0, 1, S);
        }
        snprintf(n, sizeof n, "%s.blocks.0.mlp.0.weight", stacks[s]), WT(n, wtype, 2, S, F);
        snprintf(n, sizeof n, "%s.blocks.0.mlp.0.bias", stacks[s]), WT(n, 0, 1, F);
        snprintf(n, sizeof n, "%s.blocks.0.mlp.2.weight", stacks[s]), WT(n, wtype, 2, F, S);
        snprintf(n, sizeof n, "%s.blocks.0.mlp.2.bias", stacks[s]), WT(n, 0, 1, S);
        snprintf(n, sizeof n, "%s.blocks.0.mlp_ln.weight", stacks[s]), WT(n, 0, 1, S);
        snprintf(n, sizeof n, "%s.blocks.0.mlp_ln.bias", stacks[s]), WT(n, 0, 1, S);
    }
    WT("encoder.ln_post.weight", 0, 1, S);
    WT("encoder.ln_post.bias", 0, 1, S);
    WT("decoder.token_embedding.weight", wtype, 2, S, n_vocab);
    WT("decoder.positional_embedding", 0, 2, S, 4);
    WT("decoder.ln.weight", 0, 1, S);
    WT("decoder.ln.bias", 0, 1, S);
#undef WT
}

static void seed_whisper_bins(const char *shared) {
    gb b = {0};
    wb_small_model(&b);
    write_bytes("whisper_bin", "small.bin", b.p, b.n);
    gb_free(&b);

    /* Whisper's names at a small width, each file under fuzz/run.sh's 64 KiB: F16 (width 24, [S][1]
     * biases as the converter writes them), F32 (16, 1-D biases), Q8_0 matrices of quantization
     * version 2 (32, whole blocks) */
    static const int32_t hp[10] = {64, 1500, 32, 2, 1, 448, 32, 2, 1, 4};
    static const struct {
        const char *name;
        int32_t ftype, wtype;
        int bias_2d;
    } kinds[] = {{"names-f16.bin", 1, 1, 1}, {"names-f32.bin", 0, 0, 0}, {"names-q8_0.bin", 2007, 8, 1}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        int32_t h[10];
        memcpy(h, hp, sizeof h);
        h[2] = h[6] = kinds[i].wtype == 0 ? 16 : kinds[i].wtype == 1 ? 24 : 32;
        b = (gb){0};
        wb_header(&b, h, kinds[i].ftype, 5, 40);
        whisper_tensors(&b, h[2], 4, 64, kinds[i].wtype, kinds[i].bias_2d);
        if (b.n > 65536) die(kinds[i].name, "over 64 KiB");
        write_bytes("whisper_bin", kinds[i].name, b.p, b.n);
        gb_free(&b);
    }

    /* the micro model's header and first 400 tokens (its real bytes), with a tiny filter bank and tensors */
    char path[4096];
    snprintf(path, sizeof path, "%s/whisper/whisper-micro-random.bin", shared);
    FILE *fp = fopen(path, "rb");
    if (!fp) die(path, "cannot read");
    static uint8_t head[64 * 1024 + 4096];
    size_t got = fread(head, 1, sizeof head, fp);
    fclose(fp);
    int32_t real[10], n_mel, n_fft;
    memcpy(real, head + 4, sizeof real);
    memcpy(&n_mel, head + 48, 4);
    memcpy(&n_fft, head + 52, 4);
    size_t o = 56 + (size_t)n_mel * (size_t)n_fft * 4 + 4, start = o;
    for (int i = 0; i < 400 && o + 4 <= got; i++) {
        int32_t len;
        memcpy(&len, head + o, 4);
        o += 4 + (size_t)len;
    }
    if (o > got) die(path, "shorter than its header");
    int32_t hp_real[10];
    memcpy(hp_real, real, sizeof hp_real);
    hp_real[9] = 2; /* two mel bands: a small filter bank */
    b = (gb){0};
    wb_header(&b, hp_real, 1, 201, 0);
    b.n -= 4; /* the token count written again, with the real tokens */
    gb_u32(&b, 400);
    gb_put(&b, head + start, o - start);
    wb_tensor(&b, "encoder.conv1.weight", 1, 3, (const int32_t[]){3, 2, 4}, 1);
    wb_tensor(&b, "encoder.conv1.bias", 0, 2, (const int32_t[]){1, 4}, 2);
    wb_tensor(&b, "decoder.ln.weight", 0, 1, (const int32_t[]){4}, 3);
    write_bytes("whisper_bin", "real-tokens.bin", b.p, b.n);
    gb_free(&b);

    /* quantized tensors of an old quantization version (refused), an empty vocabulary */
    static const int32_t hp_small[10] = {300, 1500, 8, 2, 1, 448, 8, 2, 1, 4};
    b = (gb){0};
    wb_header(&b, hp_small, 8, 5, 3);
    wb_tensor(&b, "q5_0", 6, 2, (const int32_t[]){32, 2}, 1);
    write_bytes("whisper_bin", "old-quant.bin", b.p, b.n);
    gb_free(&b);
    b = (gb){0};
    wb_header(&b, hp_small, 1, 5, 0);
    wb_tensor(&b, "decoder.ln.bias", 0, 1, (const int32_t[]){8}, 1);
    write_bytes("whisper_bin", "no-tokens.bin", b.p, b.n);
    gb_free(&b);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: wgml_fuzz_seeds SHARED_DIR OUT_DIR\n");
        return 2;
    }
    const char *shared = argv[1];
    g_out = argv[2];
    static const char *dirs[] = {"", "/gguf", "/model_load", "/llama2c", "/tokenizer", "/pth", "/whisper_bin", "/safetensors"};
    for (int i = 0; i < 8; i++) {
        char d[4096];
        snprintf(d, sizeof d, "%s%s", g_out, dirs[i]);
        if (mkdir(d, 0755) != 0 && errno != EEXIST) die(d, strerror(errno));
    }
    seed_all_types();
    seed_tensors("tensors.gguf", 0, 3);
    seed_tensors("tensors-align64.gguf", 64, 3);
    seed_tensors("tensors-align1.gguf", 1, 3);
    seed_tensors("tensors-v2.gguf", 0, 2);
    static const char *vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf",
                                   "ggml-vocab-bert-bge.gguf"};
    for (int i = 0; i < 4; i++)
        seed_small_vocab(shared, vocabs[i], 300);

    seed_tiny_model("tiny-f32.gguf", &(tiny){"llama", WGML_F32, 1, 0, 0, 1, 0});
    seed_tiny_model("tiny-f32-untied-2l.gguf", &(tiny){"llama", WGML_F32, 0, 0, 0, 2, 0});
    seed_tiny_model("tiny-f16.gguf", &(tiny){"llama", WGML_F16, 0, 0, 0, 1, 0});
    seed_tiny_model("tiny-q8_0.gguf", &(tiny){"llama", WGML_Q8_0, 1, 0, 0, 1, 0});
    seed_tiny_model("tiny-q4_0.gguf", &(tiny){"llama", WGML_Q4_0, 0, 0, 0, 1, 0});
    seed_tiny_model("tiny-qwen2.gguf", &(tiny){"qwen2", WGML_F32, 0, 1, 0, 1, 0});
    seed_tiny_model("tiny-rope-freqs.gguf", &(tiny){"llama", WGML_F16, 1, 0, 1, 1, 0});
    seed_tiny_model("tiny-bert.gguf", &(tiny){"bert", WGML_F32, 0, 1, 0, 1, 1});
    seed_tiny_model("tiny-bert-q8_0.gguf", &(tiny){"bert", WGML_Q8_0, 0, 1, 0, 2, 1});
    seed_tiny_model("tiny-bert-reranker.gguf", &(tiny){"bert", WGML_F16, 0, 1, 0, 1, 2});
    seed_tiny_model("tiny-nomic-bert.gguf", &(tiny){"nomic-bert", WGML_F32, 0, 0, 0, 1, 3});

    gb tok = {0};
    tiny_tokenizer(&tok, 16);
    seed_llama2c("legacy-shared.bin", 0, 1, 16, tok.p, tok.n);
    seed_llama2c("legacy-unshared.bin", 0, 0, 16, tok.p, tok.n);
    seed_llama2c("v1-shared.bin", 1, 1, 16, tok.p, tok.n);
    seed_llama2c("v1-unshared.bin", 1, 0, 16, tok.p, tok.n);
    gb_free(&tok);
    char path[4096];
    snprintf(path, sizeof path, "%s/models/llama2c/tok512.bin", shared);
    size_t n512;
    uint8_t *tok512 = read_all(path, &n512);
    if (!tok512) die(path, "cannot read");
    seed_llama2c("legacy-tok512.bin", 0, 1, 512, tok512, n512);
    free(tok512);

    seed_texts(shared);
    seed_pths();
    seed_whisper_bins(shared);
    seed_safetensors();
    printf("wgml_fuzz_seeds: wrote %d seeds under %s\n", g_count, g_out);
    return 0;
}
