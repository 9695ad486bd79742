/*
 * serve_embed.c - POST /v1/embeddings on the server's embedding model.
 */
#include <civetweb.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

/* POST /v1/embeddings: input (a string or an array of up to 2048 non-empty strings, each
 * also as {"text": ...}; an array with {"image": ...} items, and texts beside them for a CLIP
 * or SigLIP model, goes to serve_ep_embed_images),
 * encoding_format ("float" or "base64": the float32 bytes, as OpenAI's client asks by
 * default), dimensions (keep the first N values, then normalize: Matryoshka models);
 * model and user are ignored. Runs in this HTTP thread, one request at a time on the
 * model (embed_mu): an embedding is one forward pass, with no stream to interleave. */
int serve_ep_embeddings(struct mg_connection *c, serve_server *s, json_object *req) {
    json_object *input = NULL, *v;
    char msg[256];
    int kind = json_object_object_get_ex(req, "input", &input) ? serve_input_kind(input, msg, sizeof msg) : 0;
    if (kind < 0) return serve_send_error(c, 400, "input", NULL, "%s", msg);
    if (kind == 1) return serve_ep_embed_images(c, s, req); /* {"image": ...} items: serve_vision.c */
    serve_model buf;
    const serve_model *sm = serve_model_for(s, WGML_TASK_EMBED, &buf), *vm;
    if (!sm && (vm = serve_model_for(s, WGML_TASK_EMBED_IMAGE, &buf)))
        return serve_send_error(c, 400, "input", "model_not_supported",
                                "%s: this model embeds images only: send 'input' as [{\"image\": "
                                "\"data:image/png;base64,...\"}, ...]",
                                vm->id);
    if (!sm) return serve_no_task(c, s, "embed text");
    if (!input)
        return serve_send_error(c, 400, "input", NULL, "'input' is required: a string or an array of strings");
    int n = json_object_is_type(input, json_type_array) ? (int)json_object_array_length(input) : 1;
    if (n < 1 || n > 2048) return serve_send_error(c, 400, "input", NULL, "'input' must hold 1 to 2048 texts, not %d", n);
    if (serve_has_nul(input, 0)) return serve_send_error(c, 400, "input", NULL, "'input' cannot contain U+0000");
    const char **texts = calloc((size_t)n, sizeof *texts);
    if (!texts) return serve_send_error(c, 500, NULL, NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        json_object *t = json_object_is_type(input, json_type_array) ? json_object_array_get_idx(input, (size_t)i) : input;
        const char *text = serve_input_text(t);
        if (!text || !*text) {
            free(texts);
            return serve_send_error(c, 400, "input", NULL,
                              "'input' must be a non-empty string or an array of them (token arrays are not taken)");
        }
        texts[i] = text;
    }
    int base64 = 0;
    wgml_embed_params ep = wgml_embed_default_params();
    if (json_object_object_get_ex(req, "encoding_format", &v) && !json_object_is_type(v, json_type_null)) {
        const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (strcmp(f, "float") && strcmp(f, "base64")) {
            free(texts);
            return serve_send_error(c, 400, "encoding_format", NULL, "'encoding_format' must be \"float\" or \"base64\"");
        }
        base64 = !strcmp(f, "base64");
    }
    if (json_object_object_get_ex(req, "dimensions", &v) && !json_object_is_type(v, json_type_null)) {
        int64_t d = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
        const int full = wgml_embed_dim(sm->model, NULL); /* the vectors' size (a CLIP's projection, not its width) */
        if (d < 1 || d > full) {
            free(texts);
            return serve_send_error(c, 400, "dimensions", NULL, "'dimensions' must be an integer from 1 to %d", full);
        }
        ep.dimensions = (int)d;
    }
    int dim = wgml_embed_dim(sm->model, &ep);
    float *vec = dim > 0 ? malloc((size_t)n * (size_t)dim * sizeof *vec) : NULL;
    if (!vec) {
        free(texts);
        return serve_send_error(c, 500, NULL, NULL, "out of memory");
    }
    wgml_error err;
    long long tokens = 0;
    pthread_mutex_lock(&s->embed_mu);
    wgml_status st = wgml_embed(sm->model, texts, n, &ep, vec, dim, &err);
    for (int i = 0; !st && i < n; i++) {
        int k = wgml_tokenize(sm->model, texts[i], strlen(texts[i]), 1, NULL, 0, &err);
        tokens += k > 0 ? k : 0;
    }
    pthread_mutex_unlock(&s->embed_mu);
    int status;
    if (st == WGML_ERR_CONTEXT_FULL)
        status = serve_send_error(c, 400, "input", "context_length_exceeded", "%s", err.message);
    else if (st == WGML_ERR_INVALID_ARGUMENT || st == WGML_ERR_TOKENIZER)
        status = serve_send_error(c, 400, "input", NULL, "%s", err.message);
    else if (st)
        status = serve_send_error(c, 500, NULL, NULL, "embedding failed: %s", err.message);
    else
        status = serve_send_json(c, 200, cli_embeddings_json(vec, n, dim, sm->id, tokens, base64));
    free(vec);
    free(texts);
    return status;
}
