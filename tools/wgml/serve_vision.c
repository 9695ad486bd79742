/*
 * serve_vision.c - image inputs: /v1/embeddings with {"image": ...} items on a
 * vision model (CLIP, SigLIP, ViT: task EMBED_IMAGE) and /v1/classify (a wgml
 * extension) on an image classifier (a ViT with its head: task CLASSIFY).
 *
 * An image item is {"image": "data:image/png;base64,..."} (any data:image/...
 * type; the format is found from the bytes, image_file.c) or the bare base64
 * text. The base64 is strict (the standard alphabet, no white space, '='
 * padding optional but only at the end); the pixels go through
 * cli_image_read_memory with SERVE_IMAGE_MAX_PIXELS an image and
 * SERVE_IMAGE_MAX_TOTAL for the request, every budget checked from the image's
 * header before its pixels are taken. The body itself is held to --max-body
 * (serve_http.c) before any of this runs.
 */
#include <civetweb.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "image_file.h"
#include "serve.h"

/* base64's value of c, or -1 outside the standard alphabet. */
static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes n characters of base64 into out (room for n / 4 * 3 + 3 bytes); the length, or -1
 * with msg saying what is wrong (and where). */
static long long b64_decode(const char *s, size_t n, uint8_t *out, char *msg, size_t msg_size) {
    size_t pad = 0;
    while (pad < 2 && n > pad && s[n - 1 - pad] == '=') pad++;
    if (pad && n % 4) {
        snprintf(msg, msg_size, "its base64 has '=' padding but a length of %zu, not a multiple of 4", n);
        return -1;
    }
    n -= pad;
    if (n % 4 == 1) {
        snprintf(msg, msg_size, "its base64 is cut short (%zu characters: one too many or three too few)", n);
        return -1;
    }
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            unsigned char c = (unsigned char)s[i];
            if (c > 0x20 && c < 0x7f)
                snprintf(msg, msg_size, "its base64 has '%c' at character %zu, outside the alphabet A-Z a-z 0-9 + /", c,
                         i);
            else
                snprintf(msg, msg_size,
                         "its base64 has byte 0x%02x at character %zu, outside the alphabet A-Z a-z 0-9 + /", c, i);
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc) { /* bits left over that no byte holds: not what an encoder writes */
        snprintf(msg, msg_size, "its base64 ends in bits that belong to no byte (not canonical base64)");
        return -1;
    }
    return (long long)o;
}

/* What an item of input is: 0 a text (a string, or {"text": ...}: *text gets it), 1 an image
 * ({"image": ...}: *image gets its string), -1 neither (msg says why). */
static int item_kind(json_object *t, int i, const char **text, const char **image, char *msg, size_t msg_size) {
    json_object *v;
    if (json_object_is_type(t, json_type_string)) {
        *text = json_object_get_string(t);
        return 0;
    }
    if (!json_object_is_type(t, json_type_object) || json_object_object_length(t) != 1) {
        snprintf(msg, msg_size,
                 "'input[%d]' must be a string, {\"text\": \"...\"} or {\"image\": \"data:image/png;base64,...\"}", i);
        return -1;
    }
    if (json_object_object_get_ex(t, "text", &v)) {
        if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0) {
            snprintf(msg, msg_size, "'input[%d].text' must be a non-empty string", i);
            return -1;
        }
        *text = json_object_get_string(v);
        return 0;
    }
    if (json_object_object_get_ex(t, "image", &v)) {
        if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0) {
            snprintf(msg, msg_size,
                     "'input[%d].image' must be a non-empty string: a data:image/...;base64, URL or base64", i);
            return -1;
        }
        *image = json_object_get_string(v);
        return 1;
    }
    snprintf(msg, msg_size, "'input[%d]' must be {\"text\": ...} or {\"image\": ...}", i);
    return -1;
}

int serve_input_kind(json_object *input, char *msg, size_t msg_size) {
    if (!json_object_is_type(input, json_type_array)) return 0;
    int n = (int)json_object_array_length(input), images = 0, has_object = 0;
    for (int i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(input, (size_t)i);
        if (!json_object_is_type(t, json_type_object)) continue;
        has_object = 1;
        const char *text = NULL, *image = NULL;
        int k = item_kind(t, i, &text, &image, msg, msg_size);
        if (k < 0) return -1;
        images += k == 1;
    }
    if (!has_object) return 0;
    return images ? 1 : 2;
}

