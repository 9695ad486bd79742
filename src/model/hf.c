/*
 * hf.c - Hugging Face model folders as GGUFs (hf.h).
 */
#include "model/hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/fp16.h"
#include "format/file_bytes.h"
#include "model/family.h"
#include "model/hf_tokenizer.h"

#define HF_MAX_CONFIG (16u << 20) /* bytes of config.json / preprocessor_config.json */

wgml_status wgml_hf_plan_add(wgml_hf_plan *p, const char *name, const st_tensor *src, int64_t first_row, int64_t ne0,
                             int64_t ne1, wgml_error *err) {
    if (!src) return wgml_fail(err, WGML_ERR_FORMAT, "checkpoint: no tensor for '%s'", name);
    if (src->dtype != ST_F32 && src->dtype != ST_F16 && src->dtype != ST_BF16)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "checkpoint: tensor '%s' is %s (F32, F16 and BF16 are read)",
                         src->name, src->dtype_name);
    if (ne0 < 1 || ne1 < 1 || first_row < 0 || src->n_elements % ne0 ||
        (first_row + ne1) > src->n_elements / ne0)
        return wgml_fail(err, WGML_ERR_FORMAT, "checkpoint: tensor '%s' (%lld values) does not hold %lld rows of %lld "
                         "from row %lld (for '%s')", src->name, (long long)src->n_elements, (long long)ne1,
                         (long long)ne0, (long long)first_row, name);
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        wgml_hf_tensor *t = wgml_realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        p->t = t, p->cap = cap;
    }
    wgml_hf_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->src = src, t->first_row = first_row, t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0, t->ne[1] = ne1;
    return WGML_OK;
}

int wgml_hf_int(const wgml_hf_model *hf, jv obj, const char *what, const char *key, int64_t lo, int64_t hi,
                int64_t *out, wgml_error *err) {
    jv *v = NULL;
    if (obj.t == JV_DICT) jx_dict_gets(hf->e, obj.u.d, key, strlen(key), &v);
    if (!v || v->t == JV_NONE) return 0;
    if (v->t != JV_INT || v->u.i < lo || v->u.i > hi) {
        wgml_fail(err, WGML_ERR_FORMAT, "%s: '%s' must be an integer in %lld..%lld", what, key, (long long)lo,
                  (long long)hi);
        return -1;
    }
    *out = v->u.i;
    return 1;
}

int wgml_hf_num(const wgml_hf_model *hf, jv obj, const char *what, const char *key, double *out, wgml_error *err) {
    jv *v = NULL;
    if (obj.t == JV_DICT) jx_dict_gets(hf->e, obj.u.d, key, strlen(key), &v);
    if (!v || v->t == JV_NONE) return 0;
    if (v->t != JV_INT && v->t != JV_FLOAT) {
        wgml_fail(err, WGML_ERR_FORMAT, "%s: '%s' must be a number", what, key);
        return -1;
    }
    *out = v->t == JV_INT ? (double)v->u.i : v->u.f;
    return 1;
}

int wgml_hf_str(const wgml_hf_model *hf, jv obj, const char *key, const char **out) {
    jv *v = NULL;
    if (obj.t == JV_DICT) jx_dict_gets(hf->e, obj.u.d, key, strlen(key), &v);
    if (!v || v->t != JV_STR) return 0;
    *out = v->u.s->s;
    return 1;
}

jv wgml_hf_dict(const wgml_hf_model *hf, jv obj, const char *key) {
    jv *v = NULL;
    if (obj.t == JV_DICT) jx_dict_gets(hf->e, obj.u.d, key, strlen(key), &v);
    return v && v->t == JV_DICT ? *v : jv_undef(NULL);
}

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The folder of path: path itself, or the part before its last '/' ("." without one). */
static char *folder_of(const char *path) {
    if (is_dir(path)) return wgml_path_join(NULL, path);
    const char *slash = strrchr(path, '/');
    if (!slash) return wgml_path_join(NULL, ".");
    size_t n = (size_t)(slash - path);
    char *d = wgml_malloc(n + 2);
    if (!d) return NULL;
    memcpy(d, path, n ? n : 1);
    d[n ? n : 1] = '\0';
    return d;
}

int wgml_hf_detect(const char *path) {
    if (!path || !(is_dir(path) || ends_with(path, ".safetensors") || ends_with(path, ".safetensors.index.json")))
        return 0;
    char *dir = folder_of(path), *cfg = dir ? wgml_path_join(dir, "config.json") : NULL;
    struct stat sb;
    int ok = cfg && stat(cfg, &sb) == 0 && S_ISREG(sb.st_mode);
    wgml_free(cfg);
    wgml_free(dir);
    return ok;
}

/* The family converting config.json's model_type. */
static const wgml_family *family_for(const char *type) {
    for (int i = 0; i < wgml_family_count(); i++) {
        const wgml_family *f = wgml_family_at(i);
        for (int k = 0; f->hf_types && f->hf_types[k]; k++)
            if (!strcmp(f->hf_types[k], type)) return f;
    }
    return NULL;
}

/* The bytes of plan entry t in GGUF type `type` into buf (bytes of the rows as stored, or converted to F32). */
static const void *tensor_bytes(const wgml_hf_tensor *t, uint32_t type, float *buf) {
    const size_t es = t->src->elem_size, n = (size_t)(t->ne[0] * t->ne[1]);
    const uint8_t *p = (const uint8_t *)t->src->data + (size_t)t->first_row * (size_t)t->ne[0] * es;
    const int same = (type == WGML_F32 && t->src->dtype == ST_F32) || (type == WGML_F16 && t->src->dtype == ST_F16) ||
                     (type == WGML_BF16 && t->src->dtype == ST_BF16);
    if (same) return p;
    for (size_t i = 0; i < n; i++) { /* a vector stored F16 or BF16, as F32 */
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        buf[i] = t->src->dtype == ST_F16 ? wgml_f16_to_f32(h) : wgml_bf16_to_f32(h);
    }
    return buf;
}

