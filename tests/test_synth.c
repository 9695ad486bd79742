/*
 * test_synth.c - synthetic models of every listed architecture: the file has
 * the table's tensor names, shapes and metadata (Qwen2's biases, Llama 3's
 * rope_freqs and tied output, ...) and a vocabulary of exactly n_vocab
 * tokens; it loads through the public API on the CPU and, when a software
 * WebGPU adapter (lavapipe) is present, on WebGPU; 8 greedy tokens give
 * finite logits and the same top-1 on both backends.
 *
 * The BERT-family encoders (bge-small, all-minilm-l6, ms-marco-minilm-l6,
 * nomic-embed) are checked as files: the tensor list, shapes and metadata
 * llama.cpp's converter writes, the per-tensor types of the F16, Q8_0 and
 * Q4_K_M recipes, and the WordPiece vocabulary padded to nomic's 30528.
 *
 * All but stories15m are cut to 2 layers (--layers keeps every shape): on
 * lavapipe a decode step of the 1B-class models costs seconds, mostly the
 * 128K-152K-row output matrix, which every cut keeps whole.
 *
 * Top-1 agreement: the logits are ~N(0, 1) over tens of thousands of
 * tokens, so the two largest are often close, and the backends round
 * differently: the CPU quantizes activations to 8 bits for quantized weights
 * (as ggml does; logits then differ by up to ~0.1), lavapipe keeps the KV
 * cache in f16 (~1e-3 with float weights). So at each position the GPU's
 * top-1 must be the CPU's whenever the CPU's top-2 gap exceeds the tolerance
 * (float weights 0.01, quantized 0.1), and otherwise be a token whose CPU
 * logit is within that tolerance of the CPU's maximum (a near-tie).
 */
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "format/gguf.h"
#include "tools/synth.h"
#include "testutil.h"
#include "wgml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define N_STEPS 8

typedef struct {
    const char *arch, *type;
    int layers;
    uint32_t file_type;
} synth_case;

static const synth_case cases[] = {
    {"stories15m", "F16", 0, 1},    {"stories110m", "Q4_K_M", 2, 15}, {"tinyllama-1.1b", "Q8_0", 2, 7},
    {"llama-3.2-1b", "Q8_0", 2, 7}, {"qwen2.5-0.5b", "Q8_0", 2, 7},   {"smollm2-135m", "Q8_0", 2, 7},
    {"smollm2-360m", "F16", 2, 1},
};

static const char *default_vocab(const synth_arch *a) {
    if (a->kind != SYNTH_DECODER) return tu_shared("vocab/ggml-vocab-bert-bge.gguf");
    return tu_shared(a->bpe ? "vocab/ggml-vocab-gpt-2.gguf" : "vocab/ggml-vocab-llama-spm.gguf");
}

static void synth(const char *out, const char *arch, const char *type, int layers, uint64_t seed) {
    synth_params p = {.arch = arch,
                      .type = type,
                      .vocab = default_vocab(synth_arch_find(arch)),
                      .seed = seed,
                      .n_layer = layers,
                      .n_threads = 2};
    wgml_error err;
    wgml_status st = synth_write(out, &p, NULL, &err);
    if (st) fprintf(stderr, "synth %s: %s\n", arch, err.message);
    assert_int_equal(st, WGML_OK);
}

static int64_t get_int(const gguf_file *f, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s%s%s", arch, arch[0] ? "." : "", suffix);
    int64_t v = -1;
    wgml_error err;
    if (gguf_get_int(f, key, INT64_MIN, INT64_MAX, &v, &err) != 1) fail_msg("missing integer metadata %s", key);
    return v;
}

static double get_float(const gguf_file *f, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v = -1;
    wgml_error err;
    if (gguf_get_float(f, key, &v, &err) != 1) fail_msg("missing float metadata %s", key);
    return v;
}

static int str_is(gguf_str s, const char *c) { return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0; }

