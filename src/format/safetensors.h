/*
 * safetensors.h - reading Hugging Face safetensors checkpoints: one
 * `.safetensors` file, a sharded set (`model.safetensors.index.json` and the
 * shards it names), or a model folder holding either.
 *
 * Layout of a file (https://github.com/huggingface/safetensors):
 *   u64 N (little-endian)     the header's length in bytes
 *   N bytes                   a UTF-8 JSON object, possibly padded with spaces:
 *     "__metadata__": {"key": "value", ...}            optional, strings only
 *     "<tensor name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 *   the data section          each tensor's bytes at [begin, end) from its start,
 *                             row-major, little-endian, packed (no alignment)
 *
 * Everything is validated at open, as strictly as the reference reader and a
 * little more: the header is 1 .. ST_MAX_HEADER bytes and inside the file,
 * valid UTF-8 and valid JSON (no lone surrogates; integers without sign,
 * fraction or exponent; no duplicate tensor names, metadata keys or entry
 * fields); every entry has a known dtype, a shape of at most ST_MAX_DIMS
 * non-negative dimensions whose non-zero ones multiply to at most 2^63 - 1,
 * and two offsets with begin <= end; end - begin is exactly the element
 * count times the element size (computed without overflow); and the tensors
 * tile the data section exactly - no range past its end, no two overlapping,
 * no byte belonging to none (a file with holes or trailing bytes is refused,
 * as the reference does). Fields of an entry other than the three are checked
 * as JSON and ignored, as the reference ignores them. Names are unique and
 * without NUL. After a successful open nothing read from the file can point
 * outside it.
 *
 * Errors are WGML_ERR_FORMAT (WGML_ERR_UNSUPPORTED for the format's sub-byte
 * dtypes F4, F6_E2M3, F6_E3M2; WGML_ERR_IO for files that cannot be opened;
 * WGML_ERR_OUT_OF_MEMORY) and name the file and, where there is one, the
 * tensor, e.g. "model.safetensors: tensor 'b': data_offsets [8, 24) overlap
 * tensor 'a' [0, 16)".
 *
 * Tensor data is NOT aligned: a tensor begins wherever the previous one ended
 * (in practice the writer's order by dtype keeps most of them aligned, but
 * nothing guarantees it, and 0-d or odd-sized tensors break it). Callers must
 * read elements with memcpy (or otherwise unaligned-safe loads) or copy the
 * bytes to aligned memory first; never cast t->data to float * and index it.
 *
 * Host: little-endian (as the data), like the GGUF reader.
 */
#ifndef WGML_FORMAT_SAFETENSORS_H
#define WGML_FORMAT_SAFETENSORS_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS       8
#define ST_MAX_HEADER     100000000u  /* bytes of one file's JSON header (the reference's limit) */
#define ST_MAX_TENSORS    (1 << 20)   /* tensors in one file, or in a whole sharded set */
#define ST_MAX_SHARDS     4096        /* files a sharded set may name */
#define ST_MAX_INDEX      (64u << 20) /* bytes of a model.safetensors.index.json */
#define ST_MAX_JSON_DEPTH 64          /* nesting of JSON values the reader skips (unknown fields) */

/* The element types of the format, by their name in the header. */
typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_F64,
    ST_I64,
    ST_U64,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_F8_E8M0,
    ST_C64,
    ST_DTYPE_COUNT
} st_dtype;

typedef struct st_tensor {
    const char *name; /* NUL-terminated, unique in the file or set */
    st_dtype dtype;
    const char *dtype_name;     /* "F32", "BF16", ... as in the header */
    size_t elem_size;           /* bytes per element */
    int rank;                   /* 0 .. ST_MAX_DIMS; 0 is a scalar (1 element) */
    int64_t shape[ST_MAX_DIMS]; /* as in the header: shape[rank - 1] varies fastest; unused dims 0 */
    int64_t n_elements;         /* product of the shape (may be 0); the product of the non-zero
                                   dimensions always fits int64 */
    const void *data;           /* the bytes inside the file: UNALIGNED (see above); never NULL */
    size_t size;                /* bytes: n_elements * elem_size */
    uint64_t offset;            /* begin of data_offsets, relative to the data section */
    int shard;                  /* index of the file it came from (st_file_path): 0 for a single file */
    const char *file;           /* that file's path (or the name given to st_open_memory), for messages */
} st_tensor;

