/*
 * alloc.c - allocation wrappers with failure injection (see alloc.h).
 *
 * The live count is kept with relaxed atomics: CPU worker threads and Dawn's
 * callbacks may allocate, and an atomic add costs next to nothing beside malloc.
 *
 * WebAssembly: wasi-libc's malloc has no lock (Debian's wasi-libc has no
 * threads), and the build with worker threads shares one heap between them
 * (src/core/threadpool.c). Workers should never allocate; a spin lock around
 * the allocator makes it safe if one ever does.
 */
#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__wasm__)
#include <stdatomic.h>
static atomic_flag heap_lock = ATOMIC_FLAG_INIT;
#define HEAP_LOCK()                                                                       \
    do {                                                                                  \
        while (atomic_flag_test_and_set_explicit(&heap_lock, memory_order_acquire)) {} \
    } while (0)
#define HEAP_UNLOCK() atomic_flag_clear_explicit(&heap_lock, memory_order_release)
#else
#define HEAP_LOCK() ((void)0)
#define HEAP_UNLOCK() ((void)0)
#endif

static long fail_after = -1; /* <0: never fail */
static unsigned long n_allocs;
static long n_live; /* successful allocations minus frees (atomic) */

static void *counted(void *p) {
    if (p) __atomic_add_fetch(&n_live, 1, __ATOMIC_RELAXED);
    return p;
}

static void release(void *p) {
    if (!p) return;
    __atomic_sub_fetch(&n_live, 1, __ATOMIC_RELAXED);
    HEAP_LOCK();
    free(p);
    HEAP_UNLOCK();
}

static int should_fail(void) {
    n_allocs++;
    if (fail_after < 0) return 0;
    if (fail_after == 0) return 1;
    fail_after--;
    return 0;
}

void wgml_alloc_fail_after(long n) { fail_after = n; }
unsigned long wgml_alloc_count(void) { return n_allocs; }
long wgml_alloc_live(void) { return __atomic_load_n(&n_live, __ATOMIC_RELAXED); }

void *wgml_malloc(size_t size) {
    if (should_fail()) return NULL;
    HEAP_LOCK();
    void *p = malloc(size ? size : 1);
    HEAP_UNLOCK();
    return counted(p);
}

void *wgml_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    if (should_fail()) return NULL;
    HEAP_LOCK();
    void *p = calloc(n ? n : 1, size ? size : 1);
    HEAP_UNLOCK();
    return counted(p);
}

void *wgml_realloc(void *p, size_t size) {
    if (should_fail()) return NULL;
    HEAP_LOCK();
    void *q = realloc(p, size ? size : 1);
    HEAP_UNLOCK();
    return p ? q : counted(q); /* a realloc of p keeps its count */
}

void wgml_free(void *p) { release(p); }

char *wgml_strndup(const char *s, size_t n) {
    char *d = wgml_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *wgml_strdup(const char *s) { return wgml_strndup(s, strlen(s)); }

/* Buffers this large (KV caches, activations of long prompts, weights
 * converted at load) are aligned to 2 MiB and, on Linux, offered transparent
 * huge pages: attention walks a KV head's rows at a stride of a whole cache
 * row, touching a new 4 KiB page every few rows, and TLB misses then cost as
 * much as the memory reads. */
#define HUGE_BYTES ((size_t)4 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)

void *wgml_aligned_alloc(size_t size) {
    if (should_fail()) return NULL;
    void *p = NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const int huge = size >= HUGE_BYTES;
#else
    const int huge = 0; /* elsewhere (WebAssembly) the 2 MiB alignment would only waste memory */
#endif
    HEAP_LOCK();
    int rc = posix_memalign(&p, huge ? HUGE_ALIGN : 64, size ? size : 64);
    HEAP_UNLOCK();
    if (rc != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) (void)madvise(p, size & ~(HUGE_ALIGN - 1), MADV_HUGEPAGE); /* advice only: may be refused */
#endif
    return counted(p);
}

void wgml_aligned_free(void *p) { release(p); }
