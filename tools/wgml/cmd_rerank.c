/*
 * cmd_rerank.c - `wgml rerank -m MODEL -q QUERY (-f DOCS | DOC...)`: scores
 * documents against a query with a cross-encoder (wgml_rerank): one line per
 * document in input order, "SCORE<TAB>DOC", or with --json the results
 * sorted by score, highest first.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    const char *file, *query;
    int json;
} rerank_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, rerank_opts, mo),
    CLI_STRING("--query", "-q", rerank_opts, query, "TEXT", "the query"),
    CLI_STRING("--file", "-f", rerank_opts, file, "FILE", "documents, one per line"),
    CLI_FLAG("--json", NULL, rerank_opts, json,
             "print {\"object\": \"list\", \"results\": [{\"index\", \"relevance_score\",\n"
             "\"document\"}...]}, highest score first"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml rerank -m MODEL -q QUERY [options] (-f FILE | DOC...)\n",
    .about = "Scores each document's relevance to the query with a reranker (a cross-encoder:\n"
             "pooling 'rank'). Prints \"SCORE<TAB>DOC\" per document in input order; the score\n"
             "is the model's logit (higher is more relevant).\n",
    .opts = options,
    .max_args = -1,
};

static const float *sort_scores;
static int by_score(const void *a, const void *b) {
    float x = sort_scores[*(const int *)a], y = sort_scores[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

int cmd_rerank(int argc, char **argv) {
    rerank_opts opt = {0};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    const char *query = opt.query;
    if (!query) return cli_usage_error("give the query with -q QUERY");
    char **lines;
    const char *const *docs;
    int n = cli_items((const char **)argv, n_args, opt.file, "documents", &docs, &lines);
    if (n < 0) return -n;
    rc = CLI_FAIL;
    float *scores = malloc(((size_t)n + 1) * sizeof *scores);
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    wgml_model *model = scores && order ? cli_load_model(&opt.mo, NULL) : NULL;
    wgml_error err;
    if (!scores || !order) rc = cli_fail("out of memory");
    if (!model) goto done;
    if (wgml_rerank(model, query, docs, n, scores, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    if (opt.json) {
        for (int i = 0; i < n; i++) order[i] = i;
        sort_scores = scores;
        qsort(order, (size_t)n, sizeof *order, by_score);
        json_object *o = json_object_new_object(), *res = json_object_new_array();
        json_object_object_add(o, "object", json_object_new_string("list"));
        for (int k = 0; k < n; k++) {
            json_object *e = json_object_new_object();
            json_object_object_add(e, "index", json_object_new_int(order[k]));
            json_object_object_add(e, "relevance_score", json_object_new_double(scores[order[k]]));
            json_object_object_add(e, "document", json_object_new_string(docs[order[k]]));
            json_object_array_add(res, e);
        }
        json_object_object_add(o, "results", res);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else {
        for (int i = 0; i < n; i++) printf("%.9g\t%s\n", scores[i], docs[i]);
    }
    rc = fflush(stdout) == 0 ? CLI_OK : cli_fail("writing the output failed");
done:
    free(scores);
    free(order);
    wgml_model_free(model);
    cli_lines_free(lines);
    return rc;
}
