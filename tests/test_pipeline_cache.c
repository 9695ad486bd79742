/*
 * test_pipeline_cache.c - compiled pipelines on disk (src/gpu/pipeline_cache.h).
 *
 * Without a GPU ("files"): the cache module alone, in a temporary directory:
 * round trips, Dawn's two-call load, misses, every kind of damaged file
 * (flipped byte, truncation, wrong magic or version, lengths past the limits
 * or the file, another key under the same name: each a miss, never a crash
 * or wrong data), isolation keys, a directory that cannot be made, the
 * environment's choice of directory (and WGML_CACHE_DIR=off), threads.
 *
 * On an adapter ("lavapipe", "swiftshader"): a device made twice with one
 * cache directory finds the first one's pipelines (hits > 0) and computes the
 * same results; another cache key finds nothing; damaged entries are
 * rejected and the results stay right; then stories260K loaded twice on the
 * WebGPU backend: the second load is warm (hits, no misses) and generates
 * the same text. Skipped when the adapter is missing (a failure where
 * WGML_REQUIRE_ADAPTERS names it).
 *
 * Everything is written under the test's temporary directory: WGML_CACHE_DIR
 * points there.
 *   test_pipeline_cache [files] [lavapipe] [swiftshader]   (default: all)
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef WGML_HAVE_WEBGPU

#include "api_internal.h"
#include "backend/webgpu/wg_internal.h"
#include "core/alloc.h"
#include "gpu/gpu.h"
#include "gpu/pipeline_cache.h"
#include "wgml.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------------- */

/* A fresh directory for one test (not created: the cache makes it). */
static const char *fresh_dir(const char *name) { return tu_tmp_path(name); }

static size_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Rewrites byte `at` of a file with `value`. */
static void poke(const char *path, size_t at, unsigned char value) {
    size_t n;
    unsigned char *d = tu_read_file(path, &n);
    assert_non_null(d);
    assert_true(at < n);
    d[at] = value;
    assert_int_equal(tu_write_file(path, d, n), 0);
    free(d);
}

/* Writes little-endian v into bytes [at, at + 8) of a file. */
static void poke_u64(const char *path, size_t at, uint64_t v) {
    for (int i = 0; i < 8; i++)
        poke(path, at + (size_t)i, (unsigned char)(v >> (8 * i)));
}

static void truncate_to(const char *path, size_t n) { assert_int_equal(truncate(path, (off_t)n), 0); }

/* A value of n bytes, different per seed. */
static void fill(unsigned char *v, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        v[i] = (unsigned char)(seed * 31u + i * 7u + (i >> 8));
}

/* Loads key the way Dawn does (size, then a buffer of that size) into out
 * (cap bytes); returns the size, 0 on a miss. */
static size_t dawn_load(wgml_pipeline_cache *pc, const char *key, unsigned char *out, size_t cap) {
    size_t n = wgml_pipeline_cache_load(pc, key, strlen(key), NULL, 0);
    if (n == 0) return 0;
    assert_true(n <= cap);
    assert_int_equal(wgml_pipeline_cache_load(pc, key, strlen(key), out, n), n);
    return n;
}

static void store_str(wgml_pipeline_cache *pc, const char *key, const void *value, size_t n) {
    wgml_pipeline_cache_store(pc, key, strlen(key), value, n);
}

static wgml_pipeline_cache_counters counters(const wgml_pipeline_cache *pc) {
    wgml_pipeline_cache_counters c;
    wgml_pipeline_cache_get_counters(pc, &c);
    return c;
}

static char *entry_path(const wgml_pipeline_cache *pc, const char *key) {
    static char path[4][1024];
    static int slot;
    char *p = path[slot++ & 3];
    assert_true(wgml_pipeline_cache_entry_path(pc, key, strlen(key), p, 1024));
    return p;
}

/* ---- the module alone -------------------------------------------------------------- */

