/*
 * test_gpu.c - the GPU layer (src/gpu/gpu.h) on every adapter found.
 *
 * Without a GPU these are the software adapters that scripts/setup-deps.sh
 * prepares: SwiftShader (no shader-f16) and lavapipe "llvmpipe" (shader-f16),
 * WebGPU's two capability tiers. With WGML_REQUIRE_ADAPTERS=swiftshader,llvmpipe
 * (as CI sets it) a missing one is a failure, not a skip.
 *
 * Per adapter: exact results of a WGSL kernel over a ragged size, uniform
 * parameters, compile errors with the compiler's line numbers, a too-large
 * buffer, partial readbacks, copies, counters of a steady-state loop (no
 * allocation, one submit per step), timestamps, f16 where the adapter has it
 * (and its absence where it has not), sticky validation errors, device loss,
 * kernels compiled in the background (order, lifetimes, errors, progress).
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */
#endif
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef WGML_HAVE_WEBGPU

#include "backend/webgpu/wgsl_sources.h"
#include "core/alloc.h"
#include "core/fp16.h"
#include "gpu/gpu.h"

#define MAX_ADAPTERS 16

static wgml_gpu_adapter_info adapters[MAX_ADAPTERS];
static int n_adapters;
static const wgml_gpu_adapter_info *current; /* the adapter of the running group */

static int contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && (hay[i] | 32) == (needle[i] | 32))
            i++;
        if (i == n) return 1;
    }
    return n == 0;
}

/* ---- kernels ------------------------------------------------------------------ */

static const char *axpy_wgsl = "struct Params { a: f32, b: f32, n: u32, pad: u32 }\n"
                               "@group(0) @binding(0) var<uniform> p: Params;\n"
                               "@group(0) @binding(1) var<storage, read> x: array<f32>;\n"
                               "@group(0) @binding(2) var<storage, read_write> y: array<f32>;\n"
                               "@compute @workgroup_size(64)\n"
                               "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
                               "    let i = id.x;\n"
                               "    if (i < p.n) { y[i] = p.a * x[i] + p.b; }\n"
                               "}\n";

typedef struct axpy_params {
    float a, b;
    uint32_t n, pad;
} axpy_params;

#define AXPY_N 100003u /* 1e5 + 3: not a multiple of the workgroup size */

static float axpy_x(uint32_t i) { return (float)(i % 1000u) - 500.0f; }

/* ---- per-adapter state ---------------------------------------------------------- */

typedef struct fixture {
    wgml_gpu *gpu;
} fixture;

static wgml_gpu *open_current(int timestamps) {
    wgml_gpu_options opt = {0};
    opt.adapter = current->name;
    opt.want_f16 = opt.want_subgroups = 1;
    opt.want_timestamps = timestamps;
    wgml_gpu *gpu = NULL;
    wgml_error err;
    wgml_status st = wgml_gpu_create(&opt, &gpu, &err);
    if (st != WGML_OK) fail_msg("wgml_gpu_create(%s): %s", current->name, err.message);
    return gpu;
}

static int group_setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->gpu = open_current(1);
    *state = f;
    return f->gpu ? 0 : -1;
}

static int group_teardown(void **state) {
    fixture *f = *state;
    if (f) wgml_gpu_destroy(f->gpu);
    free(f);
    return 0;
}

static void check_ok(wgml_status st, const wgml_error *err) {
    if (st != WGML_OK) fail_msg("%s: %s", wgml_status_name(st), err->message);
}

static wgml_gpu_buffer *make_buffer(wgml_gpu *gpu, uint64_t size, int usage, const char *label) {
    wgml_gpu_buffer *b = NULL;
    wgml_error err;
    check_ok(wgml_gpu_buffer_create(gpu, size, usage, label, &b, &err), &err);
    return b;
}

static wgml_gpu_kernel *make_kernel(wgml_gpu *gpu, const char *wgsl, const char *label) {
    wgml_gpu_kernel *k = NULL;
    wgml_error err;
    check_ok(wgml_gpu_kernel_create(gpu, wgsl, "main", label, &k, &err), &err);
    return k;
}

/* The axpy kernel with its three buffers, ready to dispatch. */
typedef struct axpy {
    wgml_gpu_buffer *params, *x, *y;
    wgml_gpu_kernel *k;
    wgml_gpu_bindgroup *bg;
} axpy;

static void axpy_make(wgml_gpu *gpu, axpy *a, uint32_t n) {
    a->params = make_buffer(gpu, sizeof(axpy_params), WGML_GPU_UNIFORM, "params");
    a->x = make_buffer(gpu, (uint64_t)n * 4, WGML_GPU_STORAGE, "x");
    a->y = make_buffer(gpu, ((uint64_t)n + 64) * 4, WGML_GPU_STORAGE, "y"); /* 64 guard elements */
    a->k = make_kernel(gpu, axpy_wgsl, "axpy");
    float *x = malloc((size_t)n * 4);
    assert_non_null(x);
    for (uint32_t i = 0; i < n; i++)
        x[i] = axpy_x(i);
    wgml_gpu_write(gpu, a->x, 0, x, (size_t)n * 4);
    free(x);
    wgml_gpu_binding b[3] = {{0, a->params, 0, 0}, {1, a->x, 0, 0}, {2, a->y, 0, 0}};
    wgml_error err;
    check_ok(wgml_gpu_bindgroup_create(gpu, a->k, b, 3, &a->bg, &err), &err);
}

