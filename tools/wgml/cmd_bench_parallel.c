/*
 * cmd_bench_parallel.c - `wgml bench --parallel N`: the decode rate of one
 * stream and the aggregate rate of N streams decoded together (wgml_batch),
 * in one run (wgml bench hands its arguments here when --parallel is among them).
 *
 * single:    a session's greedy decode (wgml_generate, EOS ignored), as
 *            `wgml bench`'s tg: the rate a lone user gets today.
 * batch x1:  the same through a batch of one sequence (the path a server
 *            slot takes: batch-invariant matmuls, attention per sequence).
 * batch xN:  N sequences, each after its own --ctx tokens of prompt, advanced
 *            together one token each per step; aggregate = N x steps / time.
 * ratio = aggregate / single. Decode reads every weight once per step, so
 * while it is bandwidth-bound N streams cost little more than one.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    int par, n, ctx, repeat, json;
    wgml_kv_type kv;
} bench_parallel_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, bench_parallel_opts, mo),
    CLI_INT("--parallel", NULL, bench_parallel_opts, par, "N", 1, 256, "concurrent streams (1-256)"),
    CLI_INT("-n", NULL, bench_parallel_opts, n, "N", 2, 1 << 16, "tokens generated per stream (default 64)"),
    CLI_INT("--ctx", NULL, bench_parallel_opts, ctx, "N", 1, 1 << 16,
            "prompt tokens of each stream before decoding (default 16)"),
    CLI_KV_TYPE(bench_parallel_opts, kv),
    CLI_INT("--repeat", NULL, bench_parallel_opts, repeat, "R", 1, 64, "runs; figures are medians (default 3)"),
    CLI_FLAG("--json", NULL, bench_parallel_opts, json, "print one JSON object on stdout"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml bench --parallel N [options]\n",
    .about = "Measures the decode rate of one stream and the aggregate rate of N streams decoded\n"
             "together in one batched step per token, and their ratio.\n",
    .opts = options,
};

typedef struct {
    double single, batch1, aggregate;
} par_result;

static void fill_prompt(int32_t *ids, int n, int n_vocab, uint32_t seed, int32_t bos, int32_t eos) {
    uint32_t x = 12345u + 7919u * seed;
    for (int i = 0; i < n; i++) {
        do {
            x = x * 1664525u + 1013904223u;
            ids[i] = (int32_t)((x >> 8) % (uint32_t)n_vocab);
        } while (ids[i] == bos || ids[i] == eos);
    }
}

/* tokens/s of a session's greedy decode of n tokens after ctx tokens */
static int run_single(wgml_model *m, int n, int ctx, wgml_kv_type kv, const int32_t *prompt, double *tps) {
    wgml_error err;
    wgml_session_params sp = wgml_session_default_params();
    sp.n_ctx = ctx + n + 1;
    sp.kv_type = kv;
    wgml_session *s;
    if (wgml_session_create(m, &sp, &s, &err)) return cli_fail_err(&err);
    int rc = CLI_OK;
    if (wgml_session_eval(s, prompt, ctx, &err)) rc = cli_fail_err(&err);
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = n;
    gp.ignore_eos = 1;
    gp.add_bos = 0;
    gp.sampler.temperature = 0;
    wgml_generate_result res;
    if (!rc && wgml_generate(s, "", &gp, &res, &err)) rc = cli_fail_err(&err);
    /* generate_ms runs from the first token to the end: n - 1 decode steps */
    if (!rc) *tps = res.n_generated > 1 && res.generate_ms > 0 ? (res.n_generated - 1) / (res.generate_ms / 1e3) : 0;
    wgml_session_free(s);
    return rc;
}

/* aggregate tokens/s of `par` sequences decoding n tokens each, together */
static int run_batch(wgml_model *m, int par, int n, int ctx, wgml_kv_type kv, int32_t *const *prompts, double *tps) {
    wgml_error err;
    wgml_batch_params bp = wgml_batch_default_params();
    bp.n_seq = par;
    bp.n_ctx = ctx + n + 1;
    bp.kv_type = kv;
    bp.n_batch = ctx > par ? ctx : par;
    wgml_batch *b;
    if (wgml_batch_create(m, &bp, &b, &err)) return cli_fail_err(&err);
    wgml_batch_item *items = calloc((size_t)par, sizeof *items);
    int32_t *next = calloc((size_t)par, sizeof *next);
    int rc = items && next ? CLI_OK : cli_fail("out of memory");
    /* the prompts, one sequence per step; each yields its first token */
    for (int i = 0; i < par && !rc; i++) {
        items[0] = (wgml_batch_item){.seq = i, .tokens = prompts[i], .n_tokens = ctx, .sample = 1};
        if (wgml_batch_step(b, items, 1, &err)) rc = cli_fail_err(&err);
        next[i] = items[0].next;
    }
    /* n - 1 decode steps of all sequences, timed (as the single stream's n - 1) */
    double t0 = cli_now_ms();
    for (int step = 0; step < n - 1 && !rc; step++) {
        for (int i = 0; i < par; i++)
            items[i] = (wgml_batch_item){.seq = i, .tokens = &next[i], .n_tokens = 1, .sample = 1};
        if (wgml_batch_step(b, items, par, &err)) rc = cli_fail_err(&err);
        for (int i = 0; i < par && !rc; i++) next[i] = items[i].next;
    }
    double ms = cli_now_ms() - t0;
    if (!rc) *tps = n > 1 && ms > 0 ? (double)par * (n - 1) / (ms / 1e3) : 0;
    free(items);
    free(next);
    wgml_batch_free(b);
    return rc;
}

