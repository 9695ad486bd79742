/*
 * test_webgpu.c - the WebGPU backend on the software adapters, against the
 * CPU reference: op by op over the shape/type grid, end to end on
 * stories260K, the static plan's promises (one submit, nothing created, 4
 * bytes read back per greedy decode step), and the error paths.
 *
 * Configurations: SwiftShader (f32 tier), lavapipe (shader-f16 tier) and
 * lavapipe forced to the f32 tier without subgroups. A configuration whose
 * adapter is missing is skipped, unless $WGML_REQUIRE_ADAPTERS names it
 * (CI sets it, so a missing adapter fails there).
 *
 * Compiling kernels is what costs here: llvmpipe turns every workgroup
 * barrier into a coroutine suspension point, and a cold compile of the
 * op grid's pipelines takes minutes. So each configuration tests the code
 * paths that only it has:
 *   SwiftShader         every op, weight type and fused variant (f32 tier, subgroups)
 *   lavapipe            the same on the shader-f16 tier (its own decoders and kernels)
 *   lavapipe f32 tier   the reductions without subgroups: every op, but weights of
 *                       one type per decoder family (a float, a 32-block and a
 *                       256-block type), since the f32 decoders are SwiftShader's
 * and the command line picks a configuration, a group of cases and the op
 * grid's weight types, so that CTest runs the parts in parallel
 * (tests/CMakeLists.txt; matmul's pipelines are most of the compile time):
 *   test_webgpu [swiftshader|lavapipe|lavapipe-f32 [GROUP[,GROUP...] [TYPE,...]]]
 * with groups ops, layout and model.
 * Each case prints its time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"
#include "backend/backend.h"
#include "backend/opcheck.h"
#include "gpu/gpu.h"
#include "testutil.h"
#include "wgml.h"

typedef struct {
    const char *adapter;
    unsigned flags;
    const char *label;
    const char *key;   /* the command-line name */
    int quick;         /* the op grid's smaller shape set */
    const char *types; /* weight types of the op grid (opcheck's list); NULL: all */
} config;

static config configs[] = {
    {"swiftshader", 0, "SwiftShader", "swiftshader", 0, NULL},
    {"llvmpipe", 0, "lavapipe", "lavapipe", 0, NULL},
    {"llvmpipe", WGML_WEBGPU_NO_F16 | WGML_WEBGPU_NO_SUBGROUPS, "lavapipe f32 tier", "lavapipe-f32", 1, "F32,Q8_0,Q4_K"},
};

/* Skips (or, when required, fails) a test whose adapter is missing. */
static int need(const config *c) {
    if (tu_adapter_present(c->adapter)) return 1;
    const char *req = getenv("WGML_REQUIRE_ADAPTERS");
    if (req && strstr(req, c->adapter)) fail_msg("adapter '%s' is required but not found", c->adapter);
    fprintf(stderr, "skipping %s: adapter not found\n", c->label);
    return 0;
}

static void print_failure(void *user, const wgml_opcheck_result *r) {
    (void)user;
    if (!r->pass) fprintf(stderr, "  FAIL %s %s: err %.3g tol %.1g %s\n", r->op, r->config, r->err, r->tol, r->message);
}

static void run_opcheck(const config *c, int quick, uint64_t max_binding, int gpu_layout, const char *filter) {
    quick |= c->quick;
    wgml_webgpu_options o = {.adapter = c->adapter, .allow_software = 1,
                             .force_f32 = (c->flags & WGML_WEBGPU_NO_F16) != 0,
                             .no_subgroups = (c->flags & WGML_WEBGPU_NO_SUBGROUPS) != 0, .max_binding = max_binding,
                             .gpu_layout = gpu_layout};
    wgml_backend *dev, *ref;
    wgml_error err;
    assert_int_equal(wgml_backend_webgpu_create(&o, &dev, &err), WGML_OK);
    assert_int_equal(wgml_backend_cpu_create_exact(2, &ref, &err), WGML_OK);
    wgml_opcheck_options oo = {.quick = quick, .filter = filter, .type = c->types};
    int failures = wgml_opcheck_run(dev, ref, &oo, print_failure, NULL);
    dev->free(dev);
    ref->free(ref);
    if (failures) fprintf(stderr, "%s: %d op cases failed\n", c->label, failures);
    assert_int_equal(failures, 0);
}

