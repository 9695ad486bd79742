/*
 * cmd_bench_grammar.c - `wgml bench --grammar FILE` / `--json-schema FILE`:
 * what a grammar costs per generated token (wgml bench hands its arguments
 * here when either is among them).
 *
 * free:        a session's decode of -n tokens after the prompt, end of
 *              sequence ignored (as `wgml bench`'s tg).
 * constrained: the same session and sampling with the grammar: generations
 *              from the prompt until -n tokens were made in all (a grammar
 *              that ends starts again from the prompt).
 * Rates count decode steps only (the first token of each generation follows
 * the prompt's evaluation). The two alternate, --repeat times each; figures
 * are medians, ratio = constrained / free. A first constrained run, not
 * counted, makes the model's token table for grammars (once per model).
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    cli_sampling_opts s;
    const char *prompt;
    int n, repeat, json;
} bench_grammar_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, bench_grammar_opts, mo),
    CLI_STRING("--prompt", "-p", bench_grammar_opts, prompt, "TEXT", "the prompt (default: \"Here is the JSON:\")"),
    CLI_INT("-n", NULL, bench_grammar_opts, n, "N", 2, 1 << 16, "tokens generated each way (default 128)"),
    CLI_INT("--repeat", NULL, bench_grammar_opts, repeat, "R", 1, 64, "runs each way; figures are medians (default 3)"),
    CLI_FLAG("--json", NULL, bench_grammar_opts, json, "print one JSON object on stdout"),
    CLI_GROUP("Sampling (default: greedy):"),
    CLI_INCLUDE(cli_sampling_table, bench_grammar_opts, s),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml bench --grammar FILE | --json-schema FILE [options]\n",
    .about = "Measures decode speed with a grammar against decode without one, on one model.\n",
    .opts = options,
};

/* decode steps and their time: generations of the prompt until n tokens (grammar NULL: one, EOS ignored) */
static int run(wgml_session *s, const char *prompt, const wgml_sampler_params *sp, const wgml_grammar *g, int n,
               double *tps, int *gens) {
    int made = 0, steps = 0;
    double ms = 0;
    *gens = 0;
    while (made < n) {
        wgml_session_reset(s);
        wgml_generate_params gp = wgml_generate_default_params();
        gp.n_predict = n - made;
        gp.ignore_eos = !g;
        gp.sampler = *sp;
        gp.grammar = g;
        wgml_generate_result r;
        wgml_error err;
        if (wgml_generate(s, prompt, &gp, &r, &err)) return cli_fail_err(&err);
        if (r.n_generated == 0) return cli_fail("the grammar's generation made no token");
        made += r.n_generated;
        steps += r.n_generated - 1;
        ms += r.generate_ms;
        ++*gens;
    }
    *tps = steps > 0 && ms > 0 ? steps / (ms / 1e3) : 0;
    return CLI_OK;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int cmd_bench_grammar(int argc, char **argv) {
    bench_grammar_opts o = {.n = 128, .repeat = 3, .prompt = "Here is the JSON:", .s.sp = wgml_sampler_default_params()};
    o.s.sp.temperature = 0;
    int rc = cli_parse(&spec, &o, argc, argv, NULL);
    if (rc >= 0) return rc;
    if (!o.s.seed_set) o.s.sp.seed = 1;
    wgml_grammar *g;
    if (cli_sampling_grammar(&o.s, &g)) return CLI_FAIL;
    if (!g) return cli_fail("bench --grammar: give --grammar FILE or --json-schema FILE");
    wgml_model *m = cli_load_model(&o.mo, NULL);
    wgml_session *s = NULL;
    wgml_error err;
    if (!m || wgml_session_create(m, NULL, &s, &err)) {
        rc = m ? cli_fail_err(&err) : CLI_FAIL;
        wgml_model_free(m);
        wgml_grammar_free(g);
        return rc;
    }
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    double *tf = calloc((size_t)o.repeat, sizeof *tf), *tc = calloc((size_t)o.repeat, sizeof *tc), warm;
    int gens = 0, total_gens = 0;
    rc = tf && tc ? run(s, o.prompt, &o.s.sp, g, 8, &warm, &gens) : cli_fail("out of memory");
    for (int r = 0; r < o.repeat && !rc; r++) {
        rc = run(s, o.prompt, &o.s.sp, NULL, o.n, &tf[r], &gens);
        if (!rc) rc = run(s, o.prompt, &o.s.sp, g, o.n, &tc[r], &gens);
        total_gens += gens;
    }
    if (!rc) {
        const double f = median(tf, o.repeat), c = median(tc, o.repeat), ratio = f > 0 ? c / f : 0;
        if (o.json) {
            json_object *j = json_object_new_object();
            json_object_object_add(j, "model", json_object_new_string(*info.name ? info.name : info.architecture));
            json_object_object_add(j, "backend", json_object_new_string(info.backend));
            json_object_object_add(j, "threads", json_object_new_int(info.n_threads));
            json_object_object_add(j, "grammar", json_object_new_string(o.s.grammar ? o.s.grammar : o.s.schema));
            json_object_object_add(j, "tokens", json_object_new_int(o.n));
            json_object_object_add(j, "repeat", json_object_new_int(o.repeat));
            json_object_object_add(j, "temperature", json_object_new_double(o.s.sp.temperature));
            json_object_object_add(j, "tg_tokens_per_s", json_object_new_double(f));
            json_object_object_add(j, "grammar_tokens_per_s", json_object_new_double(c));
            json_object_object_add(j, "ratio", json_object_new_double(ratio));
            json_object_object_add(j, "grammar_generations", json_object_new_int(total_gens));
            printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
            json_object_put(j);
        } else {
            printf("model      %s (%s, %d threads)\n", *info.name ? info.name : info.architecture, info.backend,
                   info.n_threads);
            printf("free        %8.1f tok/s\n", f);
            printf("constrained %8.1f tok/s  (%d generations)\n", c, total_gens);
            printf("ratio       %8.3f\n", ratio);
        }
    }
    free(tf), free(tc);
    wgml_session_free(s);
    wgml_model_free(m);
    wgml_grammar_free(g);
    return rc;
}
