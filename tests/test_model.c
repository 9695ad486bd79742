/*
 * test_model.c - end-to-end correctness of the Llama forward pass on the CPU
 * backend against the shared reference outputs (llama2.c's run.c at
 * temperature 0 and a float64 numpy forward pass) for stories260K in every
 * file variant, including our own llama2.c import.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/llama2c.h"
#include "testutil.h"
#include "wgml.h"

typedef struct {
    char text[8192];
    size_t len;
    int32_t ids[1024];
    int n_ids;
} capture;

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    capture *c = user;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
    if (token >= 0 && c->n_ids < 1024) c->ids[c->n_ids++] = token;
    return 0;
}

static wgml_model *load_cpu(const char *path) {
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.n_threads = 2;
    wgml_model *m = NULL;
    wgml_error err;
    wgml_status st = wgml_model_load(path, &mp, &m, &err);
    if (st) fprintf(stderr, "load %s: %s\n", path, err.message);
    assert_int_equal(st, WGML_OK);
    return m;
}

/* Greedy generation of n tokens after prompt; returns the prompt + continuation. */
static void generate(wgml_model *m, const char *prompt, int n, capture *c) {
    wgml_session *s;
    wgml_error err;
    assert_int_equal(wgml_session_create(m, NULL, &s, &err), WGML_OK);
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = n;
    gp.sampler.temperature = 0;
    gp.on_token = on_token;
    gp.user = c;
    memset(c, 0, sizeof *c);
    size_t pl = strlen(prompt);
    memcpy(c->text, prompt, pl);
    c->len = pl;
    wgml_generate_result res;
    wgml_status st = wgml_generate(s, prompt, &gp, &res, &err);
    if (st) fprintf(stderr, "generate: %s\n", err.message);
    assert_int_equal(st, WGML_OK);
    assert_int_equal(res.n_generated, n);
    assert_int_equal(res.stop, WGML_STOP_MAX_TOKENS);
    wgml_session_free(s);
}

static char *reference(const char *name) {
    size_t n;
    char *t = (char *)tu_read_file(tu_shared(name), &n);
    assert_non_null(t);
    return t;
}

/* The 60 greedy tokens after "Once upon a time" equal run.c's output (64 positions incl. BOS). */
static void check_reference_text(const char *model_path) {
    wgml_model *m = load_cpu(model_path);
    capture c;
    generate(m, "Once upon a time", 60, &c);
    char *ref = reference("models/reference/stories260K.llama2c-run.t0.n64.once.txt");
    size_t rl = strlen(ref);
    while (rl && ref[rl - 1] == '\n') ref[--rl] = '\0';
    if (strcmp(c.text, ref) != 0) fprintf(stderr, "%s\n got: %s\nwant: %s\n", model_path, c.text, ref);
    assert_string_equal(c.text, ref);
    free(ref);
    wgml_model_free(m);
}

static void test_text_f32(void **state) {
    (void)state;
    check_reference_text(tu_shared("models/stories260K.gguf"));
}

static void test_text_f16(void **state) {
    (void)state;
    check_reference_text(tu_shared("models/stories260K-F16.gguf"));
}

static void test_text_q8_0mix(void **state) {
    (void)state;
    check_reference_text(tu_shared("models/stories260K-Q8_0mix.gguf"));
}

static void test_text_llama2c_import(void **state) {
    (void)state;
    const char *out = tu_tmp_path("import.gguf");
    wgml_error err;
    assert_int_equal(llama2c_convert(tu_shared("models/llama2c/stories260K.bin"), tu_shared("models/llama2c/tok512.bin"),
                                     out, NULL, NULL, &err),
                     WGML_OK);
    check_reference_text(out);
    remove(out);
}