const char *serve_input_text(json_object *item) {
    json_object *v;
    if (json_object_is_type(item, json_type_object) && json_object_object_get_ex(item, "text", &v) &&
        json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return json_object_is_type(item, json_type_string) ? json_object_get_string(item) : NULL;
}

/* The images of a request's input (an array of {"image": ...}): 0 with *out (n of them, to
 * free with free_images) and *n, or the HTTP status sent. */
static int read_images(struct mg_connection *c, json_object *req, const char **texts, cli_image **out, int *n_out) {
    json_object *input;
    if (!json_object_object_get_ex(req, "input", &input) || !json_object_is_type(input, json_type_array))
        return serve_send_error(c, 400, "input", NULL,
                                "'input' is required: an array of {\"image\": \"data:image/png;base64,...\"}");
    int n = (int)json_object_array_length(input);
    if (n < 1 || n > SERVE_MAX_IMAGES)
        return serve_send_error(c, 400, "input", NULL, "'input' must hold 1 to %d items, not %d", SERVE_MAX_IMAGES, n);
    cli_image *imgs = calloc((size_t)n, sizeof *imgs);
    if (!imgs) return serve_send_error(c, 500, NULL, NULL, "out of memory");
    size_t total = 0;
    uint8_t *bytes = NULL;
    char msg[640];
    int status = 0;
    for (int i = 0; i < n && !status; i++) {
        const char *text = NULL, *s = NULL;
        int k = item_kind(json_object_array_get_idx(input, (size_t)i), i, &text, &s, msg, sizeof msg);
        if (k == 0 && texts && text && *text) {
            texts[i] = text;
            continue;
        }
        if (k != 1) {
            status = serve_send_error(c, 400, "input", NULL, "%s",
                                      k < 0     ? msg
                                      : !texts  ? "'input' holds a text: this endpoint takes images only"
                                                : "'input' holds an empty text");
            break;
        }
        size_t len = strlen(s);
        if (!strncmp(s, "data:", 5)) {
            /* data:image/TYPE;base64,DATA (the TYPE is not trusted: the bytes say what the image is) */
            const char *comma = strchr(s, ',');
            if (strncmp(s + 5, "image/", 6) || !comma || comma - s < 18 || strncmp(comma - 7, ";base64", 7)) {
                status = serve_send_error(c, 400, "input", NULL,
                                          "'input[%d].image' must be a data URL of the form "
                                          "data:image/png;base64,... (or image/jpeg), or bare base64",
                                          i);
                break;
            }
            len -= (size_t)(comma + 1 - s);
            s = comma + 1;
        } else if (!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8) || !strncmp(s, "file:", 5)) {
            status = serve_send_error(c, 400, "input", NULL,
                                      "'input[%d].image': the server fetches no URLs; send the image's bytes as "
                                      "data:image/png;base64,...",
                                      i);
            break;
        }
        free(bytes);
        if (!(bytes = malloc(len / 4 * 3 + 3))) {
            status = serve_send_error(c, 500, NULL, NULL, "out of memory");
            break;
        }
        long long size = b64_decode(s, len, bytes, msg, sizeof msg);
        if (size < 0) {
            status = serve_send_error(c, 400, "input", "invalid_base64", "'input[%d].image': %s", i, msg);
            break;
        }
        /* each image within its own budget and what is left of the request's */
        size_t budget = SERVE_IMAGE_MAX_TOTAL - total < SERVE_IMAGE_MAX_PIXELS ? SERVE_IMAGE_MAX_TOTAL - total
                                                                                  : SERVE_IMAGE_MAX_PIXELS;
        char name[32];
        snprintf(name, sizeof name, "input[%d]", i);
        if (!budget) {
            status = serve_send_error(c, 400, "input", "image_too_large",
                                      "'input[%d]': the request's images are over the limit of %zu pixels in all", i,
                                      (size_t)SERVE_IMAGE_MAX_TOTAL);
            break;
        }
        if (cli_image_read_memory(bytes, (size_t)size, name, budget, &imgs[i], msg, sizeof msg)) {
            int big = strstr(msg, "over the limit") != NULL;
            status = serve_send_error(c, 400, "input", big ? "image_too_large" : "invalid_image", "%s%s", msg,
                                      big && budget < SERVE_IMAGE_MAX_PIXELS
                                          ? " (what is left of the request's budget of pixels for all its images)"
                                          : "");
            break;
        }
        total += (size_t)imgs[i].w * (size_t)imgs[i].h;
    }
    free(bytes);
    if (status) {
        for (int i = 0; i < n; i++) cli_image_free(&imgs[i]);
        free(imgs);
        return status;
    }
    *out = imgs;
    *n_out = n;
    return 0;
}

