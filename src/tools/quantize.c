/*
 * quantize.c - recipes and the streaming quantizer (see quantize.h).
 *
 * The rules of the mixed recipes, as llama.cpp's llama_tensor_get_type
 * applies them to dense Llama-family models (our reading of it; the code is
 * ours):
 *
 *   output.weight (or token_embd.weight when the output is tied):
 *       Q8_0 if its rows fit no block of the base type, else Q6_K unless the
 *       base type is Q8_0
 *   attn_v:      Q2_K: Q4_K if n_gqa >= 4 else Q3_K;  Q3_K_M: Q5_K in layers
 *                0-1, else Q4_K;  Q3_K_L: Q5_K;  Q4_K_M, Q5_K_M: Q6_K where
 *                use_more_bits;  Q4_K_S: Q5_K in layers 0-3
 *   ffn_down:    Q2_K: Q3_K;  Q3_K_M: Q5_K in the first n/16 layers, else
 *                Q4_K;  Q3_K_L: Q5_K;  Q4_K_M, Q5_K_M: Q6_K where
 *                use_more_bits;  Q4_K_S: Q5_K in the first n/8 layers
 *   attn_output: Q2_K: Q3_K;  Q3_K_M: Q4_K;  Q3_K_L: Q5_K
 *   attn_qkv (fused, nomic-bert): Q3_K_M, Q3_K_L: Q4_K;  Q4_K_M: Q5_K;  Q5_K_M: Q6_K
 *   everything else (ffn_gate/up, attn_q/k, BERT's cls): the base type
 *
 * Encoders have no output.weight, so token_embd is treated as the output as
 * for a tied decoder. position_embd, token_types and cls.output stay F32 like
 * the 1-D tensors (keeps_f32 says why).
 *
 * use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2: the first
 * and last eighth of the layers and every third layer between.
 */
#include "tools/quantize.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/threadpool.h"
#include "format/gguf.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* llama.cpp's LLAMA_FTYPE_* numbers (llama.h). */
enum {
    FT_ALL_F32 = 0,
    FT_F16 = 1,
    FT_Q4_0 = 2,
    FT_Q4_1 = 3,
    FT_Q8_0 = 7,
    FT_Q5_0 = 8,
    FT_Q5_1 = 9,
    FT_Q2_K = 10,
    FT_Q3_K_S = 11,
    FT_Q3_K_M = 12,
    FT_Q3_K_L = 13,
    FT_Q4_K_S = 14,
    FT_Q4_K_M = 15,
    FT_Q5_K_S = 16,
    FT_Q5_K_M = 17,
    FT_Q6_K = 18,
    FT_BF16 = 32,
};

static const quantize_recipe recipes[] = {
    {"F32", FT_ALL_F32, WGML_F32, 0},
    {"F16", FT_F16, WGML_F16, 0},
    {"BF16", FT_BF16, WGML_BF16, 0},
    {"Q4_0", FT_Q4_0, WGML_Q4_0, 1},
    {"Q4_1", FT_Q4_1, WGML_Q4_1, 1},
    {"Q5_0", FT_Q5_0, WGML_Q5_0, 1},
    {"Q5_1", FT_Q5_1, WGML_Q5_1, 1},
    {"Q8_0", FT_Q8_0, WGML_Q8_0, 1},
    {"Q2_K", FT_Q2_K, WGML_Q2_K, 1},
    {"Q3_K_S", FT_Q3_K_S, WGML_Q3_K, 1},
    {"Q3_K_M", FT_Q3_K_M, WGML_Q3_K, 1},
    {"Q3_K_L", FT_Q3_K_L, WGML_Q3_K, 1},
    {"Q4_K_S", FT_Q4_K_S, WGML_Q4_K, 1},
    {"Q4_K_M", FT_Q4_K_M, WGML_Q4_K, 1},
    {"Q5_K_S", FT_Q5_K_S, WGML_Q5_K, 1},
    {"Q5_K_M", FT_Q5_K_M, WGML_Q5_K, 1},
    {"Q6_K", FT_Q6_K, WGML_Q6_K, 1},
    /* uniform K types: no llama.cpp file type of their own; recorded as the "_S" (mostly) number */
    {"Q3_K", FT_Q3_K_S, WGML_Q3_K, 0},
    {"Q4_K", FT_Q4_K_S, WGML_Q4_K, 0},
    {"Q5_K", FT_Q5_K_S, WGML_Q5_K, 0},
};
#define N_RECIPES ((int)(sizeof recipes / sizeof recipes[0]))