static void test_round_trip(void **state) {
    (void)state;
    long live = wgml_alloc_live();
    const char *dir = fresh_dir("rt/a/b"); /* nested: made like mkdir -p */
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(dir, "adapter A");
    assert_non_null(pc);
    assert_false(exists(dir)); /* nothing is touched before the first store */
    unsigned char v[5000], out[5000];
    fill(v, sizeof v, 1);
    assert_int_equal(dawn_load(pc, "key 1", out, sizeof out), 0); /* absent */
    store_str(pc, "key 1", v, sizeof v);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    memset(out, 0, sizeof out);
    assert_int_equal(dawn_load(pc, "key 1", out, sizeof out), sizeof v);
    assert_memory_equal(out, v, sizeof v);
    /* a caller that passes a large enough buffer at once */
    memset(out, 0, sizeof out);
    assert_int_equal(wgml_pipeline_cache_load(pc, "key 1", 5, out, sizeof out), sizeof v);
    assert_memory_equal(out, v, sizeof v);
    /* a buffer too small gets the size and nothing else */
    assert_int_equal(wgml_pipeline_cache_load(pc, "key 1", 5, out, 10), sizeof v);
    /* replaced by a later store; other keys stay apart */
    fill(v, 100, 2);
    store_str(pc, "key 1", v, 100);
    store_str(pc, "key 2", "x", 1);
    assert_int_equal(dawn_load(pc, "key 1", out, sizeof out), 100);
    assert_memory_equal(out, v, 100);
    assert_int_equal(dawn_load(pc, "key 2", out, sizeof out), 1);
    assert_int_equal(out[0], 'x');
    assert_int_equal(dawn_load(pc, "key 3", out, sizeof out), 0);
    /* an empty key is a key */
    wgml_pipeline_cache_store(pc, "", 0, "e", 1);
    assert_int_equal(wgml_pipeline_cache_load(pc, "", 0, out, 1), 1);
    wgml_pipeline_cache_counters c = counters(pc);
    assert_int_equal(c.stores, 4);
    assert_int_equal(c.hits, 5);
    assert_int_equal(c.misses, 2);
    assert_int_equal(c.rejected, 0);
    assert_string_equal(wgml_pipeline_cache_dir(pc), dir);
    wgml_pipeline_cache_close(pc);

    /* a second cache object (another process) on the same directory finds them;
     * another isolation key does not */
    pc = wgml_pipeline_cache_open(dir, "adapter A");
    assert_int_equal(dawn_load(pc, "key 2", out, sizeof out), 1);
    wgml_pipeline_cache_close(pc);
    pc = wgml_pipeline_cache_open(dir, "adapter B");
    assert_int_equal(dawn_load(pc, "key 2", out, sizeof out), 0);
    wgml_pipeline_cache_close(pc);
    /* a trailing slash names the same directory */
    char slash[600];
    snprintf(slash, sizeof slash, "%s/", dir);
    pc = wgml_pipeline_cache_open(slash, "adapter A");
    assert_int_equal(dawn_load(pc, "key 2", out, sizeof out), 1);
    /* only entries and no temporary files are left */
    DIR *d = opendir(dir);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        files++;
        assert_non_null(strstr(e->d_name, ".bin"));
        assert_null(strstr(e->d_name, ".tmp"));
    }
    closedir(d);
    assert_int_equal(files, 3);
    wgml_pipeline_cache_close(pc);
    assert_int_equal(wgml_alloc_live(), live);
}

/* Dawn asks for the size, then for the bytes: if another process replaces the
 * entry in between, both answers still come from one entry. */
static void test_two_calls_one_entry(void **state) {
    (void)state;
    const char *dir = fresh_dir("two");
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(dir, "iso");
    wgml_pipeline_cache *other = wgml_pipeline_cache_open(dir, "iso");
    unsigned char v[300], w[700], out[1000];
    fill(v, sizeof v, 3);
    fill(w, sizeof w, 4);
    store_str(pc, "k", v, sizeof v);
    assert_int_equal(wgml_pipeline_cache_load(pc, "k", 1, NULL, 0), sizeof v);
    store_str(other, "k", w, sizeof w);
    assert_int_equal(wgml_pipeline_cache_load(pc, "k", 1, out, sizeof v), sizeof v);
    assert_memory_equal(out, v, sizeof v);
    /* the next load sees the new entry */
    assert_int_equal(dawn_load(pc, "k", out, sizeof out), sizeof w);
    assert_memory_equal(out, w, sizeof w);
    /* size queries never answered by a copy are dropped at close (no leak) */
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "q%d", i);
        store_str(pc, key, v, sizeof v);
        assert_int_equal(wgml_pipeline_cache_load(pc, key, strlen(key), NULL, 0), sizeof v);
    }
    wgml_pipeline_cache_close(pc);
    wgml_pipeline_cache_close(other);
}

