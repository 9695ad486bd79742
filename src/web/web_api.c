/*
 * web_api.c - the C ABI that web/engine.js calls: the public API (wgml.h)
 * reduced to integers, pointers and doubles, as exports of web/dist/wgml.wasm.
 *
 *   wgmlw_malloc(n) / wgmlw_free(p)           wasm memory for strings and buffers
 *   wgmlw_load(size, backend, flags, src)     wgml_model_load_stream; the bytes come
 *                                             from the import wgml.read(src, offset, buf, len)
 *   wgmlw_model_free(m)
 *   wgmlw_info(m)                             JSON: wgml_model_info + wgml_counters
 *   wgmlw_session_create(m, n_ctx) / wgmlw_session_free(s) / wgmlw_session_reset(s)
 *   wgmlw_generate(s, prompt, n_predict, temperature, top_k, top_p, seed, user)
 *                                             wgml_generate; each piece goes to the import
 *                                             wgml.token(user, token, text, len) (non-zero stops)
 *   wgmlw_result()                            JSON: the last wgml_generate_result
 *   wgmlw_embed_dim(m, dimensions)            wgml_embed_dim (-1: the reason in the last error)
 *   wgmlw_embed(m, texts, n, pooling, normalize, dimensions, truncate, n_batch, out, dim)
 *                                             wgml_embed: texts is an array of n string pointers,
 *                                             out has room for n * dim floats
 *   wgmlw_rerank(m, query, docs, n, scores)   wgml_rerank
 *   wgmlw_embed_images(m, images, n, normalize, n_batch, out, dim)
 *                                             wgml_embed_images: images is n * 3 ints (width,
 *                                             height, pointer to RGBA8 pixels, rows packed),
 *                                             out has room for n * dim floats (dim: wgmlw_embed_dim)
 *   wgmlw_classify_images(m, images, n, top, texts, n_texts)  JSON: per image its top labels
 *                                             [[{"label","index","score"}, ...], ...]
 *   wgmlw_g2p_pieces(lang, text)              JSON: the espeak-ng voice, the pieces of text
 *                                             (normalized, split) that JS phonemizes, and the
 *                                             words it phonemizes alone (for word times)
 *   wgmlw_phonemize(lang, text, pieces, results, n)
 *                                             the G2P (text/g2p.h) with those results: phonemes
 *   wgmlw_speak(m, input, voice, speed, seed, phonemes, split, lang, pieces, results, n, words, word_results,
 *               n_words, user)                wgml_speak; each chunk goes to the import
 *                                             wgml.audio(user, samples, n, meta, len) (non-zero stops)
 *   wgmlw_speak_result()                      JSON: the last wgml_speak_result
 *   wgmlw_load_memory(data, size, backend, flags)
 *                                             wgml_model_load_memory of a wgmlw_malloc'ed copy of
 *                                             the whole file (whisper.cpp's ggml .bin, which the
 *                                             stream loader does not read); freed with the model
 *   wgmlw_transcribe(m, pcm, n, rate, language, translate, timestamps, word_timestamps, beam_size,
 *                    patience, temperature, no_fallback, condition, prompt, max_tokens, seed, user)
 *                                             wgml_transcribe; each segment goes to the import
 *                                             wgml.segment(user, json, len) (non-zero stops)
 *   wgmlw_transcribe_result()                 JSON: the last wgml_transcribe_result
 *   wgmlw_error_code() / wgmlw_error_message()   the last failure of any call
 *
 * Text to speech: espeak-ng (GPL) is not part of this module. JS asks
 * wgmlw_g2p_pieces for the pieces kokoro-js's phonemize() gives espeak-ng,
 * phonemizes them with the separately loaded phonemizer module (web/g2p.js),
 * and passes both back: the G2P here runs with a backend that answers from
 * those results, so normalization, splitting, joining and post-processing
 * are the native G2P's, one implementation.
 *
 * Handles are the C pointers. Every call that can reach the GPU may suspend
 * (JSPI) or unwind (Asyncify) in its imports; engine.js runs one call at a time.
 * Notes from the library (e.g. the WebGPU-to-CPU fallback) go to wgml.log.
 */
#include "api_internal.h"
#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"
#include "text/g2p.h"
#include "wgml.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(#name)))
#define JS(name)     __attribute__((import_module("wgml"), import_name(#name)))

JS(read) double js_read(int src, double offset, void *buf, int len);
JS(token) int js_token(int user, int token, const char *text, int len);
JS(log) void js_log(const char *text, int len);
JS(audio) int js_audio(int user, const float *samples, int n, const char *meta, int len);
JS(segment) int js_segment(int user, const char *json, int len);

static wgml_error last_error;
static wgml_generate_result last_result;
static wgml_speak_result last_speech;
static wgml_transcribe_result last_transcript;

EXPORT(wgmlw_malloc) void *wgmlw_malloc(int size) { return wgml_malloc(size > 0 ? (size_t)size : 1); }
EXPORT(wgmlw_free) void wgmlw_free(void *p) { wgml_free(p); }
EXPORT(wgmlw_error_code) int wgmlw_error_code(void) { return (int)last_error.code; }
EXPORT(wgmlw_error_message) const char *wgmlw_error_message(void) { return last_error.message; }

/* ---- models -------------------------------------------------------------------- */

