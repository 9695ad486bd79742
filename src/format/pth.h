/*
 * pth.h - reading PyTorch checkpoints (`torch.save` files: `.pth`, `.pt`).
 *
 * Layout (../shared/kokoro/README.md, "Checkpoint (`.pth`) structure"): a ZIP
 * archive of stored entries under one top folder <archive> (the file's base
 * name when it was saved; not assumed here: found as the folder of the one
 * entry named `.../data.pkl`):
 *   <archive>/data.pkl     the object, pickled (protocol 2)
 *   <archive>/data/<key>   each storage's raw little-endian bytes
 *   <archive>/version      and a few other small entries, ignored
 * A tensor is pickled as a call of torch._utils._rebuild_tensor_v2(storage,
 * storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) whose
 * storage is a persistent id ('storage', torch.<T>Storage, key, location, numel).
 *
 * The pickle is read by a small machine that knows only the opcodes
 * torch.save's protocol 2 emits for state dicts and tensors (see pth.c) and
 * executes no code: GLOBAL accepts a fixed allow-list of names (OrderedDict,
 * the tensor rebuilders, the storage types) and REDUCE applies only those.
 * Anything else is an error naming the opcode or name and its offset in the
 * pickle. Stack depth, memo size, string lengths, nesting and the number of
 * tensors are bounded, and memory is a small multiple of the pickle's size.
 *
 * The object may be a tensor (a `.pt` voice: one tensor named ""), a dict of
 * tensors (a state dict: named by key), or a dict of such dicts (Kokoro's
 * checkpoint: "component/key", e.g. "bert/module.embeddings.word_embeddings.weight"),
 * nested up to PTH_MAX_NESTING dicts. Values of a dict that are neither tensors nor
 * dicts (numbers, strings, None, lists, tuples) are skipped.
 *
 * Every tensor is validated at open: its storage entry exists and holds
 * exactly numel x element size bytes; its extent (storage_offset + sum of
 * (size_i - 1) x stride_i, + 1; nothing for a tensor with a 0 size) lies in
 * the storage; no negative size, stride or offset; all arithmetic is
 * overflow-checked. Tensors may share a storage (views of one storage, with
 * any offsets and strides); every user of a storage must agree on its type
 * and element count. Names are unique.
 */
#ifndef WGML_FORMAT_PTH_H
#define WGML_FORMAT_PTH_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

#define PTH_MAX_DIMS 8
#define PTH_MAX_NESTING 4          /* dicts in dicts, the root included */
#define PTH_MAX_TENSORS (1 << 20)
#define PTH_MAX_NAME 4096          /* bytes of a full tensor name */
#define PTH_MAX_STRING (1 << 20)   /* bytes of one pickled string */
#define PTH_MAX_STACK (1 << 18)    /* pickle stack entries */
#define PTH_MAX_MARKS (1 << 16)    /* open MARKs */
#define PTH_MAX_MEMO (1 << 22)     /* memo slots */

typedef struct pth_tensor {
    const char *name;        /* NUL-terminated */
    uint32_t dtype;          /* wgml_dtype: F32, F16, BF16, F64, I64, I32, I16 or I8 */
    size_t elem_size;        /* bytes per element */
    int ndim;                /* 0 .. PTH_MAX_DIMS (0: a scalar) */
    int64_t size[PTH_MAX_DIMS];   /* torch order: size[ndim - 1] varies fastest in row-major */
    int64_t stride[PTH_MAX_DIMS]; /* in elements */
    int64_t numel;           /* product of the sizes */
    int contiguous;          /* row-major contiguous (strides of size-1 dims ignored) */
    const char *storage_key; /* NUL-terminated, e.g. "17" */
    int64_t storage_offset;  /* in elements */
    int64_t storage_numel;   /* elements in the storage */
    const uint8_t *storage;  /* the storage's bytes in the file (may be unaligned) */
} pth_tensor;

typedef struct pth_file pth_file;

/* 1 when the bytes start like a ZIP archive (a torch.save file) rather than,
 * say, a raw `.bin` voice pack of floats. */
int pth_is_pth(const void *data, size_t size);

/* Maps and validates a file; `path` is also used in messages. */
wgml_status pth_open(const char *path, pth_file **out, wgml_error *err);
/* Same over caller-owned bytes that must outlive the pth_file. `name` labels messages. */
wgml_status pth_open_memory(const void *data, size_t size, const char *name, pth_file **out, wgml_error *err);
void pth_close(pth_file *p);

const char *pth_name(const pth_file *p);
/* The top folder of the archive's entries, without the slash ("kokoro-tiny"). */
const char *pth_archive(const pth_file *p);

int64_t pth_n_tensors(const pth_file *p);
const pth_tensor *pth_tensor_at(const pth_file *p, int64_t i); /* in pickle order; NULL if out of range */
const pth_tensor *pth_find(const pth_file *p, const char *name); /* NULL if absent */

/* Gathers a tensor (any strides) into out as contiguous row-major float32:
 * n must equal t->numel. F16/BF16/F64 are converted (F64 rounded to nearest),
 * integers cast. */
wgml_status pth_tensor_read_f32(const pth_file *p, const pth_tensor *t, float *out, size_t n, wgml_error *err);

/* Checks the CRC-32 of every storage entry a tensor uses (reads all of their
 * bytes; the pickle's own CRC is checked at open). */
wgml_status pth_verify(const pth_file *p, wgml_error *err);

#endif