const quantize_recipe *quantize_recipe_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_RECIPES; i++)
        if (strcasecmp(recipes[i].name, name) == 0) return &recipes[i];
    return NULL;
}

int quantize_recipe_count(void) { return N_RECIPES; }
const quantize_recipe *quantize_recipe_at(int i) { return i >= 0 && i < N_RECIPES ? &recipes[i] : NULL; }

const char *quantize_recipe_list(void) {
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, "
           "Q5_K_M, Q6_K (llama.cpp's mixes), Q3_K, Q4_K, Q5_K (uniform)";
}

const char *quantize_ftype_name(uint32_t ftype) {
    switch (ftype) {
    case FT_ALL_F32: return "ALL_F32";
    case FT_F16: return "MOSTLY_F16";
    case FT_BF16: return "MOSTLY_BF16";
    case FT_Q4_0: return "MOSTLY_Q4_0";
    case FT_Q4_1: return "MOSTLY_Q4_1";
    case FT_Q5_0: return "MOSTLY_Q5_0";
    case FT_Q5_1: return "MOSTLY_Q5_1";
    case FT_Q8_0: return "MOSTLY_Q8_0";
    case FT_Q2_K: return "MOSTLY_Q2_K";
    case FT_Q3_K_S: return "MOSTLY_Q3_K_S";
    case FT_Q3_K_M: return "MOSTLY_Q3_K_M";
    case FT_Q3_K_L: return "MOSTLY_Q3_K_L";
    case FT_Q4_K_S: return "MOSTLY_Q4_K_S";
    case FT_Q4_K_M: return "MOSTLY_Q4_K_M";
    case FT_Q5_K_S: return "MOSTLY_Q5_K_S";
    case FT_Q5_K_M: return "MOSTLY_Q5_K_M";
    case FT_Q6_K: return "MOSTLY_Q6_K";
    default: return "unknown";
    }
}

/* The "mostly <type>" file type of a tensor type. */
static uint32_t mostly(uint32_t type) {
    switch (type) {
    case WGML_F16: return FT_F16;
    case WGML_BF16: return FT_BF16;
    case WGML_Q4_0: return FT_Q4_0;
    case WGML_Q4_1: return FT_Q4_1;
    case WGML_Q5_0: return FT_Q5_0;
    case WGML_Q5_1: return FT_Q5_1;
    case WGML_Q8_0: return FT_Q8_0;
    case WGML_Q2_K: return FT_Q2_K;
    case WGML_Q3_K: return FT_Q3_K_S;
    case WGML_Q4_K: return FT_Q4_K_S;
    case WGML_Q5_K: return FT_Q5_K_S;
    case WGML_Q6_K: return FT_Q6_K;
    default: return FT_ALL_F32;
    }
}

/* The type holding most elements; -1 when there are none. */
static int dominant(const uint64_t elements[WGML_DTYPE_COUNT]) {
    int best = -1;
    for (int t = 0; t < WGML_DTYPE_COUNT; t++)
        if (elements[t] && (best < 0 || elements[t] > elements[best])) best = t;
    return best;
}

uint32_t quantize_file_type(const quantize_recipe *r, const uint64_t elements[WGML_DTYPE_COUNT]) {
    int best = dominant(elements);
    if (best < 0 || (uint32_t)best == r->base) return r->ftype;
    return mostly((uint32_t)best);
}

/* Matrices that stay F32 in every recipe: BERT's (and the vision towers') learned position and token-type
 * embeddings (llama.cpp's converter writes them F32 and its quantizer leaves them
 * alone: they are added to the activations, not multiplied) and a reranker's
 * one-row score projection (too small to be worth a quantized block). */
static int keeps_f32(const char *name) {
    return strcmp(name, "position_embd.weight") == 0 || strcmp(name, "v.position_embd.weight") == 0 ||
           strcmp(name, "token_types.weight") == 0 ||
           strcmp(name, "cls.output.weight") == 0;
}