static int64_t stream_read(void *user, uint64_t offset, void *buf, size_t len) {
    double got = js_read((int)(intptr_t)user, (double)offset, buf, (int)len);
    return got < 0 ? -1 : (int64_t)got;
}

static void log_line(void *user, const char *line) {
    (void)user;
    js_log(line, (int)strlen(line));
}

/* backend: 0 auto, 1 cpu, 2 webgpu (wgml_backend_kind); flags: WGML_WEBGPU_*. */
EXPORT(wgmlw_load) wgml_model *wgmlw_load(double size, int backend, int flags, int src) {
    wgml_error_clear(&last_error);
    if (backend < WGML_BACKEND_AUTO || backend > WGML_BACKEND_WEBGPU || !(size > 0)) {
        wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_load: bad backend %d or size %g", backend, size);
        return NULL;
    }
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = (wgml_backend_kind)backend;
    mp.webgpu_flags = (unsigned)flags;
    mp.log = log_line;
    wgml_model *m = NULL;
    wgml_model_load_stream(stream_read, (void *)(intptr_t)src, (uint64_t)size, &mp, &m, &last_error);
    return m;
}

/* Models loaded from memory, with the bytes they keep (freed with the model). */
typedef struct {
    wgml_model *model;
    void *data;
} owned_bytes;
static owned_bytes *owned;
static int n_owned, cap_owned;

/* A whole model file in memory (data: from wgmlw_malloc; this call owns it,
 * also on failure, and frees it with the model): wgml_model_load_memory, which
 * also reads whisper.cpp's ggml .bin (converted to a GGUF in memory), which
 * wgmlw_load's stream cannot. */
EXPORT(wgmlw_load_memory) wgml_model *wgmlw_load_memory(void *data, double size, int backend, int flags) {
    wgml_error_clear(&last_error);
    if (!data || backend < WGML_BACKEND_AUTO || backend > WGML_BACKEND_WEBGPU || !(size > 0)) {
        wgml_free(data);
        wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_load_memory: bad backend %d or size %g", backend,
                  size);
        return NULL;
    }
    if (n_owned == cap_owned) {
        int cap = cap_owned ? 2 * cap_owned : 4;
        owned_bytes *o = wgml_realloc(owned, (size_t)cap * sizeof *o);
        if (!o) {
            wgml_free(data);
            wgml_fail(&last_error, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            return NULL;
        }
        owned = o;
        cap_owned = cap;
    }
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = (wgml_backend_kind)backend;
    mp.webgpu_flags = (unsigned)flags;
    mp.log = log_line;
    wgml_model *m = NULL;
    if (wgml_model_load_memory(data, (size_t)size, &mp, &m, &last_error)) {
        wgml_free(data);
        return NULL;
    }
    owned[n_owned++] = (owned_bytes){m, data};
    return m;
}

EXPORT(wgmlw_model_free) void wgmlw_model_free(wgml_model *m) {
    wgml_model_free(m);
    for (int i = 0; m && i < n_owned; i++)
        if (owned[i].model == m) {
            wgml_free(owned[i].data);
            owned[i] = owned[--n_owned];
            break;
        }
}

/* The JSON answers are built in one buffer by appending; it grows as needed
 * (a speech chunk's phonemes and words, the pieces of a long text). When it
 * cannot grow, the answer is reported as "{}" (json_done), never overrun. */
static char json_static[4096];
static char *json = json_static;
static size_t json_cap = sizeof json_static, json_at;
static int json_cut;

static void json_start(void) {
    json_at = 0;
    json_cut = 0;
    json[0] = '\0';
}

static void append(const char *fmt, ...) WGML_PRINTF(1, 2);
static void append(const char *fmt, ...) {
    if (json_cut) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(json + json_at, json_cap - json_at, fmt, ap);
    va_end(ap);
    if (w < 0) {
        json_cut = 1;
        return;
    }
    if ((size_t)w >= json_cap - json_at) { /* grow and write it again */
        size_t cap = json_cap * 2;
        while (cap - json_at <= (size_t)w) cap *= 2;
        char *b = json == json_static ? wgml_malloc(cap) : wgml_realloc(json, cap);
        if (!b) {
            json_cut = 1;
            return;
        }
        if (json == json_static) memcpy(b, json_static, json_at);
        json = b;
        json_cap = cap;
        va_start(ap, fmt);
        vsnprintf(json + json_at, json_cap - json_at, fmt, ap);
        va_end(ap);
    }
    json_at += (size_t)w;
}

/* s[0..len) as a JSON string. */
static void append_json_bytes(const char *s, size_t len) {
    append("\"");
    for (size_t j = 0; j < len; j++) {
        unsigned char c = (unsigned char)s[j];
        if (c == '"' || c == '\\')
            append("\\%c", c);
        else if (c < 0x20)
            append("\\u%04x", c);
        else
            append("%c", c);
    }
    append("\"");
}

/* s as a JSON string. */
static void append_str(const char *s) { append_json_bytes(s ? s : "", s ? strlen(s) : 0); }

static const char *json_done(void) { return json_cut ? "{}" : json; }