/* Tensors as the table says, metadata as llama.cpp writes it, vocabulary resized. */
static void check_file(const char *path, const synth_case *c) {
    const synth_arch *a = synth_arch_find(c->arch);
    const int L = c->layers ? c->layers : a->n_layer;
    gguf_file *f;
    wgml_error err;
    assert_int_equal(gguf_open(path, &f, &err), WGML_OK);

    synth_tensor want[1024];
    int n = synth_tensor_list(a, L, want, 1024);
    assert_int_equal(n, 1 + 9 * L + 1 + !a->tied + (a->rope3_factor > 0) + (a->qkv_bias ? 3 * L : 0));
    assert_int_equal(gguf_n_tensors(f), n);
    for (int i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_find_tensor(f, want[i].name);
        if (!t) fail_msg("%s: missing %s", c->arch, want[i].name);
        assert_int_equal(t->n_dims, want[i].n_dims);
        assert_int_equal(t->ne[0], want[i].ne[0]);
        assert_int_equal(t->ne[1], want[i].ne[1]);
        if (want[i].n_dims == 1) assert_int_equal(t->type, WGML_F32);
    }
    const int64_t hd = a->n_embd / a->n_head;
    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    assert_int_equal(emb->ne[0], a->n_embd);
    assert_int_equal(emb->ne[1], a->n_vocab);
    const gguf_tensor *q = gguf_find_tensor(f, "blk.0.attn_q.weight"), *k = gguf_find_tensor(f, "blk.0.attn_k.weight");
    assert_int_equal(q->ne[1], a->n_head * hd);
    assert_int_equal(k->ne[1], a->n_head_kv * hd);
    assert_int_equal(gguf_find_tensor(f, "blk.0.ffn_down.weight")->ne[0], a->n_ff);
    char last[64];
    snprintf(last, sizeof last, "blk.%d.ffn_up.weight", L - 1);
    assert_non_null(gguf_find_tensor(f, last));
    snprintf(last, sizeof last, "blk.%d.ffn_up.weight", L);
    assert_null(gguf_find_tensor(f, last));
    if (!strcmp(c->arch, "qwen2.5-0.5b")) {
        assert_int_equal(gguf_find_tensor(f, "blk.0.attn_q.bias")->ne[0], 896);
        assert_int_equal(gguf_find_tensor(f, "blk.0.attn_k.bias")->ne[0], 128);
        assert_int_equal(gguf_find_tensor(f, "blk.1.attn_v.bias")->ne[0], 128);
        assert_null(gguf_find_tensor(f, "output.weight"));
    } else {
        assert_null(gguf_find_tensor(f, "blk.0.attn_q.bias"));
    }
    if (!strcmp(c->arch, "llama-3.2-1b")) {
        const gguf_tensor *rf = gguf_find_tensor(f, "rope_freqs.weight");
        assert_non_null(rf);
        assert_int_equal(rf->ne[0], 32);
        assert_null(gguf_find_tensor(f, "output.weight"));
    } else {
        assert_null(gguf_find_tensor(f, "rope_freqs.weight"));
    }
    if (!strcmp(c->arch, "tinyllama-1.1b") || !strncmp(c->arch, "stories", 7))
        assert_non_null(gguf_find_tensor(f, "output.weight"));
    if (!strncmp(c->arch, "smollm2", 7)) assert_null(gguf_find_tensor(f, "output.weight"));

    gguf_str s;
    assert_int_equal(gguf_get_str(f, "general.architecture", &s, &err), 1);
    assert_true(str_is(s, a->arch));
    assert_int_equal(get_int(f, "", "general.file_type"), c->file_type);
    assert_int_equal(get_int(f, "", "general.quantization_version"), 2);
    assert_int_equal(get_int(f, a->arch, "block_count"), L);
    assert_int_equal(get_int(f, a->arch, "context_length"), a->n_ctx);
    assert_int_equal(get_int(f, a->arch, "embedding_length"), a->n_embd);
    assert_int_equal(get_int(f, a->arch, "feed_forward_length"), a->n_ff);
    assert_int_equal(get_int(f, a->arch, "attention.head_count"), a->n_head);
    assert_int_equal(get_int(f, a->arch, "attention.head_count_kv"), a->n_head_kv);
    assert_int_equal(get_int(f, a->arch, "rope.dimension_count"), hd);
    assert_int_equal(get_int(f, a->arch, "vocab_size"), a->n_vocab);
    assert_true(fabs(get_float(f, a->arch, "rope.freq_base") - a->rope_base) <= 1e-6 * a->rope_base);
    assert_true(fabs(get_float(f, a->arch, "attention.layer_norm_rms_epsilon") - a->eps) <= 1e-3 * a->eps);

    /* the vocabulary: exactly n_vocab tokens, scores/types alike */
    const gguf_value *tok, *types;
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok, &err), 1);
    assert_int_equal(tok->v.arr.n, a->n_vocab);
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, &err), 1);
    assert_int_equal(types->v.arr.n, a->n_vocab);
    assert_int_equal(gguf_get_str(f, "tokenizer.ggml.model", &s, &err), 1);
    assert_true(str_is(s, a->bpe ? "gpt2" : "llama"));
    if (a->n_vocab > 50257 && a->bpe) { /* gpt-2 padded: "[PAD<i>]", unused */
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%d]", a->n_vocab - 1);
        assert_true(str_is(tok->v.arr.items[a->n_vocab - 1].v.str, pad));
        assert_int_equal(gguf_arr_i32(types, (uint64_t)a->n_vocab - 1), 5);
        assert_int_equal(get_int(f, "", "tokenizer.ggml.eos_token_id"), 50256);
    }
    if (a->n_vocab < 50257 && a->bpe) { /* gpt-2 truncated: <|endoftext|> moved to the last slot */
        int64_t eos = get_int(f, "", "tokenizer.ggml.eos_token_id");
        assert_int_equal(eos, a->n_vocab - 1);
        assert_int_equal(get_int(f, "", "tokenizer.ggml.bos_token_id"), eos);
        assert_true(str_is(tok->v.arr.items[eos].v.str, "<|endoftext|>"));
        const gguf_value *merges;
        assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, &err), 1);
        assert_true(merges->v.arr.n > 40000 && merges->v.arr.n < 50000);
    }
    gguf_close(f);
}

