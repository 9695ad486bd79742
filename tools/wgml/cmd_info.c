/*
 * cmd_info.c - `wgml info MODEL`: what a GGUF file (or a whisper.cpp ggml
 * .bin, read as the GGUF it converts to) holds.
 *
 * Reads only the header (no backend is created): format version, the model
 * family (model/family.h) with its tasks and hyper-parameters, tokenizer, and
 * a table of tensors with their types, shapes and sizes, summed by type.
 */
#include <inttypes.h>
#include <string.h>

#include "cli.h"
#include "tools_internal.h"

typedef struct {
    const char *model;
    int tensors, metadata;
} info_opts;

static const cli_opt options[] = {
    CLI_STRING("--model", "-m", info_opts, model, "FILE", "the model (or as the argument; default: the default model)"),
    CLI_FLAG("--tensors", NULL, info_opts, tensors, "list every tensor (default: a summary by type)"),
    CLI_FLAG("--metadata", NULL, info_opts, metadata, "list every metadata key"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml info [MODEL] [--tensors] [--metadata]\n",
    .about = "Prints a GGUF model's architecture, hyper-parameters and tensor types and sizes.\n",
    .opts = options,
    .max_args = 1,
    .too_many = "more than one model given",
};

static void print_value(const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING: {
        uint64_t n = v->v.str.len > 80 ? 80 : v->v.str.len;
        printf("\"");
        for (uint64_t i = 0; i < n; i++) {
            char c = v->v.str.ptr[i];
            putchar(c == '\n' ? ' ' : c);
        }
        printf("%s\"", v->v.str.len > 80 ? "..." : "");
        break;
    }
    case GGUF_TYPE_ARRAY: printf("[%s x %" PRIu64 "]", gguf_type_name(v->v.arr.elem_type), v->v.arr.n); break;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: printf("%g", v->v.f64); break;
    case GGUF_TYPE_BOOL: printf("%s", v->v.b ? "true" : "false"); break;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64: printf("%" PRId64, v->v.i64); break;
    default: printf("%" PRIu64, v->v.u64); break;
    }
}

/* One hyper-parameter of the family's description, aligned with the other lines. */
static void print_field(void *user, const char *key, const char *value) {
    (void)user;
    char k[64];
    snprintf(k, sizeof k, "%s:", key);
    printf("%-14s %s\n", k, value);
}

static void human(double bytes, char *buf, size_t n) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (bytes >= 1024 && i < 4) {
        bytes /= 1024;
        i++;
    }
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", bytes, u[i]);
}

int cmd_info(int argc, char **argv) {
    info_opts opt = {0};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    if (n_args && opt.model) return cli_usage_error("more than one model given");
    const char *path = n_args ? argv[0] : opt.model;
    const int all_tensors = opt.tensors, all_meta = opt.metadata;
    char fetched[4096];
    if (!path && !(path = cli_default_model())) return CLI_FAIL;
    if (!(path = cli_fetch_model(path, fetched, sizeof fetched))) return CLI_FAIL;
    gguf_file *f;
    wgml_error err;
    wgml_model_format fmt;
    if (wgml_model_file_open_format(path, &f, &fmt, &err)) return cli_fail_err(&err);
    char sz[32];
    human((double)gguf_file_size(f), sz, sizeof sz);
    if (fmt == WGML_MODEL_FORMAT_WHISPER_BIN) /* converted in memory: the GGUF's figures */
        printf("file:          %s (%s, read as GGUF v%u of %s, %" PRId64 " tensors, %" PRId64 " metadata keys)\n", path,
               wgml_model_format_name(fmt), gguf_version(f), sz, gguf_n_tensors(f), gguf_n_kv(f));
    else
        printf("file:          %s (GGUF v%u, %s, %" PRId64 " tensors, %" PRId64 " metadata keys)\n", path,
               gguf_version(f), sz, gguf_n_tensors(f), gguf_n_kv(f));
    gguf_str s;
    if (gguf_get_str(f, "general.name", &s, NULL) == 1) printf("name:          %.*s\n", (int)s.len, s.ptr);
    if (gguf_get_str(f, "general.architecture", &s, NULL) == 1) printf("architecture:  %.*s\n", (int)s.len, s.ptr);
    const wgml_family *fam;
    char arch[64];
    wgml_error herr;
    wgml_status st = wgml_family_of(f, arch, sizeof arch, &fam, &herr);
    if (!st) {
        char tasks[128];
        uint32_t t = fam->file_tasks ? fam->file_tasks(f) : 0;
        printf("family:        %s\ntasks:         %s\n", fam->name, wgml_tasks_format(t ? t : fam->tasks, tasks, sizeof tasks));
        st = fam->describe(f, print_field, NULL, &herr);
    }
    if (st) printf("model:         not runnable: %s\n", herr.message);
    if (gguf_get_str(f, "tokenizer.ggml.model", &s, NULL) == 1) {
        const gguf_value *toks;
        int64_t n_tok = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, NULL) == 1 ? (int64_t)toks->v.arr.n : 0;
        gguf_str pre = {"", 0};
        gguf_get_str(f, "tokenizer.ggml.pre", &pre, NULL);
        printf("tokenizer:     %.*s%s%.*s, %" PRId64 " tokens\n", (int)s.len, s.ptr, pre.len ? " / " : "", (int)pre.len,
               pre.ptr, n_tok);
    }
    if (all_meta) {
        printf("\nmetadata:\n");
        for (int64_t i = 0; i < gguf_n_kv(f); i++) {
            const gguf_kv *kv = gguf_kv_at(f, i);
            printf("  %-44s ", kv->key);
            print_value(&kv->value);
            printf("\n");
        }
    }
    uint64_t by_type_bytes[WGML_DTYPE_COUNT] = {0}, by_type_n[WGML_DTYPE_COUNT] = {0}, params = 0, total = 0;
    if (all_tensors) printf("\n%-36s %-6s %-24s %12s\n", "tensor", "type", "shape", "bytes");
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        by_type_bytes[t->type] += t->size;
        by_type_n[t->type]++;
        params += (uint64_t)t->n_elements;
        total += t->size;
        if (all_tensors) {
            char shape[64];
            int k = snprintf(shape, sizeof shape, "[%" PRId64, t->ne[0]);
            for (int d = 1; d < t->n_dims && k < (int)sizeof shape; d++)
                k += snprintf(shape + k, sizeof shape - (size_t)k, ", %" PRId64, t->ne[d]);
            snprintf(shape + (k < (int)sizeof shape ? k : (int)sizeof shape - 2), 2, "]");
            printf("%-36s %-6s %-24s %12zu\n", t->name, wgml_dtype_name(t->type), shape, t->size);
        }
    }
    human((double)total, sz, sizeof sz);
    printf("\nweights:       %.2f M parameters, %s (%.2f bits per weight)\n", params / 1e6, sz,
           params ? total * 8.0 / (double)params : 0.0);
    for (int t = 0; t < WGML_DTYPE_COUNT; t++) {
        if (!by_type_n[t]) continue;
        human((double)by_type_bytes[t], sz, sizeof sz);
        printf("  %-6s %4" PRIu64 " tensors  %s\n", wgml_dtype_name((uint32_t)t), by_type_n[t], sz);
    }
    gguf_close(f);
    return CLI_OK;
}