EXPORT(wgmlw_info) const char *wgmlw_info(wgml_model *m) {
    if (!m) return "{}";
    wgml_model_info i;
    wgml_counters c;
    wgml_model_get_info(m, &i);
    wgml_model_get_counters(m, &c);
    json_start();
    append("{");
    const char *keys[4] = {"architecture", "name", "backend", "adapter"};
    const char *vals[4] = {i.architecture, i.name, i.backend, i.adapter};
    for (int k = 0; k < 4; k++) {
        append("\"%s\":", keys[k]);
        append_str(vals[k]);
        append(",");
    }
    append("\"family\":");
    append_str(i.family);
    static const char *const task_names[] = {"generate", "embed",      "rerank",  "speech",
                                             "transcribe", "embed-image", "classify"};
    append(",\"tasks\":[");
    for (int t = 0, n = 0; t < (int)(sizeof task_names / sizeof task_names[0]); t++)
        if (i.tasks & (1u << t)) append("%s\"%s\"", n++ ? "," : "", task_names[t]);
    append("],");
    if (i.family && !strcmp(i.family, "bert")) {
        static const char *const pools[] = {"model", "mean", "cls", "last", "none"};
        append("\"pooling\":\"%s\",\"causal\":%s,", i.pooling >= 0 && i.pooling <= 4 ? pools[i.pooling] : "none",
               i.causal ? "true" : "false");
    }
    if (i.tasks & WGML_TASK_TRANSCRIBE) append("\"sample_rate\":%d,", i.sample_rate);
    if (m->fam->vision) { /* the side of the square the images become, and a classifier's labels */
        wgml_vision_info vi;
        m->fam->vision->info(m->impl, &vi);
        append("\"image_size\":%d,\"n_labels\":%d,", vi.image_size, vi.n_labels);
    }
    if (i.tasks & WGML_TASK_SPEECH) {
        append("\"sample_rate\":%d,\"voices\":[", i.sample_rate);
        for (int v = 0; v < i.n_voices; v++) {
            if (v) append(",");
            append_str(wgml_speech_voice(m, v));
        }
        append("],");
    }
    const struct {
        const char *key;
        double v;
    } nums[] = {
        {"n_threads", i.n_threads},
        {"n_vocab", i.n_vocab},
        {"n_ctx_train", i.n_ctx_train},
        {"n_embd", i.n_embd},
        {"n_layer", i.n_layer},
        {"n_head", i.n_head},
        {"n_head_kv", i.n_head_kv},
        {"n_ff", i.n_ff},
        {"head_dim", i.head_dim},
        {"n_params", (double)i.n_params},
        {"matmul_params", (double)i.matmul_params},
        {"weights_bytes", (double)i.weights_bytes},
        {"bos", i.bos},
        {"eos", i.eos},
        {"steps", (double)c.steps},
        {"submits", (double)c.submits},
        {"dispatches", (double)c.dispatches},
        {"buffers_created", (double)c.buffers_created},
        {"bind_groups_created", (double)c.bind_groups_created},
        {"pipelines_created", (double)c.pipelines_created},
        {"upload_bytes", (double)c.upload_bytes},
        {"readback_bytes", (double)c.readback_bytes},
        {"device_memory_bytes", (double)c.device_memory_bytes},
        {"pipeline_compile_ms", c.pipeline_compile_ms},
    };
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
        append("%s\"%s\":%.17g", k ? "," : "", nums[k].key, nums[k].v);
    append("}");
    return json_done();
}

/* ---- sessions and generation ------------------------------------------------------ */

EXPORT(wgmlw_session_create) wgml_session *wgmlw_session_create(wgml_model *m, int n_ctx) {
    wgml_error_clear(&last_error);
    wgml_session_params sp = wgml_session_default_params();
    sp.n_ctx = n_ctx > 0 ? n_ctx : 0;
    wgml_session *s = NULL;
    wgml_session_create(m, &sp, &s, &last_error);
    return s;
}

EXPORT(wgmlw_session_free) void wgmlw_session_free(wgml_session *s) { wgml_session_free(s); }
EXPORT(wgmlw_session_reset) void wgmlw_session_reset(wgml_session *s) {
    if (s) wgml_session_reset(s);
}

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    return js_token((int)(intptr_t)user, token, text, (int)len);
}

/* grammar_kind: 0 none, 1 GBNF text, 2 a JSON Schema (JSON text), 3 any JSON object (grammar unused),
 * 4 a tools object's calls (grammar is a wgml_tools * from wgmlw_tools_create) */
EXPORT(wgmlw_generate)
int wgmlw_generate(wgml_session *s, const char *prompt, int n_predict, double temperature, int top_k, double top_p,
                   double seed, int user, int add_bos, const char *grammar, int grammar_kind) {
    wgml_error_clear(&last_error);
    memset(&last_result, 0, sizeof last_result);
    wgml_grammar *g = NULL;
    wgml_status st = WGML_OK;
    if (grammar_kind == 1) st = wgml_grammar_create(grammar ? grammar : "", grammar ? strlen(grammar) : 0, &g, &last_error);
    else if (grammar_kind == 2 || grammar_kind == 3)
        st = wgml_grammar_from_json_schema(grammar_kind == 2 ? grammar : NULL, grammar_kind == 2 && grammar ? strlen(grammar) : 0,
                                           &g, &last_error);
    if (st) return (int)st;
    wgml_generate_params gp = wgml_generate_default_params();
    gp.grammar = grammar_kind == 4 ? wgml_tools_grammar((const wgml_tools *)(const void *)grammar) : g;
    gp.add_bos = add_bos;
    gp.n_predict = n_predict;
    gp.sampler.temperature = (float)temperature;
    gp.sampler.top_k = top_k;
    gp.sampler.top_p = (float)top_p;
    gp.sampler.seed = seed > 0 ? (uint64_t)seed : 0;
    gp.on_token = on_token;
    gp.user = (void *)(intptr_t)user;
    st = wgml_generate(s, prompt, &gp, &last_result, &last_error);
    wgml_grammar_free(g);
    return (int)st;
}

