/*
 * cli_json.c - the JSON pieces the commands share (json-c), apart from
 * cli_util.c so that the fuzzed subcommands (cmake/fuzz.cmake) need no json-c.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct json_object *cli_kernels_json(const wgml_kernel_stat *kt, int n) {
    json_object *k = json_object_new_array();
    for (int i = 0; i < n; i++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "name", json_object_new_string(kt[i].name));
        json_object_object_add(e, "calls", json_object_new_int64((int64_t)kt[i].calls));
        json_object_object_add(e, "total_ms", json_object_new_double(kt[i].total_ms));
        if (kt[i].flop > 0 && kt[i].total_ms > 0)
            json_object_object_add(e, "gflops", json_object_new_double(kt[i].flop / (kt[i].total_ms * 1e6)));
        json_object_array_add(k, e);
    }
    return k;
}

/* The vector's float32 bytes (little-endian, as every platform wgml runs on stores them) in base64. */
static json_object *base64_floats(const float *v, int n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v;
    size_t len = (size_t)n * sizeof *v, o = 0;
    char *s = malloc(4 * ((len + 2) / 3) + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        s[o++] = digits[w >> 18 & 63];
        s[o++] = digits[w >> 12 & 63];
        s[o++] = i + 1 < len ? digits[w >> 6 & 63] : '=';
        s[o++] = i + 2 < len ? digits[w & 63] : '=';
    }
    json_object *j = json_object_new_string_len(s, (int)o);
    free(s);
    return j;
}

struct json_object *cli_embeddings_json(const float *vec, int n, int dim, const char *model, long long tokens,
                                        int base64) {
    json_object *o = json_object_new_object(), *data = json_object_new_array();
    json_object_object_add(o, "object", json_object_new_string("list"));
    for (int i = 0; i < n; i++) {
        json_object *e = json_object_new_object(), *a;
        json_object_object_add(e, "object", json_object_new_string("embedding"));
        json_object_object_add(e, "index", json_object_new_int(i));
        if (base64) {
            a = base64_floats(vec + (size_t)i * dim, dim);
        } else {
            a = json_object_new_array_ext(dim);
            for (int j = 0; j < dim; j++) json_object_array_add(a, json_object_new_double(vec[(size_t)i * dim + j]));
        }
        json_object_object_add(e, "embedding", a);
        json_object_array_add(data, e);
    }
    json_object_object_add(o, "data", data);
    json_object_object_add(o, "model", json_object_new_string(model));
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int64(tokens));
    json_object_object_add(u, "total_tokens", json_object_new_int64(tokens));
    json_object_object_add(o, "usage", u);
    return o;
}
