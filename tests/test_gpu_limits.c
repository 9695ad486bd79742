/*
 * test_gpu_limits.c - when the GPU says no: a model larger than the device
 * allows, a tensor row wider than a binding, no usable device at all.
 *
 * Device memory is made small with WGML_GPU_MEMORY_LIMIT (buffer creation
 * then fails as on an out-of-memory device), so "too large" costs kilobytes,
 * not gigabytes. Each failure must come back as WGML_ERR_GPU naming the
 * tensor (or session buffer) that did not fit, with the model or session
 * object freed - device memory and live host allocations back where they
 * were - and a model loaded afterwards must work.
 *
 * A step of any length: more dispatches than the backend's parameter slots
 * (it submits in parts) and many downloads, one step to the caller.
 *
 * Then the backend choice: WGML_BACKEND_AUTO never takes a software adapter
 * (it falls back to the CPU with a note), and with no Vulkan driver at all
 * (VK_ICD_FILENAMES=/nonexistent.json) auto still loads on the CPU while an
 * explicit WebGPU request fails with WGML_ERR_NO_ADAPTER.
 *
 * Runs on lavapipe, else SwiftShader; skipped without either unless
 * $WGML_REQUIRE_ADAPTERS is set.
 */
#include "api_internal.h"
#include "backend/backend.h"
#include "core/alloc.h"
#include "format/gguf.h"
#include "gpu/gpu.h"
#include "model/llama/llama.h"
#include "testutil.h"
#include "wgml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/stories260K.gguf"

static wgml_gpu_adapter_info adapters[16];
static int n_adapters;
static const char *adapter; /* software adapter the tests use */

static int setup(void **state) {
    (void)state;
    n_adapters = wgml_gpu_list_adapters(adapters, 16, NULL);
    if (n_adapters > 16) n_adapters = 16;
    static const char *names[] = {"llvmpipe", "swiftshader"};
    for (int k = 0; k < 2 && !adapter; k++)
        if (tu_adapter_present(names[k])) adapter = names[k];
    return 0;
}

static int need_adapter(void) {
    if (adapter) return 1;
    const char *req = getenv("WGML_REQUIRE_ADAPTERS");
    if (req && *req) fail_msg("no software adapter, but WGML_REQUIRE_ADAPTERS=%s", req);
    fprintf(stderr, "skipping: no software WebGPU adapter\n");
    return 0;
}

static void set_limit(uint64_t bytes) {
    if (!bytes) {
        unsetenv("WGML_GPU_MEMORY_LIMIT");
        return;
    }
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)bytes);
    setenv("WGML_GPU_MEMORY_LIMIT", v, 1);
}

static wgml_status load(wgml_backend_kind kind, const char *name, wgml_model **m, wgml_error *err) {
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = kind;
    mp.adapter = name;
    mp.n_threads = 1;
    return wgml_model_load(tu_shared(MODEL), &mp, m, err);
}

static uint64_t device_bytes(const wgml_model *m) {
    wgml_counters c;
    wgml_model_get_counters(m, &c);
    return c.device_memory_bytes;
}

static void greedy(wgml_model *m, int n, tu_sink *out) {
    wgml_session *s;
    wgml_error err;
    assert_int_equal(wgml_session_create(m, NULL, &s, &err), WGML_OK);
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = n;
    gp.sampler.temperature = 0;
    gp.on_token = tu_collect;
    gp.user = out;
    memset(out, 0, sizeof *out);
    assert_int_equal(wgml_generate(s, "Once upon a time", &gp, NULL, &err), WGML_OK);
    wgml_session_free(s);
}

/* Device memory limits from nothing up to what the model and a session need:
 * every one fails at load (naming the tensor) or at the session (naming the
 * buffer), cleanly; without the limit everything works again. */