static void axpy_free(axpy *a) {
    wgml_gpu_bindgroup_destroy(a->bg);
    wgml_gpu_kernel_destroy(a->k);
    wgml_gpu_buffer_destroy(a->params);
    wgml_gpu_buffer_destroy(a->x);
    wgml_gpu_buffer_destroy(a->y);
}

static void axpy_run(wgml_gpu *gpu, axpy *a, float alpha, float beta, uint32_t n) {
    axpy_params p = {alpha, beta, n, 0};
    wgml_gpu_write(gpu, a->params, 0, &p, sizeof p);
    wgml_gpu_dispatch(gpu, a->k, a->bg, (n + 63) / 64, 1, 1);
}

/* ---- tests on one adapter ---------------------------------------------------------- */

static void test_info(void **state) {
    fixture *f = *state;
    const wgml_gpu_adapter_info *i = wgml_gpu_info(f->gpu);
    assert_string_equal(i->name, current->name);
    assert_true(i->name[0] != '\0');
    assert_string_not_equal(i->backend, "null");
    assert_true(i->max_buffer_size >= 256u << 20);
    assert_true(i->max_storage_binding_size >= 128u << 20);
    assert_true(i->max_uniform_binding_size >= 16384);
    assert_true(i->max_storage_buffers_per_stage >= 8);
    assert_true(i->max_workgroup_invocations >= 256);
    assert_true(i->max_workgroup_size_x >= 256 && i->max_workgroup_size_z >= 64);
    assert_true(i->max_workgroup_storage >= 16384);
    assert_true(i->max_workgroups_per_dimension >= 65535);
    assert_true(i->min_storage_offset_alignment >= 4 && i->min_storage_offset_alignment <= 256);
    assert_true((i->min_storage_offset_alignment & (i->min_storage_offset_alignment - 1)) == 0);
    if (i->has_subgroups) {
        assert_true(i->subgroup_min_size >= 1 && i->subgroup_min_size <= i->subgroup_max_size);
        assert_true(i->subgroup_max_size <= 128);
    }
    wgml_gpu_features en = wgml_gpu_enabled(f->gpu);
    assert_int_equal(en.f16, i->has_f16);
    assert_int_equal(en.subgroups, i->has_subgroups);
    assert_int_equal(en.timestamps, i->has_timestamps);
    /* shared/docs/PLATFORM.md: the two software tiers. */
    if (contains_nocase(i->name, "swiftshader")) {
        assert_false(i->has_f16);
        assert_true(i->has_subgroups && i->subgroup_min_size == 4);
        assert_true(i->has_timestamps);
        assert_int_equal(i->type, WGML_GPU_CPU);
    }
    if (contains_nocase(i->name, "llvmpipe")) {
        assert_true(i->has_f16);
        assert_true(i->has_subgroups && i->subgroup_min_size == 8);
        assert_true(i->has_timestamps);
        assert_int_equal(i->type, WGML_GPU_CPU);
        assert_int_equal(i->max_storage_binding_size, 128u << 20);
    }
}

static void test_axpy_exact(void **state) {
    fixture *f = *state;
    axpy a;
    axpy_make(f->gpu, &a, AXPY_N);
    float *y = malloc(((size_t)AXPY_N + 64) * 4);
    assert_non_null(y);
    for (uint32_t i = 0; i < AXPY_N + 64; i++)
        y[i] = -1234.5f;
    wgml_gpu_write(f->gpu, a.y, 0, y, ((size_t)AXPY_N + 64) * 4);
    axpy_run(f->gpu, &a, 0.5f, 0.25f, AXPY_N);
    memset(y, 0, ((size_t)AXPY_N + 64) * 4);
    wgml_gpu_readback rb = {a.y, 0, ((size_t)AXPY_N + 64) * 4, y};
    wgml_error err;
    check_ok(wgml_gpu_submit(f->gpu, &rb, 1, &err), &err);
    for (uint32_t i = 0; i < AXPY_N; i++)
        if (y[i] != 0.5f * axpy_x(i) + 0.25f) fail_msg("y[%u] = %g, want %g", i, y[i], 0.5f * axpy_x(i) + 0.25f);
    for (uint32_t i = AXPY_N; i < AXPY_N + 64; i++)
        assert_true(y[i] == -1234.5f);

    /* Other uniform parameters, same bind group. */
    axpy_run(f->gpu, &a, -2.0f, 3.0f, AXPY_N);
    check_ok(wgml_gpu_read(f->gpu, a.y, 0, y, (size_t)AXPY_N * 4, &err), &err);
    for (uint32_t i = 0; i < AXPY_N; i++)
        assert_true(y[i] == -2.0f * axpy_x(i) + 3.0f);
    free(y);
    axpy_free(&a);
    check_ok(wgml_gpu_status(f->gpu, &err), &err);
}