/* An OpenAI-style messages array (JSON) through the model's chat template (its GGUF's,
 * or the fallback for its architecture): the prompt, freed with wgmlw_free; NULL with
 * the library's reason (no template: not a model that generates; a template's
 * raise_exception; bad JSON). The prompt holds the BOS text: generate it with add_bos 0. */
EXPORT(wgmlw_chat_prompt)
char *wgmlw_chat_prompt(wgml_model *m, const char *messages_json, int add_generation_prompt, const char *extra_json) {
    wgml_error_clear(&last_error);
    const char *tmpl = wgml_model_chat_template(m, NULL);
    if (!tmpl) {
        wgml_fail(&last_error, WGML_ERR_UNSUPPORTED, "the model has no chat template and none to fall back on");
        return NULL;
    }
    wgml_chat_params p = wgml_chat_default_params();
    p.add_generation_prompt = add_generation_prompt;
    p.model = m;
    p.extra_json = extra_json && *extra_json ? extra_json : NULL; /* {"tools": [...]} */
    char *prompt = NULL;
    if (wgml_chat_render(tmpl, messages_json, &p, &prompt, &last_error)) return NULL;
    char *out = wgml_strdup(prompt); /* from wgml's allocator, as wgmlw_free expects */
    free(prompt);
    if (!out) wgml_fail(&last_error, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    return out;
}

/* A request's tools (OpenAI's tools JSON) in the model's template's format; choice: 0 auto,
 * 1 none, 2 required, 3 named (name). NULL with the library's reason. */
EXPORT(wgmlw_tools_create)
wgml_tools *wgmlw_tools_create(wgml_model *m, const char *tools_json, int choice, const char *name, int parallel) {
    wgml_error_clear(&last_error);
    wgml_tools *t = NULL;
    const wgml_tool_format f = wgml_tool_format_of(wgml_model_chat_template(m, NULL));
    if (wgml_tools_create(tools_json ? tools_json : "", tools_json ? strlen(tools_json) : 0, f, (wgml_tool_choice)choice, name,
                          parallel, &t, &last_error))
        return NULL;
    return t;
}
EXPORT(wgmlw_tools_free) void wgmlw_tools_free(wgml_tools *t) { wgml_tools_free(t); }

/* The calls in a reply as OpenAI's tool_calls JSON (free with wgmlw_free), or NULL: not calls. */
EXPORT(wgmlw_tools_parse) char *wgmlw_tools_parse(wgml_tools *t, const char *text, double id_seed) {
    wgml_error_clear(&last_error);
    char *calls = NULL;
    if (wgml_tools_parse(t, text, text ? strlen(text) : 0, (uint64_t)id_seed, &calls, &last_error) || !calls) return NULL;
    char *out = wgml_strdup(calls); /* from wgml's allocator, as wgmlw_free expects */
    free(calls);
    return out;
}

EXPORT(wgmlw_result) const char *wgmlw_result(void) {
    const wgml_generate_result *r = &last_result;
    json_start();
    append("{\"n_prompt\":%d,\"n_generated\":%d,\"stop\":\"%s\",\"finish_reason\":\"%s\",\"prompt_ms\":%.6g,"
           "\"generate_ms\":%.6g,\"ttft_ms\":%.6g}",
           r->n_prompt, r->n_generated, wgml_stop_reason_name(r->stop),
           r->stop == WGML_STOP_MAX_TOKENS || r->stop == WGML_STOP_CONTEXT_FULL ? "length" : "stop", r->prompt_ms,
           r->generate_ms, r->ttft_ms);
    return json_done();
}

/* ---- embeddings and reranking ------------------------------------------------------ */

static wgml_embed_params embed_params(int pooling, int normalize, int dimensions, int truncate, int n_batch) {
    wgml_embed_params p = wgml_embed_default_params();
    p.pooling = (wgml_pooling)pooling;
    p.normalize = (wgml_normalize)normalize;
    p.dimensions = dimensions;
    p.truncate = truncate;
    p.n_batch = n_batch;
    return p;
}

/* The length of the vectors wgmlw_embed writes with these dimensions (0: the
 * model's); -1 with the library's reason (not an embedding model, dimensions
 * out of range) in the last error. */
EXPORT(wgmlw_embed_dim) int wgmlw_embed_dim(wgml_model *m, int dimensions) {
    wgml_error_clear(&last_error);
    wgml_embed_params p = embed_params(WGML_POOLING_MODEL, WGML_NORMALIZE_L2, dimensions, 0, 0);
    int dim = m ? wgml_embed_dim(m, &p) : -1;
    if (dim < 0) {
        /* no texts: wgml_embed only checks the model and the params, and says what is wrong */
        if (!m || !wgml_embed(m, NULL, 0, &p, NULL, -1, &last_error))
            wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "this model does not embed text");
    }
    return dim;
}

