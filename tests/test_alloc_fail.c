/*
 * test_alloc_fail.c - out of memory at every host allocation of the public path.
 *
 * For N = 0, 1, 2, ... the N+1-th allocation fails (wgml_alloc_fail_after(N))
 * during: load (file, memory or stream) -> session -> greedy and sampled
 * generation -> tokenize -> free. Each N must end in an error that says out
 * of memory (WGML_ERR_OUT_OF_MEMORY, or another code whose message says so),
 * never a crash, and leave nothing behind: the live allocation count
 * (wgml_alloc_live) returns to where it was, and under ASan/LSan nothing
 * leaks. With injection off again, the objects that survived the failure
 * still work: the model (and the session, when there was one) generates the
 * reference text, greedy and sampled. The loop ends at the first N where the
 * whole path succeeds. On the CPU every N is tried; on WebGPU, where each try
 * makes a device and its pipelines again (under ASan minutes in all), every
 * 3rd N, and the retry after every 4th failure tried: each stage's
 * allocations are still hit, many times over.
 *
 * Models: stories260K F32 and Q8_0mix (SentencePiece), a tiny Qwen2 model
 * written here with the GPT-2 vocabulary (byte-level BPE), all on the CPU;
 * then stories260K on the WebGPU backend (lavapipe, else SwiftShader), where
 * the backend and GPU layer's host allocations fail (Dawn's own are not
 * injected). Set WGML_ALLOC_FAIL_STEP=k to try only every k-th N of those
 * (quicker local runs).
 */
#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"
#include "gpu/gpu.h"
#include "testutil.h"
#include "wgml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROMPT "Once upon a time"

typedef enum { LOAD_FILE, LOAD_MEMORY, LOAD_STREAM } load_kind;

typedef struct {
    const char *label;
    const char *path;
    load_kind how;
    wgml_backend_kind backend;
    const char *adapter;
    int profile;     /* per-kernel timing on (WebGPU: timestamp queries) */
    int retry_every; /* retry after every k-th failure (0: every one) */
    int step;        /* try every step-th N (0: every N) */
} path_case;

/* What one successful pass produces, compared across N. */
typedef struct {
    char greedy[1024], sampled[1024];
    int n_ids;
    int32_t ids[64];
} outcome;

static const char *stage_name[] = {"load",     "session", "generate (greedy)", "generate (sampled)", "eval",
                                   "tokenize", "done"};
enum { ST_LOAD, ST_SESSION, ST_GREEDY, ST_SAMPLED, ST_EVAL, ST_TOKENIZE, ST_DONE };

static wgml_status generate(wgml_session *s, int n, float temp, tu_sink *out, wgml_error *err) {
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = n;
    gp.sampler.temperature = temp;
    gp.sampler.seed = 7;
    gp.on_token = tu_collect;
    gp.user = out;
    memset(out, 0, sizeof *out);
    return wgml_generate(s, PROMPT, &gp, NULL, err);
}

/* Runs the path once. Returns the stage reached (ST_DONE on success); on a
 * failure *st and err hold the error. The objects are freed before returning,
 * after `retry` (if set) has re-run the failed generate with injection off. */
