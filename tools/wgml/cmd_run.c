/*
 * cmd_run.c - `wgml run`: generate text from a prompt, streaming to stdout.
 *
 * stdout carries only the text: the prompt, then the continuation as it is
 * generated. Diagnostics and the closing statistics line go to stderr.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char *help =
    "usage: wgml run [options]\n"
    "Generates text with a model, streaming it to stdout.\n\n"
    CLI_MODEL_OPTS_HELP
    "  -p, --prompt TEXT     prompt (default: empty, start from BOS)\n"
    "  -f, --file FILE       read the prompt from a file\n"
    "  -n, --n-predict N     tokens to generate; -1 = until EOS or the context is full (default 128)\n"
    "  -c, --ctx N           context length (default: the model's, at most 4096)\n"
    "  --kv-type T           KV cache: auto, f16 or f32 (default auto: f16 where supported)\n"
    "  --temp T              temperature; 0 = greedy (default 0.8)\n"
    "  --top-k K             keep the K most likely tokens; 0 = off (default 40)\n"
    "  --top-p P             nucleus sampling threshold; 1 = off (default 0.95)\n"
    "  --min-p P             drop tokens below P x the best one's probability (default 0.05)\n"
    "  --repeat-penalty R    penalty for recently seen tokens; 1 = off (default 1)\n"
    "  --repeat-last-n N     how many recent tokens the penalty considers (default 64)\n"
    "  --seed S              random seed (default: from the clock; printed)\n"
    "  --no-bos              do not prepend the BOS token\n";

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
    cli_model_opts mo = {0};
    const char *prompt = "", *prompt_file = NULL;
    wgml_generate_params gp = wgml_generate_default_params();
    wgml_session_params sp = wgml_session_default_params();
    int seed_set = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        long long n;
        double d;
        int r = cli_model_option(argc, argv, &i, &mo);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(v = cli_value(argc, argv, &i))) return CLI_USAGE;
            prompt = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(v = cli_value(argc, argv, &i))) return CLI_USAGE;
            prompt_file = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, -1, 1 << 30, &n)) return CLI_USAGE;
            gp.n_predict = (int)n;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 1 << 20, &n)) return CLI_USAGE;
            sp.n_ctx = (int)n;
        } else if (!strcmp(a, "--kv-type")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_kv_type(v, &sp.kv_type)) return CLI_USAGE;
        } else if (!strcmp(a, "--temp")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_float(a, v, 0, 100, &d)) return CLI_USAGE;
            gp.sampler.temperature = (float)d;
        } else if (!strcmp(a, "--top-k")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 0, 1 << 30, &n)) return CLI_USAGE;
            gp.sampler.top_k = (int)n;
        } else if (!strcmp(a, "--top-p")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_float(a, v, 1e-9, 1, &d)) return CLI_USAGE;
            gp.sampler.top_p = (float)d;
        } else if (!strcmp(a, "--min-p")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_float(a, v, 0, 1, &d)) return CLI_USAGE;
            gp.sampler.min_p = (float)d;
        } else if (!strcmp(a, "--repeat-penalty")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_float(a, v, 1e-3, 100, &d)) return CLI_USAGE;
            gp.sampler.repeat_penalty = (float)d;
        } else if (!strcmp(a, "--repeat-last-n")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 0, 1 << 20, &n)) return CLI_USAGE;
            gp.sampler.repeat_last_n = (int)n;
        } else if (!strcmp(a, "--seed")) {
            if (!(v = cli_value(argc, argv, &i))) return CLI_USAGE;
            char *end;
            unsigned long long s = strtoull(v, &end, 10);
            if (!*v || *end || *v == '-') return cli_usage_error("--seed expects a non-negative integer, got '%s'", v);
            gp.sampler.seed = s;
            seed_set = 1;
        } else if (!strcmp(a, "--no-bos")) {
            gp.add_bos = 0;
        } else {
            return cli_usage_error("unknown option '%s'", a);
        }
    }
    char *file_prompt = NULL;
    if (prompt_file) {
        size_t len = 0;
        file_prompt = read_prompt_file(prompt_file, &len);
        if (!file_prompt) return cli_fail("cannot read prompt file '%s'", prompt_file);
        /* the prompt is a C string: a NUL would silently cut it short */
        const char *nul = memchr(file_prompt, 0, len);
        if (nul) {
            int rc = cli_fail("prompt file '%s' contains a NUL byte at offset %zu; a prompt is text", prompt_file,
                              (size_t)(nul - file_prompt));
            free(file_prompt);
            return rc;
        }
        prompt = file_prompt;
    }
    if (!seed_set) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        gp.sampler.seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
        if (gp.sampler.temperature > 0)
            fprintf(stderr, "wgml: seed %llu\n", (unsigned long long)gp.sampler.seed);
    }

    wgml_model *model = cli_load_model(&mo, NULL);
    if (!model) {
        free(file_prompt);
        return CLI_FAIL;
    }
    wgml_model_info info;
    wgml_model_get_info(model, &info);
    fprintf(stderr, "wgml: %s (%s, %d layers) on %s%s%s\n", *info.name ? info.name : info.architecture,
            info.architecture, info.n_layer, info.backend, *info.adapter ? " / " : "", info.adapter);
    wgml_session *s = NULL;
    wgml_error err;
    int rc = CLI_OK;
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
    free(file_prompt);
    return rc;
}