/* pooling: wgml_pooling (0 the model's, 1 mean, 2 cls, 3 last); normalize: wgml_normalize (0 l2, 1 none). */
EXPORT(wgmlw_embed)
int wgmlw_embed(wgml_model *m, const char *const *texts, int n, int pooling, int normalize, int dimensions,
                int truncate, int n_batch, float *out, int dim) {
    wgml_error_clear(&last_error);
    wgml_embed_params p = embed_params(pooling, normalize, dimensions, truncate, n_batch);
    return (int)wgml_embed(m, texts, n, &p, out, dim, &last_error);
}

EXPORT(wgmlw_rerank)
int wgmlw_rerank(wgml_model *m, const char *query, const char *const *docs, int n, float *scores) {
    wgml_error_clear(&last_error);
    return (int)wgml_rerank(m, query, docs, n, scores, &last_error);
}

/* ---- images (the clip family) -------------------------------------------------------- */

/* images: n * 3 ints, image i's width, height and RGBA8 pixels (rows of 4 * width
 * bytes, packed: what getImageData gives) as wgml_images of RGB8 (*rgb: one
 * buffer for all, free with wgml_free). The alpha is dropped, as the CLI's
 * decoders do (Pillow's convert("RGB")). */
static wgml_status rgb_images(const int *images, int n, wgml_image **out, uint8_t **rgb, wgml_error *err) {
    *out = NULL;
    *rgb = NULL;
    if (n < 0 || (n > 0 && !images)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "images: NULL or a negative count");
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const int w = images[3 * i], h = images[3 * i + 1];
        if (w < 1 || h < 1 || w > 65535 || h > 65535 || !images[3 * i + 2])
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image %d: %d x %d pixels (1 .. 65535 a side)", i, w, h);
        total += (size_t)w * (size_t)h * 3;
    }
    wgml_image *im = wgml_malloc((size_t)(n > 0 ? n : 1) * sizeof *im);
    uint8_t *buf = wgml_malloc(total ? total : 1);
    if (!im || !buf) {
        wgml_free(im);
        wgml_free(buf);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for %d images' pixels", n);
    }
    uint8_t *d = buf;
    for (int i = 0; i < n; i++) {
        const size_t w = (size_t)images[3 * i], h = (size_t)images[3 * i + 1], np = w * h;
        const uint8_t *s = (const uint8_t *)(intptr_t)images[3 * i + 2];
        im[i] = (wgml_image){(int)w, (int)h, 3 * w, d};
        for (size_t k = 0; k < np; k++, s += 4, d += 3) {
            d[0] = s[0];
            d[1] = s[1];
            d[2] = s[2];
        }
    }
    *out = im;
    *rgb = buf;
    return WGML_OK;
}

/* normalize: wgml_normalize (0 l2, 1 none); n_batch: images per step (0: the library's). */
EXPORT(wgmlw_embed_images)
int wgmlw_embed_images(wgml_model *m, const int *images, int n, int normalize, int n_batch, float *out, int dim) {
    wgml_error_clear(&last_error);
    if (!m) return (int)wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_embed_images: no model");
    wgml_image *im;
    uint8_t *rgb;
    wgml_status st = rgb_images(images, n, &im, &rgb, &last_error);
    if (st) return (int)st;
    wgml_embed_params p = wgml_embed_default_params();
    p.normalize = (wgml_normalize)normalize;
    p.n_batch = n_batch;
    st = wgml_embed_images(m, im, n, &p, out, dim, &last_error);
    wgml_free(rgb);
    wgml_free(im);
    return (int)st;
}

/* Classifies n images: per image its top labels by probability (top: how many,
 * at most the labels; 0 or less: all), as JSON
 * [[{"label":"...","index":j,"score":p}, ...], ...]; NULL with the reason.
 * texts (n_texts > 0): label texts scored zero-shot (a CLIP or SigLIP model,
 * wgml_zero_shot_classify); else the classifier's own labels. */
