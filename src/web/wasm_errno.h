/*
 * wasm_errno.h - forced into every file of the browser build (-include, the
 * top CMakeLists.txt).
 *
 * Those files are compiled with wasm atomics, and wasi-libc's <errno.h>
 * declares errno _Thread_local; but Debian's wasi-libc was compiled without
 * atomics, where thread-local variables become plain globals, so libc defines
 * errno as one. A thread-local reference to it cannot link into the module
 * with a shared memory (wgml-threads.wasm). Here errno names libc's global
 * instead. Only the main thread reads or sets it (file and number parsing);
 * worker threads run kernels.
 */
#ifndef WGML_WEB_WASM_ERRNO_H
#define WGML_WEB_WASM_ERRNO_H
#include <errno.h>
#undef errno
extern int wgml_libc_errno __asm__("errno");
#define errno wgml_libc_errno
#endif
