/*
 * family.h - the registry of model families.
 *
 * A family (src/model/<family>/) runs one kind of network: it names the GGUF
 * architectures it reads (general.architecture), the tasks it serves
 * (wgml_task bits, include/wgml.h), and the functions that read its
 * hyper-parameters, load its weights on a backend (through the shared loader,
 * model/weights.h), free them, and fill its section of wgml_model_info.
 * api.c opens every model through the registry; `wgml info` describes a file
 * through it without a backend.
 */
#ifndef WGML_MODEL_FAMILY_H
#define WGML_MODEL_FAMILY_H

#include "backend/backend.h"
#include "format/gguf.h"
#include "model/weights.h"
#include "wgml.h"

/* What a load asks beyond the file and the backend. */
typedef struct wgml_family_load_params {
    const wgml_weight_fault *fault; /* NULL: none */
    wgml_load_progress_fn progress; /* may be NULL */
    void *user;
} wgml_family_load_params;

/* Receives one described hyper-parameter: key ("layers") and its value as text. */
typedef void (*wgml_family_field_fn)(void *user, const char *key, const char *value);

typedef struct wgml_family {
    const char *name;          /* "llama" */
    const char *const *archs;  /* the architectures it reads, NULL-terminated: {"llama", "qwen2", NULL} */
    uint32_t tasks;            /* wgml_task bits */
    int no_tokenizer;          /* its files hold no text tokenizer (tokenizer.ggml.*): Kokoro's phonemes */
    /* Reads and checks the hyper-parameters from f's metadata only (no
     * tensors, no backend) and passes each to field (NULL: only check). */
    wgml_status (*describe)(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err);
    /* Reads the hyper-parameters and creates every weight on be; *out is the
     * family's model. For a header-only file the weights are created empty
     * (filled afterwards through weights()). */
    wgml_status (*load)(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err);
    void (*free)(void *model);
    /* The model's weights (for streaming them in, model/weights.h). */
    wgml_weights *(*weights)(void *model);
    /* The tasks a file of this family serves, from its metadata and tensor
     * list only (a reranker among encoders); NULL: the family's tasks. */
    uint32_t (*file_tasks)(const gguf_file *f);
    /* Fills info's architecture, n_params, weights_bytes and the family's
     * section, and tasks when this model serves fewer than the family's
     * (a reranker); the caller fills the rest (family, backend, tokens). */
    void (*get_info)(const void *model, wgml_model_info *info);
} wgml_family;

/* The family that reads architecture arch; NULL when none does. */
const wgml_family *wgml_family_find(const char *arch);

/* Reads f's general.architecture into arch (cap bytes, truncated) and finds
 * its family. A missing key, a NUL byte or an architecture no family reads is
 * an error naming the file (the last: "architecture 'foo' is not supported;
 * known: llama, qwen2"). */
wgml_status wgml_family_of(const gguf_file *f, char *arch, size_t cap, const wgml_family **out, wgml_error *err);

/* The registered families: wgml_family_at(0 .. wgml_family_count()-1). */
int wgml_family_count(void);
const wgml_family *wgml_family_at(int i);

/* Hyper-parameters from metadata keys "<arch>.<suffix>", for every family:
 * an integer in [lo, hi] (required: a missing key is an error naming it;
 * else *out stays as it was), a float, a bool (0/1). A key of the wrong type
 * or out of range is an error naming the file and the key. */
wgml_status wgml_hparam_int(const gguf_file *f, const char *arch, const char *suffix, int64_t lo, int64_t hi, int *out,
                            int required, wgml_error *err);
wgml_status wgml_hparam_float(const gguf_file *f, const char *arch, const char *suffix, float *out, wgml_error *err);
wgml_status wgml_hparam_bool(const gguf_file *f, const char *arch, const char *suffix, int *out, wgml_error *err);

/* "generate", "embed", "rerank", "speech", "transcribe" (one bit); "unknown" otherwise. */
const char *wgml_task_name(uint32_t task);
/* tasks as "generate, embed" ("none" when 0) into buf; returns buf. */
char *wgml_tasks_format(uint32_t tasks, char *buf, size_t cap);

#endif