/* Parses "ids: 1,2,3" and "pos0 top5: [(403, 17.02352), ...]" from the numpy reference. */
static void numpy_reference(int32_t *ids, int *n_ids, int32_t top_id[5], double top_val[5]) {
    char *ref = reference("models/reference/stories260K.numpy-ref.greedy64.once.txt");
    char *p = strstr(ref, "ids:");
    assert_non_null(p);
    p += 4;
    *n_ids = 0;
    while (*p && *p != '\n') {
        ids[(*n_ids)++] = (int32_t)strtol(p, &p, 10);
        while (*p == ',' || *p == ' ') p++;
    }
    p = strstr(ref, "top5:");
    assert_non_null(p);
    for (int i = 0; i < 5; i++) {
        p = strchr(p, '(');
        assert_non_null(p);
        top_id[i] = (int32_t)strtol(p + 1, &p, 10);
        p++;
        top_val[i] = strtod(p, &p);
    }
    free(ref);
}

/* Position-0 logits (after BOS) within 1e-4 of float64 numpy, and the greedy ids. */
static void test_numpy_reference(void **state) {
    (void)state;
    int32_t ids[128], top_id[5];
    double top_val[5];
    int n_ids;
    numpy_reference(ids, &n_ids, top_id, top_val);
    assert_int_equal(n_ids, 65);
    wgml_model *m = load_cpu(tu_shared("models/stories260K.gguf"));
    wgml_session *s;
    wgml_error err;
    /* an f32 cache: the comparison is with float64 math at 1e-4 */
    wgml_session_params sp = wgml_session_default_params();
    sp.kv_type = WGML_KV_F32;
    assert_int_equal(wgml_session_create(m, &sp, &s, &err), WGML_OK);
    int32_t bos = 1;
    assert_int_equal(wgml_session_eval(s, &bos, 1, &err), WGML_OK);
    const float *logits = wgml_session_logits(s);
    assert_non_null(logits);
    for (int i = 0; i < 5; i++) {
        if (fabs(logits[top_id[i]] - top_val[i]) > 1e-4)
            fprintf(stderr, "logit[%d] = %.6f, numpy %.6f\n", top_id[i], logits[top_id[i]], top_val[i]);
        assert_true(fabs(logits[top_id[i]] - top_val[i]) <= 1e-4);
    }
    /* the numpy top-5 are the 5 largest of ours too, in order */
    for (int i = 0; i < 5; i++) {
        int rank = 0;
        for (int j = 0; j < 512; j++) rank += logits[j] > logits[top_id[i]];
        assert_int_equal(rank, i);
    }
    wgml_session_free(s);
    /* the prompt encodes as numpy's ids 0..4 and greedy decoding continues with the rest */
    int32_t toks[16];
    int n = wgml_tokenize(m, "Once upon a time", 16, 1, toks, 16, &err);
    assert_int_equal(n, 5);
    assert_memory_equal(toks, ids, 5 * sizeof *toks);
    capture c;
    generate(m, "Once upon a time", 60, &c);
    assert_int_equal(c.n_ids, 60);
    assert_memory_equal(c.ids, ids + 5, 60 * sizeof *ids);
    wgml_model_free(m);
}

/* 256 greedy tokens from BOS alone (run.c with 256 steps, BOS at position 0) equal its no-prompt output. */
static void test_text_no_prompt(void **state) {
    (void)state;
    wgml_model *m = load_cpu(tu_shared("models/stories260K.gguf"));
    capture c;
    generate(m, "", 256, &c);
    char *ref = reference("models/reference/stories260K.llama2c-run.t0.n256.noprompt.txt");
    size_t rl = strlen(ref);
    while (rl && ref[rl - 1] == '\n') ref[--rl] = '\0';
    if (strcmp(c.text, ref) != 0) fprintf(stderr, " got: %s\nwant: %s\n", c.text, ref);
    assert_string_equal(c.text, ref);
    free(ref);
    wgml_model_free(m);
}

/* Prompt processing in one batch or token by token gives the same logits
 * (with an f32 cache: batches of 32 and more take the blocked GEMM, whose
 * sums round differently, and an f16 cache would turn those last-bit
 * differences into f16 roundings of K and V, 1e-3 apart). */
