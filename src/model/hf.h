/*
 * hf.h - Hugging Face model folders (config.json + model.safetensors, or
 * shards with their index, + preprocessor_config.json) read as the GGUF a
 * family runs, converted in memory: the folder's "model_type" picks the
 * family (its hf_types, model/family.h), whose hf_convert maps the
 * checkpoint's tensor names and config to its own GGUF schema. The same
 * conversion written to a file is `wgml convert hf`.
 *
 * A converter fills a plan: the metadata (through the GGUF writer) and, per
 * GGUF tensor, which rows of which safetensors tensor it is and its shape;
 * this layer writes the bytes, vectors (1-D) as F32 and matrices in their
 * stored type (F32, F16 or BF16), converting where needed.
 */
#ifndef WGML_MODEL_HF_H
#define WGML_MODEL_HF_H

#include "chat/jinja_impl.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "wgml.h"

/* The folder, its tensors and its JSON files (parsed into e's arena). */
typedef struct wgml_hf_model {
    const char *dir;
    const st_file *st;
    jinja_env *e;
    jv config;       /* config.json: a dict */
    jv preprocessor; /* preprocessor_config.json: a dict, or JV_UNDEF without the file */
    const char *preprocessor_text;
    size_t preprocessor_len;
} wgml_hf_model;

/* One GGUF tensor of the plan: rows [first_row, first_row + ne[1]) of src,
 * whose row length (its last dimension, or the product of all but the
 * first for a Conv2d weight [D][3][P][P]) is ne[0]; n_dims 1 or 2. */
typedef struct wgml_hf_tensor {
    char name[64];
    const st_tensor *src;
    int64_t first_row;
    int n_dims;
    int64_t ne[2];
} wgml_hf_tensor;

/* A growing list of planned tensors. */
typedef struct wgml_hf_plan {
    wgml_hf_tensor *t;
    int n, cap;
} wgml_hf_plan;

/* Adds src (or rows of it) as GGUF tensor `name` of shape ne0 x ne1 (ne1 = 1:
 * a vector): its element count must be the rows' (ne0 * ne1), its dtype F32,
 * F16 or BF16. Errors name the checkpoint tensor. */
wgml_status wgml_hf_plan_add(wgml_hf_plan *p, const char *name, const st_tensor *src, int64_t first_row, int64_t ne0,
                             int64_t ne1, wgml_error *err);

/* An integer / number / string member of dict obj (absent: *out kept, 0 returned; 1 found;
 * a value of another type: an error naming `what`.key). */
int wgml_hf_int(const wgml_hf_model *hf, jv obj, const char *what, const char *key, int64_t lo, int64_t hi,
                int64_t *out, wgml_error *err);
int wgml_hf_num(const wgml_hf_model *hf, jv obj, const char *what, const char *key, double *out, wgml_error *err);
int wgml_hf_str(const wgml_hf_model *hf, jv obj, const char *key, const char **out);
/* The dict member key of obj, or JV_UNDEF. */
jv wgml_hf_dict(const wgml_hf_model *hf, jv obj, const char *key);

/* 1 when path is a Hugging Face model: a folder with config.json, or a
 * .safetensors / index file (its folder holds config.json). */
int wgml_hf_detect(const char *path);

/* The model at path (a folder, or a .safetensors or index file in one) as a
 * GGUF in memory, owned by *out. */
wgml_status wgml_hf_open(const char *path, gguf_file **out, wgml_error *err);

/* The same GGUF written to out_path (F32 / F16 / BF16 matrices as stored). */
wgml_status wgml_hf_convert(const char *path, const char *out_path, wgml_error *err);

#endif
