/*
 * cmd_classify.c - `wgml classify -m MODEL --image IMAGE... [--labels TEXT...]`:
 * the labels an image classifier (a ViT with its head, wgml_classify_images)
 * gives each image file, or with --labels the zero-shot scores of the label
 * texts by a model with a text tower (CLIP, SigLIP: wgml_zero_shot_classify):
 * per image its path, then its top N labels as "PROB<TAB>LABEL", or with
 * --json one object for all.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "image_file.h"

typedef struct {
    cli_model_opts mo;
    const char *file;
    int json, image, top;
} classify_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, classify_opts, mo),
    CLI_STRING("--file", "-f", classify_opts, file, "FILE", "image files, one per line"),
    CLI_FLAG("--image", NULL, classify_opts, image, "the arguments are image files (JPEG, PNG; the default)"),
    CLI_INT("--top", NULL, classify_opts, top, "N", 1, 1 << 20, "labels printed per image (default 5)"),
    CLI_FLAG("--json", NULL, classify_opts, json,
             "print {\"object\": \"list\", \"data\": [{\"index\", \"image\", \"labels\": [{\"label\",\n"
             "\"index\", \"score\"}...]}...]}, most probable first"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml classify -m MODEL [options] (--image IMAGE... | -f FILE) [--labels TEXT...]\n",
    .about = "Classifies images with an image classifier (a ViT with a classifier head): for each\n"
             "image its most probable labels with their softmax probabilities. With --labels (the\n"
             "rest of the arguments up to the next option are label texts, e.g. \"a photo of a cat\")\n"
             "a CLIP or SigLIP model scores each image against the texts (zero-shot): CLIP's softmax\n"
             "over the labels, SigLIP's sigmoid of each label on its own.\n",
    .opts = options,
    .max_args = -1,
};

/* Label j's name: the given text, or the classifier's. */
static const char *label_of(const wgml_model *m, const char **texts, int n_texts, int j) {
    return n_texts > 0 ? texts[j] : wgml_model_label(m, j);
}

static const float *sort_probs;
static int by_prob(const void *a, const void *b) {
    float x = sort_probs[*(const int *)a], y = sort_probs[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* Takes `--labels TEXT...` (up to the next option or the end) out of argv; returns the new argc,
 * the labels in *labels (pointers into argv) and their count in *n_labels (-1: no --labels). */
static int take_labels(int argc, char **argv, const char ***labels, int *n_labels) {
    *n_labels = -1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--labels")) continue;
        int j = i + 1;
        while (j < argc && !(argv[j][0] == '-' && argv[j][1])) j++;
        static const char *store[4096];
        const int k = j - i - 1 < 4096 ? j - i - 1 : 4096;
        for (int q = 0; q < k; q++) store[q] = argv[i + 1 + q];
        *labels = store;
        *n_labels = j - i - 1;
        memmove(argv + i, argv + j, (size_t)(argc - j) * sizeof *argv);
        return argc - (j - i);
    }
    return argc;
}

int cmd_classify(int argc, char **argv) {
    classify_opts opt = {.top = 5};
    const char **label_texts = NULL;
    int n_texts;
    argc = take_labels(argc, argv, &label_texts, &n_texts);
    if (n_texts == 0) return cli_usage_error("--labels: give the label texts after it");
    if (n_texts > 4096) return cli_usage_error("--labels: %d labels (4096 at most)", n_texts);
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    char **lines;
    const char *const *paths;
    int n = cli_items((const char **)argv, n_args, opt.file, "images", &paths, &lines);
    if (n < 0) return -n;
    rc = CLI_FAIL;
    float *probs = NULL;
    int *order = NULL;
    cli_image *files = calloc((size_t)n + 1, sizeof *files);
    wgml_image *imgs = calloc((size_t)n + 1, sizeof *imgs);
    wgml_model *model = NULL;
    if (!files || !imgs) {
        rc = cli_fail("out of memory for %d images", n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char msg[512];
        if (cli_image_read_file(paths[i], 0, &files[i], msg, sizeof msg)) {
            rc = cli_fail("%s", msg);
            goto done;
        }
        imgs[i] = cli_image_view(&files[i]);
    }
    if (!(model = cli_load_model(&opt.mo, NULL))) goto done;
    const int L = n_texts > 0 ? n_texts : wgml_model_n_labels(model);
    if (!L) {
        wgml_model_info info;
        wgml_model_get_info(model, &info);
        rc = cli_fail("%s: a %s model (%s) has no classifier head; use a ViT image classifier, or give --labels "
                      "to a CLIP or SigLIP model",
                      opt.mo.model ? opt.mo.model : "model", info.family, info.architecture);
        goto done;
    }
    probs = malloc(((size_t)n * (size_t)L + 1) * sizeof *probs);
    order = malloc(((size_t)L + 1) * sizeof *order);
    if (!probs || !order) {
        rc = cli_fail("out of memory for %d images' scores", n);
        goto done;
    }
    wgml_error err;
    if (n_texts > 0 ? wgml_zero_shot_classify(model, imgs, n, label_texts, L, probs, &err)
                    : wgml_classify_images(model, imgs, n, probs, L, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    const int top = opt.top < L ? opt.top : L;
    json_object *o = opt.json ? json_object_new_object() : NULL, *data = opt.json ? json_object_new_array() : NULL;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < L; j++) order[j] = j;
        sort_probs = probs + (size_t)i * (size_t)L;
        qsort(order, (size_t)L, sizeof *order, by_prob);
        if (opt.json) {
            json_object *e = json_object_new_object(), *labels = json_object_new_array();
            json_object_object_add(e, "index", json_object_new_int(i));
            json_object_object_add(e, "image", json_object_new_string(paths[i]));
            for (int k = 0; k < top; k++) {
                json_object *l = json_object_new_object();
                const char *name = label_of(model, label_texts, n_texts, order[k]);
                json_object_object_add(l, "label", json_object_new_string(name));
                json_object_object_add(l, "index", json_object_new_int(order[k]));
                json_object_object_add(l, "score", json_object_new_double(sort_probs[order[k]]));
                json_object_array_add(labels, l);
            }
            json_object_object_add(e, "labels", labels);
            json_object_array_add(data, e);
        } else {
            printf("%s\n", paths[i]);
            for (int k = 0; k < top; k++)
                printf("%.6f\t%s\n", sort_probs[order[k]], label_of(model, label_texts, n_texts, order[k]));
        }
    }
    if (opt.json) {
        json_object_object_add(o, "object", json_object_new_string("list"));
        json_object_object_add(o, "data", data);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    }
    rc = fflush(stdout) == 0 ? CLI_OK : cli_fail("writing the output failed");
done:
    for (int i = 0; files && i < n; i++) cli_image_free(&files[i]);
    free(files);
    free(imgs);
    free(probs);
    free(order);
    wgml_model_free(model);
    cli_lines_free(lines);
    return rc;
}