static void test_batch_invariance(void **state) {
    (void)state;
    wgml_model *m = load_cpu(tu_shared("models/stories260K.gguf"));
    int32_t ids[128], top_id[5];
    double top_val[5];
    int n_ids;
    numpy_reference(ids, &n_ids, top_id, top_val);
    float *a = malloc(512 * sizeof *a);
    wgml_error err;
    for (int batch = 1; batch <= 64; batch *= 4) {
        wgml_session_params sp = wgml_session_default_params();
        sp.n_batch = batch;
        sp.kv_type = WGML_KV_F32;
        wgml_session *s;
        assert_int_equal(wgml_session_create(m, &sp, &s, &err), WGML_OK);
        assert_int_equal(wgml_session_eval(s, ids, 40, &err), WGML_OK);
        const float *l = wgml_session_logits(s);
        if (batch == 1) {
            memcpy(a, l, 512 * sizeof *a);
        } else {
            for (int i = 0; i < 512; i++) assert_true(fabsf(a[i] - l[i]) <= 1e-4f * (1 + fabsf(a[i])));
        }
        wgml_session_free(s);
    }
    free(a);
    wgml_model_free(m);
}

/* A file read through the streaming loader, counting what it is asked for. */
typedef struct {
    FILE *f;
    uint64_t size, fail_at; /* a read at or past fail_at fails (0 = never) */
    size_t max_len;
    uint64_t calls;
} stream_file;

static int64_t stream_read(void *user, uint64_t offset, void *buf, size_t len) {
    stream_file *s = user;
    s->calls++;
    if (len > s->max_len) s->max_len = len;
    if (s->fail_at && offset + len > s->fail_at) return -1;
    if (fseek(s->f, (long)offset, SEEK_SET)) return -1;
    return (int64_t)fread(buf, 1, len, s->f);
}

static void test_stream_load(void **state) {
    (void)state;
    const char *files[] = {"models/stories260K.gguf", "models/stories260K-Q8_0mix.gguf"};
    for (int i = 0; i < 2; i++) {
        stream_file s = {fopen(tu_shared(files[i]), "rb"), 0, 0, 0, 0};
        assert_non_null(s.f);
        fseek(s.f, 0, SEEK_END);
        s.size = (uint64_t)ftell(s.f);
        wgml_model_params mp = wgml_model_default_params();
        mp.backend = WGML_BACKEND_CPU;
        wgml_model *m;
        wgml_error err;
        assert_int_equal(wgml_model_load_stream(stream_read, &s, s.size, &mp, &m, &err), WGML_OK);
        assert_true(s.max_len <= (4u << 20));
        capture c;
        generate(m, "Once upon a time", 60, &c);
        char *ref = reference("models/reference/stories260K.llama2c-run.t0.n64.once.txt");
        size_t rl = strlen(ref);
        while (rl && ref[rl - 1] == '\n') ref[--rl] = '\0';
        assert_string_equal(c.text, ref);
        free(ref);
        wgml_model_free(m);
        /* a read that fails half way is an I/O error naming the tensor */
        s.fail_at = s.size * 3 / 4; /* past the header */
        assert_int_equal(wgml_model_load_stream(stream_read, &s, s.size, &mp, &m, &err), WGML_ERR_IO);
        assert_null(m);
        assert_non_null(strstr(err.message, "tensor"));
        /* a stream shorter than its header claims */
        assert_int_equal(wgml_model_load_stream(stream_read, &s, 100, &mp, &m, &err), WGML_ERR_FORMAT);
        fclose(s.f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_f32),           cmocka_unit_test(test_text_f16),
        cmocka_unit_test(test_text_q8_0mix),       cmocka_unit_test(test_text_llama2c_import),
        cmocka_unit_test(test_numpy_reference),    cmocka_unit_test(test_text_no_prompt),
        cmocka_unit_test(test_batch_invariance),   cmocka_unit_test(test_stream_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
