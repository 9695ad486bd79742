/*
 * cmd_bench.c - `wgml bench`: prompt-processing and generation speed.
 *
 * pp: one eval of P tokens into an empty context (after a warm-up eval);
 *     its time is also the time to first token.
 * tg: N greedy tokens (EOS ignored) after one BOS token, or after --ctx
 *     tokens of context; per-token latencies give p50/p90.
 * first token: from the start of the load to the end of the first evaluation
 *     (the warm-up, whose logits give a first token), with the WebGPU
 *     pipeline cache's state then: cold (nothing found on disk), warm
 *     (everything found), partial, or off (gpu/pipeline_cache.h).
 * With --repeat R every figure is the median of R runs. The device's limits
 * (bandwidth, matmul rate) are measured right after each run, and the ratios
 * to them are the medians of the per-run ratios. --json prints one
 * JSON object on stdout (and nothing else); the table goes to stdout otherwise.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "tools_internal.h"

int cmd_bench_transcribe(int argc, char **argv); /* cmd_bench_transcribe.c: a model that transcribes, or --transcribe */
int cmd_bench_grammar(int argc, char **argv);    /* cmd_bench_grammar.c: --grammar FILE or --json-schema FILE */

typedef struct {
    cli_model_opts mo;
    int pp, tg, ctx, repeat, json, profile, limits, other;
    const char *grammar;
    wgml_kv_type kv;
} bench_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, bench_opts, mo),
    CLI_INT("-p", NULL, bench_opts, pp, "N", 0, 1 << 16, "prompt tokens for pp (default 128)"),
    CLI_INT("-n", NULL, bench_opts, tg, "N", 0, 1 << 16, "generated tokens for tg (default 128)"),
    CLI_INT("--ctx", NULL, bench_opts, ctx, "N", 0, 1 << 20, "tokens already in the context before tg (default 0)"),
    CLI_KV_TYPE(bench_opts, kv),
    CLI_INT("--repeat", NULL, bench_opts, repeat, "R", 1, 64,
            "runs; figures are medians (default 1), each run with its\nown measurement of the device's limits"),
    CLI_FLAG("--profile", NULL, bench_opts, profile, "per-kernel time table (GPU timestamps / CPU op time)"),
    CLI_FLAG_SET("--no-limits", NULL, bench_opts, limits, 0, "skip measuring the device's bandwidth and matmul rate"),
    CLI_FLAG("--json", NULL, bench_opts, json, "print one JSON object on stdout"),
    /* these hand the arguments to the other benchmarks before parsing (cmd_bench) */
    CLI_FLAG("--embed", NULL, bench_opts, other,
             "embedding speed of a BERT-family model instead (wgml bench --embed --help)"),
    CLI_FLAG("--images", NULL, bench_opts, other,
             "image embedding speed of a vision tower instead (wgml bench --images --help)"),
    CLI_INT("--parallel", NULL, bench_opts, other, "N", 1, 256,
            "one stream's decode rate against N streams decoded together\n(wgml bench --parallel N --help)"),
    CLI_STRING("--grammar", NULL, bench_opts, grammar, "FILE",
               "decode with a GBNF grammar against decode without\n(wgml bench --grammar FILE --help; also --json-schema FILE)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml bench [options]\n",
    .about = "Measures prompt processing (pp) and generation (tg) speed.\n",
    .opts = options,
    .more = "\nA speech model (the kokoro family) gets the speech benchmark: wgml bench --speech --help;\n"
            "a speech recognition model (whisper), the transcription benchmark: wgml bench --transcribe --help;\n"
            "a vision tower (CLIP, SigLIP, ViT), the image benchmark: wgml bench --images --help.\n",
};

typedef struct {
    double pp_tps, tg_tps, p50, p90, ttft;
} run_result;

/* Per-token timestamps, and the backend counters at the first and the last
 * token, so that counters per decode step exclude the prompt evaluation. */
