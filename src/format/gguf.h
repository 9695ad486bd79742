/*
 * gguf.h - reading and writing GGUF files (versions 2 and 3).
 *
 * Reader: the file is memory-mapped (or given as bytes) and the whole header
 * - metadata and tensor table - is parsed and validated up front: every length
 * and count is checked against the bytes that remain, every tensor's size is
 * computed without overflow from its type and shape and must lie inside the
 * data section, aligned, without overlapping another. After gguf_open
 * succeeds, nothing read from the file can point outside it.
 *
 * Layout of a GGUF file (all little-endian):
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv x { string key, u32 type, value }            (strings: u64 len + bytes)
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to `general.alignment` (default 32), then the tensor data;
 *   each tensor's offset is relative to the data start and aligned.
 *
 * Writer: metadata and the tensor table are declared first, then the data of
 * each tensor is streamed in the order the tensors were added, so a converter
 * never holds a whole model in memory. The file is written under a temporary
 * name and renamed into place only when complete.
 */
#ifndef WGML_FORMAT_GGUF_H
#define WGML_FORMAT_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

/* A string inside the file: not NUL-terminated. */
typedef struct gguf_str {
    const char *ptr;
    uint64_t len;
} gguf_str;

/* A metadata value. Scalars are decoded; arrays of fixed-size elements point at
 * the raw little-endian bytes; arrays of strings or arrays have `items`. */
typedef struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64; /* all unsigned integer types */
        int64_t i64;  /* all signed integer types */
        double f64;   /* FLOAT32 and FLOAT64 */
        int b;        /* BOOL */
        gguf_str str; /* STRING */
        struct {
            gguf_type elem_type;
            uint64_t n;
            const uint8_t *raw;       /* fixed-size elements */
            struct gguf_value *items; /* STRING or ARRAY elements, else NULL */
        } arr;
    } v;
} gguf_value;

typedef struct gguf_kv {
    const char *key; /* NUL-terminated copy */
    gguf_value value;
    uint64_t offset;      /* file offset of the key, for messages */
    const uint8_t *raw;   /* the serialized value (type tag excluded) */
    size_t raw_size;
} gguf_kv;

typedef struct gguf_tensor {
    const char *name; /* NUL-terminated copy */
    uint32_t type;    /* wgml_dtype */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims are 1 */
    int64_t n_elements;
    uint64_t offset;  /* relative to the data section */
    size_t size;      /* bytes */
    const void *data; /* inside the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Opens and validates a file; `path` is also used in error messages. */
wgml_status gguf_open(const char *path, gguf_file **out, wgml_error *err);
/* Same over caller-owned bytes that must outlive the gguf_file. `name` labels messages. */
wgml_status gguf_open_memory(const void *data, size_t size, const char *name, gguf_file **out,
                             wgml_error *err);
/* Makes f own the bytes it was opened over with gguf_open_memory: gguf_close
 * then frees them with free() (bytes from malloc, e.g. what
 * gguf_writer_take_memory hands over). Until it succeeds the caller owns them. */
void gguf_own_bytes(gguf_file *f);
/* Parses only the header from `prefix` (the first avail bytes of a file of
 * file_size bytes): tensors are validated against file_size and have data =
 * NULL (their bytes come later, e.g. streamed). When the prefix ends before
 * the header does, fails with WGML_ERR_FORMAT and sets *need_more (call again
 * with a longer prefix). The gguf_file takes ownership of prefix (wgml_malloc'ed). */
wgml_status gguf_open_header(void *prefix, size_t avail, uint64_t file_size, const char *name, gguf_file **out,
                             int *need_more, wgml_error *err);
void gguf_close(gguf_file *f);
/* Lets the pages of [p, p + n) (tensor data of f) go from a file mapping,
 * for data a backend has copied: they come back from the file if read
 * again, and until then do not count in the process's memory. Does nothing
 * for a file held in memory. */
void gguf_release(const gguf_file *f, const void *p, size_t n);

const char *gguf_name(const gguf_file *f);
uint32_t gguf_version(const gguf_file *f);
size_t gguf_file_size(const gguf_file *f);
size_t gguf_alignment(const gguf_file *f);
size_t gguf_data_offset(const gguf_file *f);

int64_t gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i);
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key); /* NULL if absent */

int64_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL if absent */

const char *gguf_type_name(gguf_type t);

/* Typed lookups. Return 1 when found (and *out set), 0 when absent, and -1 with
 * err filled when present with a type that does not fit (e.g. a negative or
 * too large value for the requested integer). */
int gguf_get_int(const gguf_file *f, const char *key, int64_t min, int64_t max, int64_t *out,
                 wgml_error *err);
int gguf_get_float(const gguf_file *f, const char *key, double *out, wgml_error *err);
int gguf_get_bool(const gguf_file *f, const char *key, int *out, wgml_error *err);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, wgml_error *err);
/* An array whose elements have type `elem_type`; (for numeric arrays the caller
 * reads elements with the gguf_arr_* helpers below). */
int gguf_get_arr(const gguf_file *f, const char *key, gguf_type elem_type, const gguf_value **out,
                 wgml_error *err);

/* Element access for fixed-size arrays (index must be < n). */
float gguf_arr_f32(const gguf_value *arr, uint64_t i);
int32_t gguf_arr_i32(const gguf_value *arr, uint64_t i);
uint32_t gguf_arr_u32(const gguf_value *arr, uint64_t i);

/* Compares a gguf_str to a C string. */
int gguf_str_eq(gguf_str s, const char *c);

/* ---- writer ---- */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_create(void); /* NULL when out of memory */
void gguf_writer_free(gguf_writer *w);  /* also removes an unfinished output file */

/* Metadata. Each returns WGML_OK or WGML_ERR_OUT_OF_MEMORY / INVALID_ARGUMENT
 * (duplicate key). The value is copied. */
wgml_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v, wgml_error *err);
wgml_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v, wgml_error *err);
wgml_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v, wgml_error *err);
wgml_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v, wgml_error *err);
wgml_status gguf_writer_set_bool(gguf_writer *w, const char *key, int v, wgml_error *err);
wgml_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v, wgml_error *err);
/* Array of fixed-size elements (n elements of elem_type, little-endian). */
wgml_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type,
                                const void *data, uint64_t n, wgml_error *err);
/* Array of strings; lens may be NULL for NUL-terminated strings. */
wgml_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                                    const uint64_t *lens, uint64_t n, wgml_error *err);
/* Copies one key/value as is from a file being read. */
wgml_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv, wgml_error *err);
int gguf_writer_has_key(const gguf_writer *w, const char *key);

/* Declares a tensor; its data follows later through gguf_writer_write_tensor. */
wgml_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims,
                                   const int64_t *ne, wgml_error *err);

/* Writes the header and tensor table to `path` (via a temporary file). */
wgml_status gguf_writer_begin(gguf_writer *w, const char *path, wgml_error *err);
/* The same into memory (open_memstream): after gguf_writer_finish,
 * gguf_writer_take_memory hands over the file's bytes (free() them). */
wgml_status gguf_writer_begin_memory(gguf_writer *w, wgml_error *err);
wgml_status gguf_writer_take_memory(gguf_writer *w, void **data, size_t *size, wgml_error *err);
/* Writes the next tensor's data (exactly its size in bytes), in declaration order. */
wgml_status gguf_writer_write_tensor(gguf_writer *w, const void *data, size_t size, wgml_error *err);
/* Checks every tensor was written, flushes, and renames the file into place. */
wgml_status gguf_writer_finish(gguf_writer *w, wgml_error *err);

#endif
