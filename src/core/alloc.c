/*
 * alloc.c - allocation wrappers with failure injection (see alloc.h).
 */
#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static long fail_after = -1; /* <0: never fail */
static unsigned long n_allocs;

static int should_fail(void) {
    n_allocs++;
    if (fail_after < 0) return 0;
    if (fail_after == 0) return 1;
    fail_after--;
    return 0;
}

void wgml_alloc_fail_after(long n) { fail_after = n; }
unsigned long wgml_alloc_count(void) { return n_allocs; }

void *wgml_malloc(size_t size) {
    if (should_fail()) return NULL;
    return malloc(size ? size : 1);
}

void *wgml_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    if (should_fail()) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *wgml_realloc(void *p, size_t size) {
    if (should_fail()) return NULL;
    return realloc(p, size ? size : 1);
}

void wgml_free(void *p) { free(p); }

char *wgml_strndup(const char *s, size_t n) {
    char *d = wgml_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *wgml_strdup(const char *s) { return wgml_strndup(s, strlen(s)); }

void *wgml_aligned_alloc(size_t size) {
    if (should_fail()) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 64) != 0) return NULL;
    return p;
}

void wgml_aligned_free(void *p) { free(p); }