static void test_compile_error(void **state) {
    fixture *f = *state;
    const char *bad = "@compute @workgroup_size(1)\n"
                      "fn main() {\n"
                      "    let v: f32 = no_such_value;\n"
                      "}\n";
    wgml_gpu_kernel *k = (wgml_gpu_kernel *)1;
    wgml_error err;
    wgml_status st = wgml_gpu_kernel_create(f->gpu, bad, "main", "bad", &k, &err);
    assert_int_equal(st, WGML_ERR_GPU);
    assert_null(k);
    assert_non_null(strstr(err.message, "kernel 'bad'"));
    assert_non_null(strstr(err.message, "3:"));
    assert_non_null(strstr(err.message, "no_such_value"));

    /* A wrong entry point is a pipeline error, also synchronous. */
    st = wgml_gpu_kernel_create(f->gpu, axpy_wgsl, "nope", "entry", &k, &err);
    assert_int_equal(st, WGML_ERR_GPU);
    assert_non_null(strstr(err.message, "kernel 'entry'"));

    /* Neither poisoned the device. */
    check_ok(wgml_gpu_status(f->gpu, &err), &err);
    k = make_kernel(f->gpu, axpy_wgsl, "axpy");
    assert_string_equal(wgml_gpu_kernel_label(k), "axpy");
    wgml_gpu_kernel_destroy(k);
}

static void test_buffer_too_large(void **state) {
    fixture *f = *state;
    wgml_gpu_counters before, after;
    wgml_gpu_get_counters(f->gpu, &before);
    wgml_gpu_buffer *b = (wgml_gpu_buffer *)1;
    wgml_error err;
    uint64_t size = wgml_gpu_info(f->gpu)->max_buffer_size + 4;
    wgml_status st = wgml_gpu_buffer_create(f->gpu, size, WGML_GPU_STORAGE, "huge", &b, &err);
    assert_int_equal(st, WGML_ERR_GPU);
    assert_null(b);
    assert_non_null(strstr(err.message, "huge"));
    wgml_gpu_get_counters(f->gpu, &after);
    assert_int_equal(after.buffers_created, before.buffers_created);
    assert_int_equal(after.memory_bytes, before.memory_bytes);
    check_ok(wgml_gpu_status(f->gpu, &err), &err);
    assert_int_equal(wgml_gpu_buffer_create(f->gpu, 0, WGML_GPU_STORAGE, "empty", &b, &err), WGML_ERR_INVALID_ARGUMENT);
}

static void test_partial_readback_and_copy(void **state) {
    fixture *f = *state;
    enum { N = 1000 };
    uint32_t data[N];
    for (uint32_t i = 0; i < N; i++)
        data[i] = 0x01000000u + i * 7u;
    wgml_gpu_buffer *a = make_buffer(f->gpu, sizeof data, WGML_GPU_STORAGE, "a");
    wgml_gpu_buffer *b = make_buffer(f->gpu, sizeof data, WGML_GPU_STORAGE, "b");
    wgml_gpu_write(f->gpu, a, 0, data, sizeof data);
    wgml_gpu_write(f->gpu, b, 0, data, sizeof data);
    /* Copy a[100..300) to b[500..700). */
    wgml_gpu_copy(f->gpu, a, 400, b, 2000, 800);

    uint32_t r1[13], r2[200], r3[1];
    wgml_gpu_readback rb[3] = {{a, 7 * 4, sizeof r1, r1}, {b, 500 * 4, sizeof r2, r2}, {a, (N - 1) * 4, 4, r3}};
    wgml_error err;
    check_ok(wgml_gpu_submit(f->gpu, rb, 3, &err), &err);
    for (int i = 0; i < 13; i++)
        assert_int_equal(r1[i], data[7 + i]);
    for (int i = 0; i < 200; i++)
        assert_int_equal(r2[i], data[100 + i]);
    assert_int_equal(r3[0], data[N - 1]);

    /* wgml_gpu_read takes any byte range. */
    unsigned char bytes[6];
    check_ok(wgml_gpu_read(f->gpu, a, 5, bytes, sizeof bytes, &err), &err);
    assert_memory_equal(bytes, (const unsigned char *)data + 5, sizeof bytes);

    /* A range past the end is refused, without harm. */
    wgml_gpu_readback bad = {a, sizeof data - 4, 8, r1};
    assert_int_equal(wgml_gpu_submit(f->gpu, &bad, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    check_ok(wgml_gpu_status(f->gpu, &err), &err);
    wgml_gpu_buffer_destroy(a);
    wgml_gpu_buffer_destroy(b);
}

static void test_steady_state_counters(void **state) {
    fixture *f = *state;
    enum { N = 4096, STEPS = 20 };
    axpy a;
    axpy_make(f->gpu, &a, N);
    static float y[N];
    wgml_gpu_readback rb = {a.y, 0, sizeof y, y};
    wgml_error err;
    /* The first step may grow the staging buffer; later ones must not allocate. */
    axpy_run(f->gpu, &a, 1.0f, 0.0f, N);
    check_ok(wgml_gpu_submit(f->gpu, &rb, 1, &err), &err);
    wgml_gpu_counters c0, c1;
    wgml_gpu_get_counters(f->gpu, &c0);
    unsigned long allocs = wgml_alloc_count();
    for (int s = 0; s < STEPS; s++) {
        axpy_run(f->gpu, &a, (float)s, 1.0f, N);
        check_ok(wgml_gpu_submit(f->gpu, &rb, 1, &err), &err);
        assert_true(y[N - 1] == (float)s * axpy_x(N - 1) + 1.0f);
    }
    wgml_gpu_get_counters(f->gpu, &c1);
    assert_int_equal(wgml_alloc_count(), allocs);
    assert_int_equal(c1.submits - c0.submits, STEPS);
    assert_int_equal(c1.dispatches - c0.dispatches, STEPS);
    assert_int_equal(c1.buffers_created, c0.buffers_created);
    assert_int_equal(c1.bindgroups_created, c0.bindgroups_created);
    assert_int_equal(c1.kernels_created, c0.kernels_created);
    assert_int_equal(c1.read_bytes - c0.read_bytes, (uint64_t)STEPS * sizeof y);
    assert_int_equal(c1.write_bytes - c0.write_bytes, (uint64_t)STEPS * sizeof(axpy_params));
    assert_true(c1.memory_bytes >= 3 * (uint64_t)N * 4);
    /* An empty submit is still exactly one submit. */
    check_ok(wgml_gpu_submit(f->gpu, NULL, 0, &err), &err);
    wgml_gpu_get_counters(f->gpu, &c0);
    assert_int_equal(c0.submits, c1.submits + 1);
    axpy_free(&a);
}

static void test_profiling(void **state) {
    fixture *f = *state;
    if (!wgml_gpu_enabled(f->gpu).timestamps) skip();
    axpy a;
    axpy_make(f->gpu, &a, AXPY_N);
    wgml_gpu_set_profiling(f->gpu, 1);
    wgml_error err;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++)
            axpy_run(f->gpu, &a, 1.0f, (float)i, AXPY_N);
        float last;
        check_ok(wgml_gpu_read(f->gpu, a.y, 4, &last, 4, &err), &err);
        assert_true(last == axpy_x(1) + 2.0f);
    }
    /* More timed dispatches than one query set holds (256). */
    for (int i = 0; i < 300; i++)
        axpy_run(f->gpu, &a, 1.0f, 0.0f, 64);
    check_ok(wgml_gpu_submit(f->gpu, NULL, 0, &err), &err);
    wgml_gpu_set_profiling(f->gpu, 0);
    wgml_gpu_kernel_time t[16];
    int n = wgml_gpu_kernel_times(f->gpu, t, 16);
    int found = 0;
    for (int i = 0; i < n && i < 16; i++) {
        if (strcmp(t[i].label, "axpy") != 0) continue;
        found = 1;
        assert_int_equal(t[i].calls, 306);
        assert_true(t[i].total_ms > 0.0);
        print_message("    %s: axpy %llu calls, %.3f ms\n", current->name, (unsigned long long)t[i].calls,
                      t[i].total_ms);
    }
    assert_true(found);
    axpy_free(&a);
}