static void free_images(cli_image *imgs, int n) {
    for (int i = 0; imgs && i < n; i++) cli_image_free(&imgs[i]);
    free(imgs);
}

/* The model that embeds images for an endpoint, or NULL after answering 400. */
static const serve_model *image_model(struct mg_connection *c, serve_server *s, uint32_t task, serve_model *buf,
                                      int *status) {
    const serve_model *sm = serve_model_for(s, task, buf);
    if (sm) return sm;
    const serve_model *vm = serve_model_for(s, WGML_TASK_EMBED_IMAGE, buf);
    if (task == WGML_TASK_CLASSIFY && vm)
        *status = serve_send_error(c, 400, "model", "model_not_supported",
                                   "%s (a %s %s) has no classifier head: /v1/classify needs an image classifier (a ViT "
                                   "with its head); /v1/embeddings embeds its images",
                                   vm->id, vm->info.family, vm->info.architecture);
    else if (task == WGML_TASK_EMBED_IMAGE && (vm = serve_model_for(s, WGML_TASK_EMBED, buf)))
        *status = serve_send_error(c, 400, "input", "model_not_supported",
                                   "%s: this model embeds texts only, not images: send 'input' as strings", vm->id);
    else
        *status = serve_no_task(c, s, task == WGML_TASK_CLASSIFY ? "classify images" : "embed images");
    return NULL;
}

/* The first model that has every task bit of tasks, or NULL. */
static const serve_model *model_with_all(serve_server *s, uint32_t tasks, serve_model *buf) {
    if ((s->info.tasks & tasks) == tasks) {
        *buf = (serve_model){s->model, s->info, s->model_id};
        return buf;
    }
    for (int i = 0; i < s->n_extra; i++)
        if ((s->extra[i].info.tasks & tasks) == tasks) return &s->extra[i];
    return NULL;
}

/* /v1/embeddings with {"image": ...} items, and texts beside them ("...", {"text": ...}) for a
 * model with a text tower (CLIP, SigLIP: vectors in one space), in input order. */