static int finite_all(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int argmax(const float *x, int n, float *gap) {
    int b = 0, s = -1;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[b])
            s = b, b = i;
        else if (s < 0 || x[i] > x[s])
            s = i;
    }
    *gap = x[b] - x[s];
    return b;
}

static wgml_status load(const char *path, wgml_backend_kind kind, wgml_model **m, wgml_error *err) {
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = kind;
    mp.n_threads = 2;
    if (kind == WGML_BACKEND_WEBGPU) mp.adapter = "llvmpipe";
    return wgml_model_load(path, &mp, m, err);
}

/* Evaluates tokens one at a time; logits[step * n_vocab ...]. With ids NULL,
 * generates greedily into `tokens` (tokens[0] given). */
static void run_steps(wgml_model *m, int32_t *tokens, float *logits, int n_vocab, int greedy) {
    wgml_session_params sp = wgml_session_default_params();
    sp.n_ctx = 16;
    wgml_session *s;
    wgml_error err;
    assert_int_equal(wgml_session_create(m, &sp, &s, &err), WGML_OK);
    for (int i = 0; i < N_STEPS; i++) {
        wgml_status st = wgml_session_eval(s, &tokens[i], 1, &err);
        if (st) fprintf(stderr, "eval: %s\n", err.message);
        assert_int_equal(st, WGML_OK);
        const float *l = wgml_session_logits(s);
        assert_non_null(l);
        memcpy(logits + (size_t)i * n_vocab, l, (size_t)n_vocab * sizeof *l);
        assert_true(finite_all(l, n_vocab));
        float gap;
        if (greedy && i + 1 < N_STEPS) tokens[i + 1] = argmax(l, n_vocab, &gap);
    }
    wgml_session_free(s);
}