static const char *f16_wgsl = "enable f16;\n"
                              "@group(0) @binding(0) var<storage, read> x: array<f16>;\n"
                              "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
                              "@compute @workgroup_size(64)\n"
                              "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
                              "    let i = id.x;\n"
                              "    if (i < arrayLength(&y)) { y[i] = f32(x[i] * 2.0h + 1.0h); }\n"
                              "}\n";

static void test_f16(void **state) {
    fixture *f = *state;
    wgml_error err;
    if (!wgml_gpu_enabled(f->gpu).f16) {
        /* Without the feature the compiler must refuse f16: proof that the
         * feature numbers we pass are the library's (PLATFORM.md). */
        wgml_gpu_kernel *k = NULL;
        assert_int_equal(wgml_gpu_kernel_create(f->gpu, f16_wgsl, "main", "f16", &k, &err), WGML_ERR_GPU);
        assert_non_null(strstr(err.message, "f16"));
        return;
    }
    enum { N = 1000 };
    uint16_t x[N];
    float y[N];
    for (int i = 0; i < N; i++)
        x[i] = wgml_f32_to_f16((float)(i % 64 - 32) * 0.5f);
    wgml_gpu_buffer *bx = make_buffer(f->gpu, sizeof x, WGML_GPU_STORAGE, "x16");
    wgml_gpu_buffer *by = make_buffer(f->gpu, sizeof y, WGML_GPU_STORAGE, "y");
    wgml_gpu_kernel *k = make_kernel(f->gpu, f16_wgsl, "f16");
    wgml_gpu_binding b[2] = {{0, bx, 0, 0}, {1, by, 0, 0}};
    wgml_gpu_bindgroup *bg = NULL;
    check_ok(wgml_gpu_bindgroup_create(f->gpu, k, b, 2, &bg, &err), &err);
    wgml_gpu_write(f->gpu, bx, 0, x, sizeof x);
    wgml_gpu_dispatch(f->gpu, k, bg, (N + 63) / 64, 1, 1);
    check_ok(wgml_gpu_read(f->gpu, by, 0, y, sizeof y, &err), &err);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == (float)(i % 64 - 32) + 1.0f);
    wgml_gpu_bindgroup_destroy(bg);
    wgml_gpu_kernel_destroy(k);
    wgml_gpu_buffer_destroy(bx);
    wgml_gpu_buffer_destroy(by);
}

/* A validation error while recording is sticky: reported by submit and after. */
static void test_sticky_error(void **state) {
    wgml_gpu *gpu = open_current(0);
    axpy a;
    axpy_make(gpu, &a, 64);
    uint32_t too_many = wgml_gpu_info(gpu)->max_workgroups_per_dimension + 1;
    wgml_gpu_dispatch(gpu, a.k, a.bg, too_many, 1, 1);
    wgml_error err;
    assert_int_equal(wgml_gpu_submit(gpu, NULL, 0, &err), WGML_ERR_GPU);
    assert_non_null(strstr(err.message, "validation"));
    assert_int_equal(wgml_gpu_status(gpu, &err), WGML_ERR_GPU);
    float v;
    assert_int_equal(wgml_gpu_read(gpu, a.y, 0, &v, 4, &err), WGML_ERR_GPU);
    axpy_free(&a);
    wgml_gpu_destroy(gpu);
}

