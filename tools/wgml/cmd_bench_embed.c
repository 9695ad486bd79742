/*
 * cmd_bench_embed.c - `wgml bench --embed`: embedding speed of a BERT-family
 * model (wgml bench hands its arguments here when --embed is among them).
 *
 * The texts are made of common English words, text i sized to 16 + (37 i mod
 * 113) tokens ([CLS] and [SEP] included): 16 to 128, 72 on average. Batch 1
 * embeds each text alone (latency per text); batch B embeds B texts in one
 * wgml_embed call, packed into one step. The GEMM work of a token is 2 x the
 * weights it multiplies (matmul_params); each run is paired with a
 * measurement of the backend's own matmul rate taken right after it, and the
 * share of that rate is the median of the per-run ratios.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    int batch, n_texts, repeat, step, json, limits, profile, embed;
} bench_embed_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, bench_embed_opts, mo),
    CLI_FLAG("--embed", NULL, bench_embed_opts, embed, NULL), /* what brought the arguments here */
    CLI_INT("--batch", NULL, bench_embed_opts, batch, "B", 1, 4096, "texts per call for the batched figure (default 32)"),
    CLI_INT("--texts", NULL, bench_embed_opts, n_texts, "N", 1, 65536,
            "texts per run (default 64; batch 1 embeds min(N, 32) of them)"),
    CLI_INT("--repeat", NULL, bench_embed_opts, repeat, "R", 1, 64, "runs; figures are medians (default 3)"),
    CLI_INT("--step", NULL, bench_embed_opts, step, "N", 1, 1 << 20,
            "most tokens per step (wgml_embed_params.n_batch; default: the library's)"),
    CLI_FLAG_SET("--no-limits", NULL, bench_embed_opts, limits, 0, "skip measuring the matmul rate"),
    CLI_FLAG("--profile", NULL, bench_embed_opts, profile,
             "per-kernel time table of the last run (GPU timestamps / CPU op time)"),
    CLI_FLAG("--json", NULL, bench_embed_opts, json, "print one JSON object on stdout"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml bench --embed -m MODEL [options]\n",
    .about = "Measures embedding speed (texts/s, tokens/s) for batches of 1 and B texts of 16-128\n"
             "tokens, and the share of the backend's measured matmul rate the batches reach.\n",
    .opts = options,
};

static const char *const words[] = {
    "the",   "of",    "and",   "a",      "to",     "in",    "is",     "you",   "that",  "it",     "he",
    "was",   "for",   "on",    "are",    "as",     "with",  "his",    "they",  "at",    "be",     "this",
    "have",  "from",  "or",    "one",    "had",    "by",    "word",   "but",   "not",   "what",   "all",
    "were",  "we",    "when",  "your",   "can",    "said",  "there",  "use",   "an",    "each",   "which",
    "she",   "do",    "how",   "their",  "if",     "will",  "up",     "other", "about", "out",    "many",
    "then",  "them",  "these", "so",     "some",   "her",   "would",  "make",  "like",  "him",    "into",
    "time",  "has",   "look",  "two",    "more",   "write", "go",     "see",   "number", "no",    "way",
    "could", "people", "my",   "than",   "first",  "water", "been",   "call",  "who",   "oil",    "its",
    "now",   "find",  "long",  "down",   "day",    "did",   "get",    "come",  "made",  "may",    "part",
    "river", "music", "house", "garden", "search", "model", "engine", "graph", "light", "stone",  "paper",
};
#define N_WORDS (int)(sizeof words / sizeof words[0])

/* Text i: words appended until it is `want` tokens with [CLS] and [SEP] (or one more). */
static char *make_text(wgml_model *m, int i, int want) {
    size_t cap = (size_t)want * 12 + 16, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    uint32_t x = 2654435761u * (uint32_t)(i + 1);
    wgml_error err;
    for (;;) {
        int n = wgml_tokenize(m, s, len, 1, NULL, 0, &err);
        if (n < 0 || n >= want || len + 16 > cap) break;
        x = x * 1664525u + 1013904223u;
        const char *w = words[(x >> 8) % N_WORDS];
        len += (size_t)snprintf(s + len, cap - len, "%s%s", len ? " " : "", w);
    }
    return s;
}

