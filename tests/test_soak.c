/*
 * test_soak.c - many sessions and thousands of tokens: memory must not grow.
 *
 * One model per backend (CPU; WebGPU on lavapipe, else SwiftShader) runs S
 * sessions one after another. Each session generates T tokens
 * in calls of at most 100 (continuing the session), alternating sampled and
 * greedy sessions, resetting when the context (256) fills - so the loop goes
 * through creation, prompt, decode, continuation, context-full, reset and free.
 * After every session the test records:
 *   live   host allocations made by wgml and not freed (wgml_alloc_live)
 *   device the backend's allocated device/scratch bytes (device_memory_bytes)
 *   rss    the process's resident set (/proc/self/statm)
 * and after a warm-up of 2 sessions asserts:
 *   live and device: exactly equal to their value after warm-up. Both are
 *     counts of our own objects, deterministic for a given model, so any
 *     difference is a leak (or an unbounded cache).
 *   rss: at most 4 MiB above its value after warm-up (8 MiB on WebGPU). RSS
 *     also holds what we do not control - malloc's free lists, the Vulkan
 *     driver's pools, LLVM's code for lavapipe's shaders - which settles after
 *     the first sessions but moves by a few hundred KiB; a real leak of even a
 *     few bytes per token shows within the default run (8 MiB over 4000
 *     tokens is 2 KiB a token), and the live count catches smaller ones
 *     exactly. Under ASan, whose quarantine keeps freed memory resident, RSS
 *     is printed but not checked.
 *
 * Defaults (CI): 20 sessions x 200 tokens on the CPU; 10 sessions x 50
 * tokens on WebGPU, where the software adapters decode stories260K at about
 * 30 tokens/s (lavapipe) and 3 (SwiftShader) on 2 cores. Environment:
 *   WGML_SOAK_SESSIONS, WGML_SOAK_TOKENS          CPU sessions, tokens per session
 *   WGML_SOAK_GPU_SESSIONS, WGML_SOAK_GPU_TOKENS  the same on WebGPU
 *   WGML_SOAK_ADAPTERS  comma-separated adapters (default: llvmpipe, else swiftshader)
 * e.g. the long run: WGML_SOAK_SESSIONS=50 WGML_SOAK_TOKENS=1000
 * WGML_SOAK_GPU_SESSIONS=10 WGML_SOAK_GPU_TOKENS=1000 build/tests/test_soak
 */
#include "core/alloc.h"
#include "gpu/gpu.h"
#include "testutil.h"
#include "wgml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define WARMUP 2
#define N_CTX  256
#define CHUNK  100

static long env_long(const char *name, long def) {
    const char *s = getenv(name);
    long v = s && *s ? strtol(s, NULL, 10) : def;
    return v > 0 ? v : def;
}

static double rss_mib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int count_token(void *user, int32_t token, const char *text, size_t len) {
    (void)text;
    (void)len;
    if (token >= 0) ++*(long *)user;
    return 0;
}

/* One session: T tokens in calls of at most CHUNK, resetting when full. */
static long run_session(wgml_model *m, int index, long tokens) {
    wgml_session_params sp = {.n_ctx = N_CTX};
    wgml_session *s;
    wgml_error err;
    if (wgml_session_create(m, &sp, &s, &err)) fail_msg("session %d: %s", index, err.message);
    long got = 0;
    int fresh = 1;
    while (got < tokens) {
        wgml_generate_params gp = wgml_generate_default_params();
        long want = tokens - got < CHUNK ? tokens - got : CHUNK;
        gp.n_predict = (int)want;
        gp.ignore_eos = 1;
        gp.sampler.temperature = index % 2 ? 0 : 0.9f;
        gp.sampler.seed = (uint64_t)index * 1000 + (uint64_t)got;
        gp.on_token = count_token;
        gp.user = &got;
        wgml_generate_result res;
        wgml_status st = wgml_generate(s, fresh ? "Once upon a time" : "", &gp, &res, &err);
        if (st) fail_msg("session %d after %ld tokens: %s", index, got, err.message);
        fresh = 0;
        if (res.stop == WGML_STOP_CONTEXT_FULL) {
            wgml_session_reset(s);
            fresh = 1;
        } else if (res.stop != WGML_STOP_MAX_TOKENS) {
            fail_msg("session %d: stopped by %s", index, wgml_stop_reason_name(res.stop));
        }
    }
    wgml_session_free(s);
    return got;
}

typedef struct {
    double rss;
    long live;
    uint64_t device;
} sample;

static sample measure(const wgml_model *m) {
    wgml_counters c;
    wgml_model_get_counters(m, &c);
    return (sample){rss_mib(), wgml_alloc_live(), c.device_memory_bytes};
}