typedef struct {
    double *t;
    int n, cap;
    wgml_model *m;
    wgml_counters first, last;
} times;

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    (void)text, (void)len;
    times *ts = user;
    if (token < 0) return 0; /* final flush of held-back bytes */
    if (ts->n < ts->cap) ts->t[ts->n++] = cli_now_ms();
    wgml_model_get_counters(ts->m, ts->n == 1 ? &ts->first : &ts->last);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, int n, double q) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

static void fill_tokens(int32_t *ids, int n, int n_vocab, int32_t bos, int32_t eos) {
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        do {
            x = x * 1664525u + 1013904223u;
            ids[i] = (int32_t)((x >> 8) % (uint32_t)n_vocab);
        } while (ids[i] == bos || ids[i] == eos);
    }
}

static int bench_once(wgml_model *m, wgml_session *s, int pp, int tg, int ctx, int32_t *ids, run_result *r,
                      wgml_counters *tg_delta) {
    wgml_error err;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    /* pp */
    wgml_session_reset(s);
    double t0 = cli_now_ms();
    if (pp > 0 && wgml_session_eval(s, ids, pp, &err)) return cli_fail_err(&err);
    double pp_ms = cli_now_ms() - t0;
    r->pp_tps = pp > 0 ? pp / (pp_ms / 1e3) : 0;
    /* tg: after ctx tokens of context (at least one, so that there are logits to continue from) */
    wgml_session_reset(s);
    if (wgml_session_eval(s, ids, ctx > 0 ? ctx : 1, &err)) return cli_fail_err(&err);
    times ts = {calloc((size_t)tg + 1, sizeof(double)), 0, tg, m, {0}, {0}};
    if (!ts.t) return cli_fail("out of memory");
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = tg;
    gp.ignore_eos = 1;
    gp.add_bos = 0;
    gp.sampler.temperature = 0;
    gp.on_token = on_token;
    gp.user = &ts;
    wgml_generate_result res;
    wgml_status st = wgml_generate(s, "", &gp, &res, &err);
    if (st) {
        free(ts.t);
        return cli_fail_err(&err);
    }
    /* decode steps only: the first callback follows the prompt eval */
    int steps = ts.n - 1;
    double *d = calloc((size_t)(steps > 0 ? steps : 1), sizeof *d);
    for (int i = 1; i < ts.n; i++) d[i - 1] = ts.t[i] - ts.t[i - 1];
    double total = steps > 0 ? ts.t[ts.n - 1] - ts.t[0] : 0;
    r->tg_tps = steps > 0 ? steps / (total / 1e3) : 0;
    r->p50 = percentile(d, steps, 0.5);
    r->p90 = percentile(d, steps, 0.9);
    /* time to first token: the prompt's evaluation (its logits give the first token) */
    r->ttft = pp > 0 ? pp_ms : res.ttft_ms;
    /* counters over the decode steps between the first and the last token */
    wgml_counters c0 = ts.first, c1 = ts.n > 1 ? ts.last : ts.first;
    tg_delta->steps = c1.steps - c0.steps;
    tg_delta->submits = c1.submits - c0.submits;
    tg_delta->dispatches = c1.dispatches - c0.dispatches;
    tg_delta->readback_bytes = c1.readback_bytes - c0.readback_bytes;
    tg_delta->upload_bytes = c1.upload_bytes - c0.upload_bytes;
    tg_delta->buffers_created = c1.buffers_created - c0.buffers_created;
    tg_delta->bind_groups_created = c1.bind_groups_created - c0.bind_groups_created;
    tg_delta->pipelines_created = c1.pipelines_created - c0.pipelines_created;
    free(d);
    free(ts.t);
    return CLI_OK;
}

/* The tasks (wgml_task bits) of the model named by -m/--model (or
 * $WGML_MODEL): its header is enough (0 for an unreadable file, left to the
 * loader's error). */
static uint32_t model_tasks(int argc, char **argv) {
    const char *path = getenv("WGML_MODEL");
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) path = argv[++i];
    gguf_file *f;
    wgml_error err;
    char fetched[4096];
    /* a model by URL is fetched here, with its progress bar, and found in the cache when it loads */
    if (!path || !(path = cli_fetch_model(path, fetched, sizeof fetched)) || wgml_model_file_open(path, &f, &err))
        return 0;
    char arch[64];
    const wgml_family *fam;
    uint32_t tasks = wgml_family_of(f, arch, sizeof arch, &fam, &err) ? 0 : fam->tasks;
    gguf_close(f);
    return tasks;
}