int serve_ep_embed_images(struct mg_connection *c, serve_server *s, json_object *req) {
    serve_model buf;
    int status = 0;
    const serve_model *sm = image_model(c, s, WGML_TASK_EMBED_IMAGE, &buf, &status);
    if (!sm) return status;
    json_object *v, *input = NULL;
    if (json_object_object_get_ex(req, "input", &input) && serve_has_nul(input, 0))
        return serve_send_error(c, 400, "input", NULL, "'input' cannot contain U+0000");
    int base64 = 0;
    if (json_object_object_get_ex(req, "encoding_format", &v) && !json_object_is_type(v, json_type_null)) {
        const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (strcmp(f, "float") && strcmp(f, "base64"))
            return serve_send_error(c, 400, "encoding_format", NULL, "'encoding_format' must be \"float\" or \"base64\"");
        base64 = !strcmp(f, "base64");
    }
    if (json_object_object_get_ex(req, "dimensions", &v) && !json_object_is_type(v, json_type_null))
        return serve_send_error(c, 400, "dimensions", NULL,
                                "'dimensions' is not taken for images: an image's vector has the model's size");
    wgml_embed_params ep = wgml_embed_default_params();
    int dim = wgml_embed_dim(sm->model, &ep);
    if (dim < 1) return serve_send_error(c, 500, NULL, NULL, "%s gives no image vectors", sm->id);
    const char *texts[SERVE_MAX_IMAGES] = {0};
    cli_image *imgs = NULL;
    int n = 0;
    if ((status = read_images(c, req, texts, &imgs, &n))) return status;
    int n_text = 0;
    for (int i = 0; i < n; i++) n_text += texts[i] != NULL;
    if (n_text && !(sm->info.tasks & WGML_TASK_EMBED)) {
        free_images(imgs, n);
        return serve_send_error(c, 400, "input", "model_not_supported",
                                "%s (a %s %s) embeds images only: it has no text tower for the texts in 'input'",
                                sm->id, sm->info.family, sm->info.architecture);
    }
    /* the images and the texts each packed together, then their vectors back in input order */
    wgml_image *views = calloc((size_t)n, sizeof *views);
    const char **tx = calloc((size_t)n, sizeof *tx);
    float *vec = malloc((size_t)n * (size_t)dim * sizeof *vec), *tmp = malloc((size_t)n * (size_t)dim * sizeof *tmp);
    if (!views || !tx || !vec || !tmp) {
        free(views);
        free(tx);
        free(vec);
        free(tmp);
        free_images(imgs, n);
        return serve_send_error(c, 500, NULL, NULL, "out of memory");
    }
    int ni = 0, nt = 0;
    for (int i = 0; i < n; i++)
        if (texts[i]) tx[nt++] = texts[i];
        else views[ni++] = cli_image_view(&imgs[i]);
    wgml_error err;
    long long tokens = 0;
    pthread_mutex_lock(&s->embed_mu); /* one embedding request at a time on a model, as for texts */
    wgml_status st = ni ? wgml_embed_images(sm->model, views, ni, &ep, tmp, dim, &err) : WGML_OK;
    if (!st && nt) st = wgml_embed(sm->model, tx, nt, &ep, tmp + (size_t)ni * (size_t)dim, dim, &err);
    for (int i = 0; !st && i < nt; i++) {
        int k = wgml_tokenize(sm->model, tx[i], strlen(tx[i]), 1, NULL, 0, &err);
        tokens += k > 0 ? k : 0;
    }
    pthread_mutex_unlock(&s->embed_mu);
    for (int i = 0, a = 0, b = ni; !st && i < n; i++) /* images first in tmp, then texts */
        memcpy(vec + (size_t)i * (size_t)dim, tmp + (size_t)(texts[i] ? b++ : a++) * (size_t)dim,
               (size_t)dim * sizeof *vec);
    if (st == WGML_ERR_INVALID_ARGUMENT || st == WGML_ERR_CONTEXT_FULL)
        status = serve_send_error(c, 400, "input", NULL, "%s", err.message);
    else if (st)
        status = serve_send_error(c, 500, NULL, NULL, "embedding the input failed: %s", err.message);
    else /* usage: the texts' tokens (images are no tokens) */
        status = serve_send_json(c, 200, cli_embeddings_json(vec, n, dim, sm->id, tokens, base64));
    free(vec);
    free(tmp);
    free(tx);
    free(views);
    free_images(imgs, n);
    return status;
}