/* One damaged file: the load misses, and a corrupt file is deleted. */
typedef enum {
    DAMAGE_FLIP_VALUE,
    DAMAGE_FLIP_KEY,
    DAMAGE_FLIP_HEADER_SUM,
    DAMAGE_TRUNCATE,
    DAMAGE_TRUNCATE_HEADER,
    DAMAGE_EMPTY,
    DAMAGE_MAGIC,
    DAMAGE_VERSION,
    DAMAGE_VALUE_HUGE,
    DAMAGE_VALUE_LONGER,
    DAMAGE_KEY_HUGE,
    DAMAGE_APPEND,
    DAMAGE_COUNT
} damage;

static void test_damaged_files(void **state) {
    (void)state;
    long live = wgml_alloc_live();
    const char *dir = fresh_dir("damage");
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(dir, "iso key");
    unsigned char v[4096], out[4096];
    const size_t header = 40, iso = 7;
    for (int d = 0; d < DAMAGE_COUNT; d++) {
        char key[32];
        snprintf(key, sizeof key, "damaged key %d", d);
        fill(v, sizeof v, (unsigned)d);
        store_str(pc, key, v, sizeof v);
        const char *path = entry_path(pc, key);
        size_t n = file_size(path), klen = strlen(key);
        assert_int_equal(n, header + iso + klen + sizeof v);
        switch ((damage)d) {
        case DAMAGE_FLIP_VALUE: poke(path, n - 100, (unsigned char)(v[sizeof v - 100] ^ 0x10)); break;
        case DAMAGE_FLIP_KEY: poke(path, header + iso + 2, 'X'); break;
        case DAMAGE_FLIP_HEADER_SUM: poke(path, 35, 0xee); break;
        case DAMAGE_TRUNCATE: truncate_to(path, n - 1); break;
        case DAMAGE_TRUNCATE_HEADER: truncate_to(path, 20); break;
        case DAMAGE_EMPTY: truncate_to(path, 0); break;
        case DAMAGE_MAGIC: poke(path, 0, 'W'); break;
        case DAMAGE_VERSION: poke(path, 8, 99); break;
        case DAMAGE_VALUE_HUGE: poke_u64(path, 24, (uint64_t)1 << 40); break;
        case DAMAGE_VALUE_LONGER: poke_u64(path, 24, sizeof v + 1); break;
        case DAMAGE_KEY_HUGE: poke_u64(path, 16, ~(uint64_t)0 - 10); break;
        case DAMAGE_APPEND: {
            FILE *f = fopen(path, "ab");
            assert_non_null(f);
            fputc(0, f);
            fclose(f);
            break;
        }
        case DAMAGE_COUNT: break;
        }
        wgml_pipeline_cache_counters before = counters(pc);
        assert_int_equal(dawn_load(pc, key, out, sizeof out), 0);
        wgml_pipeline_cache_counters after = counters(pc);
        assert_int_equal(after.misses, before.misses + 1);
        assert_int_equal(after.rejected, before.rejected + 1);
        assert_int_equal(after.hits, before.hits);
        assert_false(exists(path)); /* deleted */
        /* stored again, it works again */
        store_str(pc, key, v, sizeof v);
        assert_int_equal(dawn_load(pc, key, out, sizeof out), sizeof v);
        assert_memory_equal(out, v, sizeof v);
    }
    wgml_pipeline_cache_close(pc);
    assert_int_equal(wgml_alloc_live(), live);
}

/* A sound entry of another key under this key's file name (as a hash
 * collision would leave): a miss, never the other key's value; the file stays. */
