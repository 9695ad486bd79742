/*
 * fuzz_hub.c - libFuzzer target: the names of models by URL and Hugging
 * Face name, their cache paths, a repository's file list and the choice of a
 * file from it (net/hub.h) - what a hostile command line or hub answers.
 *
 * The input up to its first NUL byte is a model name (also used as the
 * quantization tag); the rest is a file list (Hugging Face's tree JSON).
 * Checked: no cache path climbs out of the cache ("..", a leading '/'),
 * every listed path is a safe one, and every pick is an index of the list.
 */
#include "core/alloc.h"
#include "net/hub.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                 \
    do {                                                                         \
        if (!(c)) {                                                              \
            fprintf(stderr, "fuzz_hub: check failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                             \
        }                                                                        \
    } while (0)

static void check_relative(const char *p) {
    CHECK(p[0] != '/');
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        CHECK(n > 0);
        CHECK(!(n == 2 && s[0] == '.' && s[1] == '.'));
        CHECK(!(n == 1 && s[0] == '.'));
        if (!e) break;
        s = e + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    char *name = malloc(n + 1);
    if (!name) return 0;
    memcpy(name, data, n);
    name[n] = '\0';
    wgml_hub_spec s;
    wgml_error err;
    if (wgml_hub_parse(name, 0, &s, &err) == WGML_OK && s.kind == WGML_HUB_HF) {
        CHECK(s.owner[0] && s.repo[0]);
        if (s.file[0]) CHECK(wgml_hub_safe_path(s.file));
    }
    char path[4096];
    if (wgml_hub_url_cache_path(name, path, sizeof path) == 0) check_relative(path);
    if (wgml_hub_safe_path(name)) check_relative(name);
    if (nul) {
        const char *json = (const char *)nul + 1;
        size_t len = size - n - 1;
        wgml_hub_file *files = NULL;
        int count = 0;
        if (wgml_hub_parse_tree(json, len, &files, &count, &err) == WGML_OK) {
            for (int i = 0; i < count; i++) {
                CHECK(wgml_hub_safe_path(files[i].path));
                check_relative(files[i].path);
            }
            int *idx = malloc((size_t)(count ? count : 1) * sizeof *idx), folder = 0;
            if (idx) {
                int k = wgml_hub_pick(files, count, n < 64 ? name : "", idx, &folder, &err);
                CHECK(k >= 0 && k <= count);
                for (int i = 0; i < k; i++) CHECK(idx[i] >= 0 && idx[i] < count);
                CHECK(k <= 1 || folder);
                free(idx);
            }
            wgml_free(files);
        }
    }
    free(name);
    return 0;
}