int quantize_is_matrix(const char *name, int n_dims) {
    size_t n = strlen(name);
    return n_dims >= 2 && n >= 6 && strcmp(name + n - 6, "weight") == 0 && !strstr(name, "_norm.weight") &&
           !keeps_f32(name);
}

static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int layer_of(const char *name) {
    int l = -1;
    if (strncmp(name, "blk.", 4) != 0 || sscanf(name + 4, "%d", &l) != 1) return -1;
    return l;
}

static int64_t block_of(uint32_t type) { return wgml_dtype_get(type)->block_size; }

/* llama.cpp's per-tensor choice within a mixed recipe (before the fallback). */
static uint32_t mix_type(const quantize_recipe *r, const quantize_model_info *mi, const char *name, int64_t ne0) {
    const uint32_t f = r->ftype;
    uint32_t t = r->base;
    int is_output = strcmp(name, "output.weight") == 0 || (!mi->has_output && strcmp(name, "token_embd.weight") == 0);
    if (is_output) {
        if (ne0 % block_of(t)) return WGML_Q8_0;
        return t == WGML_Q8_0 ? t : WGML_Q6_K;
    }
    if (strcmp(name, "token_embd.weight") == 0) return t;
    const int il = layer_of(name), n = mi->n_layer;
    if (strstr(name, "attn_v.weight")) {
        if (f == FT_Q2_K)
            t = mi->n_gqa >= 4 ? WGML_Q4_K : WGML_Q3_K;
        else if (f == FT_Q3_K_M)
            t = il < 2 ? WGML_Q5_K : WGML_Q4_K;
        else if (f == FT_Q3_K_L)
            t = WGML_Q5_K;
        else if ((f == FT_Q4_K_M || f == FT_Q5_K_M) && use_more_bits(il, n))
            t = WGML_Q6_K;
        else if (f == FT_Q4_K_S && il < 4)
            t = WGML_Q5_K;
    } else if (strstr(name, "ffn_down")) {
        if (f == FT_Q2_K)
            t = WGML_Q3_K;
        else if (f == FT_Q3_K_M)
            t = il < n / 16 ? WGML_Q5_K : WGML_Q4_K;
        else if (f == FT_Q3_K_L)
            t = WGML_Q5_K;
        else if ((f == FT_Q4_K_M || f == FT_Q5_K_M) && use_more_bits(il, n))
            t = WGML_Q6_K;
        else if (f == FT_Q4_K_S && il < n / 8)
            t = WGML_Q5_K;
    } else if (strstr(name, "attn_qkv.weight")) {
        if (f == FT_Q3_K_M || f == FT_Q3_K_L)
            t = WGML_Q4_K;
        else if (f == FT_Q4_K_M)
            t = WGML_Q5_K;
        else if (f == FT_Q5_K_M)
            t = WGML_Q6_K;
    } else if (strstr(name, "attn_output.weight")) {
        if (f == FT_Q2_K)
            t = WGML_Q3_K;
        else if (f == FT_Q3_K_M)
            t = WGML_Q4_K;
        else if (f == FT_Q3_K_L)
            t = WGML_Q5_K;
    }
    return t;
}

/* The row-length fallback: the next type whose block fits, finally F16. */
static uint32_t fit(uint32_t t, int64_t ne0) {
    if (ne0 % block_of(t) == 0) return t;
    switch (t) {
    case WGML_Q4_K: t = WGML_Q5_0; break;
    case WGML_Q5_K: t = WGML_Q5_1; break;
    case WGML_Q6_K: t = WGML_Q8_0; break;
    case WGML_Q2_K:
    case WGML_Q3_K: t = WGML_Q4_0; break; /* llama.cpp: IQ4_NL, same size */
    default: t = WGML_F16; break;
    }
    return ne0 % block_of(t) ? WGML_F16 : t;
}

uint32_t quantize_tensor_type(const quantize_recipe *r, const quantize_model_info *mi, const char *name, int n_dims,
                              const int64_t *ne, uint32_t *wanted) {
    if (!quantize_is_matrix(name, n_dims)) {
        if (wanted) *wanted = WGML_F32;
        return WGML_F32;
    }
    uint32_t t = r->base;
    if (r->mix && wgml_dtype_get(t)->quantized) t = mix_type(r, mi, name, ne[0]);
    if (wanted) *wanted = t;
    return fit(t, ne[0]);
}