static void test_other_key_same_name(void **state) {
    (void)state;
    const char *dir = fresh_dir("collide");
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(dir, "iso");
    unsigned char v[64], out[64];
    fill(v, sizeof v, 9);
    store_str(pc, "the other key", v, sizeof v);
    const char *other = entry_path(pc, "the other key"), *mine = entry_path(pc, "my key");
    assert_int_equal(rename(other, mine), 0);
    assert_int_equal(dawn_load(pc, "my key", out, sizeof out), 0);
    assert_true(exists(mine));
    assert_int_equal(counters(pc).rejected, 0);
    /* the same key under another isolation key, moved to this one's name */
    wgml_pipeline_cache *pc2 = wgml_pipeline_cache_open(dir, "another iso");
    store_str(pc2, "my key", v, sizeof v);
    assert_int_equal(rename(entry_path(pc2, "my key"), mine), 0);
    assert_int_equal(dawn_load(pc, "my key", out, sizeof out), 0);
    /* keys that differ in length only */
    store_str(pc, "ab", v, sizeof v);
    assert_int_equal(rename(entry_path(pc, "ab"), entry_path(pc, "abc")), 0);
    assert_int_equal(dawn_load(pc, "abc", out, sizeof out), 0);
    wgml_pipeline_cache_close(pc2);
    wgml_pipeline_cache_close(pc);
}

/* Limits: nothing past them is stored; NULL and empty arguments are harmless. */
static void test_limits_and_nulls(void **state) {
    (void)state;
    const char *dir = fresh_dir("limits");
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(dir, NULL);
    assert_non_null(pc);
    unsigned char b[8] = {0};
    /* the sizes are checked before anything is read */
    wgml_pipeline_cache_store(pc, "k", 1, b, (size_t)WGML_PIPELINE_CACHE_MAX_VALUE + 1);
    wgml_pipeline_cache_store(pc, b, (size_t)WGML_PIPELINE_CACHE_MAX_KEY + 1, b, 1);
    wgml_pipeline_cache_store(pc, "k", 1, b, 0);
    wgml_pipeline_cache_store(pc, "k", 1, NULL, 4);
    wgml_pipeline_cache_store(pc, NULL, 4, b, 4);
    assert_int_equal(counters(pc).stores, 0);
    assert_int_equal(wgml_pipeline_cache_load(pc, NULL, 4, NULL, 0), 0);
    /* a NULL cache: off */
    assert_int_equal(wgml_pipeline_cache_load(NULL, "k", 1, b, sizeof b), 0);
    wgml_pipeline_cache_store(NULL, "k", 1, b, sizeof b);
    wgml_pipeline_cache_counters c = counters(NULL);
    assert_int_equal(c.hits + c.misses + c.stores + c.rejected, 0);
    assert_string_equal(wgml_pipeline_cache_dir(NULL), "");
    wgml_pipeline_cache_close(NULL);
    assert_null(wgml_pipeline_cache_open("off", "iso"));
    assert_null(wgml_pipeline_cache_open("", "iso"));
    wgml_pipeline_cache_close(pc);
}

/* A directory that cannot be made (its parent is a file: this fails even for
 * root): stores are skipped, loads miss, nothing fails. */
static void test_unwritable_dir(void **state) {
    (void)state;
    const char *file = tu_tmp_path("a-file");
    assert_int_equal(tu_write_file(file, "x", 1), 0);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/pipelines", file);
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(dir, "iso");
    assert_non_null(pc);
    unsigned char v[16] = {1}, out[16];
    for (int i = 0; i < 3; i++)
        store_str(pc, "k", v, sizeof v);
    assert_int_equal(dawn_load(pc, "k", out, sizeof out), 0);
    wgml_pipeline_cache_counters c = counters(pc);
    assert_int_equal(c.stores, 0);
    assert_int_equal(c.misses, 1);
    wgml_pipeline_cache_close(pc);
    /* an existing directory that is not writable (skipped as root, who can write anyway) */
    if (geteuid() != 0) {
        const char *ro = tu_tmp_path("read-only");
        assert_int_equal(mkdir(ro, 0500), 0);
        pc = wgml_pipeline_cache_open(ro, "iso");
        store_str(pc, "k", v, sizeof v);
        assert_int_equal(counters(pc).stores, 0);
        assert_int_equal(dawn_load(pc, "k", out, sizeof out), 0);
        wgml_pipeline_cache_close(pc);
        chmod(ro, 0700);
    }
}