int cmd_bench_parallel(int argc, char **argv) {
    bench_parallel_opts opt = {.n = 64, .ctx = 16, .repeat = 3};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const long long par = opt.par, n = opt.n, ctx = opt.ctx;
    const wgml_kv_type kv = opt.kv;
    const int json = opt.json;
    if (par < 1) return cli_usage_error("--parallel N is required");
    wgml_model *m = cli_load_model(&opt.mo, NULL);
    if (!m) return CLI_FAIL;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    const int P = opt.par, R = opt.repeat;
    rc = CLI_OK;
    if (!(info.tasks & WGML_TASK_GENERATE)) {
        rc = cli_fail("a %s model (%s) does not generate text", info.family, info.architecture);
        wgml_model_free(m);
        return rc;
    }
    if (ctx + n + 1 > info.n_ctx_train && !json)
        fprintf(stderr, "wgml bench: note: %lld tokens per stream exceed the training context %d\n", ctx + n,
                info.n_ctx_train);
    int32_t **prompts = calloc((size_t)P, sizeof *prompts);
    if (!prompts) rc = cli_fail("out of memory");
    for (int i = 0; i < P && !rc; i++) {
        prompts[i] = malloc((size_t)ctx * sizeof(int32_t));
        if (!prompts[i]) rc = cli_fail("out of memory");
        else fill_prompt(prompts[i], (int)ctx, info.n_vocab, (uint32_t)i, info.bos, info.eos);
    }
    double single[64], batch1[64], agg[64], ratio[64];
    for (int r = 0; r < R && !rc; r++) {
        if ((rc = run_single(m, (int)n, (int)ctx, kv, prompts[0], &single[r]))) break;
        if ((rc = run_batch(m, 1, (int)n, (int)ctx, kv, prompts, &batch1[r]))) break;
        if ((rc = run_batch(m, P, (int)n, (int)ctx, kv, prompts, &agg[r]))) break;
        ratio[r] = single[r] > 0 ? agg[r] / single[r] : 0;
    }
    if (!rc) {
        par_result res = {cli_median(single, R), cli_median(batch1, R), cli_median(agg, R)};
        double rat = cli_median(ratio, R);
        if (json) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "model", json_object_new_string(info.name[0] ? info.name : info.architecture));
            json_object_object_add(o, "backend", json_object_new_string(info.backend));
            json_object_object_add(o, "adapter", json_object_new_string(info.adapter));
            json_object_object_add(o, "threads", json_object_new_int(info.n_threads));
            json_object_object_add(o, "parallel", json_object_new_int(P));
            json_object_object_add(o, "n", json_object_new_int((int)n));
            json_object_object_add(o, "ctx", json_object_new_int((int)ctx));
            json_object_object_add(o, "repeat", json_object_new_int(R));
            json_object_object_add(o, "single_tps", json_object_new_double(res.single));
            json_object_object_add(o, "batch1_tps", json_object_new_double(res.batch1));
            json_object_object_add(o, "aggregate_tps", json_object_new_double(res.aggregate));
            json_object_object_add(o, "per_stream_tps", json_object_new_double(res.aggregate / P));
            json_object_object_add(o, "ratio", json_object_new_double(rat));
            puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
            json_object_put(o);
        } else {
            printf("model %s (%s), backend %s (%s", info.name[0] ? info.name : info.architecture, info.architecture,
                   info.backend, info.adapter);
            if (!strcmp(info.backend, "cpu")) printf(", %d threads", info.n_threads);
            printf("), %lld tokens per stream after %lld of prompt, median of %d\n", n, ctx, R);
            printf("  single stream (session)  %9.1f tokens/s\n", res.single);
            printf("  batch of 1               %9.1f tokens/s\n", res.batch1);
            printf("  %3d streams together     %9.1f tokens/s aggregate, %.1f per stream\n", P, res.aggregate,
                   res.aggregate / P);
            printf("  ratio (aggregate / single) %.2fx\n", rat);
        }
    }
    for (int i = 0; prompts && i < P; i++) free(prompts[i]);
    free(prompts);
    wgml_model_free(m);
    return rc;
}