static int adapter_required(void) {
    const char *req = getenv("WGML_REQUIRE_ADAPTERS");
    return req && strstr(req, "llvmpipe");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_arch(void **state) {
    const synth_case *c = *state;
    const double t0 = now_s();
    const synth_arch *a = synth_arch_find(c->arch);
    assert_non_null(a);
    char name[64];
    snprintf(name, sizeof name, "synth-%s.gguf", c->arch);
    const char *path = tu_tmp_path(name);
    synth(path, c->arch, c->type, c->layers, 7);
    check_file(path, c);

    wgml_model *m;
    wgml_error err;
    wgml_status st = load(path, WGML_BACKEND_CPU, &m, &err);
    if (st) fprintf(stderr, "%s: %s\n", c->arch, err.message);
    assert_int_equal(st, WGML_OK);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    assert_int_equal(info.n_vocab, a->n_vocab);
    assert_int_equal(info.n_layer, c->layers ? c->layers : a->n_layer);
    assert_int_equal(info.n_embd, a->n_embd);
    assert_int_equal(info.n_head, a->n_head);
    assert_int_equal(info.n_head_kv, a->n_head_kv);
    assert_int_equal(info.n_ff, a->n_ff);
    /* the tokenizer works */
    int32_t ids[64];
    int nt = wgml_tokenize(m, "Hello world, this is a test.", 28, 0, ids, 64, &err);
    assert_true(nt > 0 && nt <= 28);
    for (int i = 0; i < nt; i++)
        assert_true(ids[i] >= 0 && ids[i] < a->n_vocab);

    int32_t tokens[N_STEPS];
    tokens[0] = info.bos >= 0 ? info.bos : ids[0];
    float *cpu = malloc((size_t)N_STEPS * a->n_vocab * sizeof *cpu),
          *gpu = malloc((size_t)N_STEPS * a->n_vocab * sizeof *gpu);
    assert_non_null(cpu);
    assert_non_null(gpu);
    run_steps(m, tokens, cpu, a->n_vocab, 1);
    wgml_model_free(m);

    st = load(path, WGML_BACKEND_WEBGPU, &m, &err);
    if ((st == WGML_ERR_NO_ADAPTER || st == WGML_ERR_UNSUPPORTED) && !adapter_required()) {
        fprintf(stderr, "%s: WebGPU part skipped: %s\n", c->arch, err.message);
    } else {
        if (st) fprintf(stderr, "%s: %s\n", c->arch, err.message);
        assert_int_equal(st, WGML_OK);
        run_steps(m, tokens, gpu, a->n_vocab, 0);
        wgml_model_free(m);
        const int quantized = wgml_dtype_get((uint32_t)wgml_dtype_from_name(c->type) < WGML_DTYPE_COUNT
                                                 ? (uint32_t)wgml_dtype_from_name(c->type)
                                                 : WGML_Q8_0)
                                  ->quantized;
        const float tol = quantized ? 0.1f : 0.01f;
        float max_diff = 0;
        int strict = 0, equal = 0;
        for (int i = 0; i < N_STEPS; i++) {
            const float *lc = cpu + (size_t)i * a->n_vocab, *lg = gpu + (size_t)i * a->n_vocab;
            float gap_c, gap_g;
            int tc = argmax(lc, a->n_vocab, &gap_c), tg = argmax(lg, a->n_vocab, &gap_g);
            for (int k = 0; k < a->n_vocab; k++)
                max_diff = fmaxf(max_diff, fabsf(lc[k] - lg[k]));
            strict += gap_c > tol;
            equal += tc == tg;
            if (tc != tg && (gap_c > tol || lc[tc] - lc[tg] > tol))
                fail_msg("%s: position %d: CPU top-1 %d (gap %.4f), WebGPU top-1 %d (CPU logit %.4f below)", c->arch, i,
                         tc, gap_c, tg, lc[tc] - lc[tg]);
        }
        fprintf(stderr,
                "%s (%s, %d layers): logits within %.2g of the CPU's; top-1 equal at %d of %d positions "
                "(%d with a top-2 gap over %.2g); %.1f s\n",
                c->arch, c->type, c->layers ? c->layers : a->n_layer, max_diff, equal, N_STEPS, strict, tol,
                now_s() - t0);
        assert_true(max_diff < 2 * tol);
    }
    free(cpu);
    free(gpu);
    remove(path);
}

/* ---- generator properties ---- */

static unsigned char *slurp(const char *path, size_t *n) {
    unsigned char *b = tu_read_file(path, n);
    assert_non_null(b);
    return b;
}

/* Same seed -> same bytes; another seed -> other weights; --layers keeps the first layers' weights. */
static void test_determinism(void **state) {
    (void)state;
    const char *a = tu_tmp_path("d1.gguf"), *b = tu_tmp_path("d2.gguf"), *c = tu_tmp_path("d3.gguf"),
               *d = tu_tmp_path("d4.gguf");
    synth(a, "stories15m", "Q8_0", 1, 11);
    synth(b, "stories15m", "Q8_0", 1, 11);
    synth(c, "stories15m", "Q8_0", 1, 12);
    synth(d, "stories15m", "Q8_0", 2, 11);
    size_t na, nb, nc;
    unsigned char *ba = slurp(a, &na), *bb = slurp(b, &nb), *bc = slurp(c, &nc);
    assert_int_equal(na, nb);
    assert_memory_equal(ba, bb, na);
    assert_int_equal(na, nc);
    assert_true(memcmp(ba, bc, na) != 0);
    free(ba);
    free(bb);
    free(bc);
    gguf_file *f1, *f2;
    wgml_error err;
    assert_int_equal(gguf_open(a, &f1, &err), WGML_OK);
    assert_int_equal(gguf_open(d, &f2, &err), WGML_OK);
    const char *names[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight", "output.weight"};
    for (int i = 0; i < 4; i++) {
        const gguf_tensor *t1 = gguf_find_tensor(f1, names[i]), *t2 = gguf_find_tensor(f2, names[i]);
        assert_int_equal(t1->size, t2->size);
        assert_memory_equal(t1->data, t2->data, t1->size);
    }
    gguf_close(f1);
    gguf_close(f2);
    remove(a);
    remove(b);
    remove(c);
    remove(d);
}

/* mean and standard deviation of a tensor's values (dequantized) */
static void stats(const gguf_tensor *t, double *mean, double *std) {
    float *row = malloc((size_t)t->ne[0] * sizeof *row);
    size_t rs = wgml_row_size(t->type, t->ne[0]);
    double s = 0, s2 = 0;
    int64_t rows = t->n_elements / t->ne[0];
    for (int64_t r = 0; r < rows; r++) {
        assert_int_equal(wgml_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * rs, row, t->ne[0]), 0);
        for (int64_t i = 0; i < t->ne[0]; i++)
            s += row[i], s2 += (double)row[i] * row[i];
    }
    *mean = s / (double)t->n_elements;
    *std = sqrt(s2 / (double)t->n_elements - *mean * *mean);
    free(row);
}

/* Matrices ~ N(0, 0.02), also after K-quantization; norms ~ 1; Llama 3 rope factors as llama.cpp's. */
static void test_values(void **state) {
    (void)state;
    const char *p32 = tu_tmp_path("v32.gguf"), *pk = tu_tmp_path("vk.gguf");
    synth(p32, "stories15m", "F32", 1, 3);
    synth(pk, "stories110m", "Q4_K_M", 1, 3);
    gguf_file *f;
    wgml_error err;
    double mean, std;
    assert_int_equal(gguf_open(p32, &f, &err), WGML_OK);
    stats(gguf_find_tensor(f, "blk.0.attn_q.weight"), &mean, &std);
    assert_true(fabs(mean) < 1e-3 && fabs(std - 0.02) < 0.0005);
    stats(gguf_find_tensor(f, "token_embd.weight"), &mean, &std);
    assert_true(fabs(mean) < 1e-4 && fabs(std - 0.02) < 0.0002);
    stats(gguf_find_tensor(f, "blk.0.ffn_norm.weight"), &mean, &std);
    assert_true(fabs(mean - 1) < 0.01 && std < 0.03);
    gguf_close(f);
    assert_int_equal(gguf_open(pk, &f, &err), WGML_OK);
    const gguf_tensor *t = gguf_find_tensor(f, "blk.0.attn_q.weight");
    assert_int_equal(t->type, WGML_Q4_K);
    stats(t, &mean, &std);
    assert_true(fabs(mean) < 1e-3 && fabs(std - 0.02) < 0.002);
    t = gguf_find_tensor(f, "output.weight");
    assert_int_equal(t->type, WGML_Q6_K);
    stats(t, &mean, &std);
    assert_true(fabs(mean) < 1e-3 && fabs(std - 0.02) < 0.001);
    gguf_close(f);
    remove(p32);
    remove(pk);

    /* rope_freqs of Llama 3.2 1B: theta 500000, factor 32, low 1, high 4, original context 8192 */
    float fac[32];
    synth_rope3_factors(synth_arch_find("llama-3.2-1b"), fac);
    for (int i = 0; i < 15; i++)
        assert_true(fac[i] == 1.0f);
    assert_true(fabsf(fac[15] - 1.65133f) < 1e-3f);
    assert_true(fabsf(fac[16] - 3.29226f) < 1e-3f);
    assert_true(fabsf(fac[17] - 9.66673f) < 1e-3f);
    for (int i = 18; i < 32; i++)
        assert_true(fac[i] == 32.0f);
}

/* ---- encoders (BERT family) ---- */

typedef struct {
    const char *name;
    int64_t ne0, ne1; /* ne1 0: a 1-D tensor */
} want_tensor;

static void check_list(const char *arch, int layers, const want_tensor *w, int n_want) {
    synth_tensor ts[256];
    int n = synth_tensor_list(synth_arch_find(arch), layers, ts, 256);
    assert_int_equal(n, n_want);
    for (int i = 0; i < n; i++) {
        if (strcmp(ts[i].name, w[i].name)) fail_msg("%s: tensor %d is %s, not %s", arch, i, ts[i].name, w[i].name);
        assert_int_equal(ts[i].n_dims, w[i].ne1 ? 2 : 1);
        assert_int_equal(ts[i].ne[0], w[i].ne0);
        assert_int_equal(ts[i].ne[1], w[i].ne1 ? w[i].ne1 : 1);
    }
}

/* The layouts llama.cpp's BertModel / NomicBertModel converter writes, one layer spelled out. */
static void test_encoder_lists(void **state) {
    (void)state;
    /* clang-format off */
    const want_tensor bert[] = {
        {"token_embd.weight", 384, 30522},
        {"token_types.weight", 384, 2},
        {"position_embd.weight", 384, 512},
        {"token_embd_norm.weight", 384, 0},
        {"token_embd_norm.bias", 384, 0},
        {"blk.0.attn_q.weight", 384, 384},
        {"blk.0.attn_q.bias", 384, 0},
        {"blk.0.attn_k.weight", 384, 384},
        {"blk.0.attn_k.bias", 384, 0},
        {"blk.0.attn_v.weight", 384, 384},
        {"blk.0.attn_v.bias", 384, 0},
        {"blk.0.attn_output.weight", 384, 384},
        {"blk.0.attn_output.bias", 384, 0},
        {"blk.0.attn_output_norm.weight", 384, 0},
        {"blk.0.attn_output_norm.bias", 384, 0},
        {"blk.0.ffn_up.weight", 384, 1536},
        {"blk.0.ffn_up.bias", 1536, 0},
        {"blk.0.ffn_down.weight", 1536, 384},
        {"blk.0.ffn_down.bias", 384, 0},
        {"blk.0.layer_output_norm.weight", 384, 0},
        {"blk.0.layer_output_norm.bias", 384, 0},
        /* the reranker's head */
        {"cls.weight", 384, 384},
        {"cls.bias", 384, 0},
        {"cls.output.weight", 384, 1},
        {"cls.output.bias", 1, 0},
    };
    /* clang-format on */
    check_list("bge-small", 1, bert, 21);
    check_list("all-minilm-l6", 1, bert, 21);
    check_list("ms-marco-minilm-l6", 1, bert, 25);
    /* clang-format off */
    const want_tensor nomic[] = {
        {"token_embd.weight", 768, 30528},
        {"token_types.weight", 768, 2},
        {"token_embd_norm.weight", 768, 0},
        {"token_embd_norm.bias", 768, 0},
        {"blk.0.attn_qkv.weight", 768, 2304},
        {"blk.0.attn_output.weight", 768, 768},
        {"blk.0.attn_output_norm.weight", 768, 0},
        {"blk.0.attn_output_norm.bias", 768, 0},
        {"blk.0.ffn_up.weight", 768, 3072},
        {"blk.0.ffn_gate.weight", 768, 3072},
        {"blk.0.ffn_down.weight", 3072, 768},
        {"blk.0.layer_output_norm.weight", 768, 0},
        {"blk.0.layer_output_norm.bias", 768, 0},
    };
    /* clang-format on */
    check_list("nomic-embed", 1, nomic, 13);
    /* whole models: 5 + 16 per layer (+ 4), 4 + 9 per layer */
    assert_int_equal(synth_tensor_list(synth_arch_find("bge-small"), 0, NULL, 0), 5 + 16 * 12);
    assert_int_equal(synth_tensor_list(synth_arch_find("all-minilm-l6"), 0, NULL, 0), 5 + 16 * 6);
    assert_int_equal(synth_tensor_list(synth_arch_find("ms-marco-minilm-l6"), 0, NULL, 0), 5 + 16 * 6 + 4);
    assert_int_equal(synth_tensor_list(synth_arch_find("nomic-embed"), 0, NULL, 0), 4 + 9 * 12);
}

/* The type a tensor of an encoder file must have under the recipe `type`. */
static uint32_t encoder_type(const char *type, const synth_tensor *t) {
    if (t->n_dims == 1 || !strcmp(t->name, "token_types.weight") || !strcmp(t->name, "position_embd.weight") ||
        !strcmp(t->name, "cls.output.weight"))
        return WGML_F32;
    if (!strcmp(type, "F16")) return WGML_F16;
    if (!strcmp(type, "Q8_0")) return WGML_Q8_0; /* every row (384, 768, 1536, 3072) fits 32-blocks */
    /* Q4_K_M: token_embd as the (absent) output, K-quant rows of 384 fall back as llama.cpp's do */
    const int narrow = t->ne[0] % 256 != 0;
    if (!strcmp(t->name, "token_embd.weight")) return narrow ? WGML_Q8_0 : WGML_Q6_K;
    if (strstr(t->name, "attn_qkv")) return WGML_Q5_K;
    if (strstr(t->name, "ffn_down") || strstr(t->name, "attn_v.")) {
        /* use_more_bits with 2 layers: layer 1 only */
        if (!strncmp(t->name, "blk.1.", 6)) return narrow ? WGML_Q8_0 : WGML_Q6_K;
    }
    return narrow ? WGML_Q5_0 : WGML_Q4_K;
}

static void check_encoder_file(const char *arch, const char *type) {
    const synth_arch *a = synth_arch_find(arch);
    assert_non_null(a);
    const char *path = tu_tmp_path("synth-enc.gguf");
    synth(path, arch, type, 2, 9);
    gguf_file *f;
    wgml_error err;
    assert_int_equal(gguf_open(path, &f, &err), WGML_OK);
    synth_tensor want[64];
    int n = synth_tensor_list(a, 2, want, 64);
    assert_int_equal(gguf_n_tensors(f), n);
    for (int i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (strcmp(t->name, want[i].name)) fail_msg("%s: tensor %d is %s, not %s", arch, i, t->name, want[i].name);
        assert_int_equal(t->n_dims, want[i].n_dims);
        assert_int_equal(t->ne[0], want[i].ne[0]);
        if (want[i].n_dims == 2) assert_int_equal(t->ne[1], want[i].ne[1]);
        uint32_t wt = encoder_type(type, &want[i]);
        if (t->type != wt)
            fail_msg("%s %s: %s is %s, not %s", arch, type, t->name, wgml_dtype_name(t->type), wgml_dtype_name(wt));
    }

    /* metadata as the converter writes it */
    gguf_str s;
    int b = -1;
    char key[128];
    assert_int_equal(gguf_get_str(f, "general.architecture", &s, &err), 1);
    assert_true(str_is(s, a->arch));
    assert_int_equal(get_int(f, a->arch, "block_count"), 2);
    assert_int_equal(get_int(f, a->arch, "context_length"), a->n_ctx);
    assert_int_equal(get_int(f, a->arch, "embedding_length"), a->n_embd);
    assert_int_equal(get_int(f, a->arch, "feed_forward_length"), a->n_ff);
    assert_int_equal(get_int(f, a->arch, "attention.head_count"), 12);
    assert_int_equal(get_int(f, a->arch, "pooling_type"), a->pooling);
    assert_true(fabs(get_float(f, a->arch, "attention.layer_norm_epsilon") - 1e-12) < 1e-15);
    snprintf(key, sizeof key, "%s.attention.causal", a->arch);
    assert_int_equal(gguf_get_bool(f, key, &b, &err), 1);
    assert_int_equal(b, 0);
    assert_int_equal(get_int(f, "", "tokenizer.ggml.token_type_count"), 2);
    const char *absent[] = {"vocab_size", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
                            "rope.dimension_count"};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%s.%s", a->arch, absent[i]);
        if (gguf_find_kv(f, key)) fail_msg("%s: unexpected key %s", arch, key);
    }
    snprintf(key, sizeof key, "%s.rope.freq_base", a->arch);
    if (a->kind == SYNTH_NOMIC_BERT)
        assert_true(fabs(get_float(f, a->arch, "rope.freq_base") - 1000) < 1e-3);
    else
        assert_null(gguf_find_kv(f, key));
    const gguf_value *labels;
    snprintf(key, sizeof key, "%s.classifier.output_labels", a->arch);
    if (a->cls_head) {
        assert_int_equal(gguf_get_arr(f, key, GGUF_TYPE_STRING, &labels, &err), 1);
        assert_int_equal(labels->v.arr.n, 1);
        assert_true(str_is(labels->v.arr.items[0].v.str, "LABEL_0"));
        assert_int_equal(a->pooling, 4);
    } else {
        assert_null(gguf_find_kv(f, key));
    }

    /* the WordPiece vocabulary: n_vocab tokens, special ids kept, padding UNUSED */
    const gguf_value *tok, *types;
    assert_int_equal(gguf_get_str(f, "tokenizer.ggml.model", &s, &err), 1);
    assert_true(str_is(s, "bert"));
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok, &err), 1);
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, &err), 1);
    assert_int_equal(tok->v.arr.n, a->n_vocab);
    assert_int_equal(types->v.arr.n, a->n_vocab);
    assert_int_equal(get_int(f, "", "tokenizer.ggml.cls_token_id"), 101);
    assert_int_equal(get_int(f, "", "tokenizer.ggml.seperator_token_id"), 102);
    assert_int_equal(get_int(f, "", "tokenizer.ggml.padding_token_id"), 0);
    assert_int_equal(get_int(f, "", "tokenizer.ggml.unknown_token_id"), 100);
    assert_true(str_is(tok->v.arr.items[101].v.str, "[CLS]"));
    assert_true(str_is(tok->v.arr.items[102].v.str, "[SEP]"));
    assert_int_equal(gguf_arr_i32(types, 101), 3);
    if (a->n_vocab > 30522) {
        assert_true(str_is(tok->v.arr.items[30527].v.str, "[PAD30527]"));
        assert_int_equal(gguf_arr_i32(types, 30527), 5);
        assert_int_equal(gguf_arr_i32(types, 30521), 1);
    }
    gguf_close(f);
    remove(path);
}