/* The directory from the environment; the variables are restored after. */
static void test_environment(void **state) {
    (void)state;
    const char *names[3] = {"WGML_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
    char *saved[3];
    for (int i = 0; i < 3; i++)
        saved[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL;
    char dir[4096];
    unsetenv("WGML_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/home/u", 1);
    assert_true(wgml_pipeline_cache_default_dir(dir, sizeof dir));
    assert_string_equal(dir, "/x/cache/wgml/pipelines");
    setenv("XDG_CACHE_HOME", "relative/cache", 1); /* ignored, as the XDG spec says */
    assert_true(wgml_pipeline_cache_default_dir(dir, sizeof dir));
    assert_string_equal(dir, "/home/u/.cache/wgml/pipelines");
    unsetenv("XDG_CACHE_HOME");
    assert_true(wgml_pipeline_cache_default_dir(dir, sizeof dir));
    assert_string_equal(dir, "/home/u/.cache/wgml/pipelines");
    unsetenv("HOME");
    assert_false(wgml_pipeline_cache_default_dir(dir, sizeof dir));
    assert_null(wgml_pipeline_cache_open(NULL, "iso"));
    setenv("WGML_CACHE_DIR", "/some/dir", 1);
    assert_true(wgml_pipeline_cache_default_dir(dir, sizeof dir));
    assert_string_equal(dir, "/some/dir");
    assert_false(wgml_pipeline_cache_default_dir(dir, 5)); /* does not fit */
    setenv("WGML_CACHE_DIR", "off", 1);
    assert_false(wgml_pipeline_cache_default_dir(dir, sizeof dir));
    assert_null(wgml_pipeline_cache_open(NULL, "iso"));
    setenv("WGML_CACHE_DIR", "OFF", 1);
    assert_null(wgml_pipeline_cache_open(NULL, "iso"));
    const char *tmp = fresh_dir("from-env");
    setenv("WGML_CACHE_DIR", tmp, 1);
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(NULL, "iso");
    assert_non_null(pc);
    assert_string_equal(wgml_pipeline_cache_dir(pc), tmp);
    wgml_pipeline_cache_close(pc);
    for (int i = 0; i < 3; i++) {
        if (saved[i])
            setenv(names[i], saved[i], 1);
        else
            unsetenv(names[i]);
        free(saved[i]);
    }
}

/* Threads storing and loading at once (shared and own keys): every hit is
 * the right value. */
#define N_THREADS 4
#define N_ROUNDS  150

typedef struct {
    wgml_pipeline_cache *pc;
    int id, bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    unsigned char v[777], out[777];
    for (int r = 0; r < N_ROUNDS; r++) {
        char key[32];
        int shared = r % 2 == 0;
        unsigned k = (unsigned)(r % 10);
        snprintf(key, sizeof key, shared ? "shared %u" : "own %d %u", shared ? k : (unsigned)w->id, k);
        /* shared keys hold the same value in every thread, as Dawn's blobs do */
        fill(v, sizeof v, shared ? k : k + 100u * (unsigned)(w->id + 1));
        wgml_pipeline_cache_store(w->pc, key, strlen(key), v, sizeof v);
        size_t n = wgml_pipeline_cache_load(w->pc, key, strlen(key), NULL, 0);
        if (n &&
            (n != sizeof v || wgml_pipeline_cache_load(w->pc, key, strlen(key), out, n) != n || memcmp(out, v, n) != 0))
            w->bad++;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    wgml_pipeline_cache *pc = wgml_pipeline_cache_open(fresh_dir("threads"), "iso");
    pthread_t t[N_THREADS];
    worker w[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (worker){pc, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].bad, 0);
    }
    wgml_pipeline_cache_counters c = counters(pc);
    assert_int_equal(c.stores, N_THREADS * N_ROUNDS);
    assert_int_equal(c.rejected, 0);
    assert_true(c.hits > 0);
    wgml_pipeline_cache_close(pc);
}

/* ---- on an adapter ------------------------------------------------------------------ */

static const char *adapter; /* "llvmpipe" or "swiftshader": the group's */

static const char *kernel_wgsl = "struct P { a: f32, n: u32 }\n"
                                 "@group(0) @binding(0) var<uniform> p: P;\n"
                                 "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
                                 "@compute @workgroup_size(64)\n"
                                 "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
                                 "    let i = id.x;\n"
                                 "    if (i < p.n) { let x = f32(i) * 0.001; y[i] = p.a * sin(x) + exp(-x) * x; }\n"
                                 "}\n";
#define KERNEL_N 4099u

/* Makes a device on the group's adapter with cache_key, compiles and runs the
 * kernel, reads back its output and the counters. */
static void run_device(const char *cache_key, float *out, wgml_gpu_counters *c) {
    wgml_gpu_options opt = {.adapter = adapter, .allow_software = 1, .cache_key = cache_key};
    wgml_gpu *gpu = NULL;
    wgml_error err;
    wgml_status st = wgml_gpu_create(&opt, &gpu, &err);
    if (st) fail_msg("wgml_gpu_create(%s): %s", adapter, err.message);
    wgml_gpu_kernel *k = NULL;
    wgml_gpu_buffer *params = NULL, *y = NULL;
    wgml_gpu_bindgroup *bg = NULL;
    struct {
        float a;
        uint32_t n;
        uint32_t pad[2];
    } p = {1.5f, KERNEL_N, {0, 0}};
    if ((st = wgml_gpu_kernel_create(gpu, kernel_wgsl, "main", "cache test", &k, &err)) ||
        (st = wgml_gpu_buffer_create(gpu, sizeof p, WGML_GPU_UNIFORM, "params", &params, &err)) ||
        (st = wgml_gpu_buffer_create(gpu, KERNEL_N * 4, WGML_GPU_STORAGE, "y", &y, &err)))
        fail_msg("%s", err.message);
    wgml_gpu_binding b[2] = {{0, params, 0, 0}, {1, y, 0, 0}};
    if ((st = wgml_gpu_bindgroup_create(gpu, k, b, 2, &bg, &err))) fail_msg("%s", err.message);
    wgml_gpu_write(gpu, params, 0, &p, sizeof p);
    wgml_gpu_dispatch(gpu, k, bg, (KERNEL_N + 63) / 64, 1, 1);
    wgml_gpu_readback r = {y, 0, KERNEL_N * 4, out};
    if ((st = wgml_gpu_submit(gpu, &r, 1, &err))) fail_msg("%s", err.message);
    wgml_gpu_get_counters(gpu, c);
    wgml_gpu_bindgroup_destroy(bg);
    wgml_gpu_buffer_destroy(y);
    wgml_gpu_buffer_destroy(params);
    wgml_gpu_kernel_destroy(k);
    wgml_gpu_destroy(gpu);
}

/* Flips a byte in the second half of every entry (header and keys intact: the
 * checksum must catch it), and truncates every third. */
static void damage_all(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int i = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".bin")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = file_size(path);
        if (i++ % 3 == 2)
            truncate_to(path, n / 2);
        else {
            size_t m;
            unsigned char *data = tu_read_file(path, &m);
            assert_non_null(data);
            poke(path, n - 1 - (n / 4), (unsigned char)(data[n - 1 - (n / 4)] ^ 0x5a));
            free(data);
        }
    }
    closedir(d);
    assert_true(i > 0);
}