static void test_model_too_large(void **state) {
    (void)state;
    if (!need_adapter()) skip();
    wgml_model *m = NULL;
    wgml_session *s = NULL;
    wgml_error err;
    tu_sink ref, got;
    set_limit(0);
    assert_int_equal(load(WGML_BACKEND_WEBGPU, adapter, &m, &err), WGML_OK);
    uint64_t need_model = device_bytes(m);
    wgml_session_params sp = {.n_ctx = 256};
    assert_int_equal(wgml_session_create(m, &sp, &s, &err), WGML_OK);
    uint64_t need_session = device_bytes(m);
    wgml_session_free(s);
    assert_int_equal(device_bytes(m), need_model);
    greedy(m, 20, &ref);
    wgml_model_free(m);
    printf("device memory: %llu bytes after load, %llu with a 256-token session\n", (unsigned long long)need_model,
           (unsigned long long)need_session);

    /* what the backend allocates for itself, before any weight */
    wgml_webgpu_options o = {.adapter = adapter, .allow_software = 1};
    wgml_backend *be;
    assert_int_equal(wgml_backend_webgpu_create(&o, &be, &err), WGML_OK);
    wgml_backend_stats bs;
    be->get_stats(be, &bs);
    uint64_t base = bs.device_memory_bytes;
    be->free(be);

    /* limits below the backend's own buffers, then through the weights and the session */
    int at_backend = 0, at_tensor = 0, at_session = 0;
    const int steps = 16;
    for (int i = -1; i < steps; i++) {
        uint64_t limit = i < 0 ? base / 2 : base + (need_session - base) * (uint64_t)i / steps;
        long live0 = wgml_alloc_live();
        set_limit(limit);
        m = (wgml_model *)&m;
        wgml_status st = load(WGML_BACKEND_WEBGPU, adapter, &m, &err);
        if (st) {
            assert_null(m);
        } else {
            s = (wgml_session *)&s;
            st = wgml_session_create(m, &sp, &s, &err);
            if (st == WGML_OK) fail_msg("limit %llu: a session fits", (unsigned long long)limit);
            assert_null(s);
            assert_int_equal(device_bytes(m), need_model); /* the session's buffers went with it */
            at_session++;
            wgml_model_free(m);
        }
        set_limit(0);
        if (st != WGML_ERR_GPU || err.code != st || !strstr(err.message, "out of memory"))
            fail_msg("limit %llu: status %s: %s", (unsigned long long)limit, wgml_status_name(st), err.message);
        if (strstr(err.message, "loading tensor '"))
            at_tensor++;
        else if (strstr(err.message, "buffer 'wgml ") && !strstr(err.message, "allocating '"))
            at_backend++; /* the backend's own buffers */
        else if (!strstr(err.message, "allocating '"))
            fail_msg("limit %llu: names nothing: %s", (unsigned long long)limit, err.message);
        assert_int_equal(wgml_alloc_live(), live0);
        if (i == -1 || i == steps / 2 || i == steps - 1)
            printf("limit %llu: %s\n", (unsigned long long)limit, err.message);
    }
    printf("%d limits: %d failed creating the backend, %d loading a tensor, %d creating the session\n", steps + 1,
           at_backend, at_tensor, at_session);
    assert_int_equal(at_backend, 1);
    assert_true(at_tensor >= 3);
    assert_true(at_session >= 1);

    /* and a new model works as before */
    assert_int_equal(load(WGML_BACKEND_WEBGPU, adapter, &m, &err), WGML_OK);
    greedy(m, 20, &got);
    assert_string_equal(got.text, ref.text);
    wgml_model_free(m);
}

/* The streaming loader creates every weight before reading a byte of them:
 * a model that does not fit fails before the download. */