static int run_path(const path_case *c, const void *bytes, size_t n_bytes, outcome *o, int retry, wgml_status *st,
                    wgml_error *err) {
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = c->backend ? c->backend : WGML_BACKEND_CPU;
    mp.adapter = c->adapter;
    mp.n_threads = 1;
    wgml_model *m = (wgml_model *)&mp; /* must come back NULL on failure */
    wgml_session *s = NULL;
    tu_sink out;
    int stage = ST_LOAD;
    memset(o, 0, sizeof *o);
    if (c->how == LOAD_FILE) {
        *st = wgml_model_load(c->path, &mp, &m, err);
    } else if (c->how == LOAD_MEMORY) {
        *st = wgml_model_load_memory(bytes, n_bytes, &mp, &m, err);
    } else {
        FILE *f = fopen(c->path, "rb");
        assert_non_null(f);
        *st = wgml_model_load_stream(tu_file_read, f, n_bytes, &mp, &m, err);
        fclose(f);
    }
    if (*st) {
        assert_null(m);
        return stage;
    }
    if (c->profile) wgml_model_set_profiling(m, 1);
    stage = ST_SESSION;
    wgml_session_params sp = {.n_ctx = 32, .n_batch = 4};
    if ((*st = wgml_session_create(m, &sp, &s, err))) {
        assert_null(s);
        goto done;
    }
    stage = ST_GREEDY;
    if ((*st = generate(s, 3, 0, &out, err))) goto done;
    strcpy(o->greedy, out.text);
    stage = ST_SAMPLED;
    wgml_session_reset(s);
    if ((*st = generate(s, 3, 1.0f, &out, err))) goto done;
    strcpy(o->sampled, out.text);
    stage = ST_EVAL;
    const int32_t toks[3] = {1, 403, 407};
    if ((*st = wgml_session_eval(s, toks, 3, err))) goto done;
    if (!wgml_session_logits(s)) fail_msg("%s: no logits after eval", c->label);
    wgml_kernel_stat ks[64];
    if (c->profile && wgml_model_get_kernel_times(m, ks, 64) <= 0) fail_msg("%s: no kernel times", c->label);
    stage = ST_TOKENIZE;
    o->n_ids = wgml_tokenize(m, PROMPT " 123 \xc3\xa9t\xc3\xa9", strlen(PROMPT) + 10, 1, o->ids, 64, err);
    if (o->n_ids < 0) {
        *st = err->code;
        goto done;
    }
    stage = ST_DONE;
done:
    if (*st && retry) {
        /* the model (and the session, if made) survived: with memory back, they work */
        wgml_alloc_fail_after(-1);
        wgml_error e2;
        if (!s && wgml_session_create(m, &sp, &s, &e2)) fail_msg("%s: session after OOM: %s", c->label, e2.message);
        wgml_session_reset(s);
        if (generate(s, 3, 0, &out, &e2)) fail_msg("%s: generate after OOM: %s", c->label, e2.message);
        strcpy(o->greedy, out.text);
        wgml_session_reset(s);
        if (generate(s, 3, 1.0f, &out, &e2)) fail_msg("%s: generate after OOM: %s", c->label, e2.message);
        strcpy(o->sampled, out.text);
    }
    wgml_session_free(s);
    wgml_model_free(m);
    return stage;
}

