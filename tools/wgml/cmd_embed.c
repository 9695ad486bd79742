/*
 * cmd_embed.c - `wgml embed -m MODEL [TEXT... | -f FILE]`: embedding vectors
 * of texts with a BERT-family model or the text tower of a CLIP or SigLIP
 * model (wgml_embed), or with --image of image
 * files (JPEG, PNG) with a CLIP, SigLIP or ViT vision tower
 * (wgml_embed_images), one vector per line, or an OpenAI-shaped JSON object
 * with --json.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "image_file.h"

typedef struct {
    cli_model_opts mo;
    wgml_embed_params ep;
    const char *file;
    int json, image, text;
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
    CLI_FLAG("--image", NULL, embed_opts, image, "the arguments (or -f's lines) are image files (JPEG, PNG)"),
    CLI_FLAG("--text", NULL, embed_opts, text, "the arguments are texts (the default)"),
    CLI_FLAG("--json", NULL, embed_opts, json, "print {\"object\": \"list\", \"data\": [...], \"usage\": ...}"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml embed -m MODEL [options] ([--text] TEXT... | --image IMAGE... | -f FILE)\n",
    .about = "Prints the embedding of each text (or image, with --image): one vector per line, values\n"
             "separated by spaces, or with --json an object shaped as OpenAI's embeddings response.\n",
    .opts = options,
    .max_args = -1,
};

/* Decodes n image files into imgs (views) and files (their pixels); 0, or CLI_FAIL with a message. */
static int read_images(const char *const *paths, int n, cli_image *files, wgml_image *imgs) {
    for (int i = 0; i < n; i++) {
        char msg[512];
        if (cli_image_read_file(paths[i], 0, &files[i], msg, sizeof msg)) return cli_fail("%s", msg);
        imgs[i] = cli_image_view(&files[i]);
    }
    return 0;
}

/* `wgml embed --image`: a vector per image file. */
static int embed_images(const embed_opts *opt, const char *const *paths, int n) {
    int rc = CLI_FAIL;
    float *vec = NULL;
    cli_image *files = calloc((size_t)n + 1, sizeof *files);
    wgml_image *imgs = calloc((size_t)n + 1, sizeof *imgs);
    wgml_model *model = NULL;
    if (!files || !imgs) {
        rc = cli_fail("out of memory for %d images", n);
        goto done;
    }
    if ((rc = read_images(paths, n, files, imgs))) goto done;
    rc = CLI_FAIL;
    if (!(model = cli_load_model(&opt->mo, NULL))) goto done;
    wgml_model_info info;
    wgml_model_get_info(model, &info);
    if (!(info.tasks & WGML_TASK_EMBED_IMAGE)) {
        rc = cli_fail("%s: a %s model (%s) does not embed images; use a CLIP, SigLIP or ViT model",
                      opt->mo.model ? opt->mo.model : "model", info.family, info.architecture);
        goto done;
    }
    wgml_embed_params ep = opt->ep;
    int dim = wgml_embed_dim(model, &ep);
    if (dim < 0) {
        rc = cli_usage_error("--dimensions %d: the model's image vectors have other sizes", ep.dimensions);
        goto done;
    }
    if (!(vec = malloc(((size_t)n + 1) * (size_t)dim * sizeof *vec))) {
        rc = cli_fail("out of memory for %d vectors", n);
        goto done;
    }
    wgml_error err;
    if (wgml_embed_images(model, imgs, n, &ep, vec, dim, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    if (opt->json) {
        json_object *o = cli_embeddings_json(vec, n, dim, *info.name ? info.name : info.architecture, 0, 0);
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
    for (int i = 0; files && i < n; i++) cli_image_free(&files[i]);
    free(files);
    free(imgs);
    free(vec);
    wgml_model_free(model);
    return rc;
}

int cmd_embed(int argc, char **argv) {
    embed_opts opt = {.ep = wgml_embed_default_params()};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    if (opt.image && opt.text) return cli_usage_error("--image and --text: one kind of input at a time");
    const cli_model_opts mo = opt.mo;
    wgml_embed_params ep = opt.ep;
    char **lines;
    const char *const *texts;
    int n = cli_items((const char **)argv, n_args, opt.file, opt.image ? "images" : "texts", &texts, &lines);
    if (n < 0) return -n;
    if (opt.image) {
        rc = embed_images(&opt, texts, n);
        cli_lines_free(lines);
        return rc;
    }
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
            rc = cli_fail("%s: a %s model (%s) does not embed text; use a BERT-family model, or a CLIP or SigLIP "
                          "model with its text tower", mo.model ? mo.model : "model", info.family, info.architecture);
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