void quantize_note_fallbacks(const quantize_fallback *fb, int n, void (*log)(void *user, const char *line),
                             void *user) {
    if (!log) return;
    for (int i = 0; i < n; i++) {
        int first = 1, count = 0;
        for (int k = 0; k < n; k++) {
            int same = fb[k].wanted == fb[i].wanted && fb[k].type == fb[i].type && fb[k].ne0 == fb[i].ne0;
            if (same && k < i) first = 0;
            count += same;
        }
        if (!first) continue;
        char line[512], more[32] = "";
        if (count > 1) snprintf(more, sizeof more, " and %d more", count - 1);
        snprintf(line, sizeof line, "%s%s: rows of %lld fit no %s block (%lld); using %s", fb[i].name, more,
                 (long long)fb[i].ne0, wgml_dtype_name(fb[i].wanted), (long long)block_of(fb[i].wanted),
                 wgml_dtype_name(fb[i].type));
        log(user, line);
    }
}

/* ---- parallel row conversion ---- */

typedef struct rows_job {
    uint32_t type;
    int64_t ne0, r1;
    size_t row_size;
    quantize_row_fn fn;
    void *ctx;
    uint8_t *dst;
    float *scratch; /* ne0 floats per thread */
    atomic_llong next;
    int64_t chunk;
    atomic_int failed;
} rows_job;

static void rows_task(void *arg, int ith, int nth) {
    (void)nth;
    rows_job *j = arg;
    float *buf = j->scratch + (size_t)ith * (size_t)j->ne0;
    for (;;) {
        int64_t a = atomic_fetch_add(&j->next, j->chunk);
        if (a >= j->r1) break;
        int64_t b = a + j->chunk < j->r1 ? a + j->chunk : j->r1;
        for (int64_t r = a; r < b; r++) {
            j->fn(j->ctx, r, buf, j->ne0);
            if (wgml_quantize_row(j->type, buf, j->dst + (size_t)r * j->row_size, j->ne0) != j->row_size)
                atomic_store(&j->failed, 1);
        }
    }
}

wgml_status quantize_rows(wgml_threadpool *pool, uint32_t type, int64_t ne0, int64_t r0, int64_t r1, quantize_row_fn fn,
                          void *ctx, void *dst, wgml_error *err) {
    size_t row_size = wgml_row_size(type, ne0);
    if (!row_size || !wgml_can_quantize(type))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "cannot write rows of %lld elements as %s", (long long)ne0,
                         wgml_dtype_name(type));
    if (r1 <= r0) return WGML_OK;
    int nth = wgml_threadpool_size(pool);
    float *scratch = wgml_malloc((size_t)nth * (size_t)ne0 * sizeof(float));
    if (!scratch)
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory converting rows of %lld", (long long)ne0);
    rows_job j = {
        .type = type, .ne0 = ne0, .r1 = r1, .row_size = row_size, .fn = fn, .ctx = ctx, .dst = dst, .scratch = scratch};
    /* chunks of ~64K elements: small enough to balance threads, large enough to be cheap */
    j.chunk = ne0 >= 65536 ? 1 : 65536 / ne0;
    atomic_init(&j.next, (long long)r0);
    atomic_init(&j.failed, 0);
    wgml_threadpool_run(pool, rows_task, &j);
    wgml_free(scratch);
    if (atomic_load(&j.failed))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "converting rows to %s failed", wgml_dtype_name(type));
    return WGML_OK;
}

/* ---- the file quantizer ---- */

typedef struct plan_entry {
    const gguf_tensor *t;
    uint32_t type;
} plan_entry;

typedef struct src_rows {
    const gguf_tensor *t;
    size_t in_row;
} src_rows;

static void dequant_row(void *ctx, int64_t row, float *dst, int64_t n) {
    const src_rows *s = ctx;
    wgml_dequantize_row(s->t->type, (const uint8_t *)s->t->data + (size_t)row * s->in_row, dst, n);
}

static int is_float(uint32_t type) { return type == WGML_F32 || type == WGML_F16 || type == WGML_BF16; }