static int need_adapter(void) {
#ifndef WGML_DAWN_BLOB_CACHE
    fprintf(stderr, "skipping: this Dawn's webgpu.h has no blob cache (cmake/webgpu.cmake)\n");
    return 0;
#endif
    if (tu_adapter_present(adapter)) return 1;
    const char *req = getenv("WGML_REQUIRE_ADAPTERS");
    if (req && strstr(req, adapter)) fail_msg("adapter '%s' is required but not found", adapter);
    fprintf(stderr, "skipping: no %s adapter\n", adapter);
    return 0;
}

static void test_device_twice(void **state) {
    (void)state;
    if (!need_adapter()) skip();
    char dir[600];
    snprintf(dir, sizeof dir, "%s", fresh_dir(adapter));
    setenv("WGML_CACHE_DIR", dir, 1);
    static float first[KERNEL_N], again[KERNEL_N];
    wgml_gpu_counters c;
    run_device("kernels 1", first, &c);
    assert_int_equal(c.cache_hits, 0);
    assert_true(c.cache_misses > 0);
    assert_true(c.cache_stores > 0);
    /* the same device and kernels again: from the disk, the same results */
    run_device("kernels 1", again, &c);
    assert_true(c.cache_hits > 0);
    assert_int_equal(c.cache_misses, 0);
    assert_memory_equal(first, again, sizeof first);
    /* other kernel sources: nothing of the first's */
    run_device("kernels 2", again, &c);
    assert_int_equal(c.cache_hits, 0);
    assert_memory_equal(first, again, sizeof first);
    /* damaged entries: rejected, compiled again, still right */
    damage_all(dir);
    memset(again, 0, sizeof again);
    run_device("kernels 1", again, &c);
    assert_int_equal(c.cache_hits, 0);
    assert_true(c.cache_stores > 0);
    assert_memory_equal(first, again, sizeof first);
    /* and the entries written then are good again */
    run_device("kernels 1", again, &c);
    assert_true(c.cache_hits > 0);
    assert_memory_equal(first, again, sizeof first);
    /* off: no counts */
    setenv("WGML_CACHE_DIR", "off", 1);
    run_device("kernels 1", again, &c);
    assert_int_equal(c.cache_hits + c.cache_misses + c.cache_stores, 0);
    assert_memory_equal(first, again, sizeof first);
}

