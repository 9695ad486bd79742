/*
 * file_bytes.h - a whole file's bytes, read-only, for the readers that work
 * in place on them (gguf.c, pth.c): memory-mapped natively, read into an
 * owned buffer in WebAssembly (no mmap there).
 */
#ifndef WGML_FORMAT_FILE_BYTES_H
#define WGML_FORMAT_FILE_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

/* How a reader holds its bytes. */
enum { WGML_BYTES_BORROWED = 0, WGML_BYTES_MAPPED = 1, WGML_BYTES_OWNED = 2 };

/* The bytes of regular file `path` into *base / *size, *kind MAPPED or
 * OWNED. A file smaller than min_size is WGML_ERR_FORMAT ("file of N bytes
 * is too small to be <what>"); errors name the path. */
wgml_status wgml_file_bytes(const char *path, size_t min_size, const char *what, const uint8_t **base, size_t *size,
                            int *kind, wgml_error *err);

/* Gives back bytes of that kind (MAPPED: unmapped, OWNED: freed, BORROWED: nothing). */
void wgml_file_bytes_release(const uint8_t *base, size_t size, int kind);

#endif