static void test_encoder_files(void **state) {
    (void)state;
    const char *archs[] = {"bge-small", "all-minilm-l6", "ms-marco-minilm-l6", "nomic-embed"};
    for (int i = 0; i < 4; i++) {
        check_encoder_file(archs[i], "F16");
        check_encoder_file(archs[i], "Q8_0");
    }
    check_encoder_file("ms-marco-minilm-l6", "Q4_K_M"); /* rows of 384: K-quant fallbacks */
    check_encoder_file("nomic-embed", "Q4_K_M");        /* attn_qkv's own rule */
}

/* LayerNorm weights ~ 1, their biases and the projections' ~ N(0, 0.02); the reranker's one-row head works. */
static void test_encoder_values(void **state) {
    (void)state;
    const char *path = tu_tmp_path("synth-encv.gguf");
    synth(path, "ms-marco-minilm-l6", "F32", 1, 4);
    gguf_file *f;
    wgml_error err;
    double mean, std;
    assert_int_equal(gguf_open(path, &f, &err), WGML_OK);
    stats(gguf_find_tensor(f, "blk.0.layer_output_norm.weight"), &mean, &std);
    assert_true(fabs(mean - 1) < 0.01 && std > 0.01 && std < 0.03);
    stats(gguf_find_tensor(f, "token_embd_norm.bias"), &mean, &std);
    assert_true(fabs(mean) < 0.01 && std > 0.01 && std < 0.03);
    stats(gguf_find_tensor(f, "blk.0.ffn_up.bias"), &mean, &std);
    assert_true(fabs(mean) < 0.005 && std > 0.015 && std < 0.025);
    stats(gguf_find_tensor(f, "position_embd.weight"), &mean, &std);
    assert_true(fabs(mean) < 0.001 && fabs(std - 0.02) < 0.001);
    const gguf_tensor *t = gguf_find_tensor(f, "cls.output.bias");
    assert_int_equal(t->n_elements, 1);
    assert_true(fabsf(*(const float *)t->data) < 0.1f);
    stats(gguf_find_tensor(f, "cls.output.weight"), &mean, &std);
    assert_true(fabs(mean) < 0.01 && std > 0.01 && std < 0.03);
    gguf_close(f);
    remove(path);
}

