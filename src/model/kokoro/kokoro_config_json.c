/*
 * kokoro_config_json.c - kokoro_config_parse: a Kokoro config.json read with
 * json-c. Built into the small library wgml_json (cmake/sources.cmake) that
 * the CLI and the tests link, not into libwgml, which takes the config as a
 * struct (kokoro.h) and needs no JSON library.
 */
#include <json-c/json.h>
#include <string.h>

#include "core/error.h"
#include "model/kokoro/kokoro.h"

/* An integer member of obj in [lo, hi] (absent: *out kept). */
static wgml_status get_int(json_object *obj, const char *key, int lo, int hi, int *out, wgml_error *err) {
    json_object *v;
    if (!json_object_object_get_ex(obj, key, &v)) return WGML_OK;
    if (!json_object_is_type(v, json_type_int))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: '%s' must be an integer", key);
    int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: '%s' is %lld (%d..%d allowed)", key, (long long)x,
                         lo, hi);
    *out = (int)x;
    return WGML_OK;
}

/* An array of n_max or fewer integers; *n its length. */
static wgml_status get_ints(json_object *obj, const char *key, int n_max, int lo, int hi, int *out, int *n,
                            wgml_error *err) {
    json_object *v;
    if (!json_object_object_get_ex(obj, key, &v)) return WGML_OK;
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) < 1 ||
        json_object_array_length(v) > (size_t)n_max)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: '%s' must be an array of 1..%d integers", key, n_max);
    for (size_t i = 0; i < json_object_array_length(v); i++) {
        json_object *e = json_object_array_get_idx(v, i);
        int64_t x = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : (int64_t)lo - 1;
        if (x < lo || x > hi)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: '%s' holds a value outside %d..%d", key, lo, hi);
        out[i] = (int)x;
    }
    *n = (int)json_object_array_length(v);
    return WGML_OK;
}