EXPORT(wgmlw_classify_images)
const char *wgmlw_classify_images(wgml_model *m, const int *images, int n, int top, const char *const *texts,
                                  int n_texts) {
    wgml_error_clear(&last_error);
    if (!m) {
        wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_classify_images: no model");
        return NULL;
    }
    const int L = n_texts > 0 ? n_texts : wgml_model_n_labels(m);
    if (!L) { /* the library's message */
        wgml_classify_images(m, NULL, 0, NULL, 0, &last_error);
        return NULL;
    }
    wgml_image *im;
    uint8_t *rgb;
    if (rgb_images(images, n, &im, &rgb, &last_error)) return NULL;
    float *probs = wgml_malloc((size_t)(n > 0 ? n : 1) * (size_t)L * sizeof *probs);
    int *order = wgml_malloc((size_t)L * sizeof *order);
    wgml_status st = !probs || !order ? wgml_fail(&last_error, WGML_ERR_OUT_OF_MEMORY, "out of memory for the scores")
                      : n_texts > 0 ? wgml_zero_shot_classify(m, im, n, texts, L, probs, &last_error)
                                    : wgml_classify_images(m, im, n, probs, L, &last_error);
    wgml_free(rgb);
    wgml_free(im);
    const int k = top > 0 && top < L ? top : L;
    if (!st) {
        json_start();
        append("[");
        for (int i = 0; i < n; i++) {
            const float *p = probs + (size_t)i * (size_t)L;
            /* the k best by a partial selection: higher score first, then the lower index (as the CLI) */
            for (int j = 0; j < L; j++) order[j] = j;
            for (int a = 0; a < k; a++) {
                int b = a;
                for (int j = a + 1; j < L; j++)
                    if (p[order[j]] > p[order[b]] || (p[order[j]] == p[order[b]] && order[j] < order[b])) b = j;
                const int t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
            append("%s[", i ? "," : "");
            for (int a = 0; a < k; a++) {
                const char *label = n_texts > 0 ? texts[order[a]] : wgml_model_label(m, order[a]);
                append("%s{\"label\":", a ? "," : "");
                append_str(label);
                append(",\"index\":%d,\"score\":%.9g}", order[a], (double)p[order[a]]);
            }
            append("]");
        }
        append("]");
        if (json_cut) st = wgml_fail(&last_error, WGML_ERR_OUT_OF_MEMORY, "out of memory listing the labels");
    }
    wgml_free(order);
    wgml_free(probs);
    return st ? NULL : json;
}

/* ---- speech (the kokoro family) ------------------------------------------------------ */

/* The G2P backend of the page: the phonemes of each piece, computed in JS
 * (web/g2p.js: phonemizer, espeak-ng compiled to WebAssembly) for exactly
 * these pieces, handed over before the call. */
typedef struct {
    const char *voice; /* espeak-ng's voice the results are for */
    const char *const *pieces, *const *results;
    int n;
    const char *const *words, *const *word_results; /* each word said alone (NULL: none given) */
    int n_words;
} given_g2p;

/* espeak-ng's voice for a language, as kokoro-js picks it ('a' en-us, 'b' en). */
static const char *espeak_voice(const char *lang) { return g2p_en_american(lang) ? "en-us" : "en"; }

/* out[i]: a copy of results[i], after checking that the texts asked for
 * are those JS phonemized (what: "piece" or "word"). */
static wgml_status give(const char *const *asked, const char *const *texts, const char *const *results, size_t n,
                        const char *what, char **out, wgml_error *err) {
    for (size_t i = 0; i < n; i++)
        if (!texts[i] || !results[i] || strcmp(asked[i], texts[i]))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s %zu to phonemize is '%s', phonemized was '%s'", what,
                             i, asked[i], texts[i] ? texts[i] : "(none)");
    for (size_t i = 0; i < n; i++)
        if (!(out[i] = wgml_strdup(results[i]))) {
            for (size_t j = 0; j < i; j++) {
                wgml_free(out[j]);
                out[j] = NULL;
            }
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory phonemizing text");
        }
    return WGML_OK;
}

static wgml_status given_phonemize(void *user, const char *lang, const char *const *pieces, size_t n, char **out,
                                   wgml_error *err) {
    const given_g2p *g = user;
    if (strcmp(espeak_voice(lang), g->voice))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the phonemes were made with espeak-ng voice '%s', not '%s'",
                         g->voice, espeak_voice(lang));
    if (n != (size_t)g->n)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the text has %zu pieces to phonemize, %d phonemized", n,
                         g->n);
    return give(pieces, g->pieces, g->results, n, "piece", out, err);
}

static wgml_status given_words(void *user, const char *lang, const char *const *words, size_t n, char **out,
                               wgml_error *err) {
    const given_g2p *g = user;
    if (!g->words || strcmp(espeak_voice(lang), g->voice) || n != (size_t)g->n_words)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the words were not phonemized alone");
    return give(words, g->words, g->word_results, n, "word", out, err);
}

/* The pieces of text that espeak-ng phonemizes (g2p_en_normalize, g2p_en_split),
 * and the words it says alone for word timing (g2p_en_words):
 * {"voice":"en-us","pieces":["...", ...],"words":["...", ...]}; NULL on
 * failure (bad UTF-8, unknown language). */
EXPORT(wgmlw_g2p_pieces) const char *wgmlw_g2p_pieces(const char *lang, const char *text) {
    wgml_error_clear(&last_error);
    if (!text) {
        wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_g2p_pieces: no text");
        return NULL;
    }
    if (!lang) lang = "en-us";
    if (g2p_en_american(lang) < 0) {
        wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "unknown language '%s' (en-us or en-gb)", lang);
        return NULL;
    }
    char *norm = NULL;
    g2p_span *spans = NULL;
    size_t n = 0;
    if (g2p_check_utf8(text, &last_error) || g2p_en_normalize(text, &norm, &last_error) ||
        g2p_en_split(norm, &spans, &n, &last_error)) {
        wgml_free(norm);
        return NULL;
    }
    g2p_span *words = NULL;
    size_t n_words = 0;
    if (g2p_en_words(norm, spans, n, &words, &n_words, &last_error)) {
        wgml_free(spans);
        wgml_free(norm);
        return NULL;
    }
    json_start();
    append("{\"voice\":\"%s\",\"pieces\":[", espeak_voice(lang));
    for (size_t i = 0, k = 0; i < n; i++) {
        if (spans[i].punct) continue;
        append("%s", k++ ? "," : "");
        append_json_bytes(norm + spans[i].off, spans[i].len);
    }
    append("],\"words\":[");
    for (size_t i = 0; i < n_words; i++) {
        append("%s", i ? "," : "");
        append_json_bytes(norm + words[i].off, words[i].len);
    }
    append("]}");
    wgml_free(words);
    wgml_free(spans);
    wgml_free(norm);
    if (json_cut) {
        wgml_fail(&last_error, WGML_ERR_OUT_OF_MEMORY, "out of memory listing the pieces of the text");
        return NULL;
    }
    return json;
}