static wgml_status model_info(const gguf_file *f, quantize_model_info *mi, wgml_error *err) {
    memset(mi, 0, sizeof *mi);
    mi->has_output = gguf_find_tensor(f, "output.weight") != NULL;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++)
        if (strstr(gguf_tensor_at(f, i)->name, "attn_v.weight")) mi->n_layer++;
    mi->n_gqa = 1;
    gguf_str arch;
    int r = gguf_get_str(f, "general.architecture", &arch, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0 || arch.len > 64) return WGML_OK;
    char key[128];
    int64_t v, heads = 0, kv = 0;
    snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
    if ((r = gguf_get_int(f, key, 1, 1 << 20, &v, err)) < 0) return WGML_ERR_FORMAT;
    if (r) mi->n_layer = (int)v;
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)arch.len, arch.ptr);
    if (gguf_get_int(f, key, 1, 1 << 20, &heads, err) < 0) return WGML_ERR_FORMAT;
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)arch.len, arch.ptr);
    if (gguf_get_int(f, key, 1, 1 << 20, &kv, err) < 0) return WGML_ERR_FORMAT;
    if (heads && kv) mi->n_gqa = (int)(heads / kv);
    return WGML_OK;
}

/* Decides every tensor's type and checks the input can be converted to it. */
static wgml_status make_plan(const gguf_file *f, const quantize_recipe *rc, const quantize_params *p, plan_entry *plan,
                             quantize_fallback *fb, uint64_t *elements, quantize_result *res, wgml_error *err) {
    quantize_model_info mi;
    wgml_status st = model_info(f, &mi, err);
    if (st) return st;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (t->type >= WGML_DTYPE_COUNT || !wgml_dtype_get(t->type))
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: tensor '%s' has unknown type %u", gguf_name(f), t->name,
                             t->type);
        uint32_t wanted, type = quantize_tensor_type(rc, &mi, t->name, t->n_dims, t->ne, &wanted);
        int matrix = quantize_is_matrix(t->name, t->n_dims);
        if (!matrix && !is_float(t->type)) type = t->type; /* e.g. integer tensors: copied */
        if (type != t->type && !is_float(t->type))
            return wgml_fail(
                err, WGML_ERR_UNSUPPORTED,
                "%s: tensor '%s' is %s; requantizing is not supported (the input must be F32, F16 or BF16)",
                gguf_name(f), t->name, wgml_dtype_name(t->type));
        if (t->ne[0] < 1 || (type != t->type && !wgml_row_size(t->type, t->ne[0])))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s' has a bad shape", gguf_name(f), t->name);
        if (type != wanted) fb[res->n_fallback++] = (quantize_fallback){t->name, wanted, type, t->ne[0]};
        plan[i].t = t;
        plan[i].type = type;
        if (matrix) elements[type] += (uint64_t)t->n_elements;
    }
    if (p) quantize_note_fallbacks(fb, res->n_fallback, p->log, p->log_user);
    return WGML_OK;
}

static wgml_status write_metadata(gguf_writer *w, const gguf_file *f, uint32_t file_type, wgml_error *err) {
    wgml_status st;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        /* rewritten below; the writer uses its own (default) alignment */
        if (!strcmp(kv->key, "general.file_type") || !strcmp(kv->key, "general.quantization_version") ||
            !strcmp(kv->key, "general.alignment"))
            continue;
        if ((st = gguf_writer_copy_kv(w, kv, err))) return st;
    }
    if ((st = gguf_writer_set_u32(w, "general.quantization_version", 2, err)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", file_type, err)))
        return st;
    return WGML_OK;
}

/* Rows per progress report: about 16M elements. */
#define PROGRESS_ELEMENTS (16LL << 20)

static wgml_status convert_tensor(wgml_threadpool *pool, gguf_writer *w, const plan_entry *e, uint8_t *buf,
                                  const quantize_params *p, uint64_t *done, uint64_t total, wgml_error *err) {
    const gguf_tensor *t = e->t;
    wgml_status st;
    if (e->type == t->type) {
        st = gguf_writer_write_tensor(w, t->data, t->size, err);
        *done += t->size;
    } else {
        int64_t ne0 = t->ne[0], rows = t->n_elements / ne0;
        src_rows src = {t, wgml_row_size(t->type, ne0)};
        int64_t step = PROGRESS_ELEMENTS / ne0 > 0 ? PROGRESS_ELEMENTS / ne0 : 1;
        for (int64_t r = 0; r < rows; r += step) {
            int64_t r1 = r + step < rows ? r + step : rows;
            if ((st = quantize_rows(pool, e->type, ne0, r, r1, dequant_row, &src, buf, err))) {
                wgml_error_prefix(err, "tensor '%s'", t->name);
                return st;
            }
            *done += (uint64_t)(r1 - r) * src.in_row;
            if (p && p->progress && p->progress(p->progress_user, "quantizing", *done, total))
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "quantization cancelled");
        }
        st = gguf_writer_write_tensor(w, buf, wgml_row_size(e->type, ne0) * (size_t)rows, err);
    }
    if (!st && p && p->progress && p->progress(p->progress_user, "quantizing", *done, total))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "quantization cancelled");
    return st;
}