static void test_stream_too_large(void **state) {
    (void)state;
    if (!need_adapter()) skip();
    FILE *f = fopen(tu_shared(MODEL), "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    uint64_t size = (uint64_t)ftell(f);
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_WEBGPU;
    mp.adapter = adapter;
    wgml_model *m = (wgml_model *)&m;
    wgml_error err;
    long live0 = wgml_alloc_live();
    set_limit(2800000); /* the backend's ~2 MiB of its own, and some of the weights */
    wgml_status st = wgml_model_load_stream(tu_file_read, f, size, &mp, &m, &err);
    set_limit(0);
    assert_int_equal(st, WGML_ERR_GPU);
    assert_null(m);
    assert_non_null(strstr(err.message, "loading tensor 'blk."));
    assert_non_null(strstr(err.message, "out of memory"));
    assert_int_equal(wgml_alloc_live(), live0);
    assert_int_equal(wgml_model_load_stream(tu_file_read, f, size, &mp, &m, &err), WGML_OK);
    tu_sink out;
    greedy(m, 5, &out);
    assert_true(out.len > 0);
    wgml_model_free(m);
    fclose(f);
}

/* Through the backend interface: a tensor larger than the device's memory, and
 * a row wider than one storage binding may be. */
static void test_backend_weights(void **state) {
    (void)state;
    if (!need_adapter()) skip();
    if (!tu_shared_present()) skip(); /* before anything is allocated: a skip later would leak it */
    wgml_webgpu_options o = {.adapter = adapter, .allow_software = 1};
    wgml_backend *be;
    wgml_error err;
    wgml_backend_stats bs;
    set_limit(64u << 20);
    assert_int_equal(wgml_backend_webgpu_create(&o, &be, &err), WGML_OK);
    be->get_stats(be, &bs);
    uint64_t base = bs.device_memory_bytes;
    /* 1 GiB of f32 weights, created empty (as the streaming loader does) */
    wgml_buffer *b = (wgml_buffer *)&b;
    wgml_status st = be->weight_create(be, WGML_F32, 4096, 65536, NULL, "huge.weight", &b, &err);
    assert_int_equal(st, WGML_ERR_GPU);
    assert_null(b);
    assert_non_null(strstr(err.message, "'huge.weight'"));
    assert_non_null(strstr(err.message, "out of memory"));
    be->get_stats(be, &bs);
    assert_int_equal(bs.device_memory_bytes, base);
    /* 1 MiB fits */
    assert_int_equal(be->weight_create(be, WGML_F32, 4096, 64, NULL, "small.weight", &b, &err), WGML_OK);
    be->buffer_free(be, b);
    be->free(be);
    set_limit(0);

    /* windows of at most 600 bytes: stories260K's rows of 64 floats fit two to
     * a window, blk.0.ffn_down's rows of 172 floats do not fit at all */
    o.max_binding = 600;
    assert_int_equal(wgml_backend_webgpu_create(&o, &be, &err), WGML_OK);
    be->get_stats(be, &bs);
    base = bs.device_memory_bytes;
    gguf_file *g;
    assert_int_equal(gguf_open(tu_shared(MODEL), &g, &err), WGML_OK);
    llama_model *lm = (llama_model *)&lm;
    st = llama_model_load(g, be, NULL, NULL, &lm, &err);
    assert_int_equal(st, WGML_ERR_GPU);
    assert_null(lm);
    assert_non_null(strstr(err.message, "one row of tensor 'blk.0.ffn_down.weight' exceeds the binding limit"));
    be->get_stats(be, &bs);
    assert_int_equal(bs.device_memory_bytes, base);
    be->free(be);
    /* with room, the same backend options load it */
    o.max_binding = 4096;
    assert_int_equal(wgml_backend_webgpu_create(&o, &be, &err), WGML_OK);
    assert_int_equal(llama_model_load(g, be, NULL, NULL, &lm, &err), WGML_OK);
    llama_model_free(lm);
    be->free(be);
    gguf_close(g);
}

typedef struct {
    char lines[2048];
} log_sink;

static void log_line(void *user, const char *line) {
    log_sink *l = user;
    size_t n = strlen(l->lines);
    snprintf(l->lines + n, sizeof l->lines - n, "%s\n", line);
}

static wgml_model *load_auto(log_sink *log) {
    wgml_model_params mp = wgml_model_default_params();
    mp.log = log_line;
    mp.log_user = log;
    mp.n_threads = 1;
    memset(log, 0, sizeof *log);
    wgml_model *m = NULL;
    wgml_error err;
    if (wgml_model_load(tu_shared(MODEL), &mp, &m, &err)) fail_msg("auto: %s", err.message);
    return m;
}

/* Auto takes a hardware adapter or the CPU, never a software adapter. */
/* 20000 dispatches (x += b, in place) and 100 downloads in one step: the
 * backend submits in parts of its 8192 parameter slots, each part sees the
 * last one's result, and every download reads the step's final state. */
static void test_long_step(void **state) {
    (void)state;
    if (!need_adapter()) return;
    wgml_webgpu_options o = {.adapter = adapter, .allow_software = 1};
    wgml_backend *be;
    wgml_error err;
    assert_int_equal(wgml_backend_webgpu_create(&o, &be, &err), WGML_OK);
    enum { N = 64, STEPS = 20000, READS = 100 };
    wgml_buffer *bx, *bb;
    assert_int_equal(be->buffer_create(be, N * 4, WGML_BUFFER_ACTIVATIONS, &bx, &err), WGML_OK);
    assert_int_equal(be->buffer_create(be, N * 4, WGML_BUFFER_ACTIVATIONS, &bb, &err), WGML_OK);
    float b[N], x[N] = {0}, got[READS][N];
    for (int i = 0; i < N; i++) b[i] = (float)(i % 7) * 0.25f; /* sums stay exact in f32 */
    assert_int_equal(be->buffer_write(be, bx, 0, x, sizeof x, &err), WGML_OK);
    assert_int_equal(be->buffer_write(be, bb, 0, b, sizeof b, &err), WGML_OK);
    wgml_tensor tx = {.type = WGML_F32, .ne = {N, 1, 1, 1}, .buf = bx, .name = "x"};
    wgml_tensor tb = {.type = WGML_F32, .ne = {N, 1, 1, 1}, .buf = bb, .name = "b"};
    wgml_backend_stats s0, s1;
    be->get_stats(be, &s0);
    be->begin(be, &(wgml_step){0, 1});
    for (int k = 0; k < STEPS; k++) wgml_op_add(be, &(wgml_add_args){.out = &tx, .a = &tx, .b = &tb});
    for (int r = 0; r < READS; r++) be->download(be, &tx, got[r], sizeof got[r]);
    assert_int_equal(be->end(be, &err), WGML_OK);
    be->get_stats(be, &s1);
    assert_int_equal(s1.steps - s0.steps, 1);
    assert_int_equal(s1.submits - s0.submits, (STEPS + 8191) / 8192);
    assert_int_equal(s1.dispatches - s0.dispatches, STEPS);
    for (int r = 0; r < READS; r++)
        for (int i = 0; i < N; i++) assert_float_equal(got[r][i], b[i] * STEPS, 0);
    be->buffer_free(be, bx);
    be->buffer_free(be, bb);
    be->free(be);
}

static void test_auto_never_software(void **state) {
    (void)state;
    log_sink log;
    wgml_model *m = load_auto(&log);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    int hardware = 0;
    for (int i = 0; i < n_adapters; i++)
        hardware |= adapters[i].type != WGML_GPU_CPU;
    fprintf(stderr, "auto: %s / %s; notes: %s", info.backend, info.adapter, log.lines[0] ? log.lines : "none\n");
    if (hardware) {
        assert_string_equal(info.backend, "webgpu");
        for (int i = 0; i < n_adapters; i++)
            if (!strcmp(adapters[i].name, info.adapter)) assert_int_not_equal(adapters[i].type, WGML_GPU_CPU);
    } else {
        assert_string_equal(info.backend, "cpu");
        assert_non_null(strstr(log.lines, "using the CPU"));
        if (n_adapters > 0) assert_non_null(strstr(log.lines, "no hardware adapter"));
    }
    wgml_model_free(m);
}

/* No Vulkan driver at all: auto loads on the CPU, an explicit request fails. */
static void test_no_driver(void **state) {
    (void)state;
    const char *names[2] = {"VK_ICD_FILENAMES", "VK_DRIVER_FILES"};
    char *saved[2];
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        saved[i] = v ? strdup(v) : NULL;
        setenv(names[i], "/nonexistent.json", 1);
    }
    log_sink log;
    wgml_model *m = load_auto(&log);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    assert_string_equal(info.backend, "cpu");
    assert_non_null(strstr(log.lines, "webgpu unavailable"));
    assert_non_null(strstr(log.lines, "using the CPU"));
    tu_sink out;
    greedy(m, 5, &out);
    assert_true(out.len > 0);
    wgml_model_free(m);
    wgml_error err;
    m = (wgml_model *)&m;
    assert_int_equal(load(WGML_BACKEND_WEBGPU, "llvmpipe", &m, &err), WGML_ERR_NO_ADAPTER);
    assert_null(m);
    assert_non_null(strstr(err.message, "no WebGPU adapter"));
    for (int i = 0; i < 2; i++) {
        if (saved[i])
            setenv(names[i], saved[i], 1);
        else
            unsetenv(names[i]);
        free(saved[i]);
    }
    /* the drivers are found again */
    if (adapter) {
        assert_int_equal(load(WGML_BACKEND_WEBGPU, adapter, &m, &err), WGML_OK);
        wgml_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_too_large), cmocka_unit_test(test_stream_too_large),
        cmocka_unit_test(test_backend_weights), cmocka_unit_test(test_long_step),
        cmocka_unit_test(test_auto_never_software),
        cmocka_unit_test(test_no_driver),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