/* text -> phonemes through the G2P, with the pieces' phonemes from JS. *out: wgml_malloc'ed. */
static wgml_status phonemize_given(const char *lang, const char *text, const char *const *pieces,
                                   const char *const *results, int n, char **out) {
    given_g2p given = {espeak_voice(lang ? lang : "en-us"), pieces, results, n, NULL, NULL, 0};
    wgml_g2p_backend be = {.name = "espeak-ng (phonemizer)", .phonemize_pieces = given_phonemize, .user = &given};
    wgml_g2p *g;
    wgml_status st = wgml_g2p_open(&be, &g, &last_error);
    if (st) return st;
    st = wgml_g2p_phonemize(g, lang ? lang : "en-us", text, out, &last_error);
    wgml_g2p_free(g);
    return st;
}

/* kokoro-js's phonemize(text): a wgml_malloc'ed string (free with wgmlw_free); NULL on failure. */
EXPORT(wgmlw_phonemize)
char *wgmlw_phonemize(const char *lang, const char *text, const char *const *pieces, const char *const *results,
                      int n) {
    wgml_error_clear(&last_error);
    if (!text) {
        wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_phonemize: no text");
        return NULL;
    }
    char *ph = NULL;
    if (lang && g2p_en_american(lang) < 0) {
        wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "unknown language '%s' (en-us or en-gb)", lang);
        return NULL;
    }
    phonemize_given(lang, text, pieces, results, n, &ph);
    return ph;
}

/* A chunk to JS: the samples, and the rest as JSON. */
static int on_audio(void *user, const wgml_audio_chunk *c) {
    json_start();
    append("{\"index\":%d,\"start\":%.17g,\"sample_rate\":%d,\"phonemes\":", c->index, c->start, c->sample_rate);
    append_str(c->phonemes);
    append(",\"words\":[");
    for (int i = 0; i < c->n_words; i++) {
        append("%s{\"word\":", i ? "," : "");
        append_str(c->words[i].word);
        append(",\"phonemes\":");
        append_str(c->words[i].phonemes);
        append(",\"start\":%.17g,\"end\":%.17g,\"offset\":%lld,\"length\":%lld}", c->words[i].start, c->words[i].end,
               (long long)c->words[i].offset, (long long)c->words[i].length);
    }
    append("]}");
    if (json_cut) return 1; /* out of memory: stop rather than lose the chunk's timing */
    return js_audio((int)(intptr_t)user, c->samples, (int)c->n_samples, json, (int)json_at);
}

/* Speaks input (phonemes: 1, the model's symbols; 0: text, with the
 * phonemes of its pieces from wgmlw_g2p_pieces in pieces/results, n of
 * each, and of its words said alone in words/word_results, n_words of each;
 * words NULL: the words are placed by their letters). seed: the vocoder
 * noise's (0 .. 2^53). Returns a wgml_status. */
EXPORT(wgmlw_speak)
int wgmlw_speak(wgml_model *m, const char *input, const char *voice, double speed, double seed, int phonemes, int split,
                const char *lang, const char *const *pieces, const char *const *results, int n,
                const char *const *words, const char *const *word_results, int n_words, int user) {
    wgml_error_clear(&last_error);
    memset(&last_speech, 0, sizeof last_speech);
    if (!m || !input) return (int)wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_speak: NULL argument");
    if (!(seed >= 0 && seed <= 9007199254740992.0))
        return (int)wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "seed %g is outside 0 .. 2^53", seed);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    if (!(info.tasks & WGML_TASK_SPEECH)) /* the library's message, before any G2P */
        return (int)wgml_speak(m, "", NULL, NULL, NULL, NULL, NULL, &last_error);
    wgml_speak_params p = wgml_speak_default_params();
    p.speed = (float)speed;
    p.seed = (uint64_t)seed;
    p.phonemes = phonemes != 0;
    p.split = (wgml_speak_split)split; /* checked by wgml_speak */
    if (lang) p.lang = lang;
    if (!phonemes && g2p_en_american(p.lang) < 0)
        return (int)wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "unknown language '%s' (en-us or en-gb)", p.lang);
    given_g2p given = {espeak_voice(p.lang), pieces, results, n, words, word_results, n_words};
    wgml_g2p_backend be = {.name = "espeak-ng (phonemizer)",
                           .phonemize_pieces = given_phonemize,
                           .user = &given,
                           .phonemize_words = words ? given_words : NULL};
    wgml_g2p *g = NULL;
    wgml_status st = phonemes ? WGML_OK : wgml_g2p_open(&be, &g, &last_error);
    if (!st)
        st = wgml_speak_g2p(m, input, voice && *voice ? voice : NULL, &p, g, on_audio, (void *)(intptr_t)user,
                            &last_speech, &last_error);
    wgml_g2p_free(g);
    return (int)st;
}