static wgml_status parse(json_object *root, kokoro_config *c, wgml_error *err) {
    kokoro_hparams *hp = &c->hp;
    wgml_status st;
    json_object *pl = NULL, *is = NULL, *vocab = NULL;
    if (!json_object_is_type(root, json_type_object))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: not a JSON object");
    if ((st = get_int(root, "n_token", 2, KOKORO_N_VOCAB_MAX, &hp->n_token, err)) ||
        (st = get_int(root, "hidden_dim", 2, 1 << 14, &hp->hidden, err)) ||
        (st = get_int(root, "style_dim", 1, 1 << 14, &hp->style, err)) ||
        (st = get_int(root, "n_layer", 1, 64, &hp->n_layer, err)) ||
        (st = get_int(root, "max_dur", 1, 1 << 12, &hp->max_dur, err)) ||
        (st = get_int(root, "text_encoder_kernel_size", 1, 63, &hp->text_kernel, err)))
        return st;
    if (hp->hidden % 2 || hp->text_kernel % 2 == 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: hidden_dim must be even and the kernel size odd");
    if (json_object_object_get_ex(root, "plbert", &pl) &&
        ((st = get_int(pl, "hidden_size", 1, 1 << 14, &hp->bert_hidden, err)) ||
         (st = get_int(pl, "num_attention_heads", 1, 256, &hp->bert_heads, err)) ||
         (st = get_int(pl, "intermediate_size", 1, 1 << 16, &hp->bert_ff, err)) ||
         (st = get_int(pl, "num_hidden_layers", 1, 256, &hp->bert_layers, err)) ||
         (st = get_int(pl, "max_position_embeddings", 1, 1 << 16, &hp->bert_ctx, err)) ||
         (st = get_int(pl, "embedding_size", 1, 1 << 14, &hp->bert_embd, err))))
        return st;
    if (hp->bert_hidden % hp->bert_heads)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: plbert hidden_size %d is no multiple of %d heads",
                         hp->bert_hidden, hp->bert_heads);
    if (json_object_object_get_ex(root, "istftnet", &is)) {
        int n_rates = hp->n_ups, n_kern = hp->n_ups, n_rk = hp->n_rb, n_dil = 0;
        json_object *dil;
        if ((st = get_ints(is, "upsample_rates", KOKORO_MAX_UPS, 1, 1024, hp->up_rates, &n_rates, err)) ||
            (st = get_ints(is, "upsample_kernel_sizes", KOKORO_MAX_UPS, 1, 1024, hp->up_kernels, &n_kern, err)) ||
            (st = get_ints(is, "resblock_kernel_sizes", KOKORO_MAX_RB, 1, 63, hp->rb_kernels, &n_rk, err)) ||
            (st = get_int(is, "upsample_initial_channel", 1, 1 << 14, &hp->up_initial, err)) ||
            (st = get_int(is, "gen_istft_n_fft", 2, 4096, &hp->n_fft, err)) ||
            (st = get_int(is, "gen_istft_hop_size", 1, 4096, &hp->hop, err)) ||
            (st = get_int(is, "decoder_dim", 1, 1 << 14, &hp->dec_dim, err)) ||
            (st = get_int(is, "asr_res_dim", 1, 1 << 14, &hp->asr_res_dim, err)))
            return st;
        if (json_object_object_get_ex(is, "resblock_dilation_sizes", &dil)) {
            if (!json_object_is_type(dil, json_type_array) || json_object_array_length(dil) != (size_t)n_rk)
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "config: resblock_dilation_sizes must hold one triple per resblock kernel");
            for (int i = 0; i < n_rk; i++) {
                json_object *holder = json_object_new_object();
                if (!holder) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
                json_object_object_add(holder, "d", json_object_get(json_object_array_get_idx(dil, (size_t)i)));
                int n = 0;
                st = get_ints(holder, "d", 3, 1, 1024, hp->rb_dil[i], &n, err);
                json_object_put(holder);
                if (st) return st;
                if (n != 3)
                    return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: each resblock has 3 dilations");
            }
            n_dil = n_rk;
        }
        if (n_rates != n_kern || (n_dil && n_dil != n_rk))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: the istftnet lists' lengths differ");
        hp->n_ups = n_rates, hp->n_rb = n_rk;
        if (hp->n_fft % 2) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: gen_istft_n_fft must be even");
    }
    /* the generator halves its channels per upsampling stage (as kokoro_read_hparams checks a GGUF) */
    if (hp->up_initial % (1 << hp->n_ups))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "config: inconsistent sizes: upsample_initial_channel %d is no multiple of 2^%d (the "
                         "upsampling stages)",
                         hp->up_initial, hp->n_ups);
    if (json_object_object_get_ex(root, "vocab", &vocab)) {
        if (!json_object_is_type(vocab, json_type_object))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: vocab must be an object of symbol: id");
        memset(c->vocab, 0, sizeof c->vocab);
        json_object_object_foreach(vocab, sym, idv) {
            int64_t id = json_object_is_type(idv, json_type_int) ? json_object_get_int64(idv) : -1;
            size_t len = strlen(sym);
            if (id < 1 || id >= hp->n_token || len == 0 || len >= sizeof c->vocab[0])
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "config: vocab entry '%.16s' has id %lld (1..%d) or is too long", sym, (long long)id,
                                 hp->n_token - 1);
            if (c->vocab[id][0])
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: vocab id %lld is given twice", (long long)id);
            memcpy(c->vocab[id], sym, len + 1);
        }
    }
    return WGML_OK;
}

wgml_status kokoro_config_parse(const char *json, size_t len, kokoro_config *c, wgml_error *err) {
    kokoro_config_default(c);
    json_tokener *tok = json_tokener_new();
    if (!tok) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    json_object *root = len <= INT32_MAX ? json_tokener_parse_ex(tok, json, (int)len) : NULL;
    enum json_tokener_error je = json_tokener_get_error(tok);
    wgml_status st;
    if (!root || je != json_tokener_success)
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "config: not valid JSON (%s)",
                       root ? "trailing data" : json_tokener_error_desc(je));
    else
        st = parse(root, c, err);
    json_object_put(root);
    json_tokener_free(tok);
    return st;
}
