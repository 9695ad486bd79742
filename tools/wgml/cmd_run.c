/*
 * cmd_run.c - `wgml run`: generate text from a prompt, streaming to stdout.
 *
 * stdout carries only the text: the prompt, then the continuation as it is
 * generated. Diagnostics and the closing statistics line go to stderr.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    const char *prompt, *file;
    wgml_generate_params gp;
    wgml_session_params sp;
    cli_sampling_opts s;
} run_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, run_opts, mo),
    CLI_GROUP("Generation:"),
    CLI_STRING("--prompt", "-p", run_opts, prompt, "TEXT", "prompt (default: empty, start from BOS)"),
    CLI_STRING("--file", "-f", run_opts, file, "FILE", "read the prompt from a file"),
    CLI_INT("--n-predict", "-n", run_opts, gp.n_predict, "N", -1, 1 << 30,
            "tokens to generate; -1 = until EOS or the context is full (default 128)"),
    CLI_INT("--ctx", "-c", run_opts, sp.n_ctx, "N", 1, 1 << 20, "context length (default: the model's, at most 4096)"),
    CLI_KV_TYPE(run_opts, sp.kv_type),
    CLI_FLAG_SET("--no-bos", NULL, run_opts, gp.add_bos, 0, "do not prepend the BOS token"),
    CLI_GROUP("Sampling:"),
    CLI_INCLUDE(cli_sampling_table, run_opts, s),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml run [options]\n",
    .about = "Generates text with a model, streaming it to stdout.\n",
    .opts = options,
    .more = "\nWithout --seed the seed comes from the clock and is printed (with --temp above 0).\n",
};

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    (void)user;
    (void)token;
    cli_out(text, len);
    return 0;
}

/* The whole file, NUL-terminated; *len is its size. */
static char *read_prompt_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            } else {
                b = nb;
            }
        }
    }
    fclose(f);
    if (b) b[n] = '\0';
    *len = n;
    return b;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {.prompt = "",
                  .gp = wgml_generate_default_params(),
                  .sp = wgml_session_default_params(),
                  .s.sp = wgml_sampler_default_params()};
    int rc = cli_parse(&spec, &o, argc, argv, NULL);
    if (rc >= 0) return rc;
    const char *prompt = o.prompt, *prompt_file = o.file;
    wgml_generate_params gp = o.gp;
    wgml_session_params sp = o.sp;
    char *file_prompt = NULL;
    if (prompt_file) {
        size_t len = 0;
        file_prompt = read_prompt_file(prompt_file, &len);
        if (!file_prompt) return cli_fail("cannot read prompt file '%s'", prompt_file);
        /* the prompt is a C string: a NUL would silently cut it short */
        const char *nul = memchr(file_prompt, 0, len);
        if (nul) {
            rc = cli_fail("prompt file '%s' contains a NUL byte at offset %zu; a prompt is text", prompt_file,
                          (size_t)(nul - file_prompt));
            free(file_prompt);
            return rc;
        }
        prompt = file_prompt;
    }
    if (cli_sampling_seed(&o.s) && o.s.sp.temperature > 0)
        fprintf(stderr, "wgml: seed %llu\n", (unsigned long long)o.s.sp.seed);
    gp.sampler = o.s.sp;
    wgml_grammar *grammar = NULL;
    if (cli_sampling_grammar(&o.s, &grammar)) {
        free(file_prompt);
        return CLI_FAIL;
    }
    gp.grammar = grammar;

    wgml_model *model = cli_load_model(&o.mo, NULL);
    if (!model) {
        wgml_grammar_free(grammar);
        free(file_prompt);
        return CLI_FAIL;
    }
    wgml_model_info info;
    wgml_model_get_info(model, &info);
    fprintf(stderr, "wgml: %s (%s, %d layers) on %s%s%s\n", *info.name ? info.name : info.architecture,
            info.architecture, info.n_layer, info.backend, *info.adapter ? " / " : "", info.adapter);
    wgml_session *s = NULL;
    wgml_error err;
    rc = CLI_OK;
    if (wgml_session_create(model, &sp, &s, &err)) {
        rc = cli_fail_err(&err);
    } else {
        gp.on_token = on_token;
        wgml_generate_result res;
        cli_out(prompt, strlen(prompt));
        if (wgml_generate(s, prompt, &gp, &res, &err)) {
            cli_out("\n", 1);
            rc = cli_fail_err(&err);
        } else {
            cli_out("\n", 1);
            double tg = res.n_generated > 1 ? (res.n_generated - 1) / (res.generate_ms / 1e3) : 0;
            double pp = res.prompt_ms > 0 ? res.n_prompt / (res.prompt_ms / 1e3) : 0;
            cli_line_start();
            fprintf(stderr,
                    "wgml: prompt %d tokens (%.1f tok/s), generated %d tokens (%.1f tok/s), first token %.1f ms; "
                    "stop: %s\n",
                    res.n_prompt, pp, res.n_generated, tg, res.ttft_ms, wgml_stop_reason_name(res.stop));
        }
    }
    wgml_session_free(s);
    wgml_model_free(model);
    wgml_grammar_free(grammar);
    free(file_prompt);
    return rc;
}