static void test_lost_device(void **state) {
    wgml_gpu *gpu = open_current(1);
    axpy a;
    axpy_make(gpu, &a, 1000);
    axpy_run(gpu, &a, 1.0f, 0.0f, 1000);
    wgml_error err;
    check_ok(wgml_gpu_submit(gpu, NULL, 0, &err), &err);

    wgml_gpu_lose_device(gpu);
    wgml_gpu_set_profiling(gpu, 1);
    axpy_run(gpu, &a, 1.0f, 0.0f, 1000);
    wgml_status st = wgml_gpu_submit(gpu, NULL, 0, &err);
    assert_true(st == WGML_ERR_DEVICE_LOST || st == WGML_ERR_GPU);
    assert_int_equal(wgml_gpu_status(gpu, &err), WGML_ERR_DEVICE_LOST);
    assert_non_null(strstr(err.message, "lost"));
    float v;
    assert_int_equal(wgml_gpu_read(gpu, a.y, 0, &v, 4, &err), WGML_ERR_DEVICE_LOST);
    wgml_gpu_buffer *b = NULL;
    assert_int_equal(wgml_gpu_buffer_create(gpu, 64, WGML_GPU_STORAGE, "after", &b, &err), WGML_ERR_DEVICE_LOST);
    assert_null(b);
    wgml_gpu_kernel *k = NULL;
    assert_int_equal(wgml_gpu_kernel_create(gpu, axpy_wgsl, "main", "after", &k, &err), WGML_ERR_DEVICE_LOST);
    wgml_gpu_bindgroup *bg = NULL;
    wgml_gpu_binding bind[1] = {{1, a.x, 0, 0}};
    assert_int_equal(wgml_gpu_bindgroup_create(gpu, a.k, bind, 1, &bg, &err), WGML_ERR_DEVICE_LOST);
    wgml_gpu_write(gpu, a.x, 0, &v, 4);
    wgml_gpu_copy(gpu, a.x, 0, a.y, 0, 4);
    axpy_free(&a);
    wgml_gpu_destroy(gpu);
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A wait gives up after WGML_GPU_TIMEOUT seconds instead of hanging: a
 * serial loop far longer than the timeout (software adapters only, where its
 * length is predictable) fails the submit in about the timeout. */
static void test_wait_timeout(void **state) {
    if (current->type != WGML_GPU_CPU) skip();
    static const char *spin = "@group(0) @binding(0) var<storage, read_write> v: array<u32>;\n"
                              "@compute @workgroup_size(1)\n"
                              "fn main() {\n"
                              "    var acc = 0u;\n"
                              "    for (var i = 0u; i < v[0]; i++) { acc = acc * 1664525u + 1013904223u; }\n"
                              "    v[1] = acc;\n"
                              "}\n";
    fixture *f = *state;
    wgml_gpu *gpus[2];
    wgml_gpu_buffer *b[2];
    wgml_gpu_kernel *k[2];
    wgml_gpu_bindgroup *bg[2];
    wgml_error err;
    gpus[0] = f->gpu; /* the normal timeout, to calibrate */
    setenv("WGML_GPU_TIMEOUT", "0.2", 1);
    gpus[1] = open_current(0);
    unsetenv("WGML_GPU_TIMEOUT");
    for (int i = 0; i < 2; i++) {
        b[i] = make_buffer(gpus[i], 8, WGML_GPU_STORAGE, "v");
        k[i] = make_kernel(gpus[i], spin, "spin");
        wgml_gpu_binding bind = {0, b[i], 0, 0};
        check_ok(wgml_gpu_bindgroup_create(gpus[i], k[i], &bind, 1, &bg[i], &err), &err);
    }
    /* Calibrate: the second of two runs of 2^24 iterations. */
    double per_iter = 0;
    for (int run = 0; run < 2; run++) {
        uint32_t v[2] = {1u << 24, 0};
        wgml_gpu_write(gpus[0], b[0], 0, v, sizeof v);
        double t0 = seconds();
        wgml_gpu_dispatch(gpus[0], k[0], bg[0], 1, 1, 1);
        check_ok(wgml_gpu_read(gpus[0], b[0], 4, &v[1], 4, &err), &err);
        per_iter = (seconds() - t0) / (double)(1u << 24);
    }
    double iters = 1.5 / (per_iter > 0 ? per_iter : 1e-9); /* about 1.5 s */
    uint32_t v[2] = {iters > 4e9 ? 4000000000u : (uint32_t)iters, 0};
    wgml_gpu_write(gpus[1], b[1], 0, v, sizeof v);
    wgml_gpu_dispatch(gpus[1], k[1], bg[1], 1, 1, 1);
    double t0 = seconds();
    wgml_status st = wgml_gpu_read(gpus[1], b[1], 4, &v[1], 4, &err);
    double waited = seconds() - t0;
    assert_int_equal(st, WGML_ERR_GPU);
    assert_non_null(strstr(err.message, "timed out"));
    assert_true(waited < 1.0);
    assert_int_equal(wgml_gpu_status(gpus[1], &err), WGML_ERR_GPU);
    check_ok(wgml_gpu_status(gpus[0], &err), &err);
    for (int i = 0; i < 2; i++) {
        wgml_gpu_bindgroup_destroy(bg[i]);
        wgml_gpu_kernel_destroy(k[i]);
        wgml_gpu_buffer_destroy(b[i]);
    }
    wgml_gpu_destroy(gpus[1]); /* waits for the loop to end */
}

/* Pipelines compiled in the background (wgml_gpu_kernel_create_async): the
 * commands recorded with them keep their order against copies and dispatches
 * of ready kernels, a kernel or bind group destroyed before the submit stays
 * alive for it, and the step waits for every pipeline. */
static const char *scale_wgsl = "@group(0) @binding(0) var<storage, read_write> v: array<f32>;\n"
                                "@compute @workgroup_size(64)\n"
                                "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
                                "    if (id.x < arrayLength(&v)) { v[id.x] = v[id.x] * MUL + ADD; }\n"
                                "}\n";

static wgml_gpu_kernel *make_scale(wgml_gpu *gpu, float mul, float add, int async) {
    char src[512], label[32];
    snprintf(src, sizeof src, "const MUL: f32 = %.1f;\nconst ADD: f32 = %.1f;\n%s", mul, add, scale_wgsl);
    snprintf(label, sizeof label, "scale %g %g", mul, add);
    wgml_gpu_kernel *k = NULL;
    wgml_error err;
    check_ok((async ? wgml_gpu_kernel_create_async : wgml_gpu_kernel_create)(gpu, src, "main", label, &k, &err),
             &err);
    return k;
}

static void test_async_kernels(void **state) {
    fixture *f = *state;
    enum { N = 1000, K = 6 };
    wgml_gpu_buffer *a = make_buffer(f->gpu, N * 4, WGML_GPU_STORAGE, "a");
    wgml_gpu_buffer *b = make_buffer(f->gpu, N * 4, WGML_GPU_STORAGE, "b");
    wgml_gpu_kernel *ready = make_scale(f->gpu, 2.0f, 0.0f, 0);
    wgml_gpu_kernel *k[K];
    wgml_gpu_bindgroup *bg[K], *bg_ready;
    wgml_error err;
    wgml_gpu_binding ba = {0, a, 0, 0}, bb = {0, b, 0, 0};
    wgml_gpu_counters c0, c1;
    wgml_gpu_get_counters(f->gpu, &c0);
    for (int i = 0; i < K; i++) {
        k[i] = make_scale(f->gpu, 1.0f, (float)(i + 1), 1); /* v + i + 1 */
        check_ok(wgml_gpu_bindgroup_create(f->gpu, k[i], i % 2 ? &bb : &ba, 1, &bg[i], &err), &err);
    }
    check_ok(wgml_gpu_bindgroup_create(f->gpu, ready, &ba, 1, &bg_ready, &err), &err);
    assert_true(wgml_gpu_kernels_pending(f->gpu) <= K);

    float x[N], y[N], want_a[N], want_b[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 17);
    wgml_gpu_write(f->gpu, a, 0, x, sizeof x);
    /* a = (x + 1) * 2; b = a + 2; a = a + 3; b = b + 4; a = a*2; copy a -> b's
     * first half; a += 5; b += 6: the order matters at every step. */
    wgml_gpu_dispatch(f->gpu, k[0], bg[0], (N + 63) / 64, 1, 1);
    wgml_gpu_dispatch(f->gpu, ready, bg_ready, (N + 63) / 64, 1, 1);
    wgml_gpu_copy(f->gpu, a, 0, b, 0, N * 4);
    wgml_gpu_dispatch(f->gpu, k[1], bg[1], (N + 63) / 64, 1, 1);
    wgml_gpu_dispatch(f->gpu, k[2], bg[2], (N + 63) / 64, 1, 1);
    wgml_gpu_dispatch(f->gpu, k[3], bg[3], (N + 63) / 64, 1, 1);
    wgml_gpu_dispatch(f->gpu, ready, bg_ready, (N + 63) / 64, 1, 1);
    wgml_gpu_copy(f->gpu, a, 0, b, 0, N * 2);
    wgml_gpu_dispatch(f->gpu, k[4], bg[4], (N + 63) / 64, 1, 1);
    wgml_gpu_dispatch(f->gpu, k[5], bg[5], (N + 63) / 64, 1, 1);
    /* Destroyed before the submit: the recorded dispatches keep them alive. */
    wgml_gpu_bindgroup_destroy(bg[5]);
    wgml_gpu_kernel_destroy(k[5]);
    for (int i = 0; i < N; i++) {
        float va = (x[i] + 1) * 2, vb = va + 2;
        va += 3;
        vb += 4;
        va *= 2;
        if (i < N / 2) vb = va;
        want_a[i] = va + 5;
        want_b[i] = vb + 6;
    }
    wgml_gpu_readback rb[2] = {{a, 0, sizeof y, y}, {b, 0, sizeof x, x}};
    check_ok(wgml_gpu_submit(f->gpu, rb, 2, &err), &err);
    assert_int_equal(wgml_gpu_kernels_pending(f->gpu), 0);
    for (int i = 0; i < N; i++) {
        if (y[i] != want_a[i]) fail_msg("a[%d] = %g, want %g", i, y[i], want_a[i]);
        if (x[i] != want_b[i]) fail_msg("b[%d] = %g, want %g", i, x[i], want_b[i]);
    }
    wgml_gpu_get_counters(f->gpu, &c1);
    assert_int_equal(c1.kernels_created - c0.kernels_created, K);
    assert_int_equal(c1.dispatches - c0.dispatches, 8);
    assert_int_equal(c1.submits - c0.submits, 1);

    /* Once compiled they run like any kernel, with their bind groups made once. */
    wgml_gpu_dispatch(f->gpu, k[0], bg[0], (N + 63) / 64, 1, 1);
    check_ok(wgml_gpu_read(f->gpu, a, 0, y, sizeof y, &err), &err);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == want_a[i] + 1);
    wgml_gpu_counters c2;
    wgml_gpu_get_counters(f->gpu, &c2);
    assert_int_equal(c2.bindgroups_created, c1.bindgroups_created);

    /* Pending and never used, then waited for explicitly, with progress. */
    wgml_gpu_kernel *idle = make_scale(f->gpu, 3.0f, 1.0f, 1);
    wgml_gpu_kernel *gone = make_scale(f->gpu, 3.0f, 2.0f, 1);
    wgml_gpu_kernel_destroy(gone); /* its pipeline is dropped when it arrives */
    check_ok(wgml_gpu_kernels_wait(f->gpu, NULL, NULL, &err), &err);
    assert_int_equal(wgml_gpu_kernels_pending(f->gpu), 0);
    assert_true(wgml_gpu_kernel_wait_ms(f->gpu) >= 0.0);
    wgml_gpu_kernel_destroy(idle);
    for (int i = 0; i < K - 1; i++) {
        wgml_gpu_bindgroup_destroy(bg[i]);
        wgml_gpu_kernel_destroy(k[i]);
    }
    wgml_gpu_bindgroup_destroy(bg_ready);
    wgml_gpu_kernel_destroy(ready);
    wgml_gpu_buffer_destroy(a);
    wgml_gpu_buffer_destroy(b);
    check_ok(wgml_gpu_status(f->gpu, &err), &err);
}