EXPORT(wgmlw_speak_result) const char *wgmlw_speak_result(void) {
    const wgml_speak_result *r = &last_speech;
    json_start();
    append("{\"n_samples\":%lld,\"n_chunks\":%d,\"first_audio_ms\":%.6g,\"total_ms\":%.6g}", (long long)r->n_samples,
           r->n_chunks, r->first_audio_ms, r->total_ms);
    return json_done();
}

/* ---- speech recognition (the whisper family) ---------------------------------------- */

/* A float as JSON: a number, or null when it is not finite. */
static void append_num(double v) {
    if (isfinite(v))
        append("%.9g", v);
    else
        append("null");
}

/* A segment to JS, as JSON. */
static int on_segment(void *user, const wgml_transcript_segment *s) {
    json_start();
    append("{\"index\":%d,\"start\":%.17g,\"end\":%.17g,\"text\":", s->index, s->start, s->end);
    append_str(s->text);
    append(",\"tokens\":[");
    for (int i = 0; i < s->n_tokens; i++) append("%s%d", i ? "," : "", (int)s->tokens[i]);
    append("],\"temperature\":");
    append_num(s->temperature);
    append(",\"avg_logprob\":");
    append_num(s->avg_logprob);
    append(",\"compression_ratio\":");
    append_num(s->compression_ratio);
    append(",\"no_speech_prob\":");
    append_num(s->no_speech_prob);
    if (s->words) {
        append(",\"words\":[");
        for (int i = 0; i < s->n_words; i++) {
            append("%s{\"word\":", i ? "," : "");
            append_str(s->words[i].text);
            append(",\"start\":%.17g,\"end\":%.17g,\"probability\":", s->words[i].start, s->words[i].end);
            append_num(s->words[i].probability);
            append("}");
        }
        append("]");
    }
    append("}");
    if (json_cut) return 1; /* out of memory: stop rather than lose the segment */
    return js_segment((int)(intptr_t)user, json, (int)json_at);
}

/* Transcribes (translate 1: into English) n mono float samples at rate Hz.
 * language: a code ("en"), NULL/"" or "auto": detected; timestamps 0: no
 * timestamp tokens (a segment per 30 s window); beam_size 0/1 greedy;
 * temperature the first try's; no_fallback 1: no retries at higher
 * temperatures; condition 0: windows do not see the text before them;
 * prompt: text before the first window, or NULL; max_tokens per window, 0:
 * 224; seed: sampling's (0 .. 2^53). Each segment goes to wgml.segment.
 * Returns a wgml_status. */
EXPORT(wgmlw_transcribe)
int wgmlw_transcribe(wgml_model *m, const float *pcm, int n, int rate, const char *language, int translate,
                     int timestamps, int word_timestamps, int beam_size, double patience, double temperature,
                     int no_fallback, int condition, const char *prompt, int max_tokens, double seed, int user) {
    wgml_error_clear(&last_error);
    memset(&last_transcript, 0, sizeof last_transcript);
    if (!m || n < 0 || (!pcm && n))
        return (int)wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "wgmlw_transcribe: NULL argument");
    if (!(seed >= 0 && seed <= 9007199254740992.0))
        return (int)wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT, "seed %g is outside 0 .. 2^53", seed);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    if (!(info.tasks & WGML_TASK_TRANSCRIBE)) /* the library's message */
        return (int)wgml_transcribe(m, NULL, 0, 16000, NULL, NULL, NULL, NULL, &last_error);
    if (!n) /* natively an empty transcript; here most likely a recording that caught nothing */
        return (int)wgml_fail(&last_error, WGML_ERR_INVALID_ARGUMENT,
                              "there is no audio to transcribe (0 samples): nothing was recorded or decoded");
    wgml_transcribe_params p = wgml_transcribe_default_params();
    p.language = language && *language && strcmp(language, "auto") ? language : NULL;
    p.translate = translate != 0;
    p.without_timestamps = !timestamps;
    p.word_timestamps = word_timestamps != 0;
    p.beam_size = beam_size;
    p.patience = (float)patience;
    p.temperature = (float)temperature;
    p.no_fallback = no_fallback != 0;
    p.condition_on_previous_text = condition != 0;
    p.prompt = prompt && *prompt ? prompt : NULL;
    p.max_tokens = max_tokens;
    p.seed = (uint64_t)seed;
    return (int)wgml_transcribe(m, pcm, (size_t)n, rate, &p, on_segment, (void *)(intptr_t)user, &last_transcript,
                                &last_error);
}

EXPORT(wgmlw_transcribe_result) const char *wgmlw_transcribe_result(void) {
    const wgml_transcribe_result *r = &last_transcript;
    json_start();
    append("{\"language\":");
    append_str(r->language);
    append(",\"duration\":%.17g,\"n_segments\":%d,\"n_windows\":%d,\"n_tokens\":%d,\"encode_ms\":%.6g,"
           "\"decode_ms\":%.6g,\"total_ms\":%.6g}",
           r->duration, r->n_segments, r->n_windows, r->n_tokens, r->encode_ms, r->decode_ms, r->total_ms);
    return json_done();
}
