/*
 * web_threads.c - the worker threads of web/dist/wgml-threads.wasm (only that
 * module links this file: cmake/web.cmake).
 *
 * That module runs on a shared memory that web/engine.js creates; every Web
 * Worker it starts (web/thread.js) instantiates the same module on the same
 * memory. Each instance has its own globals, so a worker needs its own stack
 * (the exported __stack_pointer, which JS sets before calling in) and its own
 * thread-local block (__wasm_init_tls). Both are allocated here by the main
 * thread, which owns the heap (wasi-libc's malloc has no lock).
 *
 *   wgmlw_threads_init(n)   main thread, once, right after _initialize: sets up
 *                           its own TLS, then makes n - 1 worker slots with a
 *                           stack each; returns how many it made
 *   wgmlw_thread_stack(i)   the top of slot i's stack, for __stack_pointer
 *   wgmlw_thread_entry(i)   a worker: never returns (src/core/threadpool.c,
 *                           wgml_threadpool_wasm_serve)
 *   wgmlw_threads_idle()    slots that are serving and not in a pool: JS waits
 *                           for every worker to get there before loading
 */
#include <stdint.h>

#include "core/alloc.h"
#include "core/threadpool.h"

#define EXPORT(name) __attribute__((export_name(#name)))

/* 1 MiB each, as the main thread's (-z stack-size): the kernels keep their
 * tiles on the stack. */
#define WORKER_STACK_BYTES ((size_t)1 << 20)

/* made by wasm-ld for a shared memory: copies the TLS image to `block` and
 * points this instance's __tls_base at it */
extern void __wasm_init_tls(void *block);

static struct {
    int slot;
    uint8_t *stack;
    void *tls;
} workers[WGML_WASM_MAX_THREADS];
static int n_workers, main_ready;

static void *tls_block(void) {
    size_t align = __builtin_wasm_tls_align(), size = __builtin_wasm_tls_size();
    uint8_t *p = wgml_aligned_alloc(size + align); /* 64-aligned; TLS asks for less */
    return p && align <= 64 ? p : NULL;
}

EXPORT(wgmlw_threads_init) int wgmlw_threads_init(int n) {
    if (!main_ready) {
        void *t = tls_block();
        if (!t) return -1;
        __wasm_init_tls(t);
        main_ready = 1;
    }
    if (n > WGML_WASM_MAX_THREADS) n = WGML_WASM_MAX_THREADS;
    while (n_workers < n - 1) {
        uint8_t *stack = wgml_aligned_alloc(WORKER_STACK_BYTES);
        void *tls = tls_block();
        int slot = stack && tls ? wgml_threadpool_wasm_add_slot() : -1;
        if (slot < 0) {
            wgml_aligned_free(stack);
            wgml_aligned_free(tls);
            break;
        }
        workers[n_workers].slot = slot;
        workers[n_workers].stack = stack;
        workers[n_workers].tls = tls;
        n_workers++;
    }
    return n_workers;
}

EXPORT(wgmlw_thread_stack) uintptr_t wgmlw_thread_stack(int i) {
    return i >= 0 && i < n_workers ? (uintptr_t)(workers[i].stack + WORKER_STACK_BYTES) : 0;
}

EXPORT(wgmlw_thread_entry) void wgmlw_thread_entry(int i) {
    if (i < 0 || i >= n_workers) return;
    __wasm_init_tls(workers[i].tls);
    wgml_threadpool_wasm_serve(workers[i].slot);
}

EXPORT(wgmlw_threads_idle) int wgmlw_threads_idle(void) { return wgml_threadpool_wasm_idle(); }
