/*
 * file_bytes.h - a whole file's bytes, read-only, for the readers that work
 * in place on them (gguf.c, pth.c): memory-mapped natively, read into an
 * owned buffer in WebAssembly (no mmap there). Also small text files read
 * whole (a model folder's JSON files) and path joining.
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

/* "dir/name" (no second '/' when dir ends with one; just name when dir is
 * NULL or empty), wgml_malloc'ed (free with wgml_free); NULL when out of memory. */
char *wgml_path_join(const char *dir, const char *name);

/* A small text file - a model folder's config.json, preprocessor_config.json,
 * tokenizer.json - read whole: the file `name` in folder `dir` (or the path
 * `name` when dir is NULL) into *text, wgml_malloc'ed and NUL-terminated
 * (free with wgml_free), its length without the NUL in *len (len may be
 * NULL). A file of more than max_size bytes is WGML_ERR_FORMAT; one that
 * cannot be opened or read, or is not a regular file, WGML_ERR_IO; except
 * that with `optional` set a file that does not exist gives WGML_OK and
 * *text = NULL. The bytes are not checked (UTF-8, NULs): the parser does
 * that. Errors name the path. */
wgml_status wgml_read_text_file(const char *dir, const char *name, size_t max_size, int optional, char **text,
                                size_t *len, wgml_error *err);

#endif
