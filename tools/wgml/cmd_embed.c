/*
 * cmd_embed.c - `wgml embed -m MODEL [TEXT... | -f FILE]`: embedding vectors
 * of texts with a BERT-family model (wgml_embed), one vector per line, or
 * an OpenAI-shaped JSON object with --json.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    wgml_embed_params ep;
    const char *file;
    int json;
} embed_opts;

static const cli_choice poolings[] = {{"mean", WGML_POOLING_MEAN},
                                      {"cls", WGML_POOLING_CLS},
                                      {"first", WGML_POOLING_CLS},
                                      {"last", WGML_POOLING_LAST},
                                      {NULL, 0}};
static const cli_choice normalizations[] = {{"l2", WGML_NORMALIZE_L2}, {"none", WGML_NORMALIZE_NONE}, {NULL, 0}};

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, embed_opts, mo),
    CLI_STRING("--file", "-f", embed_opts, file, "FILE", "texts, one per line"),
    CLI_CHOICE("--pooling", NULL, embed_opts, ep.pooling, "P", poolings, "mean, cls or last (default: the model's)"),
    CLI_CHOICE("--normalize", NULL, embed_opts, ep.normalize, "N", normalizations, "l2 or none (default l2)"),
    CLI_INT("--dimensions", NULL, embed_opts, ep.dimensions, "N", 1, 1 << 20,
            "keep the first N values (Matryoshka models), then normalize"),
    CLI_FLAG("--truncate", NULL, embed_opts, ep.truncate,
             "cut texts longer than the model's context (default: an error)"),
    CLI_INT("--batch", NULL, embed_opts, ep.n_batch, "N", 1, 1 << 20,
            "most tokens per step, texts packed together (default 512 on the CPU,\n2048 on a GPU)"),
    CLI_FLAG("--json", NULL, embed_opts, json, "print {\"object\": \"list\", \"data\": [...], \"usage\": ...}"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml embed -m MODEL [options] (TEXT... | -f FILE)\n",
    .about = "Prints the embedding of each text: one vector per line, values separated by spaces,\n"
             "or with --json an object shaped as OpenAI's embeddings response.\n",
    .opts = options,
    .max_args = -1,
};

int cmd_embed(int argc, char **argv) {
    embed_opts opt = {.ep = wgml_embed_default_params()};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    wgml_embed_params ep = opt.ep;
    char **lines;
    const char *const *texts;
    int n = cli_items((const char **)argv, n_args, opt.file, "texts", &texts, &lines);
    if (n < 0) return -n;
    rc = CLI_FAIL;
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
    if (opt.json) {
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
    return rc;
}