static void soak(const char *label, wgml_backend_kind kind, const char *adapter, long sessions, long tokens,
                 double rss_tolerance) {
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = kind;
    mp.adapter = adapter;
    mp.n_threads = 2;
    wgml_model *m;
    wgml_error err;
    sample before = {rss_mib(), wgml_alloc_live(), 0};
    if (wgml_model_load(tu_shared("models/stories260K.gguf"), &mp, &m, &err)) fail_msg("%s: %s", label, err.message);
    sample loaded = measure(m), warm = loaded, peak = loaded, last = loaded;
    printf("%s: %ld sessions x %ld tokens; before load rss %.1f MiB, live %ld; loaded rss %.1f MiB, live %ld, "
           "device %llu B\n",
           label, sessions, tokens, before.rss, before.live, loaded.rss, loaded.live,
           (unsigned long long)loaded.device);
    printf("  %8s %9s %9s %8s %12s %8s\n", "session", "tokens", "rss MiB", "live", "device B", "tok/s");
    long total = 0;
    double t0 = seconds();
    long every = sessions / 10 > 1 ? sessions / 10 : 1;
    for (long i = 0; i < sessions; i++) {
        double ts = seconds();
        total += run_session(m, (int)i, tokens);
        double dt = seconds() - ts;
        last = measure(m);
        if (last.rss > peak.rss) peak.rss = last.rss;
        if (i + 1 == WARMUP) warm = last;
        if (i < WARMUP || (i + 1) % every == 0 || i + 1 == sessions)
            printf("  %8ld %9ld %9.1f %8ld %12llu %8.0f\n", i + 1, total, last.rss, last.live,
                   (unsigned long long)last.device, dt > 0 ? (double)tokens / dt : 0);
        if (i + 1 > WARMUP) {
            if (last.live != warm.live)
                fail_msg("%s: after session %ld, %ld live allocations (%ld after warm-up)", label, i + 1, last.live,
                         warm.live);
            if (last.device != warm.device)
                fail_msg("%s: after session %ld, %llu device bytes (%llu after warm-up)", label, i + 1,
                         (unsigned long long)last.device, (unsigned long long)warm.device);
        }
    }
    double secs = seconds() - t0;
    double growth = last.rss - warm.rss;
    printf("%s: %ld tokens in %.1f s (%.0f tok/s); rss after warm-up %.1f MiB, at the end %.1f MiB (%+.2f MiB), "
           "peak %.1f MiB; live allocations %ld -> %ld; device %llu -> %llu B\n",
           label, total, secs, (double)total / secs, warm.rss, last.rss, growth, peak.rss, warm.live, last.live,
           (unsigned long long)warm.device, (unsigned long long)last.device);
    fflush(stdout);
    if (sessions > WARMUP && !UNDER_ASAN && growth > rss_tolerance)
        fail_msg("%s: rss grew %.2f MiB after warm-up (tolerance %.0f MiB)", label, growth, rss_tolerance);
    wgml_model_free(m);
    long after = wgml_alloc_live();
    if (after != before.live) fail_msg("%s: %ld allocations left after freeing the model", label, after - before.live);
}

static void test_cpu(void **state) {
    (void)state;
    soak("cpu", WGML_BACKEND_CPU, NULL, env_long("WGML_SOAK_SESSIONS", 20), env_long("WGML_SOAK_TOKENS", 200), 4.0);
}

static void test_webgpu(void **state) {
    (void)state;
    char list[256];
    const char *env = getenv("WGML_SOAK_ADAPTERS");
    if (env && *env)
        snprintf(list, sizeof list, "%s", env);
    else
        snprintf(list, sizeof list, "%s", tu_adapter_present("llvmpipe") ? "llvmpipe" : "swiftshader");
    long sessions = env_long("WGML_SOAK_GPU_SESSIONS", 10), tokens = env_long("WGML_SOAK_GPU_TOKENS", 50);
    int ran = 0;
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        if (!tu_adapter_present(a)) {
            const char *req = getenv("WGML_REQUIRE_ADAPTERS");
            if (req && strstr(req, a)) fail_msg("adapter '%s' is required but not found", a);
            fprintf(stderr, "skipping %s: adapter not found\n", a);
            continue;
        }
        char label[64];
        snprintf(label, sizeof label, "webgpu %s", a);
        soak(label, WGML_BACKEND_WEBGPU, a, sessions, tokens, 8.0);
        ran++;
    }
    if (!ran) skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_webgpu),
    };
    const char *only = getenv("WGML_TEST_FILTER"); /* e.g. "test_cpu" */
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