static int progress_calls, progress_last, progress_total;
static void count_progress(void *user, int done, int total) {
    (void)user;
    progress_calls++;
    if (done <= progress_last || done > total) fail_msg("progress %d of %d after %d", done, total, progress_last);
    progress_last = done;
    progress_total = total;
}

/* A pipeline that fails in the background (an entry point the module lacks)
 * fails the next submit naming the kernel; kernels waited for report progress;
 * a gpu destroyed with pipelines still pending frees them. */
static void test_async_errors(void **state) {
    (void)state;
    wgml_gpu *gpu = open_current(0);
    wgml_error err;
    wgml_gpu_kernel *k[3] = {make_scale(gpu, 1.0f, 1.0f, 1), make_scale(gpu, 1.0f, 2.0f, 1), NULL};
    progress_calls = progress_last = progress_total = 0;
    check_ok(wgml_gpu_kernels_wait(gpu, count_progress, NULL, &err), &err);
    assert_int_equal(progress_calls, 2);
    assert_int_equal(progress_last, 2);
    assert_int_equal(progress_total, 2);

    /* A WGSL error is still reported at once. */
    assert_int_equal(wgml_gpu_kernel_create_async(gpu, "fn main( {", "main", "broken", &k[2], &err), WGML_ERR_GPU);
    assert_null(k[2]);
    assert_non_null(strstr(err.message, "kernel 'broken'"));
    check_ok(wgml_gpu_status(gpu, &err), &err);

    wgml_status st = wgml_gpu_kernel_create_async(gpu, axpy_wgsl, "nope", "no entry", &k[2], &err);
    if (st == WGML_OK) {
        wgml_gpu_buffer *v = make_buffer(gpu, 256, WGML_GPU_STORAGE, "v");
        wgml_gpu_binding bind = {0, v, 0, 0};
        wgml_gpu_bindgroup *bg = NULL;
        check_ok(wgml_gpu_bindgroup_create(gpu, k[2], &bind, 1, &bg, &err), &err);
        wgml_gpu_dispatch(gpu, k[2], bg, 1, 1, 1);
        assert_int_equal(wgml_gpu_submit(gpu, NULL, 0, &err), WGML_ERR_GPU);
        assert_non_null(strstr(err.message, "kernel 'no entry'"));
        print_message("    %s\n", err.message);
        assert_int_equal(wgml_gpu_status(gpu, &err), WGML_ERR_GPU);
        wgml_gpu_bindgroup_destroy(bg);
        wgml_gpu_buffer_destroy(v);
    } else {
        /* Dawn may also refuse it before compiling. */
        assert_int_equal(st, WGML_ERR_GPU);
        assert_non_null(strstr(err.message, "no entry"));
    }
    wgml_gpu_kernel_destroy(k[2]);
    /* Still compiling when the gpu goes (the kernels outlive it). */
    wgml_gpu *gpu2 = open_current(0);
    wgml_gpu_kernel *late = make_scale(gpu2, 5.0f, 1.0f, 1);
    wgml_gpu_destroy(gpu2);
    wgml_gpu_kernel_destroy(late);
    wgml_gpu_kernel_destroy(k[0]);
    wgml_gpu_kernel_destroy(k[1]);
    wgml_gpu_destroy(gpu);
}

