/*
 * testutil.c - see testutil.h.
 */
#include "testutil.h"

#include "gpu/gpu.h"

#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *shared_root(void) {
    const char *root = getenv("WGML_SHARED");
    return root && *root ? root : "../shared";
}

int tu_shared_present(void) {
    struct stat st;
    if (stat(shared_root(), &st) == 0 && S_ISDIR(st.st_mode)) return 1;
    /* A clone with no shared data beside it: the tests that need it are
     * skipped, unless they are required (CI). */
    static int told;
    const char *req = getenv("WGML_REQUIRE_SHARED");
    if (req && *req) fail_msg("the shared test data %s is missing (WGML_REQUIRE_SHARED is set)", shared_root());
    if (!told++) fprintf(stderr, "no shared test data at %s: the tests that need it are skipped\n", shared_root());
    return 0;
}

const char *tu_shared(const char *rel) {
    static char bufs[8][4096];
    static int slot;
    char *b = bufs[slot++ & 7];
    if (!tu_shared_present()) skip();
    snprintf(b, 4096, "%s/%s", shared_root(), rel);
    return b;
}

unsigned char *tu_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n > 0 ? n : 0] = 0;
        *size = (size_t)(n > 0 ? n : 0);
    }
    return b;
}

int tu_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, size, f);
    return fclose(f) == 0 && w == size ? 0 : -1;
}

static char tmp_dir[256];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* The temporary directory goes when the test ends: at exit (passed or
 * failed: cmocka turns a crash inside a test into a failure and returns
 * from main), and on an abort (assert, ASan with abort_on_error) or a
 * termination request, which then take their default action. */
static void remove_tmp_dir(void) {
    if (tmp_dir[0]) nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void remove_tmp_dir_on_signal(int sig) {
    remove_tmp_dir();
    signal(sig, SIG_DFL);
    raise(sig);
}

const char *tu_tmp_path(const char *name) {
    static char bufs[8][512];
    static int slot;
    if (!tmp_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(tmp_dir, sizeof tmp_dir, "%s/wgml-test-%d", t && *t ? t : "/tmp", (int)getpid());
        mkdir(tmp_dir, 0700);
        atexit(remove_tmp_dir);
        const int fatal[] = {SIGABRT, SIGTERM, SIGINT};
        for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) signal(fatal[i], remove_tmp_dir_on_signal);
    }
    char *b = bufs[slot++ & 7];
    snprintf(b, 512, "%s/%s", tmp_dir, name);
    return b;
}

uint64_t tu_next(tu_rng *r) {
    uint64_t x = r->s ? r->s : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

float tu_uniform(tu_rng *r) { return (float)(tu_next(r) >> 40) / 16777216.0f; }

float tu_normal(tu_rng *r) {
    float u1 = tu_uniform(r), u2 = tu_uniform(r);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

int tu_collect(void *user, int32_t token, const char *text, size_t len) {
    (void)token;
    tu_sink *s = user;
    if (s->len + len < sizeof s->text) {
        memcpy(s->text + s->len, text, len);
        s->len += len;
        s->text[s->len] = 0;
    }
    s->calls++;
    return s->stop_after && s->calls >= s->stop_after;
}

int64_t tu_file_read(void *user, uint64_t offset, void *buf, size_t len) {
    FILE *f = user;
    if (fseek(f, (long)offset, SEEK_SET)) return -1;
    return (int64_t)fread(buf, 1, len, f);
}

int tu_adapter_present(const char *name) {
    wgml_gpu_adapter_info a[16];
    int n = wgml_gpu_list_adapters(a, 16, NULL);
    for (int i = 0; i < n && i < 16; i++) {
        char lower[256];
        size_t k = 0;
        for (; a[i].name[k] && k < 255; k++) lower[k] = (char)(a[i].name[k] | 0x20);
        lower[k] = 0;
        if (strstr(lower, name)) return 1;
    }
    return 0;
}