/* The pipeline cache at the first token: its directory ("" when off, or not
 * built: no WebGPU, or a Dawn without the blob cache) and its state from the
 * counters (see the top of this file). */
static const char *cache_state(const wgml_model_info *info, const wgml_backend_stats *bs, char *dir, size_t cap) {
    dir[0] = '\0';
    if (!strcmp(info->backend, "cpu")) return "none";
#if defined(WGML_HAVE_WEBGPU) && defined(WGML_DAWN_BLOB_CACHE)
    if (!wgml_pipeline_cache_default_dir(dir, cap)) dir[0] = '\0';
#else
    (void)cap;
#endif
    if (!dir[0]) return "off";
    if (bs->pipeline_cache_hits == 0) return "cold";
    return bs->pipeline_cache_misses == 0 ? "warm" : "partial";
}

static double median_of(run_result *r, int n, size_t field) {
    double v[64];
    for (int i = 0; i < n; i++) v[i] = *(double *)((char *)&r[i] + field);
    return percentile(v, n, 0.5);
}

int cmd_bench(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--embed")) return cmd_bench_embed(argc, argv);
        else if (!strcmp(argv[i], "--images")) return cmd_bench_images(argc, argv);
        else if (!strcmp(argv[i], "--speech")) return cmd_bench_speech(argc, argv);
        else if (!strcmp(argv[i], "--parallel")) return cmd_bench_parallel(argc, argv);
        else if (!strcmp(argv[i], "--transcribe")) return cmd_bench_transcribe(argc, argv);
        else if (!strcmp(argv[i], "--grammar") || !strcmp(argv[i], "--json-schema")) return cmd_bench_grammar(argc, argv);
    const uint32_t tasks = model_tasks(argc, argv);
    if (tasks & WGML_TASK_SPEECH) return cmd_bench_speech(argc, argv);
    if (tasks & WGML_TASK_TRANSCRIBE) return cmd_bench_transcribe(argc, argv);
    if (tasks & WGML_TASK_EMBED_IMAGE) return cmd_bench_images(argc, argv);
    bench_opts opt = {.pp = 128, .tg = 128, .repeat = 1, .limits = 1};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    const long long pp = opt.pp, tg = opt.tg, ctx = opt.ctx, repeat = opt.repeat;
    const int json = opt.json, profile = opt.profile, limits = opt.limits;
    double load_ms;
    wgml_model *m = cli_load_model(&mo, &load_ms);
    if (!m) return CLI_FAIL;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    int n_ctx = (int)(pp > ctx + tg + 1 ? pp : ctx + tg + 1);
    wgml_session_params sp = wgml_session_default_params();
    sp.n_ctx = n_ctx;
    sp.kv_type = opt.kv;
    /* one batch for the pp prompt, and batches as large for the --ctx fill */
    long long batch = pp > ctx ? pp : ctx;
    sp.n_batch = batch > 0 ? (int)(batch < 512 ? batch : 512) : 64;
    wgml_session *s = NULL;
    wgml_error err;
    rc = CLI_OK;
    int32_t *ids = calloc((size_t)n_ctx, sizeof *ids);
    run_result runs[64];
    wgml_counters per = {0};
    if (!ids) {
        rc = cli_fail("out of memory");
        goto done;
    }
    double t_loaded = cli_now_ms();
    if (wgml_session_create(m, &sp, &s, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    fill_tokens(ids, n_ctx, info.n_vocab, info.bos, info.eos);
    /* warm-up: pipelines, caches, page faults; the first token's evaluation */
    if (wgml_session_eval(s, ids, pp > 0 ? (int)(pp < 8 ? pp : 8) : 1, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    double first_eval_ms = cli_now_ms() - t_loaded, first_token_ms = load_ms + first_eval_ms;
    wgml_backend *be = wgml_model_backend(m);
    wgml_backend_stats first_stats = {0};
    be->get_stats(be, &first_stats);
    char cache_dir[4096];
    const char *cache = cache_state(&info, &first_stats, cache_dir, sizeof cache_dir);
    /* Each run is paired with a device measurement taken right after it, and the
     * ratios are per pair: on a shared host the speed of both drifts by tens of
     * percent within minutes, and a ratio of a decode and a bandwidth measured
     * minutes apart measures the drift. */
    double read_r[64] = {0}, matmul_r[64] = {0}, roof_r[64] = {0}, pp_pct_r[64] = {0};
    /* and the rate of a matmul of the model's own weight type over as many rows as the prompt */
    double type_r[64] = {0}, pp_type_pct_r[64] = {0};
    const int type_rows = pp > 4096 ? 4096 : (int)pp, measure_type = type_rows > 0 && info.matmul_type[0];
    /* roofline: bytes a decode step reads at the run's mean context, and prompt FLOPs */
    uint64_t bytes_per_token = wgml_session_decode_bytes(s, (int)(ctx + tg / 2));
    const double gflop_per_token = 2.0 * (double)info.matmul_params / 1e9;
    double rss_mb = 0;
    wgml_kernel_stat kt[64];
    int n_kt = 0;
    cli_progress bar;
    cli_progress_begin(&bar, "bench");
    for (int r = 0; r < repeat && rc == CLI_OK; r++) {
        if (profile && r == repeat - 1) wgml_model_set_profiling(m, 1);
        rc = bench_once(m, s, (int)pp, (int)tg, (int)ctx, ids, &runs[r], &per);
        if (rc) break;
        if (r == 0) {
            /* before the device measurement's own buffers; later runs reuse this memory */
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            rss_mb = ru.ru_maxrss / 1024.0;
        }
        if (profile && r == repeat - 1) {
            /* the kernel table covers the model's work only, not the device measurement */
            n_kt = wgml_model_get_kernel_times(m, kt, 64);
            wgml_model_set_profiling(m, 0);
        }
        if (limits) {
            if (wgml_model_measure_device(m, &read_r[r], &matmul_r[r], &err)) {
                rc = cli_fail_err(&err);
                break;
            }
            if (read_r[r] > 0) roof_r[r] = bytes_per_token * runs[r].tg_tps / (read_r[r] * 1e9) * 100;
            if (matmul_r[r] > 0) pp_pct_r[r] = runs[r].pp_tps * gflop_per_token / matmul_r[r] * 100;
            if (measure_type && wgml_model_measure_matmul(m, info.matmul_type, type_rows, &type_r[r], &err)) {
                rc = cli_fail_err(&err);
                break;
            }
            if (type_r[r] > 0) pp_type_pct_r[r] = runs[r].pp_tps * gflop_per_token / type_r[r] * 100;
        }
        cli_progress_update(&bar, (uint64_t)r + 1, (uint64_t)repeat);
    }
    cli_progress_end(&bar);
    if (rc) goto done;
    int R = (int)repeat;
    run_result med = {median_of(runs, R, offsetof(run_result, pp_tps)), median_of(runs, R, offsetof(run_result, tg_tps)),
                      median_of(runs, R, offsetof(run_result, p50)), median_of(runs, R, offsetof(run_result, p90)),
                      median_of(runs, R, offsetof(run_result, ttft))};
    double read_gbs = cli_median(read_r, R), matmul_gflops = cli_median(matmul_r, R);
    double roofline = cli_median(roof_r, R), pp_pct = cli_median(pp_pct_r, R);
    double type_gflops = cli_median(type_r, R), pp_type_pct = cli_median(pp_type_pct_r, R);
    wgml_counters now;
    wgml_model_get_counters(m, &now);
    double decode_steps = per.steps > 0 ? (double)per.steps : 1;
    double pp_gflops = med.pp_tps * gflop_per_token;
    const char *model_path = mo.model ? mo.model : cli_default_model();
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(model_path));
        json_object_object_add(o, "architecture", json_object_new_string(info.architecture));
        json_object_object_add(o, "backend", json_object_new_string(info.backend));
        json_object_object_add(o, "adapter", json_object_new_string(info.adapter));
        json_object_object_add(o, "n_params", json_object_new_int64((int64_t)info.n_params));
        json_object_object_add(o, "weights_bytes", json_object_new_int64((int64_t)info.weights_bytes));
        json_object_object_add(o, "threads", json_object_new_int(info.n_threads));
        json_object_object_add(o, "pp_tokens", json_object_new_int((int)pp));
        json_object_object_add(o, "tg_tokens", json_object_new_int((int)tg));
        json_object_object_add(o, "ctx", json_object_new_int((int)ctx));
        json_object_object_add(o, "repeat", json_object_new_int((int)repeat));
        json_object_object_add(o, "pp_tokens_per_s", json_object_new_double(med.pp_tps));
        json_object_object_add(o, "tg_tokens_per_s", json_object_new_double(med.tg_tps));
        json_object_object_add(o, "ms_per_token_p50", json_object_new_double(med.p50));
        json_object_object_add(o, "ms_per_token_p90", json_object_new_double(med.p90));
        json_object_object_add(o, "ttft_ms", json_object_new_double(med.ttft));
        json_object_object_add(o, "load_ms", json_object_new_double(load_ms));
        json_object_object_add(o, "first_eval_ms", json_object_new_double(first_eval_ms));
        json_object_object_add(o, "load_to_first_token_ms", json_object_new_double(first_token_ms));
        json_object *pc = json_object_new_object();
        json_object_object_add(pc, "state", json_object_new_string(cache));
        json_object_object_add(pc, "dir", json_object_new_string(cache_dir));
        json_object_object_add(pc, "hits", json_object_new_int64((int64_t)first_stats.pipeline_cache_hits));
        json_object_object_add(pc, "misses", json_object_new_int64((int64_t)first_stats.pipeline_cache_misses));
        json_object_object_add(pc, "stores", json_object_new_int64((int64_t)first_stats.pipeline_cache_stores));
        json_object_object_add(o, "pipeline_cache", pc);
        json_object_object_add(o, "peak_rss_mb", json_object_new_double(rss_mb));
        json_object_object_add(o, "device_memory_mb", json_object_new_double(now.device_memory_bytes / 1048576.0));
        json_object_object_add(o, "gpu_memory_mb",
                               json_object_new_double(strcmp(info.backend, "cpu") ? now.device_memory_bytes / 1048576.0 : 0));
        json_object_object_add(o, "pipeline_compile_ms", json_object_new_double(now.pipeline_compile_ms));
        json_object_object_add(o, "bytes_per_token", json_object_new_int64((int64_t)bytes_per_token));
        json_object_object_add(o, "bandwidth_gbs", json_object_new_double(read_gbs));
        json_object_object_add(o, "decode_roofline_pct", json_object_new_double(roofline));
        json_object_object_add(o, "matmul_gflops", json_object_new_double(matmul_gflops));
        json_object_object_add(o, "pp_gflops", json_object_new_double(pp_gflops));
        json_object_object_add(o, "pp_matmul_pct", json_object_new_double(pp_pct));
        json_object_object_add(o, "matmul_type", json_object_new_string(info.matmul_type));
        json_object_object_add(o, "type_matmul_rows", json_object_new_int(measure_type ? type_rows : 0));
        json_object_object_add(o, "type_matmul_gflops", json_object_new_double(type_gflops));
        json_object_object_add(o, "pp_type_matmul_pct", json_object_new_double(pp_type_pct));
        json_object_object_add(o, "submits_per_token", json_object_new_double(per.submits / decode_steps));
        json_object_object_add(o, "dispatches_per_token", json_object_new_double(per.dispatches / decode_steps));
        json_object_object_add(o, "readback_bytes_per_token", json_object_new_double(per.readback_bytes / decode_steps));
        json_object_object_add(o, "upload_bytes_per_token", json_object_new_double(per.upload_bytes / decode_steps));
        json_object_object_add(o, "allocations_during_decode",
                               json_object_new_int64((int64_t)(per.buffers_created + per.bind_groups_created +
                                                               per.pipelines_created)));
        json_object *ra = json_object_new_array();
        for (int r = 0; r < R; r++) {
            json_object *e = json_object_new_object();
            json_object_object_add(e, "pp_tokens_per_s", json_object_new_double(runs[r].pp_tps));
            json_object_object_add(e, "tg_tokens_per_s", json_object_new_double(runs[r].tg_tps));
            json_object_object_add(e, "bandwidth_gbs", json_object_new_double(read_r[r]));
            json_object_object_add(e, "decode_roofline_pct", json_object_new_double(roof_r[r]));
            json_object_object_add(e, "matmul_gflops", json_object_new_double(matmul_r[r]));
            json_object_object_add(e, "pp_matmul_pct", json_object_new_double(pp_pct_r[r]));
            json_object_object_add(e, "type_matmul_gflops", json_object_new_double(type_r[r]));
            json_object_object_add(e, "pp_type_matmul_pct", json_object_new_double(pp_type_pct_r[r]));
            json_object_array_add(ra, e);
        }
        json_object_object_add(o, "runs", ra);
        if (profile) json_object_object_add(o, "kernels", cli_kernels_json(kt, n_kt < 64 ? n_kt : 64));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("model        %s (%s, %.2f M params, %.2f MiB of weights)\n", model_path, info.architecture,
               info.n_params / 1e6, info.weights_bytes / 1048576.0);
        printf("backend      %s%s%s", info.backend, *info.adapter ? " / " : "", info.adapter);
        if (!strcmp(info.backend, "cpu")) printf(" (%d threads)", info.n_threads);
        printf("\n");
        printf("load         %.1f ms\n", load_ms);
        printf("first token  %.1f ms from the load's start (first evaluation %.1f ms)\n", first_token_ms,
               first_eval_ms);
        if (strcmp(cache, "none"))
            printf("pipelines    cache %s at the first token: %llu hits, %llu misses, %llu stored%s%s\n", cache,
                   (unsigned long long)first_stats.pipeline_cache_hits,
                   (unsigned long long)first_stats.pipeline_cache_misses,
                   (unsigned long long)first_stats.pipeline_cache_stores, *cache_dir ? " in " : "", cache_dir);
        printf("pp%-9lld %.1f tokens/s\n", pp, med.pp_tps);
        printf("tg%-9lld %.1f tokens/s (%.3f ms/token p50, %.3f p90) at context %lld\n", tg, med.tg_tps, med.p50,
               med.p90, ctx);
        printf("ttft         %.2f ms\n", med.ttft);
        if (limits) {
            printf("device       %.1f GB/s read bandwidth, %.1f GFLOP/s f32 matmul (measured now)\n", read_gbs,
                   matmul_gflops);
            printf("decode       %.2f MB per token, %.1f%% of the measured bandwidth\n", bytes_per_token / 1e6, roofline);
            printf("prompt       %.1f GFLOP/s, %.1f%% of the measured matmul rate\n", pp_gflops, pp_pct);
            if (measure_type)
                printf("             %.1f%% of a %s matmul over %d rows (%.1f GFLOP/s, measured now)\n", pp_type_pct,
                       info.matmul_type, type_rows, type_gflops);
        }
        printf("peak RSS     %.1f MiB\n", rss_mb);
        printf("per token    %.2f submits, %.1f dispatches, %.0f bytes read back\n", per.submits / decode_steps,
               per.dispatches / decode_steps, per.readback_bytes / decode_steps);
        if (strcmp(info.backend, "cpu"))
            printf("gpu          %.1f MiB of device memory, %.0f ms compiling kernels\n",
                   now.device_memory_bytes / 1048576.0, now.pipeline_compile_ms);
        if (profile) {
            printf("\n%-28s %8s %12s %10s\n", "kernel", "calls", "total ms", "us/call");
            for (int i = 0; i < n_kt && i < 64; i++)
                printf("%-28s %8llu %12.3f %10.2f\n", kt[i].name, (unsigned long long)kt[i].calls, kt[i].total_ms,
                       kt[i].calls ? kt[i].total_ms * 1e3 / (double)kt[i].calls : 0.0);
        }
    }
done:
    free(ids);
    wgml_session_free(s);
    wgml_model_free(m);
    return rc;
}