static void test_ops(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    run_opcheck(c, 0, 0, 0, NULL);
}

/* The matvec layout of hardware GPUs (workgroups reduce over a row), which
 * CPU adapters do not use by default: CI has no GPU, so it is checked here. */
static void test_gpu_layout(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    run_opcheck(c, 1, 0, 1, "matmul");
}

/* Weights split into many small binding windows (as a tensor over 128 MiB is on lavapipe). */
static void test_windows(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    run_opcheck(c, 1, 2048, 0, "matmul");
    run_opcheck(c, 1, 2048, 0, "get_rows");
}

typedef struct {
    char text[8192];
    size_t len;
    int n;
    wgml_model *m;
    wgml_counters at[80];
} capture;

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    capture *c = user;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = 0;
    }
    if (token >= 0 && c->n < 80) wgml_model_get_counters(c->m, &c->at[c->n++]);
    return 0;
}

static wgml_model *load(const config *c, const char *file, wgml_error *err) {
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_WEBGPU;
    mp.adapter = c->adapter;
    mp.webgpu_flags = c->flags;
    wgml_model *m = NULL;
    wgml_status st = wgml_model_load(tu_shared(file), &mp, &m, err);
    if (st) fprintf(stderr, "%s: %s\n", file, err->message);
    assert_int_equal(st, WGML_OK);
    return m;
}

static void greedy(wgml_model *m, int n, capture *cap) {
    wgml_session *s;
    wgml_error err;
    assert_int_equal(wgml_session_create(m, NULL, &s, &err), WGML_OK);
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = n;
    gp.sampler.temperature = 0;
    gp.on_token = on_token;
    gp.user = cap;
    memset(cap, 0, sizeof *cap);
    cap->m = m;
    strcpy(cap->text, "Once upon a time");
    cap->len = strlen(cap->text);
    wgml_status st = wgml_generate(s, "Once upon a time", &gp, NULL, &err);
    if (st) fprintf(stderr, "generate: %s\n", err.message);
    assert_int_equal(st, WGML_OK);
    wgml_session_free(s);
}

static void test_reference_text(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    size_t n;
    char *ref = (char *)tu_read_file(tu_shared("models/reference/stories260K.llama2c-run.t0.n64.once.txt"), &n);
    assert_non_null(ref);
    while (n && ref[n - 1] == '\n') ref[--n] = 0;
    const char *files[] = {"models/stories260K.gguf", "models/stories260K-F16.gguf", "models/stories260K-Q8_0mix.gguf"};
    for (int i = 0; i < 3; i++) {
        wgml_error err;
        wgml_model *m = load(c, files[i], &err);
        capture cap;
        greedy(m, 60, &cap);
        if (strcmp(cap.text, ref)) fprintf(stderr, "%s on %s:\n got: %s\nwant: %s\n", files[i], c->label, cap.text, ref);
        assert_string_equal(cap.text, ref);
        wgml_model_free(m);
    }
    free(ref);
}