/* stories260K on the WebGPU backend, greedy, with the cache's counters
 * right after the load and at the end. */
static void generate(const char *path, tu_sink *out, wgml_backend_stats *at_load, wgml_backend_stats *stats) {
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_WEBGPU;
    mp.adapter = adapter;
    wgml_model *m = NULL;
    wgml_session *s = NULL;
    wgml_error err;
    if (wgml_model_load(path, &mp, &m, &err) || wgml_session_create(m, NULL, &s, &err))
        fail_msg("%s: %s", adapter, err.message);
    wgml_model_backend(m)->get_stats(wgml_model_backend(m), at_load);
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = 24;
    gp.sampler.temperature = 0;
    gp.on_token = tu_collect;
    gp.user = out;
    if (wgml_generate(s, "Once upon a time", &gp, NULL, &err)) fail_msg("%s: %s", adapter, err.message);
    wgml_backend *be = wgml_model_backend(m);
    be->get_stats(be, stats);
    wgml_session_free(s);
    wgml_model_free(m);
}

static void test_model_twice(void **state) {
    (void)state;
    const char *path = tu_shared("models/stories260K.gguf");
    if (!need_adapter()) skip();
    char dir[600];
    snprintf(dir, sizeof dir, "%s-model", fresh_dir(adapter));
    setenv("WGML_CACHE_DIR", dir, 1);
    static tu_sink cold, warm, again;
    wgml_backend_stats a0, a, b0, b, c0, c;
    generate(path, &cold, &a0, &a);
    assert_int_equal(a.pipeline_cache_hits, 0);
    assert_true(a.pipeline_cache_stores > 0);
    assert_int_equal(a0.pipelines_created, 0); /* nothing known of this model yet */
    generate(path, &warm, &b0, &b);
    assert_true(b.pipeline_cache_hits > 0);
    assert_int_equal(b.pipeline_cache_misses, 0);
    assert_int_equal(b.pipelines_created, a.pipelines_created);
    /* every kernel the first run used was compiled during the load */
    assert_int_equal(b0.pipelines_created, a.pipelines_created);
    assert_true(cold.len > 0);
    assert_string_equal(cold.text, warm.text);

    /* A damaged kernel list is thrown away (and written again at the end). */
    int damaged = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        char file[1200];
        snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        size_t n = 0;
        char *bytes = e->d_name[0] == '.' ? NULL : (char *)tu_read_file(file, &n);
        const char *magic = "wgml-kernels 1\n";
        for (size_t i = 0; bytes && i + strlen(magic) + 17 <= n; i++) {
            if (memcmp(bytes + i, magic, strlen(magic)) != 0) continue;
            bytes[i + strlen(magic) + 5] ^= 1; /* a key's digit: the checksum no longer matches */
            assert_int_equal(tu_write_file(file, bytes, n), 0);
            damaged++;
            break;
        }
        free(bytes);
    }
    closedir(d);
    assert_int_equal(damaged, 1);
    generate(path, &again, &c0, &c);
    assert_int_equal(c0.pipelines_created, 0);
    assert_string_equal(cold.text, again.text);
    generate(path, &again, &c0, &c);
    assert_int_equal(c0.pipelines_created, a.pipelines_created);
}

