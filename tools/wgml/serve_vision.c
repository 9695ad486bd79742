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
    if (images && images != n) {
        snprintf(msg, msg_size, "'input' mixes images and texts: send them in separate requests");
        return -1;
    }
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
static int read_images(struct mg_connection *c, json_object *req, cli_image **out, int *n_out) {
    json_object *input;
    if (!json_object_object_get_ex(req, "input", &input) || !json_object_is_type(input, json_type_array))
        return serve_send_error(c, 400, "input", NULL,
                                "'input' is required: an array of {\"image\": \"data:image/png;base64,...\"}");
    int n = (int)json_object_array_length(input);
    if (n < 1 || n > SERVE_MAX_IMAGES)
        return serve_send_error(c, 400, "input", NULL, "'input' must hold 1 to %d images, not %d", SERVE_MAX_IMAGES, n);
    cli_image *imgs = calloc((size_t)n, sizeof *imgs);
    if (!imgs) return serve_send_error(c, 500, NULL, NULL, "out of memory");
    size_t total = 0;
    uint8_t *bytes = NULL;
    char msg[640];
    int status = 0;
    for (int i = 0; i < n && !status; i++) {
        const char *text = NULL, *s = NULL;
        int k = item_kind(json_object_array_get_idx(input, (size_t)i), i, &text, &s, msg, sizeof msg);
        if (k != 1) {
            status = serve_send_error(c, 400, "input", NULL, "%s",
                                      k < 0 ? msg : "'input' mixes images and texts: send them in separate requests");
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

int serve_ep_embed_images(struct mg_connection *c, serve_server *s, json_object *req) {
    serve_model buf;
    int status = 0;
    const serve_model *sm = image_model(c, s, WGML_TASK_EMBED_IMAGE, &buf, &status);
    if (!sm) return status;
    json_object *v;
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
    cli_image *imgs = NULL;
    int n = 0;
    if ((status = read_images(c, req, &imgs, &n))) return status;
    wgml_image *views = calloc((size_t)n, sizeof *views);
    float *vec = malloc((size_t)n * (size_t)dim * sizeof *vec);
    if (!views || !vec) {
        free(views);
        free(vec);
        free_images(imgs, n);
        return serve_send_error(c, 500, NULL, NULL, "out of memory");
    }
    for (int i = 0; i < n; i++) views[i] = cli_image_view(&imgs[i]);
    wgml_error err;
    pthread_mutex_lock(&s->embed_mu); /* one embedding request at a time on a model, as for texts */
    wgml_status st = wgml_embed_images(sm->model, views, n, &ep, vec, dim, &err);
    pthread_mutex_unlock(&s->embed_mu);
    if (st == WGML_ERR_INVALID_ARGUMENT)
        status = serve_send_error(c, 400, "input", NULL, "%s", err.message);
    else if (st)
        status = serve_send_error(c, 500, NULL, NULL, "embedding the images failed: %s", err.message);
    else /* usage: images are no tokens (0 prompt and total tokens) */
        status = serve_send_json(c, 200, cli_embeddings_json(vec, n, dim, sm->id, 0, base64));
    free(vec);
    free(views);
    free_images(imgs, n);
    return status;
}

static const float *sort_probs; /* by_prob's scores (qsort has no user pointer; set under embed_mu) */
static int by_prob(const void *a, const void *b) {
    float x = sort_probs[*(const int *)a], y = sort_probs[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* POST /v1/classify (a wgml extension): input (an array of up to SERVE_MAX_IMAGES {"image": ...}),
 * top (labels per image, 1.., default 5; more than the model has gives them all); model is
 * ignored. Per image its labels, most probable first, with their softmax probabilities, as
 * `wgml classify --json` prints them. Runs in this HTTP thread under embed_mu. */
int serve_ep_classify(struct mg_connection *c, serve_server *s, json_object *req) {
    serve_model buf;
    int status = 0;
    const serve_model *sm = image_model(c, s, WGML_TASK_CLASSIFY, &buf, &status);
    if (!sm) return status;
    const int L = wgml_model_n_labels(sm->model);
    json_object *v;
    int top = 5;
    if (json_object_object_get_ex(req, "top", &v) && !json_object_is_type(v, json_type_null)) {
        int64_t t = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
        if (t < 1 || t > INT32_MAX) return serve_send_error(c, 400, "top", NULL, "'top' must be a positive integer");
        top = (int)t;
    }
    if (top > L) top = L;
    cli_image *imgs = NULL;
    int n = 0;
    if ((status = read_images(c, req, &imgs, &n))) return status;
    wgml_image *views = calloc((size_t)n, sizeof *views);
    float *probs = malloc((size_t)n * (size_t)L * sizeof *probs);
    int *order = malloc((size_t)L * sizeof *order);
    if (!views || !probs || !order) {
        free(views);
        free(probs);
        free(order);
        free_images(imgs, n);
        return serve_send_error(c, 500, NULL, NULL, "out of memory");
    }
    for (int i = 0; i < n; i++) views[i] = cli_image_view(&imgs[i]);
    wgml_error err;
    json_object *data = NULL;
    pthread_mutex_lock(&s->embed_mu);
    wgml_status st = wgml_classify_images(sm->model, views, n, probs, L, &err);
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
                json_object_object_add(l, "label", json_object_new_string(wgml_model_label(sm->model, order[k])));
                json_object_object_add(l, "index", json_object_new_int(order[k]));
                json_object_object_add(l, "score", json_object_new_double(sort_probs[order[k]]));
                json_object_array_add(labels, l);
            }
            json_object_object_add(e, "labels", labels);
            json_object_array_add(data, e);
        }
    }
    pthread_mutex_unlock(&s->embed_mu);
    if (st == WGML_ERR_INVALID_ARGUMENT) {
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
    free_images(imgs, n);
    return status;
}