/* Converts the folder of path; to out_path, or (out_path NULL) into memory (*data, *size). */
static wgml_status convert(const char *path, const char *out_path, void **data, size_t *size, wgml_error *err) {
    wgml_hf_model hf;
    memset(&hf, 0, sizeof hf);
    wgml_hf_plan plan = {0};
    st_file *st = NULL;
    gguf_writer *w = NULL;
    char *config = NULL, *pre = NULL, *dir = folder_of(path);
    float *buf = NULL;
    size_t config_len = 0, pre_len = 0;
    wgml_status st_ = dir ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st_) st_ = wgml_read_text_file(dir, "config.json", HF_MAX_CONFIG, 0, &config, &config_len, err);
    if (!st_) st_ = wgml_read_text_file(dir, "preprocessor_config.json", HF_MAX_CONFIG, 1, &pre, &pre_len, err);
    if (!st_) st_ = st_open(is_dir(path) ? dir : path, &st, err);
    jinja_limits lim = jinja_default_limits();
    lim.max_memory = (size_t)256 << 20;
    lim.max_depth = 64;
    if (!st_) st_ = jinja_env_create(&lim, &hf.e, err);
    hf.dir = dir, hf.st = st, hf.preprocessor = jv_undef(NULL);
    if (!st_ && jx_json_parse(hf.e, config, config_len, "config.json", &hf.config))
        st_ = wgml_fail(err, WGML_ERR_FORMAT, "config.json: %s", hf.e->msg);
    if (!st_ && pre && jx_json_parse(hf.e, pre, pre_len, "preprocessor_config.json", &hf.preprocessor))
        st_ = wgml_fail(err, WGML_ERR_FORMAT, "preprocessor_config.json: %s", hf.e->msg);
    hf.preprocessor_text = pre, hf.preprocessor_len = pre_len;
    const char *type = NULL;
    if (!st_ && (hf.config.t != JV_DICT || !wgml_hf_str(&hf, hf.config, "model_type", &type)))
        st_ = wgml_fail(err, WGML_ERR_FORMAT, "config.json: no \"model_type\" string");
    const wgml_family *fam = st_ ? NULL : family_for(type);
    if (!st_ && !fam) {
        char known[256] = "";
        for (int i = 0; i < wgml_family_count(); i++)
            for (int k = 0; wgml_family_at(i)->hf_types && wgml_family_at(i)->hf_types[k]; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", *known ? ", " : "",
                         wgml_family_at(i)->hf_types[k]);
        st_ = wgml_fail(err, WGML_ERR_UNSUPPORTED, "config.json: model_type '%.40s' is not supported (known: %s)", type,
                        known);
    }
    if (!st_ && !(w = gguf_writer_create())) st_ = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st_) st_ = fam->hf_convert(&hf, type, w, &plan, err);
    if (!st_) st_ = wgml_hf_tokenizer_write(&hf, type, w, err); /* tokenizer.json / spiece.model, when there */
    int64_t most = 1;
    for (int i = 0; !st_ && i < plan.n; i++) {
        const wgml_hf_tensor *t = &plan.t[i];
        uint32_t gt = t->n_dims == 1 || t->src->dtype == ST_F32 ? WGML_F32
                      : t->src->dtype == ST_F16                 ? WGML_F16
                                                                : WGML_BF16;
        st_ = gguf_writer_add_tensor(w, t->name, gt, t->n_dims, t->ne, err);
        if (t->n_dims == 1 && t->ne[0] > most) most = t->ne[0];
    }
    if (!st_ && !(buf = wgml_malloc((size_t)most * sizeof *buf)))
        st_ = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st_) st_ = out_path ? gguf_writer_begin(w, out_path, err) : gguf_writer_begin_memory(w, err);
    for (int i = 0; !st_ && i < plan.n; i++) {
        const wgml_hf_tensor *t = &plan.t[i];
        uint32_t gt = t->n_dims == 1 || t->src->dtype == ST_F32 ? WGML_F32
                      : t->src->dtype == ST_F16                 ? WGML_F16
                                                                : WGML_BF16;
        st_ = gguf_writer_write_tensor(w, tensor_bytes(t, gt, buf), wgml_row_size(gt, t->ne[0]) * (size_t)t->ne[1],
                                       err);
    }
    if (!st_) st_ = gguf_writer_finish(w, err);
    if (!st_ && !out_path) st_ = gguf_writer_take_memory(w, data, size, err);
    if (st_) wgml_error_prefix(err, "%s", path);
    gguf_writer_free(w);
    if (hf.e) jinja_env_free(hf.e);
    st_close(st);
    wgml_free(plan.t);
    wgml_free(buf);
    wgml_free(config);
    wgml_free(pre);
    wgml_free(dir);
    return st_;
}

wgml_status wgml_hf_open(const char *path, gguf_file **out, wgml_error *err) {
    *out = NULL;
    void *data = NULL;
    size_t size = 0;
    wgml_status st = convert(path, NULL, &data, &size, err);
    if (st) return st;
    if ((st = gguf_open_memory(data, size, path, out, err))) {
        free(data);
        return st;
    }
    gguf_own_bytes(*out);
    return WGML_OK;
}

wgml_status wgml_hf_convert(const char *path, const char *out_path, wgml_error *err) {
    return convert(path, out_path, NULL, NULL, err);
}