/* ---- tests across adapters ------------------------------------------------------------ */

static void test_list_adapters(void **state) {
    for (int i = 0; i < n_adapters; i++) {
        const wgml_gpu_adapter_info *a = &adapters[i];
        print_message("    adapter %d: %s [%s, %s] f16=%d subgroups=%d(%u-%u) timestamps=%d maxBuffer=%llu "
                      "maxStorageBinding=%llu from %s\n",
                      i, a->name, a->backend, a->driver, a->has_f16, a->has_subgroups, a->subgroup_min_size,
                      a->subgroup_max_size, a->has_timestamps, (unsigned long long)a->max_buffer_size,
                      (unsigned long long)a->max_storage_binding_size, a->source);
        assert_true(a->name[0] != '\0');
        assert_true(a->source[0] != '\0');
        assert_string_not_equal(a->backend, "null");
        assert_false(contains_nocase(a->name, "null backend"));
    }
    const char *req = getenv("WGML_REQUIRE_ADAPTERS");
    if (!req || !*req) return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", req);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int i = 0; i < n_adapters; i++)
            found |= contains_nocase(adapters[i].name, tok);
        if (!found) fail_msg("WGML_REQUIRE_ADAPTERS: no adapter matching '%s' (run scripts/setup-deps.sh)", tok);
    }
}