wgml_status quantize_file(const char *in, const char *out, const char *type, const quantize_params *p,
                          quantize_result *result, wgml_error *err) {
    quantize_result res;
    memset(&res, 0, sizeof res);
    if (result) memset(result, 0, sizeof *result);
    const quantize_recipe *rc = quantize_recipe_find(type);
    if (!rc)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown type '%s' (known: %s)", type ? type : "(null)",
                         quantize_recipe_list());
    if (!in || !out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "quantize: input and output paths are required");
    gguf_file *f = NULL;
    gguf_writer *w = NULL;
    wgml_threadpool *pool = NULL;
    plan_entry *plan = NULL;
    quantize_fallback *fb = NULL;
    uint8_t *buf = NULL;
    uint64_t elements[WGML_DTYPE_COUNT] = {0};
    wgml_status st = gguf_open(in, &f, err);
    if (st) return st;
    int64_t n = gguf_n_tensors(f);
    plan = wgml_calloc(n ? (size_t)n : 1, sizeof *plan);
    fb = wgml_calloc(n ? (size_t)n : 1, sizeof *fb);
    w = gguf_writer_create();
    if (!plan || !fb || !w) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory quantizing %s", in);
        goto done;
    }
    if ((st = make_plan(f, rc, p, plan, fb, elements, &res, err))) goto done;
    res.file_type = quantize_file_type(rc, elements);
    if (res.file_type != rc->ftype && p)
        wgml_note(p->log, p->log_user, "general.file_type = %u (%s), not %s's %u: most weights are %s",
                  res.file_type, quantize_ftype_name(res.file_type), rc->name, rc->ftype,
                  wgml_dtype_name((uint32_t)dominant(elements)));
    if ((st = write_metadata(w, f, res.file_type, err))) goto done;
    size_t max_out = 0;
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor *t = plan[i].t;
        if ((st = gguf_writer_add_tensor(w, t->name, plan[i].type, t->n_dims, t->ne, err))) goto done;
        size_t sz = wgml_row_size(plan[i].type, t->ne[0]) * (size_t)(t->n_elements / t->ne[0]);
        if (plan[i].type != t->type && sz > max_out) max_out = sz;
        total += t->size;
    }
    if (max_out && !(buf = wgml_malloc(max_out))) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes for one tensor", max_out);
        goto done;
    }
    if ((st = wgml_threadpool_create(p ? p->n_threads : 0, &pool, err))) goto done;
    if ((st = gguf_writer_begin(w, out, err))) goto done;
    uint64_t done_bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        if ((st = convert_tensor(pool, w, &plan[i], buf, p, &done_bytes, total, err))) goto done;
        res.n_tensors++;
        res.per_type[plan[i].type]++;
        res.bytes_in += plan[i].t->size;
        res.bytes_out +=
            wgml_row_size(plan[i].type, plan[i].t->ne[0]) * (size_t)(plan[i].t->n_elements / plan[i].t->ne[0]);
    }
    st = gguf_writer_finish(w, err);
done:
    gguf_writer_free(w);
    wgml_threadpool_free(pool);
    wgml_free(buf);
    wgml_free(fb);
    wgml_free(plan);
    gguf_close(f);
    if (!st && result) *result = res;
    return st;
}