static void test_errors(void **state) {
    (void)state;
    const char *out = tu_tmp_path("err.gguf");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    struct stat sb;
    wgml_error err;
    synth_params p = {.arch = "gpt-5", .type = "F16", .vocab = tu_shared("vocab/ggml-vocab-llama-spm.gguf")};
    assert_int_equal(synth_write(out, &p, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "unknown architecture 'gpt-5'"));
    assert_non_null(strstr(err.message, "tinyllama-1.1b"));
    p.arch = "stories15m";
    p.type = "Q7";
    assert_int_equal(synth_write(out, &p, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "unknown type 'Q7'"));
    p.type = "q8_0";
    p.n_layer = 7;
    assert_int_equal(synth_write(out, &p, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "6 layers"));
    p.n_layer = 1;
    p.vocab = "/no/such/vocab.gguf";
    assert_int_equal(synth_write(out, &p, NULL, &err), WGML_ERR_IO);
    assert_non_null(strstr(err.message, "/no/such/vocab.gguf"));
    p.vocab = tu_shared("models/stories260K.gguf"); /* a model, but a 512-token vocabulary: resized */
    assert_int_equal(synth_write("/no/such/dir/x.gguf", &p, NULL, &err), WGML_ERR_IO);
    assert_int_equal(stat(out, &sb), -1);
    assert_int_equal(stat(tmp, &sb), -1);
}