/* The streaming loader puts weights straight into GPU buffers, chunk by chunk. */
static void test_stream_load(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    FILE *f = fopen(tu_shared("models/stories260K-Q8_0mix.gguf"), "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    uint64_t size = (uint64_t)ftell(f);
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_WEBGPU;
    mp.adapter = c->adapter;
    mp.webgpu_flags = c->flags;
    wgml_model *m;
    wgml_error err;
    assert_int_equal(wgml_model_load_stream(tu_file_read, f, size, &mp, &m, &err), WGML_OK);
    fclose(f);
    capture cap;
    greedy(m, 60, &cap);
    size_t n;
    char *ref = (char *)tu_read_file(tu_shared("models/reference/stories260K.llama2c-run.t0.n64.once.txt"), &n);
    while (n && ref[n - 1] == '\n') ref[--n] = 0;
    assert_string_equal(cap.text, ref);
    free(ref);
    wgml_model_free(m);
}

/* Logits at every position of a 64-token run stay within tolerance of the CPU's. */
static void test_logits_vs_cpu(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    wgml_error err;
    wgml_model *gm = load(c, "models/stories260K.gguf", &err);
    wgml_model_params cp = wgml_model_default_params();
    cp.backend = WGML_BACKEND_CPU;
    wgml_model *cm;
    assert_int_equal(wgml_model_load(tu_shared("models/stories260K.gguf"), &cp, &cm, &err), WGML_OK);
    wgml_session *gs, *cs;
    assert_int_equal(wgml_session_create(gm, NULL, &gs, &err), WGML_OK);
    /* the CPU keeps its cache in the device's type, so that only the arithmetic differs */
    wgml_session_params csp = wgml_session_default_params();
    csp.kv_type = wgml_model_backend(gm)->kv_type == WGML_F16 ? WGML_KV_F16 : WGML_KV_F32;
    assert_int_equal(wgml_session_create(cm, &csp, &cs, &err), WGML_OK);
    int32_t ids[128];
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
                       "One day, she saw a big, red ball.";
    int n = wgml_tokenize(cm, text, strlen(text), 1, ids, 128, &err);
    assert_true(n > 30 && n <= 64);
    double worst = 0;
    /* the f16 tier also computes parts of the kernels in f16 */
    double tol = wgml_model_backend(gm)->kv_type == WGML_F32 ? 2e-4 : 1e-2;
    for (int i = 0; i < n; i++) {
        assert_int_equal(wgml_session_eval(gs, &ids[i], 1, &err), WGML_OK);
        assert_int_equal(wgml_session_eval(cs, &ids[i], 1, &err), WGML_OK);
        const float *a = wgml_session_logits(gs), *b = wgml_session_logits(cs);
        for (int v = 0; v < 512; v++) worst = fmax(worst, fabs((double)a[v] - b[v]));
    }
    fprintf(stderr, "%s: max |logit diff| over %d positions: %.3g\n", c->label, n, worst);
    assert_true(worst <= tol * 20); /* logits span about +-20 */
    wgml_session_free(gs);
    wgml_session_free(cs);
    wgml_model_free(gm);
    wgml_model_free(cm);
}

/* The plan's promises, from the counters between decode steps. */
static void test_plan_counters(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    wgml_error err;
    wgml_model *m = load(c, "models/stories260K.gguf", &err);
    capture cap;
    greedy(m, 40, &cap);
    assert_int_equal(cap.n, 40);
    /* token i+1 is sampled after exactly one decode step following token i */
    for (int i = 2; i < 39; i++) {
        const wgml_counters *a = &cap.at[i], *b = &cap.at[i + 1];
        assert_int_equal(b->steps - a->steps, 1);
        assert_int_equal(b->submits - a->submits, 1);
        assert_int_equal(b->buffers_created - a->buffers_created, 0);
        assert_int_equal(b->bind_groups_created - a->bind_groups_created, 0);
        assert_int_equal(b->pipelines_created - a->pipelines_created, 0);
        assert_int_equal(b->readback_bytes - a->readback_bytes, 4);
        assert_true(b->upload_bytes - a->upload_bytes <= 64); /* token id + step uniform */
        assert_true(b->dispatches - a->dispatches <= 8 * 5 + 4);
    }
    wgml_model_free(m);
}

static void test_errors(void **state) {
    const config *c = *state;
    if (!need(c)) skip();
    wgml_error err;
    wgml_model *m = load(c, "models/stories260K.gguf", &err);
    wgml_backend *be = wgml_model_backend(m);
    /* a buffer larger than the device allows */
    wgml_buffer *b = NULL;
    assert_int_equal(be->buffer_create(be, (size_t)1 << 40, WGML_BUFFER_ACTIVATIONS, &b, &err), WGML_ERR_GPU);
    assert_null(b);
    assert_non_null(strstr(err.message, "bytes"));
    /* a KV cache type the device's kernels were not composed for */
    wgml_session *s = NULL;
    wgml_session_params sp = wgml_session_default_params();
    sp.kv_type = be->kv_type == WGML_F16 ? WGML_KV_F32 : WGML_KV_F16;
    assert_int_equal(wgml_session_create(m, &sp, &s, &err), WGML_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "KV cache"));
    assert_null(s);
    /* the device is lost between steps: generation fails with an error, nothing crashes */
    assert_int_equal(wgml_session_create(m, NULL, &s, &err), WGML_OK);
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = 4;
    gp.sampler.temperature = 0;
    assert_int_equal(wgml_generate(s, "Once", &gp, NULL, &err), WGML_OK);
    wgml_backend_webgpu_lose_device(be);
    wgml_status st = wgml_generate(s, " upon", &gp, NULL, &err);
    assert_true(st == WGML_ERR_DEVICE_LOST || st == WGML_ERR_GPU);
    fprintf(stderr, "after device loss: %s\n", err.message);
    wgml_session_free(s);
    wgml_model_free(m);
    /* and a new model on a new device works */
    m = load(c, "models/stories260K.gguf", &err);
    capture cap;
    greedy(m, 5, &cap);
    assert_int_equal(cap.n, 5);
    wgml_model_free(m);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double case_start;
static int case_begin(void **state) {
    (void)state;
    case_start = now_s();
    return 0;
}
static int case_end(void **state) {
    fprintf(stderr, "[ %s: %.1f s ]\n", ((const config *)*state)->label, now_s() - case_start);
    return 0;
}

#define CASE(fn, c) cmocka_unit_test_prestate_setup_teardown(fn, case_begin, case_end, (void *)(c))

int main(int argc, char **argv) {
    const char *want = argc > 1 ? argv[1] : NULL, *group = argc > 2 ? argv[2] : NULL;
    int want_ops = !group, want_layout = !group, want_model = !group, bad = argc > 4;
    for (const char *g = group; g && *g;) {
        size_t n = strcspn(g, ",");
        if (n == 3 && !strncmp(g, "ops", 3)) want_ops = 1;
        else if (n == 6 && !strncmp(g, "layout", 6)) want_layout = 1;
        else if (n == 5 && !strncmp(g, "model", 5)) want_model = 1;
        else bad = 1;
        g += n + (g[n] == ',');
    }
    if (bad) {
        fprintf(stderr, "usage: test_webgpu [swiftshader|lavapipe|lavapipe-f32 [GROUP[,GROUP...] [TYPE,...]]]\n"
                        "groups: ops, layout, model\n");
        return 2;
    }
    for (size_t i = 0; argc > 3 && i < sizeof configs / sizeof configs[0]; i++) configs[i].types = argv[3];
    struct CMUnitTest tests[3 * 8];
    size_t n = 0;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        const config *c = &configs[i];
        if (want && strcmp(want, c->key)) continue;
        if (want_ops) {
            tests[n++] = (struct CMUnitTest)CASE(test_ops, c);
            tests[n++] = (struct CMUnitTest)CASE(test_windows, c);
        }
        if (want_layout) tests[n++] = (struct CMUnitTest)CASE(test_gpu_layout, c);
        if (want_model) {
            tests[n++] = (struct CMUnitTest)CASE(test_reference_text, c);
            tests[n++] = (struct CMUnitTest)CASE(test_stream_load, c);
            tests[n++] = (struct CMUnitTest)CASE(test_logits_vs_cpu, c);
            tests[n++] = (struct CMUnitTest)CASE(test_plan_counters, c);
            tests[n++] = (struct CMUnitTest)CASE(test_errors, c);
        }
    }
    if (!n) {
        fprintf(stderr, "test_webgpu: no configuration named '%s'\n", want);
        return 2;
    }
    return _cmocka_run_group_tests(want ? want : "test_webgpu", tests, n, NULL, NULL);
}