int cmd_bench_embed(int argc, char **argv) {
    bench_embed_opts opt = {.batch = 32, .n_texts = 64, .repeat = 3, .limits = 1};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    const int json = opt.json, limits = opt.limits, profile = opt.profile;
    if (!mo.model && !getenv("WGML_MODEL")) return cli_usage_error("give an embedding model with -m");
    wgml_model *m = cli_load_model(&mo, NULL);
    if (!m) return CLI_FAIL;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    const int N = opt.n_texts, B = opt.batch, R = opt.repeat, N1 = N < 32 ? N : 32;
    rc = CLI_OK;
    wgml_embed_params ep = wgml_embed_default_params();
    int dim = wgml_embed_dim(m, &ep);
    char **texts = calloc((size_t)N, sizeof *texts);
    float *out = dim > 0 ? malloc((size_t)N * (size_t)dim * sizeof *out) : NULL;
    long long tokens = 0, tokens1 = 0;
    wgml_error err;
    if (dim < 0) {
        rc = cli_fail("a %s model (%s) does not embed text", info.family, info.architecture);
        goto done;
    }
    if (!texts || !out) {
        rc = cli_fail("out of memory");
        goto done;
    }
    for (int i = 0; i < N && !rc; i++) {
        int want = 16 + (37 * i) % 113;
        if (want > info.n_ctx_train) want = info.n_ctx_train;
        if (!(texts[i] = make_text(m, i, want))) rc = cli_fail("out of memory");
        int k = rc ? 0 : wgml_tokenize(m, texts[i], strlen(texts[i]), 1, NULL, 0, &err);
        tokens += k;
        if (i < N1) tokens1 += k;
    }
    if (rc) goto done;
    ep.n_batch = opt.step; /* 0: the library's default */
    /* warm-up: pipelines, scratch, page faults */
    if (wgml_embed(m, (const char *const *)texts, N < B ? N : B, &ep, out, dim, &err) ||
        wgml_embed(m, (const char *const *)texts, 1, &ep, out, dim, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    double b_tps[64] = {0}, b_texts[64] = {0}, one_tps[64] = {0}, one_ms[64] = {0}, mm[64] = {0}, pct[64] = {0},
           pct1[64] = {0};
    const double gflop_per_token = 2.0 * (double)info.matmul_params / 1e9;
    cli_progress bar;
    cli_progress_begin(&bar, "bench");
    wgml_kernel_stat kt[64];
    int n_kt = 0;
    for (int r = 0; r < R && !rc; r++) {
        if (profile && r == R - 1) wgml_model_set_profiling(m, 1);
        double t0 = cli_now_ms();
        for (int i = 0; i < N && !rc; i += B) {
            int k = N - i < B ? N - i : B;
            if (wgml_embed(m, (const char *const *)texts + i, k, &ep, out + (size_t)i * dim, dim, &err))
                rc = cli_fail_err(&err);
        }
        double ms = cli_now_ms() - t0;
        b_texts[r] = N / (ms / 1e3);
        b_tps[r] = tokens / (ms / 1e3);
        double lat[64];
        t0 = cli_now_ms();
        for (int i = 0; i < N1 && !rc; i++) {
            double t1 = cli_now_ms();
            if (wgml_embed(m, (const char *const *)texts + i, 1, &ep, out, dim, &err)) rc = cli_fail_err(&err);
            lat[i] = cli_now_ms() - t1;
        }
        ms = cli_now_ms() - t0;
        one_tps[r] = tokens1 / (ms / 1e3);
        if (profile && r == R - 1) { /* the model's work only, not the device measurement */
            n_kt = wgml_model_get_kernel_times(m, kt, 64);
            wgml_model_set_profiling(m, 0);
        }
        one_ms[r] = rc ? 0 : cli_median(lat, N1);
        if (!rc && limits) {
            double gbs;
            if (wgml_model_measure_device(m, &gbs, &mm[r], &err)) rc = cli_fail_err(&err);
            else if (mm[r] > 0) {
                pct[r] = b_tps[r] * gflop_per_token / mm[r] * 100;
                pct1[r] = one_tps[r] * gflop_per_token / mm[r] * 100;
            }
        }
        cli_progress_update(&bar, (uint64_t)r + 1, (uint64_t)R);
    }
    cli_progress_end(&bar);
    if (rc) goto done;
    const char *path = mo.model ? mo.model : getenv("WGML_MODEL");
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(path));
        json_object_object_add(o, "architecture", json_object_new_string(info.architecture));
        json_object_object_add(o, "backend", json_object_new_string(info.backend));
        json_object_object_add(o, "adapter", json_object_new_string(info.adapter));
        json_object_object_add(o, "threads", json_object_new_int(info.n_threads));
        json_object_object_add(o, "n_params", json_object_new_int64((int64_t)info.n_params));
        json_object_object_add(o, "matmul_params", json_object_new_int64((int64_t)info.matmul_params));
        json_object_object_add(o, "texts", json_object_new_int(N));
        json_object_object_add(o, "mean_tokens_per_text", json_object_new_double((double)tokens / N));
        json_object_object_add(o, "repeat", json_object_new_int(R));
        json_object_object_add(o, "batch", json_object_new_int(B));
        json_object_object_add(o, "batch_texts_per_s", json_object_new_double(cli_median(b_texts, R)));
        json_object_object_add(o, "batch_tokens_per_s", json_object_new_double(cli_median(b_tps, R)));
        json_object_object_add(o, "batch_matmul_pct", json_object_new_double(cli_median(pct, R)));
        json_object_object_add(o, "single_tokens_per_s", json_object_new_double(cli_median(one_tps, R)));
        json_object_object_add(o, "single_latency_ms_p50", json_object_new_double(cli_median(one_ms, R)));
        json_object_object_add(o, "single_matmul_pct", json_object_new_double(cli_median(pct1, R)));
        json_object_object_add(o, "matmul_gflops", json_object_new_double(cli_median(mm, R)));
        json_object_object_add(o, "gemm_gflop_per_token", json_object_new_double(gflop_per_token));
        if (profile) json_object_object_add(o, "kernels", cli_kernels_json(kt, n_kt < 64 ? n_kt : 64));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("model        %s (%s, %.2f M params)\n", path, info.architecture, info.n_params / 1e6);
        printf("backend      %s%s%s", info.backend, *info.adapter ? " / " : "", info.adapter);
        if (!strcmp(info.backend, "cpu")) printf(" (%d threads)", info.n_threads);
        printf("\ntexts        %d of %.1f tokens on average, %d runs (medians)\n", N, (double)tokens / N, R);
        printf("batch %-6d %.1f texts/s, %.0f tokens/s", B, cli_median(b_texts, R), cli_median(b_tps, R));
        if (limits) printf(", %.0f%% of the matmul rate", cli_median(pct, R));
        printf("\nbatch 1      %.2f ms per text (p50), %.0f tokens/s", cli_median(one_ms, R), cli_median(one_tps, R));
        if (limits) printf(", %.0f%% of the matmul rate", cli_median(pct1, R));
        if (limits) printf("\nmatmul       %.1f GFLOP/s (the backend's f32 matmul, 1024^3)", cli_median(mm, R));
        printf("\n");
        for (int i = 0; i < n_kt && i < 64; i++)
            printf("  %-40s %8llu calls %10.2f ms\n", kt[i].name, (unsigned long long)kt[i].calls, kt[i].total_ms);
    }
done:
    for (int i = 0; texts && i < N; i++) free(texts[i]);
    free(texts);
    free(out);
    wgml_model_free(m);
    return rc;
}