static void test_choose(void **state) {
    wgml_gpu *gpu = (wgml_gpu *)1;
    wgml_error err;
    wgml_gpu_options opt = {0};
    opt.adapter = "no-such-adapter-anywhere";
    assert_int_equal(wgml_gpu_create(&opt, &gpu, &err), WGML_ERR_NO_ADAPTER);
    assert_null(gpu);
    assert_non_null(strstr(err.message, "no-such-adapter-anywhere"));
    if (n_adapters > 0) assert_non_null(strstr(err.message, adapters[0].name));

    /* No name: hardware only, unless software is allowed. */
    int hardware = 0;
    for (int i = 0; i < n_adapters; i++)
        hardware |= adapters[i].type != WGML_GPU_CPU;
    wgml_status st = wgml_gpu_create(NULL, &gpu, &err);
    assert_int_equal(st, hardware ? WGML_OK : WGML_ERR_NO_ADAPTER);
    if (st == WGML_OK) assert_int_not_equal(wgml_gpu_info(gpu)->type, WGML_GPU_CPU);
    wgml_gpu_destroy(gpu);
    if (n_adapters == 0) return;
    opt.adapter = NULL;
    opt.allow_software = 1;
    check_ok(wgml_gpu_create(&opt, &gpu, &err), &err);
    wgml_gpu_destroy(gpu);
    /* Case-insensitive substring. */
    char upper[64];
    snprintf(upper, sizeof upper, "%.8s", adapters[0].name);
    for (char *p = upper; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 32);
    opt.adapter = upper;
    opt.allow_software = 0;
    check_ok(wgml_gpu_create(&opt, &gpu, &err), &err);
    wgml_gpu_destroy(gpu);
}

static void test_wgsl_embedded(void **state) {
    assert_null(wgml_wgsl_source("no-such-kernel"));
    assert_null(wgml_wgsl_name(-1));
    assert_null(wgml_wgsl_name(wgml_wgsl_count()));
    for (int i = 0; i < wgml_wgsl_count(); i++) {
        const char *name = wgml_wgsl_name(i);
        assert_non_null(name);
        const char *src = wgml_wgsl_source(name);
        assert_non_null(src);
        assert_true(strlen(src) > 0);
    }
}

int main(void) {
    wgml_error err;
    n_adapters = wgml_gpu_list_adapters(adapters, MAX_ADAPTERS, &err);
    if (n_adapters < 0) {
        fprintf(stderr, "wgml_gpu_list_adapters: %s\n", err.message);
        return 1;
    }
    if (n_adapters > MAX_ADAPTERS) n_adapters = MAX_ADAPTERS;
    const struct CMUnitTest global[] = {
        cmocka_unit_test(test_list_adapters),
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_wgsl_embedded),
    };
    int failed = cmocka_run_group_tests_name("gpu", global, NULL, NULL);
    const struct CMUnitTest per_adapter[] = {
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_axpy_exact),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_buffer_too_large),
        cmocka_unit_test(test_partial_readback_and_copy),
        cmocka_unit_test(test_steady_state_counters),
        cmocka_unit_test(test_profiling),
        cmocka_unit_test(test_f16),
        cmocka_unit_test(test_sticky_error),
        cmocka_unit_test(test_lost_device),
        cmocka_unit_test(test_wait_timeout),
        cmocka_unit_test(test_async_kernels),
        cmocka_unit_test(test_async_errors),
    };
    for (int i = 0; i < n_adapters; i++) {
        char name[300];
        snprintf(name, sizeof name, "gpu on %.255s", adapters[i].name);
        current = &adapters[i];
        failed += _cmocka_run_group_tests(name, per_adapter, sizeof per_adapter / sizeof *per_adapter, group_setup,
                                          group_teardown);
    }
    return failed ? 1 : 0;
}

#else /* !WGML_HAVE_WEBGPU */

/* Skipped, unless adapters are required (CI): then a build without WebGPU fails. */
static void test_no_webgpu(void **state) {
    const char *req = getenv("WGML_REQUIRE_ADAPTERS");
    if (req && *req) fail_msg("WGML_REQUIRE_ADAPTERS=%s but wgml was built without WebGPU (no Dawn found)", req);
    skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_webgpu)};
    return cmocka_run_group_tests_name("gpu (built without WebGPU)", tests, NULL, NULL);
}

#endif
