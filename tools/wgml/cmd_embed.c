/*
 * cmd_embed.c - `wgml embed -m MODEL [TEXT... | -f FILE]`: embedding vectors
 * of texts with a BERT-family model (wgml_embed), one vector per line, or
 * an OpenAI-shaped JSON object with --json.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *help =
    "usage: wgml embed -m MODEL [options] (TEXT... | -f FILE)\n"
    "Prints the embedding of each text: one vector per line, values separated by spaces,\n"
    "or with --json an object shaped as OpenAI's embeddings response.\n\n"
    CLI_MODEL_OPTS_HELP
    "  -f, --file FILE       texts, one per line\n"
    "  --pooling P           mean, cls or last (default: the model's)\n"
    "  --normalize N         l2 or none (default l2)\n"
    "  --dimensions N        keep the first N values (Matryoshka models), then normalize\n"
    "  --truncate            cut texts longer than the model's context (default: an error)\n"
    "  --batch N             most tokens per step, texts packed together (default 512 on the CPU,\n"
    "                        2048 on a GPU)\n"
    "  --json                print {\"object\": \"list\", \"data\": [...], \"usage\": ...}\n";

static int parse_pooling(const char *s, wgml_pooling *out) {
    if (!strcmp(s, "mean")) *out = WGML_POOLING_MEAN;
    else if (!strcmp(s, "cls") || !strcmp(s, "first")) *out = WGML_POOLING_CLS;
    else if (!strcmp(s, "last")) *out = WGML_POOLING_LAST;
    else return cli_usage_error("--pooling: '%s' is not mean, cls or last", s), 0;
    return 1;
}

int cmd_embed(int argc, char **argv) {
    cli_model_opts mo = {0};
    wgml_embed_params ep = wgml_embed_default_params();
    const char *file = NULL;
    int json = 0, n_args = 0;
    const char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return cli_fail("out of memory");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        long long n;
        int r = cli_model_option(argc, argv, &i, &mo);
        if (r < 0) goto usage;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            free(args);
            return CLI_OK;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value(argc, argv, &i))) goto usage;
        } else if (!strcmp(a, "--pooling")) {
            if (!(v = cli_value(argc, argv, &i)) || !parse_pooling(v, &ep.pooling)) goto usage;
        } else if (!strcmp(a, "--normalize")) {
            if (!(v = cli_value(argc, argv, &i))) goto usage;
            if (!strcmp(v, "l2")) ep.normalize = WGML_NORMALIZE_L2;
            else if (!strcmp(v, "none")) ep.normalize = WGML_NORMALIZE_NONE;
            else {
                cli_usage_error("--normalize: '%s' is not l2 or none", v);
                goto usage;
            }
        } else if (!strcmp(a, "--dimensions")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 1 << 20, &n)) goto usage;
            ep.dimensions = (int)n;
        } else if (!strcmp(a, "--batch")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 1 << 20, &n)) goto usage;
            ep.n_batch = (int)n;
        } else if (!strcmp(a, "--truncate")) {
            ep.truncate = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (a[0] == '-' && a[1]) {
            cli_usage_error("unknown option '%s'", a);
            goto usage;
        } else {
            args[n_args++] = a;
        }
    }
    char **lines;
    const char *const *texts;
    int n = cli_items(args, n_args, file, "texts", &texts, &lines);
    if (n < 0) {
        free(args);
        return -n;
    }
    int rc = CLI_FAIL;
    float *vec = NULL;
    wgml_model *model = cli_load_model(&mo, NULL);
    if (!model) goto done;
    wgml_error err;
    int dim = wgml_embed_dim(model, &ep);
    if (dim < 0) {
        wgml_model_info info;
        wgml_model_get_info(model, &info);
        if (!(info.tasks & WGML_TASK_EMBED) && !(info.tasks & WGML_TASK_RERANK))
            rc = cli_fail("%s: a %s model (%s) does not embed text; use a BERT-family model", mo.model ? mo.model : "model",
                          info.family, info.architecture);
        else
            rc = cli_usage_error("--dimensions %d: the model's vectors have %d values", ep.dimensions, info.n_embd);
        goto done;
    }
    if (!(vec = malloc(((size_t)n + 1) * (size_t)dim * sizeof *vec))) {
        rc = cli_fail("out of memory for %d vectors", n);
        goto done;
    }
    if (wgml_embed(model, texts, n, &ep, vec, dim, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    if (json) {
        long long tokens = 0;
        for (int i = 0; i < n; i++) {
            int k = wgml_tokenize(model, texts[i], strlen(texts[i]), 1, NULL, 0, &err);
            tokens += k > 0 ? k : 0;
        }
        wgml_model_info info;
        wgml_model_get_info(model, &info);
        json_object *o = cli_embeddings_json(vec, n, dim, *info.name ? info.name : info.architecture, tokens, 0);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else {
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < dim; j++) printf(j ? " %.9g" : "%.9g", vec[(size_t)i * dim + j]);
            putchar('\n');
        }
    }
    rc = fflush(stdout) == 0 ? CLI_OK : cli_fail("writing the output failed");
done:
    free(vec);
    wgml_model_free(model);
    cli_lines_free(lines);
    free(args);
    return rc;
usage:
    free(args);
    return CLI_USAGE;
}
