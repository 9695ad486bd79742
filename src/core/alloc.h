/*
 * alloc.h - the library's only way to get host memory.
 *
 * All library allocations go through these wrappers so that tests can make the
 * N-th allocation fail (wgml_alloc_fail_after) and check that every caller
 * copes: returns WGML_ERR_OUT_OF_MEMORY, leaks nothing, crashes nowhere.
 * Large weight memory is mmap'ed by the GGUF reader and is not counted here.
 */
#ifndef WGML_CORE_ALLOC_H
#define WGML_CORE_ALLOC_H

#include <stddef.h>

void *wgml_malloc(size_t size);
void *wgml_calloc(size_t n, size_t size);  /* fails (NULL) when n*size overflows */
void *wgml_realloc(void *p, size_t size);
void wgml_free(void *p);
char *wgml_strdup(const char *s);
char *wgml_strndup(const char *s, size_t n);
/* 64-byte aligned, for SIMD kernels; free with wgml_aligned_free. */
void *wgml_aligned_alloc(size_t size);
void wgml_aligned_free(void *p);

/* Test hook: after `n` more successful allocations every allocation fails,
 * until reset with n < 0. Not thread-safe; meant for single-threaded tests. */
void wgml_alloc_fail_after(long n);
/* Number of allocations made since the process started (for leak loops). */
unsigned long wgml_alloc_count(void);
/* Allocations live now: successful allocations minus frees (tests: leaks, soak). */
long wgml_alloc_live(void);

#endif