static int says_oom(wgml_status st, const wgml_error *err) {
    return st == WGML_ERR_OUT_OF_MEMORY || strstr(err->message, "out of memory") != NULL;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long step_from_env(void) {
    const char *s = getenv("WGML_ALLOC_FAIL_STEP");
    long k = s && *s ? strtol(s, NULL, 10) : 1;
    return k > 0 ? k : 1;
}

/* The loop over N for one case. Returns the number of failing N tried. */
static long alloc_loop(const path_case *c) {
    size_t n_bytes = 0;
    void *bytes = NULL;
    if (c->how != LOAD_FILE) {
        bytes = tu_read_file(c->path, &n_bytes);
        assert_non_null(bytes);
    }
    wgml_error err;
    wgml_status st;
    outcome ref, got;
    double t0 = seconds();
    /* WebGPU: a first run fills the pipeline cache on disk (WGML_CACHE_DIR), so
     * that the counted run and the failing ones find the same entries there:
     * loads from it allocate, compiling does not (Dawn's own allocations). */
    if (c->backend == WGML_BACKEND_WEBGPU && run_path(c, bytes, n_bytes, &ref, 0, &st, &err) != ST_DONE)
        fail_msg("%s: %s", c->label, err.message);
    long live0 = wgml_alloc_live();
    unsigned long a0 = wgml_alloc_count();
    if (run_path(c, bytes, n_bytes, &ref, 0, &st, &err) != ST_DONE) fail_msg("%s: %s", c->label, err.message);
    unsigned long per_run = wgml_alloc_count() - a0;
    assert_int_equal(wgml_alloc_live(), live0);
    assert_true(strlen(ref.greedy) > 0 && strlen(ref.sampled) > 0 && ref.n_ids > 5);

    long step = step_from_env() * (c->step > 1 ? c->step : 1), fails = 0, by_stage[ST_DONE + 1] = {0};
    for (long n = 0;; n += step) {
        wgml_alloc_fail_after(n);
        int retry = c->retry_every <= 1 || fails % c->retry_every == 0;
        int stage = run_path(c, bytes, n_bytes, &got, retry, &st, &err);
        wgml_alloc_fail_after(-1);
        long live = wgml_alloc_live();
        if (live != live0)
            fail_msg("%s: failing allocation %ld (%s): %ld allocations leaked", c->label, n, stage_name[stage],
                     live - live0);
        if (stage == ST_DONE) {
            assert_string_equal(got.greedy, ref.greedy);
            assert_string_equal(got.sampled, ref.sampled);
            assert_int_equal(got.n_ids, ref.n_ids);
            assert_memory_equal(got.ids, ref.ids, (size_t)ref.n_ids * sizeof *ref.ids);
            break;
        }
        if (!says_oom(st, &err) || err.code != st || !err.message[0])
            fail_msg("%s: failing allocation %ld in %s gave status %d (%s): \"%s\"", c->label, n, stage_name[stage],
                     (int)st, wgml_status_name(st), err.message);
        if (stage > ST_LOAD && retry) { /* the retry with injection off */
            assert_string_equal(got.greedy, ref.greedy);
            assert_string_equal(got.sampled, ref.sampled);
        }
        fails++;
        by_stage[stage]++;
        if (n > (long)per_run + 16)
            fail_msg("%s: still failing at %ld (a run makes %lu allocations)", c->label, n, per_run);
    }
    printf("%-28s %4lu allocations a run, %4ld failing N (load %ld, session %ld, generate %ld+%ld, eval %ld, "
           "tokenize %ld), %.1f s\n",
           c->label, per_run, fails, by_stage[ST_LOAD], by_stage[ST_SESSION], by_stage[ST_GREEDY], by_stage[ST_SAMPLED],
           by_stage[ST_EVAL], by_stage[ST_TOKENIZE], seconds() - t0);
    fflush(stdout);
    free(bytes);
    return fails;
}

static void test_cpu_f32(void **state) {
    (void)state;
    path_case c = {.label = "cpu F32 file", .path = tu_shared("models/stories260K.gguf"), .how = LOAD_FILE};
    assert_true(alloc_loop(&c) > 20);
}

static void test_cpu_q8(void **state) {
    (void)state;
    path_case c = {.label = "cpu Q8_0mix file", .path = tu_shared("models/stories260K-Q8_0mix.gguf"), .how = LOAD_FILE};
    assert_true(alloc_loop(&c) > 20);
}

static void test_cpu_memory(void **state) {
    (void)state;
    path_case c = {.label = "cpu F32 memory", .path = tu_shared("models/stories260K.gguf"), .how = LOAD_MEMORY};
    assert_true(alloc_loop(&c) > 20);
}

static void test_cpu_stream(void **state) {
    (void)state;
    path_case c = {
        .label = "cpu Q8_0mix stream", .path = tu_shared("models/stories260K-Q8_0mix.gguf"), .how = LOAD_STREAM};
    assert_true(alloc_loop(&c) > 20);
}

/* ---- a byte-level BPE model: tiny Qwen2 weights + the GPT-2 vocabulary ---- */

static void write_bpe_model(const char *out) {
    enum { DIM = 32, HEADS = 4, KV = 2, HD = 8, FF = 64 };
    wgml_error err;
    gguf_file *v = NULL;
    if (gguf_open(tu_shared("vocab/ggml-vocab-gpt-2.gguf"), &v, &err)) fail_msg("%s", err.message);
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    for (int64_t i = 0; i < gguf_n_kv(v); i++) {
        const gguf_kv *kv = gguf_kv_at(v, i);
        if (strncmp(kv->key, "tokenizer.", 10) == 0 && gguf_writer_copy_kv(w, kv, &err)) fail_msg("%s", err.message);
    }
    const gguf_kv *toks = gguf_find_kv(v, "tokenizer.ggml.tokens");
    assert_non_null(toks);
    int64_t n_vocab = (int64_t)toks->value.v.arr.n;
#define OK(x)                                                                                                          \
    if ((x)) fail_msg("%s", err.message)
    OK(gguf_writer_set_str(w, "general.architecture", "qwen2", &err));
    OK(gguf_writer_set_u32(w, "qwen2.context_length", 64, &err));
    OK(gguf_writer_set_u32(w, "qwen2.embedding_length", DIM, &err));
    OK(gguf_writer_set_u32(w, "qwen2.feed_forward_length", FF, &err));
    OK(gguf_writer_set_u32(w, "qwen2.block_count", 1, &err));
    OK(gguf_writer_set_u32(w, "qwen2.attention.head_count", HEADS, &err));
    OK(gguf_writer_set_u32(w, "qwen2.attention.head_count_kv", KV, &err));
    struct {
        const char *name;
        int64_t ne0, ne1;
    } t[] = {
        {"token_embd.weight", DIM, n_vocab},  {"output_norm.weight", DIM, 0},
        {"blk.0.attn_norm.weight", DIM, 0},   {"blk.0.attn_q.weight", DIM, HEADS * HD},
        {"blk.0.attn_q.bias", HEADS * HD, 0}, {"blk.0.attn_k.weight", DIM, KV * HD},
        {"blk.0.attn_k.bias", KV * HD, 0},    {"blk.0.attn_v.weight", DIM, KV * HD},
        {"blk.0.attn_v.bias", KV * HD, 0},    {"blk.0.attn_output.weight", HEADS * HD, DIM},
        {"blk.0.ffn_norm.weight", DIM, 0},    {"blk.0.ffn_gate.weight", DIM, FF},
        {"blk.0.ffn_up.weight", DIM, FF},     {"blk.0.ffn_down.weight", FF, DIM},
    };
    size_t n_t = sizeof t / sizeof t[0];
    for (size_t i = 0; i < n_t; i++) {
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        OK(gguf_writer_add_tensor(w, t[i].name, WGML_F32, t[i].ne1 ? 2 : 1, ne, &err));
    }
    OK(gguf_writer_begin(w, out, &err));
    tu_rng rng = {42};
    for (size_t i = 0; i < n_t; i++) {
        size_t n = (size_t)(t[i].ne0 * (t[i].ne1 ? t[i].ne1 : 1));
        float *d = malloc(n * sizeof *d);
        assert_non_null(d);
        for (size_t k = 0; k < n; k++)
            d[k] = t[i].ne1 ? tu_normal(&rng) * 0.3f : 1.0f;
        OK(gguf_writer_write_tensor(w, d, n * sizeof *d, &err));
        free(d);
    }
    OK(gguf_writer_finish(w, &err));
#undef OK
    gguf_writer_free(w);
    gguf_close(v);
}

static void test_cpu_bpe(void **state) {
    (void)state;
    const char *path = tu_tmp_path("bpe-qwen2.gguf");
    write_bpe_model(path);
    path_case c = {.label = "cpu BPE (GPT-2 vocab) file", .path = path, .how = LOAD_FILE};
    assert_true(alloc_loop(&c) > 20);
    remove(path);
}

/* ---- WebGPU on a software adapter ---- */

static const char *software_adapter(void) {
    static const char *names[] = {"llvmpipe", "swiftshader"};
    wgml_gpu_adapter_info a[16];
    int n = wgml_gpu_list_adapters(a, 16, NULL);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < n && i < 16; i++) {
            char lower[256];
            size_t j = 0;
            for (; a[i].name[j] && j < 255; j++)
                lower[j] = (char)(a[i].name[j] | 0x20);
            lower[j] = 0;
            if (strstr(lower, names[k])) return names[k];
        }
    return NULL;
}

static void test_webgpu(void **state) {
    (void)state;
    const char *adapter = software_adapter();
    if (!adapter) {
        const char *req = getenv("WGML_REQUIRE_ADAPTERS");
        if (req && *req) fail_msg("no software adapter, but WGML_REQUIRE_ADAPTERS=%s", req);
        fprintf(stderr, "skipping: no software WebGPU adapter\n");
        skip();
    }
    char label[64];
    snprintf(label, sizeof label, "webgpu (%s) file", adapter);
    path_case c = {.label = label,
                   .path = tu_shared("models/stories260K-Q8_0mix.gguf"),
                   .how = LOAD_FILE,
                   .backend = WGML_BACKEND_WEBGPU,
                   .adapter = adapter,
                   .profile = 1,
                   .retry_every = 4,
                   .step = 3};
    assert_true(alloc_loop(&c) > 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_f32),    cmocka_unit_test(test_cpu_q8),  cmocka_unit_test(test_cpu_memory),
        cmocka_unit_test(test_cpu_stream), cmocka_unit_test(test_cpu_bpe), cmocka_unit_test(test_webgpu),
    };
    const char *only = getenv("WGML_TEST_FILTER"); /* e.g. "test_cpu_*" */
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