/* Every allocation failing in turn (with the vocabulary truncated and a block pool made). */
static void test_out_of_memory(void **state) {
    (void)state;
    const char *out = tu_tmp_path("oom.gguf");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    synth_params p = {.arch = "stories110m",
                      .type = "Q8_0",
                      .vocab = tu_shared("vocab/ggml-vocab-gpt-2.gguf"),
                      .n_layer = 1,
                      .n_threads = 2};
    wgml_error err;
    struct stat sb;
    int n;
    for (n = 0; n < 1000; n++) {
        wgml_alloc_fail_after(n);
        wgml_status st = synth_write(out, &p, NULL, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) break;
        if (st != WGML_ERR_OUT_OF_MEMORY) fail_msg("allocation %d failing: %s", n, err.message);
        assert_int_equal(stat(out, &sb), -1);
        assert_int_equal(stat(tmp, &sb), -1);
    }
    assert_true(n > 5 && n < 1000);
    remove(out);
}

static int run_cli(const char *args, char *errbuf, size_t cap) {
    const char *cli = getenv("WGML_CLI");
    const char *errp = tu_tmp_path("cli.err");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s' </dev/null", cli, args, errp);
    int st = system(cmd);
    size_t n;
    unsigned char *b = tu_read_file(errp, &n);
    snprintf(errbuf, cap, "%s", b ? (char *)b : "");
    free(b);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void **state) {
    (void)state;
    if (!getenv("WGML_CLI") || !*getenv("WGML_CLI")) skip();
    static char e[65536];
    char args[2048];
    char out[512]; /* a copy: tu_tmp_path's buffers are reused after 8 calls (run_cli makes one each) */
    snprintf(out, sizeof out, "%s", tu_tmp_path("cli-s.gguf"));
    snprintf(args, sizeof args, "synth --arch SmolLM2-135M --type q8_0 --layers 1 --seed 5 -t 2 -o '%s' --vocab '%s'",
             out, tu_shared("vocab/ggml-vocab-gpt-2.gguf"));
    assert_int_equal(run_cli(args, e, sizeof e), 0);
    assert_non_null(strstr(e, "MiB"));
    assert_non_null(strstr(e, "MB/s"));
    assert_non_null(strstr(e, "kept the first 49152")); /* the vocabulary note */
    struct stat sb;
    assert_int_equal(stat(out, &sb), 0);
    remove(out);
    snprintf(args, sizeof args, "synth --arch nomic-embed --type Q8_0 --layers 1 -t 2 -o '%s'", out);
    assert_int_equal(run_cli(args, e, sizeof e), 0); /* the shipped WordPiece vocabulary by default */
    assert_non_null(strstr(e, "ggml-vocab-bert-bge.gguf has 30522 tokens; padded to 30528"));
    remove(out);
    snprintf(args, sizeof args, "synth --arch gpt-5 --type F16 -o '%s'", out);
    assert_int_equal(run_cli(args, e, sizeof e), 2);
    assert_non_null(strstr(e, "unknown architecture 'gpt-5'"));
    snprintf(args, sizeof args, "synth --arch stories15m --type Q7 -o '%s'", out);
    assert_int_equal(run_cli(args, e, sizeof e), 2);
    assert_int_equal(run_cli("synth --arch stories15m --type F16", e, sizeof e), 2);
    snprintf(args, sizeof args, "synth --arch stories15m --type F16 --layers 9 -o '%s'", out);
    assert_int_equal(run_cli(args, e, sizeof e), 2);
    snprintf(args, sizeof args, "synth --arch stories15m --type F16 --seed x -o '%s'", out);
    assert_int_equal(run_cli(args, e, sizeof e), 2);
    snprintf(args, sizeof args, "synth --arch stories15m --type F16 --vocab /no/such.gguf -o '%s'", out);
    assert_int_equal(run_cli(args, e, sizeof e), 1);
    assert_int_equal(stat(out, &sb), -1);
    assert_int_equal(run_cli("synth --list", e, sizeof e), 0);
    assert_int_equal(run_cli("synth --help", e, sizeof e), 0);
}

int main(void) {
    struct CMUnitTest tests[sizeof cases / sizeof cases[0] + 9];
    size_t n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tests[n] = (struct CMUnitTest)cmocka_unit_test_prestate(test_arch, (void *)&cases[i]);
        tests[n++].name = cases[i].arch;
    }
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_determinism);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_values);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_encoder_lists);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_encoder_files);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_encoder_values);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_errors);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_out_of_memory);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_cli);
    return _cmocka_run_group_tests("test_synth", tests, n, NULL, NULL);
}