/* The stored list of kernels believes nothing (src/backend/webgpu/wg_manifest.c). */
static void test_kernel_list_parse(void **state) {
    (void)state;
    uint64_t k[4];
    const char ok[] = "wgml-kernels 1\n0001000200000003\n0000000000000000\n";
    assert_int_equal(wg_kernels_parse(ok, strlen(ok), k, 4), 2);
    assert_true(k[0] == 0x0001000200000003ull && k[1] == 0);
    assert_int_equal(wg_kernels_parse(ok, strlen(ok), k, 1), -1);       /* more than fit */
    assert_int_equal(wg_kernels_parse(ok, strlen(ok) - 1, k, 4), -1);   /* cut short */
    assert_int_equal(wg_kernels_parse(ok, 14, k, 4), -1);               /* magic cut */
    assert_int_equal(wg_kernels_parse("wgml-kernels 1\n", 15, k, 4), 0); /* empty */
    const char *bad[] = {
        "wgml-kernels 2\n0001000200000003\n", /* another version */
        "wgml-kernels 1\n0001000200000G03\n", /* not hex */
        "wgml-kernels 1\n0001000200000A03\n", /* upper case is not how it is written */
        "wgml-kernels 1\n000100020000003\n\n", /* short key */
        "wgml-kernels 1\nffff000000000000\n", /* no such kernel kind */
        "wgml-kernels 1\n0001000200000003 ",   /* no newline */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (wg_kernels_parse(bad[i], strlen(bad[i]), k, 4) != -1) fail_msg("accepted: %s", bad[i]);
}

/* ---- main ---------------------------------------------------------------------------- */

static int wants(int argc, char **argv, const char *part) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], part)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int failed = 0;
    if (wants(argc, argv, "files")) {
        const struct CMUnitTest files[] = {
            cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_two_calls_one_entry),
            cmocka_unit_test(test_damaged_files),    cmocka_unit_test(test_other_key_same_name),
            cmocka_unit_test(test_limits_and_nulls), cmocka_unit_test(test_unwritable_dir),
            cmocka_unit_test(test_environment),      cmocka_unit_test(test_threads),
            cmocka_unit_test(test_kernel_list_parse),
        };
        failed += cmocka_run_group_tests_name("pipeline cache files", files, NULL, NULL);
    }
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_device_twice),
        cmocka_unit_test(test_model_twice),
    };
    static const char *const parts[][2] = {{"lavapipe", "llvmpipe"}, {"swiftshader", "swiftshader"}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!wants(argc, argv, parts[i][0])) continue;
        adapter = parts[i][1];
        char name[64];
        snprintf(name, sizeof name, "pipeline cache on %s", parts[i][0]);
        failed += _cmocka_run_group_tests(name, device, sizeof device / sizeof device[0], NULL, NULL);
    }
    return failed ? 1 : 0;
}

#else /* !WGML_HAVE_WEBGPU */

/* The cache belongs to the Dawn build: skipped, unless adapters are required (CI). */
static void test_no_webgpu(void **state) {
    (void)state;
    const char *req = getenv("WGML_REQUIRE_ADAPTERS");
    if (req && *req) fail_msg("WGML_REQUIRE_ADAPTERS=%s but wgml was built without WebGPU (no Dawn found)", req);
    skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_webgpu)};
    return cmocka_run_group_tests_name("pipeline cache (built without WebGPU)", tests, NULL, NULL);
}

#endif
