/*
 * testutil.h - helpers shared by the unit tests: where the shared data lives,
 * reading whole files, temporary paths, deterministic random numbers.
 */
#ifndef WGML_TESTUTIL_H
#define WGML_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first */
#include <cmocka.h>

/* Path of a file under the shared folder ($WGML_SHARED or ../shared): a static buffer per call slot.
 * Without that folder the calling test is skipped (cmocka skip()), or fails when
 * $WGML_REQUIRE_SHARED is set (CI sets it). Call it from a test, not from main. */
const char *tu_shared(const char *rel);
/* 1 when the shared folder is there; 0 (with a note on stderr, once) when it is
 * not, or a failure when $WGML_REQUIRE_SHARED is set. For group setups, which
 * cannot skip. */
int tu_shared_present(void);
/* Reads a whole file; returns NULL on failure. Free with free(). */
unsigned char *tu_read_file(const char *path, size_t *size);
/* Writes bytes to a file; returns 0 on success. */
int tu_write_file(const char *path, const void *data, size_t size);
/* A wgml_model_load_stream reader over an open FILE * (the user pointer). */
int64_t tu_file_read(void *user, uint64_t offset, void *buf, size_t len);
/* 1 if a WebGPU adapter whose lower-cased name contains `name` ("llvmpipe",
 * "swiftshader") is on this machine. */
int tu_adapter_present(const char *name);
/* A fresh path in a per-process temporary directory. */
const char *tu_tmp_path(const char *name);

/* Streamed text from wgml_generate: pass tu_collect as on_token and a
 * tu_sink as its user pointer. Keeps the text (truncated at the buffer),
 * counts the calls, and stops generation after stop_after calls (0: never). */
typedef struct {
    char text[16384];
    size_t len;
    int calls, stop_after;
} tu_sink;
int tu_collect(void *user, int32_t token, const char *text, size_t len);

/* xorshift64* generator; deterministic per seed. */
typedef struct {
    uint64_t s;
} tu_rng;
uint64_t tu_next(tu_rng *r);
float tu_uniform(tu_rng *r); /* [0, 1) */
float tu_normal(tu_rng *r);  /* mean 0, std 1 */

#endif