/* One file or a sharded set, presented alike. */
typedef struct st_file st_file;

/* Opens `path`, which is one of:
 *   - a directory: its model.safetensors.index.json if present, else its
 *     model.safetensors, else an error listing both;
 *   - a file whose name ends in ".json": a shard index
 *     {"metadata": {...}, "weight_map": {"tensor": "shard file name", ...}},
 *     whose shards (plain file names in the index's folder: no '/', '\\' or
 *     "..") are all opened and checked: each tensor of the weight map is in
 *     the shard it names, every tensor of a shard is in the weight map, no
 *     tensor is in two shards;
 *   - any other file: one safetensors file.
 * `path` labels messages (shards as "<folder>/<shard name>"). */
wgml_status st_open(const char *path, st_file **out, wgml_error *err);

/* One safetensors file over caller-owned bytes that must outlive the
 * st_file (borrowed, as gguf_open_memory). `name` labels messages. */
wgml_status st_open_memory(const void *data, size_t size, const char *name, st_file **out, wgml_error *err);

/* Frees everything, unmapping the files (NULL is fine). */
void st_close(st_file *f);

/* The path (or name) it was opened with. */
const char *st_name(const st_file *f);

/* Tensors: a single file's in header order; a set's shard by shard (shards in
 * the order of their file names), each in header order. */
int64_t st_n_tensors(const st_file *f);
/* Tensor i (0 <= i < st_n_tensors), NULL when out of range. */
const st_tensor *st_tensor_at(const st_file *f, int64_t i);
/* The tensor named `name`, NULL when absent (a binary search). */
const st_tensor *st_find(const st_file *f, const char *name);

/* Files: 1 for a single file, the shard count for a set. */
int st_n_files(const st_file *f);
/* The path of file i (shards named "<folder>/<shard name>"), NULL when out of range. */
const char *st_file_path(const st_file *f, int i);
/* The path of the file tensor t came from (t->file). */
const char *st_tensor_file(const st_file *f, const st_tensor *t);

/* The `__metadata__` value of `key` (NUL-terminated; *len, when len is not
 * NULL, its length in bytes: a value may hold a NUL), or NULL when absent.
 * In a set, the first shard that has the key answers. */
const char *st_metadata(const st_file *f, const char *key, size_t *len);
/* The `__metadata__` entries of file `file` in header order: their count, and
 * entry i's key and value (NULL when out of range). */
int64_t st_n_metadata(const st_file *f, int file);
const char *st_metadata_at(const st_file *f, int file, int64_t i, const char **value, size_t *len);

/* The element type's name as in the header ("F32"), "invalid" for others. */
const char *st_dtype_name(st_dtype t);
/* Bytes per element, 0 for an invalid type. */
size_t st_dtype_size(st_dtype t);
/* The wgml_dtype (core/dtype.h) holding the same elements bit for bit -
 * F32, F16, BF16, F64, I8, I16, I32, I64 - or -1 when wgml has none (BOOL,
 * unsigned integers, the 8-bit floats, complex). The consumer decides what
 * it accepts; e.g. CLIP's I64 `position_ids` buffer is simply skipped. */
int st_dtype_to_wgml(st_dtype t);

/* Lets the pages of [p, p + n) (tensor data of f) go from a file mapping,
 * for data a backend has copied, as gguf_release does: they come back from
 * the file if read again. Does nothing for bytes held in memory. */
void st_release(const st_file *f, const void *p, size_t n);

#endif