static const float *sort_probs; /* by_prob's scores (qsort has no user pointer; set under embed_mu) */
static int by_prob(const void *a, const void *b) {
    float x = sort_probs[*(const int *)a], y = sort_probs[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* The label texts of a zero-shot request ('labels': 1 to SERVE_MAX_LABELS non-empty strings):
 * their count (pointers into req in *out), or -(the HTTP status sent). */
static int read_labels(struct mg_connection *c, json_object *labels, const char ***out) {
    int n = json_object_is_type(labels, json_type_array) ? (int)json_object_array_length(labels) : 0;
    if (n < 1 || n > SERVE_MAX_LABELS)
        return -serve_send_error(c, 400, "labels", NULL, "'labels' must be an array of 1 to %d texts",
                                 SERVE_MAX_LABELS);
    if (serve_has_nul(labels, 0)) return -serve_send_error(c, 400, "labels", NULL, "'labels' cannot contain U+0000");
    const char **t = calloc((size_t)n, sizeof *t);
    if (!t) return -serve_send_error(c, 500, NULL, NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(labels, (size_t)i);
        if (!json_object_is_type(e, json_type_string) || !json_object_get_string_len(e)) {
            free(t);
            return -serve_send_error(c, 400, "labels", NULL, "'labels[%d]' must be a non-empty string", i);
        }
        t[i] = json_object_get_string(e);
    }
    *out = t;
    return n;
}

/* POST /v1/classify (a wgml extension): input (an array of up to SERVE_MAX_IMAGES {"image": ...}),
 * labels (optional: texts to score each image against, zero-shot, with a CLIP or SigLIP model;
 * without it, a classifier's own labels), top (labels per image, 1.., default 5; more than there
 * are gives them all); model is ignored. Per image its labels, most probable first, with their
 * probabilities (softmax; SigLIP's zero-shot: a sigmoid each), as `wgml classify --json` prints
 * them. Runs in this HTTP thread under embed_mu. */
int serve_ep_classify(struct mg_connection *c, serve_server *s, json_object *req) {
    serve_model buf;
    int status = 0;
    json_object *v, *jl = NULL;
    const char **label_texts = NULL;
    const int zero_shot = json_object_object_get_ex(req, "labels", &jl) && !json_object_is_type(jl, json_type_null);
    const serve_model *sm = NULL;
    if (zero_shot) {
        if (!(sm = model_with_all(s, WGML_TASK_EMBED_IMAGE | WGML_TASK_EMBED | WGML_TASK_CLASSIFY, &buf)))
            return serve_send_error(c, 400, "labels", "model_not_supported",
                                    "no model here scores images against texts: 'labels' (zero-shot) needs a CLIP or "
                                    "SigLIP model with its text tower");
    } else {
        for (int i = -1; i < s->n_extra && !sm; i++) { /* a model with a classifier head */
            const serve_model *m = i < 0 ? (buf = (serve_model){s->model, s->info, s->model_id}, &buf) : &s->extra[i];
            if (wgml_model_n_labels(m->model) > 0) sm = m;
        }
        if (!sm && model_with_all(s, WGML_TASK_EMBED_IMAGE | WGML_TASK_EMBED, &buf))
            return serve_send_error(c, 400, "labels", NULL,
                                    "%s has no classifier head: give 'labels', the texts to score each image against "
                                    "(zero-shot)", buf.id);
        if (!sm && !(sm = image_model(c, s, WGML_TASK_CLASSIFY, &buf, &status))) return status;
    }
    int L = zero_shot ? read_labels(c, jl, &label_texts) : wgml_model_n_labels(sm->model);
    if (L < 0) return -L;
    int top = 5;
    if (json_object_object_get_ex(req, "top", &v) && !json_object_is_type(v, json_type_null)) {
        int64_t t = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
        if (t < 1 || t > INT32_MAX) {
            free(label_texts);
            return serve_send_error(c, 400, "top", NULL, "'top' must be a positive integer");
        }
        top = (int)t;
    }
    if (top > L) top = L;
    cli_image *imgs = NULL;
    int n = 0;
    if ((status = read_images(c, req, NULL, &imgs, &n))) {
        free(label_texts);
        return status;
    }
    wgml_image *views = calloc((size_t)n, sizeof *views);
    float *probs = malloc((size_t)n * (size_t)L * sizeof *probs);
    int *order = malloc((size_t)L * sizeof *order);
    if (!views || !probs || !order) {
        free(views);
        free(probs);
        free(order);
        free(label_texts);
        free_images(imgs, n);
        return serve_send_error(c, 500, NULL, NULL, "out of memory");
    }
    for (int i = 0; i < n; i++) views[i] = cli_image_view(&imgs[i]);
    wgml_error err;
    json_object *data = NULL;
    pthread_mutex_lock(&s->embed_mu);
    wgml_status st = zero_shot ? wgml_zero_shot_classify(sm->model, views, n, label_texts, L, probs, &err)
                               : wgml_classify_images(sm->model, views, n, probs, L, &err);
    if (!st) {
        data = json_object_new_array();
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < L; j++) order[j] = j;
            sort_probs = probs + (size_t)i * (size_t)L;
            qsort(order, (size_t)L, sizeof *order, by_prob);
            json_object *e = json_object_new_object(), *labels = json_object_new_array();
            json_object_object_add(e, "index", json_object_new_int(i));
            for (int k = 0; k < top; k++) {
                json_object *l = json_object_new_object();
                const char *name = zero_shot ? label_texts[order[k]] : wgml_model_label(sm->model, order[k]);
                json_object_object_add(l, "label", json_object_new_string(name));
                json_object_object_add(l, "index", json_object_new_int(order[k]));
                json_object_object_add(l, "score", json_object_new_double(sort_probs[order[k]]));
                json_object_array_add(labels, l);
            }
            json_object_object_add(e, "labels", labels);
            json_object_array_add(data, e);
        }
    }
    pthread_mutex_unlock(&s->embed_mu);
    if (st == WGML_ERR_INVALID_ARGUMENT || st == WGML_ERR_CONTEXT_FULL) {
        status = serve_send_error(c, 400, "input", NULL, "%s", err.message);
    } else if (st) {
        status = serve_send_error(c, 500, NULL, NULL, "classifying the images failed: %s", err.message);
    } else {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "object", json_object_new_string("list"));
        json_object_object_add(o, "data", data);
        json_object_object_add(o, "model", json_object_new_string(sm->id));
        status = serve_send_json(c, 200, o);
    }
    free(order);
    free(probs);
    free(views);
    free(label_texts);
    free_images(imgs, n);
    return status;
}
