/*
 * serve_http.c - the server's HTTP side, on civetweb (Debian's
 * libcivetweb-dev): one handler routes every request.
 *
 * Each request is checked in this order, each failure an OpenAI-shaped JSON
 * error ({"error": {"message", "type", "param", "code"}}):
 *   both Content-Length and Transfer-Encoding 400 (and the connection
 *   closes), without an API key a Host that is not this server's 403, an
 *   Origin that --cors does not allow 403 (serve_guard.c), a CORS preflight
 *   (OPTIONS) answered, route unknown 404, method not allowed 405 (with
 *   Allow), API key missing or wrong 401 (/v1/ routes; /health and /metrics
 *   stay open for monitors), draining 503, a POST body that is not
 *   application/json 415, body over the limit 413, a body not in within the
 *   time limit 408, malformed JSON or a bad parameter 400, prompt longer than
 *   the context 400 (context_length_exceeded), queue full 503.
 * A generation request becomes a job for the scheduler (serve_sched.c); this
 * thread then waits on the job and writes the answer: one JSON response, or
 * server-sent events as the text is released (`data: {chunk}` ... `data:
 * [DONE]`). A write that fails (the client went away) cancels the job, which
 * frees its slot before the next step.
 */
#include <civetweb.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

struct serve_http {
    struct mg_context *ctx;
    serve_server *s;
    serve_guard *guard;
    serve_http_opts o;
    int port; /* the port bound */
};

enum { EP_CHAT, EP_COMPLETIONS, EP_EMBEDDINGS, EP_SPEECH, EP_MODELS, EP_HEALTH, EP_METRICS, EP_OTHER };
static const char *const ep_names[SERVE_N_ENDPOINTS] = {"chat_completions", "completions", "embeddings", "audio_speech",
                                                        "models", "health", "metrics", "other"};

/* ---- responses ---- */

const int serve_status_codes[SERVE_N_STATUS] = {200, 400, 401, 403, 404, 405, 408, 413, 415, 429, 499, 500, 503};

static void count(serve_server *s, int ep, int status) {
    int k = SERVE_N_STATUS - 1;
    for (int i = 0; i < SERVE_N_STATUS; i++)
        if (serve_status_codes[i] == status) k = i;
    pthread_mutex_lock(&s->mu);
    s->metrics.requests[ep][k]++;
    pthread_mutex_unlock(&s->mu);
}

/* The Access-Control-Allow-Origin of a response: NULL unless the request's Origin is one --cors allows. */
static const char *cors_origin(struct mg_connection *c) {
    const serve_http *h = mg_get_user_data(mg_get_context(c));
    const char *origin = mg_get_header(c, "Origin");
    if (!h || !origin) return NULL;
    for (int i = 0; i < h->o.n_cors; i++) {
        if (!strcmp(h->o.cors[i], "*")) return "*";
        if (!strcasecmp(h->o.cors[i], origin)) return origin;
    }
    return NULL;
}

static void add_cors(struct mg_connection *c) {
    const char *o = cors_origin(c);
    if (!o) return;
    mg_response_header_add(c, "Access-Control-Allow-Origin", o, -1);
    mg_response_header_add(c, "Vary", "Origin", -1);
}

static int send_body(struct mg_connection *c, int status, const char *type, const char *body, size_t len,
                     const char *extra_name, const char *extra_value) {
    char cl[32];
    snprintf(cl, sizeof cl, "%zu", len);
    mg_response_header_start(c, status);
    mg_response_header_add(c, "Content-Type", type, -1);
    mg_response_header_add(c, "Content-Length", cl, -1);
    if (extra_name) mg_response_header_add(c, extra_name, extra_value, -1);
    add_cors(c);
    mg_response_header_send(c);
    if (len) mg_write(c, body, len);
    return status;
}

static int send_json(struct mg_connection *c, int status, json_object *o) {
    size_t len;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    send_body(c, status, "application/json", t, len, NULL, NULL);
    json_object_put(o);
    return status;
}

static json_object *error_object(const char *message, const char *type, const char *param, const char *code) {
    json_object *e = json_object_new_object();
    json_object_object_add(e, "message", json_object_new_string(message));
    json_object_object_add(e, "type", json_object_new_string(type));
    json_object_object_add(e, "param", param ? json_object_new_string(param) : NULL);
    json_object_object_add(e, "code", code ? json_object_new_string(code) : NULL);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "error", e);
    return o;
}

/* An OpenAI-shaped error; allow: the Allow header's methods (405) */
static int send_error_allow(struct mg_connection *c, int status, const char *param, const char *code,
                            const char *allow, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const char *type = status == 401   ? "authentication_error"
                       : status == 403 ? "permission_error"
                       : status == 404 ? "not_found_error"
                       : status >= 500 ? (status == 503 ? "overloaded_error" : "server_error")
                                       : "invalid_request_error";
    json_object *o = error_object(msg, type, param, code);
    size_t len;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    send_body(c, status, "application/json", t, len, allow ? "Allow" : NULL, allow);
    json_object_put(o);
    return status;
}

static int send_error(struct mg_connection *c, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int send_error(struct mg_connection *c, int status, const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = send_error_allow(c, status, param, code, NULL, fmt, ap);
    va_end(ap);
    return r;
}

static int send_405(struct mg_connection *c, const char *allow, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int send_405(struct mg_connection *c, const char *allow, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = send_error_allow(c, 405, NULL, "method_not_allowed", allow, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- request parameters ---- */

typedef struct {
    int stream, include_usage, max_tokens;
    wgml_sampler_params sampler;
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    char err[256];
    const char *bad_param;
} gen_params;

static int bad(gen_params *g, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(gen_params *g, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    g->bad_param = param;
    return -1;
}

static int is_number(json_object *v) { return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double); }

/* Whether a string anywhere in v holds U+0000. Texts go on as C strings (the template
 * engine, the tokenizers, the G2P), which would cut them at the NUL without a word: such
 * a request gets a 400 instead. */
static int has_nul(json_object *v, int depth) {
    if (depth > 64) return 0; /* json-c's parser nests no deeper */
    if (json_object_is_type(v, json_type_string))
        return memchr(json_object_get_string(v), 0, (size_t)json_object_get_string_len(v)) != NULL;
    if (json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++)
            if (has_nul(json_object_array_get_idx(v, i), depth + 1)) return 1;
    } else if (json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, k, x) {
            (void)k;
            if (has_nul(x, depth + 1)) return 1;
        }
    }
    return 0;
}

static int add_stop(gen_params *g, json_object *v) {
    if (!json_object_is_type(v, json_type_string)) return bad(g, "stop", "'stop' must be a string or an array of strings");
    size_t n = (size_t)json_object_get_string_len(v);
    if (n == 0 || n > SERVE_STOP_MAX_LEN)
        return bad(g, "stop", "a stop string must have 1 to %d bytes", SERVE_STOP_MAX_LEN);
    if (has_nul(v, 0)) return bad(g, "stop", "a stop string cannot contain U+0000");
    if (g->n_stop >= SERVE_MAX_STOP) return bad(g, "stop", "at most %d stop strings", SERVE_MAX_STOP);
    if (!(g->stop[g->n_stop] = strdup(json_object_get_string(v)))) return bad(g, "stop", "out of memory");
    g->n_stop++;
    return 0;
}

/* The parameters both generation endpoints share; -1 with g->err on a bad one. */
static int parse_gen(json_object *req, int chat, gen_params *g) {
    memset(g, 0, sizeof *g);
    g->max_tokens = chat ? -1 : 16; /* OpenAI's defaults: the context for chat, 16 for completions */
    g->sampler = wgml_sampler_default_params();
    g->sampler.temperature = 1.0f, g->sampler.top_p = 1.0f, g->sampler.top_k = 0, g->sampler.min_p = 0;
    g->sampler.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    json_object *v;
    if (json_object_object_get_ex(req, "model", &v) && v && !json_object_is_type(v, json_type_string))
        return bad(g, "model", "'model' must be a string");
    if (json_object_object_get_ex(req, "stream", &v) && v) {
        if (!json_object_is_type(v, json_type_boolean)) return bad(g, "stream", "'stream' must be a boolean");
        g->stream = json_object_get_boolean(v);
    }
    if (json_object_object_get_ex(req, "stream_options", &v) && v) {
        json_object *u;
        if (!json_object_is_type(v, json_type_object)) return bad(g, "stream_options", "'stream_options' must be an object");
        if (json_object_object_get_ex(v, "include_usage", &u) && u) {
            if (!json_object_is_type(u, json_type_boolean))
                return bad(g, "stream_options.include_usage", "'include_usage' must be a boolean");
            g->include_usage = json_object_get_boolean(u);
        }
    }
    const char *names[] = {"max_tokens", "max_completion_tokens"};
    for (int i = 0; i < 2; i++) {
        if (!json_object_object_get_ex(req, names[i], &v) || !v) continue;
        if (!json_object_is_type(v, json_type_int)) return bad(g, names[i], "'%s' must be an integer", names[i]);
        int64_t n = json_object_get_int64(v);
        if (n < 1 || n > (1 << 24)) return bad(g, names[i], "'%s' must be from 1 to %d", names[i], 1 << 24);
        g->max_tokens = (int)n;
    }
    if (json_object_object_get_ex(req, "temperature", &v) && v) {
        double t = json_object_get_double(v);
        if (!is_number(v) || !(t >= 0 && t <= 2)) return bad(g, "temperature", "'temperature' must be a number in [0, 2]");
        g->sampler.temperature = (float)t;
    }
    if (json_object_object_get_ex(req, "top_p", &v) && v) {
        double t = json_object_get_double(v);
        if (!is_number(v) || !(t > 0 && t <= 1)) return bad(g, "top_p", "'top_p' must be a number in (0, 1]");
        g->sampler.top_p = (float)t;
    }
    if (json_object_object_get_ex(req, "seed", &v) && v) {
        if (!json_object_is_type(v, json_type_int)) return bad(g, "seed", "'seed' must be an integer");
        g->sampler.seed = (uint64_t)json_object_get_int64(v);
    }
    if (json_object_object_get_ex(req, "n", &v) && v) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 1)
            return bad(g, "n", "only n = 1 is supported");
    }
    if (json_object_object_get_ex(req, "stop", &v) && v) {
        if (json_object_is_type(v, json_type_array)) {
            size_t n = json_object_array_length(v);
            for (size_t i = 0; i < n; i++)
                if (add_stop(g, json_object_array_get_idx(v, i))) return -1;
        } else if (add_stop(g, v)) {
            return -1;
        }
    }
    return 0;
}

static void free_gen(gen_params *g) {
    for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
    g->n_stop = 0;
}

/* ---- the generation endpoints ---- */

static const char *finish_name(serve_finish f) { return f == SERVE_FINISH_LENGTH ? "length" : "stop"; }

static json_object *usage_object(const serve_job *j) {
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int(j->n_prompt));
    json_object_object_add(u, "completion_tokens", json_object_new_int(j->n_gen));
    json_object_object_add(u, "total_tokens", json_object_new_int(j->n_prompt + j->n_gen));
    json_object *d = json_object_new_object();
    json_object_object_add(d, "cached_tokens", json_object_new_int(j->n_cached));
    json_object_object_add(u, "prompt_tokens_details", d);
    return u;
}

/* A response or chunk's common fields. */
static json_object *envelope(serve_server *s, const char *id, const char *object) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "object", json_object_new_string(object));
    json_object_object_add(o, "created", json_object_new_int64((int64_t)time(NULL)));
    json_object_object_add(o, "model", json_object_new_string(s->model_id));
    json_object_object_add(o, "system_fingerprint", json_object_new_string("wgml"));
    return o;
}

/* One choice: chat's message or delta, or completion's text. */
static json_object *choice(int chat, int delta, const char *text, size_t len, int role, const char *finish) {
    json_object *c = json_object_new_object();
    json_object_object_add(c, "index", json_object_new_int(0));
    if (chat) {
        json_object *m = json_object_new_object();
        if (role) json_object_object_add(m, "role", json_object_new_string("assistant"));
        if (text) json_object_object_add(m, "content", json_object_new_string_len(text, (int)len));
        json_object_object_add(c, delta ? "delta" : "message", m);
    } else {
        json_object_object_add(c, "text", json_object_new_string_len(text ? text : "", text ? (int)len : 0));
    }
    json_object_object_add(c, "logprobs", NULL);
    json_object_object_add(c, "finish_reason", finish ? json_object_new_string(finish) : NULL);
    return c;
}

/* Streamed bodies. HTTP/1.1 gets them chunked; HTTP/1.0 has no chunked encoding, so
 * there the body goes out as it is, and the connection closes at its end. */
static int http10(struct mg_connection *c) {
    const struct mg_request_info *ri = mg_get_request_info(c);
    return ri && ri->http_version && !strcmp(ri->http_version, "1.0");
}

static void stream_start(struct mg_connection *c, const char *content_type) {
    mg_response_header_start(c, 200);
    mg_response_header_add(c, "Content-Type", content_type, -1);
    if (!strcmp(content_type, "text/event-stream")) mg_response_header_add(c, "Cache-Control", "no-cache", -1);
    if (http10(c)) mg_response_header_add(c, "Connection", "close", -1);
    else mg_response_header_add(c, "Transfer-Encoding", "chunked", -1);
    add_cors(c);
    mg_response_header_send(c);
}

/* 0, or -1 when the client is gone */
static int stream_write(struct mg_connection *c, const void *b, size_t n) {
    if (!n) return 0;
    return (http10(c) ? mg_write(c, b, n) : mg_send_chunk(c, b, (unsigned)n)) > 0 ? 0 : -1;
}

static void stream_end(struct mg_connection *c) {
    if (!http10(c)) mg_send_chunk(c, "", 0);
}

/* Writes one server-sent event; 0, or -1 when the client is gone. */
static int sse(struct mg_connection *c, json_object *o) {
    size_t len;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    char *buf = malloc(len + 9);
    int rc = -1;
    if (buf) {
        memcpy(buf, "data: ", 6);
        memcpy(buf + 6, t, len);
        memcpy(buf + 6 + len, "\n\n", 2);
        rc = stream_write(c, buf, len + 8);
        free(buf);
    }
    json_object_put(o);
    return rc;
}

static json_object *chunk(serve_server *s, const char *id, int chat, int include_usage, json_object *choice_obj) {
    json_object *o = envelope(s, id, chat ? "chat.completion.chunk" : "text_completion");
    json_object *arr = json_object_new_array();
    if (choice_obj) json_object_array_add(arr, choice_obj);
    json_object_object_add(o, "choices", arr);
    if (include_usage) json_object_object_add(o, "usage", NULL);
    return o;
}

static void cancel(serve_server *s, serve_job *j) {
    pthread_mutex_lock(&s->mu);
    j->cancelled = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

/* The time ms milliseconds from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(int ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    return until;
}

/* Waits (under s->mu) until the job has text past `sent` or has finished, or
 * for at most ms milliseconds (ms > 0); 1 when the time ran out first. */
static int wait_job(serve_server *s, serve_job *j, size_t sent, int ms) {
    if (ms <= 0) {
        while (j->len == sent && !j->finish) pthread_cond_wait(&j->cv, &s->mu);
        return 0;
    }
    struct timespec until = deadline_in(ms);
    while (j->len == sent && !j->finish)
        if (pthread_cond_timedwait(&j->cv, &s->mu, &until) == ETIMEDOUT) return j->len == sent && !j->finish;
    return 0;
}

/* Streams a queued job's text as server-sent events until it finishes. While
 * it waits for a slot or its prompt is evaluated, nothing else would be
 * written: an SSE comment (": keep-alive") every s->keepalive_ms keeps
 * proxies from timing out, and a write that fails tells us the client is
 * gone, so the job is cancelled there and then (it leaves the queue, or its
 * slot, before the next step) instead of holding a place until its first token. */
static int stream_job(struct mg_connection *c, serve_server *s, serve_job *j, const char *id, int chat,
                      const gen_params *g) {
    stream_start(c, "text/event-stream");
    int dead = chat && sse(c, chunk(s, id, chat, g->include_usage, choice(chat, 1, "", 0, 1, NULL)));
    size_t sent = 0;
    char *piece = NULL;
    serve_finish fin = SERVE_RUNNING;
    while (!dead) {
        pthread_mutex_lock(&s->mu);
        if (wait_job(s, j, sent, s->keepalive_ms)) {
            pthread_mutex_unlock(&s->mu);
            if (stream_write(c, ": keep-alive\n\n", 14)) dead = 1;
            continue;
        }
        size_t n = j->len - sent;
        char *np = n ? realloc(piece, n) : piece;
        int oom = n && !np; /* (a job that ends with no text at all has n = 0 and no piece yet) */
        if (n && np) {
            piece = np;
            memcpy(piece, j->text + sent, n);
            sent += n;
        }
        fin = j->finish;
        pthread_mutex_unlock(&s->mu);
        if (oom) {
            dead = 1;
            break;
        }
        if (n && sse(c, chunk(s, id, chat, g->include_usage, choice(chat, 1, piece, n, 0, NULL)))) dead = 1;
        if (fin) break;
    }
    free(piece);
    if (dead) {
        cancel(s, j);
        return 499;
    }
    if (fin == SERVE_FINISH_ERROR) {
        json_object *e = error_object(j->error, "server_error", NULL, NULL);
        sse(c, e);
    } else {
        if (sse(c, chunk(s, id, chat, g->include_usage, choice(chat, 1, NULL, 0, 0, finish_name(fin))))) dead = 1;
        if (!dead && g->include_usage) {
            json_object *u = chunk(s, id, chat, 0, NULL);
            json_object_object_add(u, "usage", usage_object(j));
            dead = sse(c, u) != 0;
        }
    }
    if (!dead) stream_write(c, "data: [DONE]\n\n", 14);
    stream_end(c);
    return 200;
}

/* How often a non-streamed request looks whether its client is still there. */
#define CLIENT_CHECK_MS 100

/* Waits for a job and answers with one JSON object. Meanwhile, every
 * CLIENT_CHECK_MS, it looks whether the client closed its connection: then
 * the job is cancelled (it leaves the queue, or its slot, before the next step)
 * instead of generating to its end for nobody. */
static int answer_job(struct mg_connection *c, serve_server *s, serve_job *j, const char *id, int chat) {
    serve_http *h = mg_get_user_data(mg_get_context(c));
    pthread_mutex_lock(&s->mu);
    while (!j->finish) {
        struct timespec until = deadline_in(CLIENT_CHECK_MS);
        while (!j->finish && pthread_cond_timedwait(&j->cv, &s->mu, &until) != ETIMEDOUT) continue;
        if (j->finish) break;
        pthread_mutex_unlock(&s->mu);
        int gone = h && serve_guard_client_gone(h->guard, c);
        pthread_mutex_lock(&s->mu);
        if (gone && !j->finish) {
            j->cancelled = 1;
            pthread_cond_signal(&s->wake);
            while (!j->finish) pthread_cond_wait(&j->cv, &s->mu);
            pthread_mutex_unlock(&s->mu);
            return 499;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (j->finish == SERVE_FINISH_ERROR) return send_error(c, 500, NULL, NULL, "generation failed: %s", j->error);
    if (j->finish == SERVE_FINISH_CANCELLED) return send_error(c, 503, NULL, NULL, "the server is shutting down");
    json_object *o = envelope(s, id, chat ? "chat.completion" : "text_completion");
    json_object *arr = json_object_new_array();
    json_object_array_add(arr, choice(chat, 0, j->text ? j->text : "", j->len, 1, finish_name(j->finish)));
    json_object_object_add(o, "choices", arr);
    json_object_object_add(o, "usage", usage_object(j));
    return send_json(c, 200, o);
}

/* Tokenizes, queues and answers a generation request whose prompt text is ready. */
static int generate(struct mg_connection *c, serve_server *s, const char *text, int add_bos, int chat,
                    gen_params *g) {
    size_t tlen = strlen(text);
    wgml_error err;
    /* no lock: tokenizing reads the vocabulary only (wgml.h), beside the scheduler's steps */
    int n = wgml_tokenize(s->model, text, tlen, add_bos, NULL, 0, &err);
    int32_t *toks = n > 0 ? malloc((size_t)n * sizeof *toks) : NULL;
    if (toks) n = wgml_tokenize(s->model, text, tlen, add_bos, toks, n, &err);
    if (n < 0) {
        free(toks);
        return send_error(c, 400, chat ? "messages" : "prompt", NULL, "the prompt cannot be tokenized: %s", err.message);
    }
    if (n == 0) return send_error(c, 400, chat ? "messages" : "prompt", NULL, "the prompt is empty");
    if (!toks) return send_error(c, 500, NULL, NULL, "out of memory");
    if (n > s->n_ctx - 1) {
        free(toks);
        return send_error(c, 400, chat ? "messages" : "prompt", "context_length_exceeded",
                          "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens "
                          "(the reply needs at least one more).",
                          s->n_ctx, chat ? "messages" : "prompt", n);
    }
    serve_job *j = serve_job_new();
    if (!j) {
        free(toks);
        return send_error(c, 500, NULL, NULL, "out of memory");
    }
    j->prompt = toks;
    j->n_prompt = n;
    j->max_tokens = g->max_tokens;
    j->sampler = g->sampler;
    for (int i = 0; i < g->n_stop; i++) j->stop[i] = g->stop[i];
    j->n_stop = g->n_stop;
    g->n_stop = 0; /* the job owns them now */
    char id[48];
    pthread_mutex_lock(&s->mu);
    snprintf(id, sizeof id, "%s-%llx%06llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)s->created,
             (unsigned long long)++s->next_id);
    int full = serve_submit(s, j);
    pthread_mutex_unlock(&s->mu);
    int status;
    if (full) {
        status = send_error(c, 503, NULL, NULL, "all %d slots are busy and %d requests wait: try again later",
                            s->n_slots, s->max_queue);
    } else {
        status = g->stream ? stream_job(c, s, j, id, chat, g) : answer_job(c, s, j, id, chat);
    }
    pthread_mutex_lock(&s->mu);
    serve_job_unref(s, j);
    pthread_mutex_unlock(&s->mu);
    return status;
}

/* 400 for an endpoint of a task the model does not have (the name of the task's API). */
static int no_task(struct mg_connection *c, serve_server *s, const char *what) {
    uint32_t tasks = s->info.tasks;
    for (int i = 0; i < s->n_extra; i++) tasks |= s->extra[i].info.tasks;
    char served[160] = "";
    if (tasks & WGML_TASK_GENERATE) strcat(served, " /v1/chat/completions /v1/completions");
    if (tasks & WGML_TASK_EMBED) strcat(served, " /v1/embeddings");
    if (tasks & WGML_TASK_SPEECH) strcat(served, " /v1/audio/speech");
    return send_error(c, 400, "model", "model_not_supported", "no model of this server can %s (it serves:%s)", what,
                      served);
}

static int ep_completions(struct mg_connection *c, serve_server *s, json_object *req) {
    if (!(s->info.tasks & WGML_TASK_GENERATE)) return no_task(c, s, "generate text");
    gen_params g;
    if (parse_gen(req, 0, &g)) {
        free_gen(&g);
        return send_error(c, 400, g.bad_param, NULL, "%s", g.err);
    }
    json_object *p;
    const char *text = NULL;
    if (json_object_object_get_ex(req, "prompt", &p) && p) {
        if (json_object_is_type(p, json_type_string)) text = json_object_get_string(p);
        else if (json_object_is_type(p, json_type_array) && json_object_array_length(p) == 1 &&
                 json_object_is_type(json_object_array_get_idx(p, 0), json_type_string))
            text = json_object_get_string(json_object_array_get_idx(p, 0));
    }
    int status = !text           ? send_error(c, 400, "prompt", NULL, "'prompt' must be a string (or an array of one string)")
                 : has_nul(p, 0) ? send_error(c, 400, "prompt", NULL, "'prompt' cannot contain U+0000")
                                 : generate(c, s, text, 1, 0, &g);
    free_gen(&g);
    return status;
}

static int ep_chat(struct mg_connection *c, serve_server *s, json_object *req) {
    if (!(s->info.tasks & WGML_TASK_GENERATE)) return no_task(c, s, "generate text");
    gen_params g;
    if (parse_gen(req, 1, &g)) {
        free_gen(&g);
        return send_error(c, 400, g.bad_param, NULL, "%s", g.err);
    }
    json_object *msgs;
    int status;
    if (!json_object_object_get_ex(req, "messages", &msgs) || !json_object_is_type(msgs, json_type_array) ||
        json_object_array_length(msgs) == 0) {
        status = send_error(c, 400, "messages", NULL, "'messages' must be a non-empty array");
    } else if (has_nul(msgs, 0)) {
        status = send_error(c, 400, "messages", NULL, "'messages' cannot contain U+0000");
    } else {
        char msg[512] = "";
        char *prompt = serve_chat_prompt(s, msgs, msg, sizeof msg);
        status = prompt ? generate(c, s, prompt, 0, 1, &g) : send_error(c, 400, "messages", NULL, "%s", msg);
        free(prompt);
    }
    free_gen(&g);
    return status;
}

/* POST /v1/embeddings: input (a string or an array of up to 2048 non-empty strings),
 * encoding_format ("float" or "base64": the float32 bytes, as OpenAI's client asks by
 * default), dimensions (keep the first N values, then normalize: Matryoshka models);
 * model and user are ignored. Runs in this HTTP thread, one request at a time on the
 * model (embed_mu): an embedding is one forward pass, with no stream to interleave. */
static int ep_embeddings(struct mg_connection *c, serve_server *s, json_object *req) {
    serve_model buf;
    const serve_model *sm = serve_model_for(s, WGML_TASK_EMBED, &buf);
    if (!sm) return no_task(c, s, "embed text");
    json_object *input, *v;
    if (!json_object_object_get_ex(req, "input", &input))
        return send_error(c, 400, "input", NULL, "'input' is required: a string or an array of strings");
    int n = json_object_is_type(input, json_type_array) ? (int)json_object_array_length(input) : 1;
    if (n < 1 || n > 2048) return send_error(c, 400, "input", NULL, "'input' must hold 1 to 2048 texts, not %d", n);
    if (has_nul(input, 0)) return send_error(c, 400, "input", NULL, "'input' cannot contain U+0000");
    const char **texts = calloc((size_t)n, sizeof *texts);
    if (!texts) return send_error(c, 500, NULL, NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        json_object *t = json_object_is_type(input, json_type_array) ? json_object_array_get_idx(input, (size_t)i) : input;
        if (!json_object_is_type(t, json_type_string) || json_object_get_string_len(t) == 0) {
            free(texts);
            return send_error(c, 400, "input", NULL,
                              "'input' must be a non-empty string or an array of them (token arrays are not taken)");
        }
        texts[i] = json_object_get_string(t);
    }
    int base64 = 0;
    wgml_embed_params ep = wgml_embed_default_params();
    if (json_object_object_get_ex(req, "encoding_format", &v) && !json_object_is_type(v, json_type_null)) {
        const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (strcmp(f, "float") && strcmp(f, "base64")) {
            free(texts);
            return send_error(c, 400, "encoding_format", NULL, "'encoding_format' must be \"float\" or \"base64\"");
        }
        base64 = !strcmp(f, "base64");
    }
    if (json_object_object_get_ex(req, "dimensions", &v) && !json_object_is_type(v, json_type_null)) {
        int64_t d = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
        if (d < 1 || d > sm->info.n_embd) {
            free(texts);
            return send_error(c, 400, "dimensions", NULL, "'dimensions' must be an integer from 1 to %d", sm->info.n_embd);
        }
        ep.dimensions = (int)d;
    }
    int dim = wgml_embed_dim(sm->model, &ep);
    float *vec = dim > 0 ? malloc((size_t)n * (size_t)dim * sizeof *vec) : NULL;
    if (!vec) {
        free(texts);
        return send_error(c, 500, NULL, NULL, "out of memory");
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
        status = send_error(c, 400, "input", "context_length_exceeded", "%s", err.message);
    else if (st == WGML_ERR_INVALID_ARGUMENT || st == WGML_ERR_TOKENIZER)
        status = send_error(c, 400, "input", NULL, "%s", err.message);
    else if (st)
        status = send_error(c, 500, NULL, NULL, "embedding failed: %s", err.message);
    else
        status = send_json(c, 200, cli_embeddings_json(vec, n, dim, sm->id, tokens, base64));
    free(vec);
    free(texts);
    return status;
}

/* POST /v1/audio/speech: input (text, at most 4096 bytes, through the G2P; or the model's
 * phoneme symbols with the extension "phonemes": true), voice (a voice of the model or a
 * blend, "af_heart:0.6,am_adam:0.4"), response_format "wav" (16-bit PCM; the default) or
 * "pcm" (raw 16-bit little-endian samples at 24 kHz), both streamed sentence by sentence as
 * they are made. A streamed WAV's header cannot know the length, so its RIFF and data sizes
 * are 0xFFFFFFFF, as OpenAI's own streamed WAVs and `wgml speak -o -` have them; speed
 * (0.25-4); extensions seed and lang ("en-us", "en-gb"). OpenAI's compressed formats (mp3,
 * opus, aac, flac) are refused: wgml has no encoder.
 *
 * One request at a time on the model (speech_mu), but the lock is never held while the
 * client is written to: a thread of the request's own synthesizes under the lock, piece
 * by piece into memory, while this HTTP thread writes the pieces out as they come. So a
 * slow reader slows only its own stream (its audio waits in memory: at most a few minutes
 * of it for the 4096 bytes of input), and a client gone stops the synthesis at its next
 * piece. */
typedef struct speech_piece {
    struct speech_piece *next;
    size_t n;
    unsigned char b[];
} speech_piece;

typedef struct {
    /* the request (read-only) */
    serve_server *s;
    wgml_model *model;
    const char *input, *voice;
    wgml_speak_params p;
    int wav; /* the first piece carries a WAV header of unknown length */
    /* the synthesis thread's result */
    wgml_status st;
    wgml_error err;
    int rate, made; /* made: a piece was made */
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    speech_piece *head, *tail;
    int done, failed, gone; /* failed: out of memory or a change of rate; gone: the client left */
} speech_job;

/* The synthesis thread's callback: one piece of audio into the queue; 1 stops the synthesis. */
static int speech_chunk(void *user, const wgml_audio_chunk *ch) {
    speech_job *k = user;
    int stop = 0;
    if (k->rate && ch->sample_rate != k->rate) stop = 1;
    k->rate = ch->sample_rate;
    unsigned char h[64];
    size_t hl = k->wav && !k->made ? cli_wav_header(h, -1, k->rate, 0) : 0;
    size_t bytes = hl + (size_t)ch->n_samples * 2;
    speech_piece *piece = stop ? NULL : malloc(sizeof *piece + (bytes ? bytes : 1));
    if (piece) {
        piece->next = NULL;
        piece->n = bytes;
        memcpy(piece->b, h, hl);
        cli_audio_bytes(ch->samples, ch->n_samples, 0, piece->b + hl);
        k->made = 1;
    }
    pthread_mutex_lock(&k->mu);
    if (!piece) k->failed = 1;
    else if (k->gone) free(piece);
    else {
        if (k->tail) k->tail->next = piece;
        else k->head = piece;
        k->tail = piece;
        pthread_cond_signal(&k->cv);
    }
    stop = k->failed || k->gone;
    pthread_mutex_unlock(&k->mu);
    return stop;
}

static void *speech_thread(void *arg) {
    speech_job *k = arg;
    pthread_mutex_lock(&k->s->speech_mu);
    k->st = wgml_speak(k->model, k->input, k->voice, &k->p, speech_chunk, k, NULL, &k->err);
    pthread_mutex_unlock(&k->s->speech_mu);
    pthread_mutex_lock(&k->mu);
    k->done = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* Runs the synthesis in its own thread and streams its pieces to c as they come. Returns
 * 1 when a stream was started (headers sent), 0 when no piece was made, -1 when the
 * thread could not start. */
static int speak_streamed(struct mg_connection *c, speech_job *k) {
    if (pthread_mutex_init(&k->mu, NULL)) return -1;
    if (pthread_cond_init(&k->cv, NULL)) {
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, speech_thread, k)) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    int sent = 0;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->head && !k->done) pthread_cond_wait(&k->cv, &k->mu);
        speech_piece *list = k->head;
        k->head = k->tail = NULL;
        int done = k->done;
        pthread_mutex_unlock(&k->mu);
        int gone = 0;
        while (list) {
            speech_piece *next = list->next;
            if (!gone) {
                if (!sent) stream_start(c, k->wav ? "audio/wav" : "audio/pcm");
                sent = 1;
                gone = stream_write(c, list->b, list->n) != 0;
            }
            free(list);
            list = next;
        }
        pthread_mutex_lock(&k->mu);
        if (gone) k->gone = 1; /* the synthesis stops at its next piece */
        if (done && !k->head) break;
    }
    pthread_mutex_unlock(&k->mu);
    pthread_join(t, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    return sent;
}

/* Whether every voice a voice string names ("a", or "a:0.6,b:0.4") is one of the
 * model's: the library would also take a voice file's path, which a client must not. */
static int model_voices(const wgml_model *m, const char *voice) {
    for (const char *p = voice;;) {
        size_t n = strcspn(p, ":,");
        int found = 0;
        for (int i = 0; !found && wgml_speech_voice(m, i); i++) {
            const char *name = wgml_speech_voice(m, i);
            found = strlen(name) == n && !strncmp(name, p, n);
        }
        if (!found) return 0;
        p += n;
        if (*p == ':') p += strcspn(p, ","); /* the weight: the library checks it */
        if (!*p) return 1;
        p++; /* ',' */
    }
}

static int ep_speech(struct mg_connection *c, serve_server *s, json_object *req) {
    serve_model buf;
    const serve_model *sm = serve_model_for(s, WGML_TASK_SPEECH, &buf);
    if (!sm) return no_task(c, s, "speak");
    json_object *v;
    wgml_speak_params p = wgml_speak_default_params();
    if (!json_object_object_get_ex(req, "input", &v) || !json_object_is_type(v, json_type_string) ||
        json_object_get_string_len(v) == 0 || json_object_get_string_len(v) > 4096)
        return send_error(c, 400, "input", NULL, "'input' must be a string of 1 to 4096 bytes");
    if (has_nul(v, 0)) return send_error(c, 400, "input", NULL, "'input' cannot contain U+0000");
    const char *input = json_object_get_string(v);
    if (!json_object_object_get_ex(req, "voice", &v) || !json_object_is_type(v, json_type_string) ||
        json_object_get_string_len(v) == 0)
        return send_error(c, 400, "voice", NULL, "'voice' must name a voice of the model (GET /v1/models lists them)");
    const char *voice = json_object_get_string(v);
    if (has_nul(v, 0) || !model_voices(sm->model, voice))
        return send_error(c, 400, "voice", NULL,
                          "'voice' %.64s is not a voice of the model or a blend of them (\"af_heart:0.6,am_adam:0.4\"): "
                          "GET /v1/models lists them", voice);
    int pcm = 0;
    if (json_object_object_get_ex(req, "response_format", &v) && !json_object_is_type(v, json_type_null)) {
        const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (!strcmp(f, "pcm")) pcm = 1;
        else if (strcmp(f, "wav"))
            return send_error(c, 400, "response_format", NULL,
                              "'response_format' %.32s is not served: wgml has no audio encoder; ask for \"wav\" or "
                              "\"pcm\" (16-bit, 24 kHz)", f);
    }
    if (json_object_object_get_ex(req, "speed", &v) && !json_object_is_type(v, json_type_null)) {
        double sp = is_number(v) ? json_object_get_double(v) : 0;
        if (!(sp >= 0.25 && sp <= 4)) return send_error(c, 400, "speed", NULL, "'speed' must be a number from 0.25 to 4");
        p.speed = (float)sp;
    }
    if (json_object_object_get_ex(req, "seed", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
            return send_error(c, 400, "seed", NULL, "'seed' must be a non-negative integer");
        p.seed = (uint64_t)json_object_get_int64(v);
    }
    if (json_object_object_get_ex(req, "lang", &v) && !json_object_is_type(v, json_type_null)) {
        const char *l = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (strcmp(l, "en-us") && strcmp(l, "en-gb"))
            return send_error(c, 400, "lang", NULL, "'lang' must be \"en-us\" or \"en-gb\"");
        p.lang = l;
    }
    if (json_object_object_get_ex(req, "phonemes", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_boolean))
            return send_error(c, 400, "phonemes", NULL, "'phonemes' must be true or false");
        p.phonemes = json_object_get_boolean(v);
    }
    speech_job k = {.s = s, .model = sm->model, .input = input, .voice = voice, .p = p, .wav = !pcm};
    int sent = speak_streamed(c, &k);
    wgml_status st = k.st;
    const wgml_error err = k.err;
    int status;
    if (sent < 0) {
        status = send_error(c, 500, NULL, NULL, "cannot start a thread for the speech");
    } else if (sent) { /* a stream under way: end it (after a failure, cut short) */
        stream_end(c);
        status = k.failed || k.gone ? 499 : 200;
    } else if (k.failed) {
        status = send_error(c, 500, NULL, NULL, "out of memory making the audio");
    } else if (st == WGML_ERR_INVALID_ARGUMENT) {
        status = send_error(c, 400, strstr(err.message, "voice") ? "voice" : "input", NULL, "%s", err.message);
    } else if (st == WGML_ERR_UNSUPPORTED || st == WGML_ERR_TOKENIZER) {
        status = send_error(c, 400, "input", NULL, "%s", err.message);
    } else if (st) {
        status = send_error(c, 500, NULL, NULL, "speech failed: %s", err.message);
    } else if (pcm) { /* nothing to say: an empty stream */
        status = send_body(c, 200, "audio/pcm", "", 0, NULL, NULL);
    } else { /* nothing to say: a WAV of no samples, whose sizes are known */
        unsigned char h[64];
        size_t hl = cli_wav_header(h, 0, sm->info.sample_rate > 0 ? sm->info.sample_rate : 24000, 0);
        status = send_body(c, 200, "audio/wav", (const char *)h, hl, NULL, NULL);
    }
    return status;
}

/* ---- the other endpoints ---- */

/* One entry of /v1/models: what the model can do (and a speech model's voices). */
static json_object *model_entry(serve_server *s, const wgml_model *model, const wgml_model_info *info, const char *id,
                                int n_ctx) {
    json_object *m = json_object_new_object();
    json_object_object_add(m, "id", json_object_new_string(id));
    json_object_object_add(m, "object", json_object_new_string("model"));
    json_object_object_add(m, "created", json_object_new_int64((int64_t)s->created));
    json_object_object_add(m, "owned_by", json_object_new_string("wgml"));
    json_object *caps = json_object_new_array();
    if (info->tasks & WGML_TASK_GENERATE) {
        json_object_array_add(caps, json_object_new_string("completions"));
        json_object_array_add(caps, json_object_new_string("chat.completions"));
    }
    if (info->tasks & WGML_TASK_EMBED) json_object_array_add(caps, json_object_new_string("embeddings"));
    if (info->tasks & WGML_TASK_SPEECH) {
        json_object_array_add(caps, json_object_new_string("audio.speech"));
        json_object *voices = json_object_new_array();
        for (int i = 0; wgml_speech_voice(model, i); i++)
            json_object_array_add(voices, json_object_new_string(wgml_speech_voice(model, i)));
        json_object_object_add(m, "voices", voices);
    }
    json_object *meta = json_object_new_object();
    json_object_object_add(meta, "capabilities", caps);
    json_object_object_add(meta, "architecture", json_object_new_string(info->architecture));
    json_object_object_add(meta, "n_ctx", json_object_new_int(n_ctx));
    json_object_object_add(meta, "n_ctx_train", json_object_new_int(info->n_ctx_train));
    json_object_object_add(meta, "n_params", json_object_new_int64((int64_t)info->n_params));
    json_object_object_add(meta, "backend", json_object_new_string(info->backend));
    json_object_object_add(m, "meta", meta);
    return m;
}

static int ep_models(struct mg_connection *c, serve_server *s) {
    json_object *arr = json_object_new_array();
    json_object_array_add(arr, model_entry(s, s->model, &s->info, s->model_id, s->n_ctx));
    for (int i = 0; i < s->n_extra; i++)
        json_object_array_add(arr, model_entry(s, s->extra[i].model, &s->extra[i].info, s->extra[i].id,
                                               s->extra[i].info.n_ctx_train));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(o, "data", arr);
    return send_json(c, 200, o);
}

static int ep_health(struct mg_connection *c, serve_server *s) {
    int busy, queued, draining;
    pthread_mutex_lock(&s->mu);
    serve_load(s, &busy, &queued);
    draining = s->draining;
    pthread_mutex_unlock(&s->mu);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "status", json_object_new_string(draining ? "draining" : "ok"));
    json_object_object_add(o, "slots_total", json_object_new_int(s->n_slots));
    json_object_object_add(o, "slots_busy", json_object_new_int(busy));
    json_object_object_add(o, "slots_free", json_object_new_int(s->n_slots - busy));
    json_object_object_add(o, "queue_length", json_object_new_int(queued));
    json_object_object_add(o, "queue_limit", json_object_new_int(s->max_queue));
    return send_json(c, draining ? 503 : 200, o);
}

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = b->p ? vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 8192;
        while (n >= 0 && cap < b->len + (size_t)n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return;
        b->p = q;
        b->cap = cap;
    }
}

static void sb_hist(sbuf *b, const char *name, const char *help, const serve_hist *h) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SERVE_HIST_BUCKETS; i++) {
        cum += h->count[i];
        sb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, serve_hist_bounds[i], (unsigned long long)cum);
    }
    sb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)h->n, name,
              h->sum, name, (unsigned long long)h->n);
}

static int ep_metrics(struct mg_connection *c, serve_server *s) {
    sbuf b = {0};
    pthread_mutex_lock(&s->mu);
    serve_metrics m = s->metrics;
    double busy_s = m.busy_slot_seconds + s->busy * (cli_now_ms() - s->last_busy_t) / 1e3;
    int busy = s->busy, queued = s->q_len;
    pthread_mutex_unlock(&s->mu);
    sb_printf(&b, "# HELP wgml_requests_total HTTP requests by endpoint and status.\n# TYPE wgml_requests_total counter\n");
    for (int e = 0; e < SERVE_N_ENDPOINTS; e++)
        for (int k = 0; k < SERVE_N_STATUS; k++)
            if (m.requests[e][k])
                sb_printf(&b, "wgml_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", ep_names[e],
                          serve_status_codes[k], (unsigned long long)m.requests[e][k]);
    sb_printf(&b,
              "# HELP wgml_prompt_tokens_total Prompt tokens of accepted requests.\n# TYPE wgml_prompt_tokens_total counter\n"
              "wgml_prompt_tokens_total %llu\n"
              "# HELP wgml_prompt_tokens_cached_total Prompt tokens reused from a slot's cache.\n"
              "# TYPE wgml_prompt_tokens_cached_total counter\nwgml_prompt_tokens_cached_total %llu\n"
              "# HELP wgml_generated_tokens_total Tokens generated.\n# TYPE wgml_generated_tokens_total counter\n"
              "wgml_generated_tokens_total %llu\n"
              "# HELP wgml_requests_cancelled_total Generations ended because the client went away.\n"
              "# TYPE wgml_requests_cancelled_total counter\nwgml_requests_cancelled_total %llu\n"
              "# HELP wgml_steps_total Batched forward steps.\n# TYPE wgml_steps_total counter\nwgml_steps_total %llu\n"
              "# HELP wgml_step_tokens_total Tokens evaluated in the steps.\n# TYPE wgml_step_tokens_total counter\n"
              "wgml_step_tokens_total %llu\n"
              "# HELP wgml_slots_total Slots (sequences decoded together).\n# TYPE wgml_slots_total gauge\n"
              "wgml_slots_total %d\n"
              "# HELP wgml_slots_busy Slots with a request.\n# TYPE wgml_slots_busy gauge\nwgml_slots_busy %d\n"
              "# HELP wgml_queue_length Requests waiting for a slot.\n# TYPE wgml_queue_length gauge\n"
              "wgml_queue_length %d\n"
              "# HELP wgml_slot_busy_seconds_total Busy slot time (its rate over the slots: utilization).\n"
              "# TYPE wgml_slot_busy_seconds_total counter\nwgml_slot_busy_seconds_total %.3f\n",
              (unsigned long long)m.prompt_tokens, (unsigned long long)m.cached_tokens,
              (unsigned long long)m.generated_tokens, (unsigned long long)m.cancelled, (unsigned long long)m.steps,
              (unsigned long long)m.step_rows, s->n_slots, busy, queued, busy_s);
    sb_hist(&b, "wgml_time_to_first_token_seconds", "From the request's arrival to its first token.", &m.ttft);
    sb_hist(&b, "wgml_time_per_output_token_seconds", "Time between a stream's consecutive tokens.", &m.per_token);
    sb_hist(&b, "wgml_request_duration_seconds", "From arrival to the last token.", &m.duration);
    sb_hist(&b, "wgml_queue_wait_seconds", "Time in the queue before a slot.", &m.queue_wait);
    serve_http *h = mg_get_user_data(mg_get_context(c));
    if (h) {
        serve_guard_stats gs;
        serve_guard_get_stats(h->guard, &gs);
        sb_printf(&b,
                  "# HELP wgml_http_connections HTTP connections open.\n# TYPE wgml_http_connections gauge\n"
                  "wgml_http_connections %d\n"
                  "# HELP wgml_http_connections_closed_total Connections the server closed to protect itself: idle ones "
                  "making room (evicted), new ones over the per-client limit (refused), bodies past the time limit.\n"
                  "# TYPE wgml_http_connections_closed_total counter\n"
                  "wgml_http_connections_closed_total{reason=\"evicted\"} %llu\n"
                  "wgml_http_connections_closed_total{reason=\"refused\"} %llu\n"
                  "wgml_http_connections_closed_total{reason=\"body_timeout\"} %llu\n",
                  gs.open, (unsigned long long)gs.evicted, (unsigned long long)gs.refused,
                  (unsigned long long)gs.body_timeouts);
    }
    int status = b.p ? send_body(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len, NULL, NULL)
                     : send_error(c, 500, NULL, NULL, "out of memory");
    free(b.p);
    return status;
}

/* ---- routing ---- */

/* Whether s[0..n) is UTF-8 (JSON text must be): no overlong forms, surrogates or values past U+10FFFF. */
static int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
        if (k == 9 || n - i <= k) return 0; /* an invalid lead byte, or the sequence runs past the end */
        uint32_t v = k ? c & (0x3f >> k) : c;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            v = v << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 1 && v < 0x80) || (k == 2 && v < 0x800) || (k == 3 && (v < 0x10000 || v > 0x10ffff)) ||
            (v >= 0xd800 && v <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

static int key_ok(serve_server *s, struct mg_connection *c) {
    if (!s->api_key) return 1;
    const char *h = mg_get_header(c, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0; /* the scheme is case-insensitive (RFC 9110) */
    h += 7;
    size_t a = strlen(h), b = strlen(s->api_key);
    unsigned diff = a != b;
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned)(h[i] ^ s->api_key[i]); /* no early exit */
    return diff == 0;
}

/* The body, NUL-terminated, into *out: 0, or the HTTP status of the failure (after answering).
 * A body that does not arrive within the time limit (the guard's reaper then ends our reads)
 * gets 408. */
static int read_body(struct mg_connection *c, serve_server *s, char **out, size_t *len) {
    const struct mg_request_info *ri = mg_get_request_info(c);
    serve_http *h = mg_get_user_data(mg_get_context(c));
    *out = NULL;
    if (ri->content_length > (long long)s->max_body)
        return send_error(c, 413, NULL, NULL, "the body has %lld bytes; the limit is %zu", ri->content_length,
                          s->max_body);
    size_t cap = ri->content_length >= 0 ? (size_t)ri->content_length + 1 : 65536, n = 0;
    char *b = malloc(cap);
    if (!b) return send_error(c, 500, NULL, NULL, "out of memory");
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > s->max_body + 1) break;
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                return send_error(c, 500, NULL, NULL, "out of memory");
            }
            b = nb, cap *= 2;
        }
        int r = mg_read(c, b + n, cap - n - 1);
        if (r <= 0 && serve_guard_body_late(h->guard, c)) {
            free(b);
            mg_disable_connection_keep_alive(c);
            return send_error(c, 408, NULL, "request_timeout", "the body did not arrive within %d ms",
                              h->o.timeout_ms);
        }
        if (r < 0) {
            free(b);
            return send_error(c, 400, NULL, NULL, "reading the body failed");
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    serve_guard_body_done(h->guard, c);
    if (ri->content_length >= 0 && n < (size_t)ri->content_length) {
        free(b);
        return send_error(c, 400, NULL, NULL, "the body ended after %zu of its %lld bytes", n, ri->content_length);
    }
    if (n > s->max_body) {
        free(b);
        return send_error(c, 413, NULL, NULL, "the body exceeds the limit of %zu bytes", s->max_body);
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

/* Whether a Content-Type is application/json (parameters after ';' allowed). */
static int is_json_type(const char *t) {
    if (!t) return 0;
    while (*t == ' ' || *t == '\t') t++;
    if (strncasecmp(t, "application/json", 16)) return 0;
    t += 16;
    while (*t == ' ' || *t == '\t') t++;
    return !*t || *t == ';';
}

static int handle(struct mg_connection *c, void *user) {
    serve_http *h = user;
    serve_server *s = h->s;
    const struct mg_request_info *ri = mg_get_request_info(c);
    const char *uri = ri->local_uri ? ri->local_uri : "", *method = ri->request_method ? ri->request_method : "";
    static const struct {
        const char *path, *method;
        int ep;
    } routes[] = {{"/v1/chat/completions", "POST", EP_CHAT}, {"/v1/completions", "POST", EP_COMPLETIONS},
                  {"/v1/embeddings", "POST", EP_EMBEDDINGS}, {"/v1/audio/speech", "POST", EP_SPEECH},
                  {"/v1/models", "GET", EP_MODELS},
                  {"/health", "GET", EP_HEALTH},             {"/metrics", "GET", EP_METRICS}};
    int ep = EP_OTHER, status;
    size_t r = 0;
    for (; r < sizeof routes / sizeof routes[0]; r++)
        if (!strcmp(uri, routes[r].path)) break;
    const char *host = mg_get_header(c, "Host"), *origin = mg_get_header(c, "Origin");
    if (strcmp(method, "POST")) serve_guard_body_done(h->guard, c); /* no body to wait for: the reaper leaves it */
    if (r < sizeof routes / sizeof routes[0]) ep = routes[r].ep;
    if (mg_get_header(c, "Transfer-Encoding") && mg_get_header(c, "Content-Length")) {
        /* two framings of one body: a proxy in front may take the other one (request smuggling) */
        mg_disable_connection_keep_alive(c);
        status = send_error(c, 400, NULL, NULL, "a request may not have both Content-Length and Transfer-Encoding");
    } else if (!s->api_key && !serve_guard_host_ok(host, h->o.host, h->port)) {
        status = send_error(c, 403, NULL, "host_not_allowed",
                            "Host '%.100s' is not this server's address; without --api-key only a loopback name or the "
                            "address it listens on is served (a guard against DNS rebinding)", host);
    } else if (!serve_guard_origin_ok(origin, host, h->o.cors, h->o.n_cors)) {
        status = send_error(c, 403, NULL, "origin_not_allowed",
                            "cross-origin requests from '%.100s' are refused: start the server with --cors ORIGIN to "
                            "allow a web page's origin", origin);
    } else if (!strcmp(method, "OPTIONS") && r < sizeof routes / sizeof routes[0]) {
        /* a CORS preflight from an origin --cors allows (any other was refused above), or a plain OPTIONS */
        mg_response_header_start(c, 204);
        mg_response_header_add(c, "Allow", routes[r].method, -1);
        if (origin && mg_get_header(c, "Access-Control-Request-Method")) {
            add_cors(c);
            mg_response_header_add(c, "Access-Control-Allow-Methods", routes[r].method, -1);
            mg_response_header_add(c, "Access-Control-Allow-Headers", "Authorization, Content-Type", -1);
            mg_response_header_add(c, "Access-Control-Max-Age", "600", -1);
        }
        mg_response_header_add(c, "Content-Length", "0", -1);
        mg_response_header_send(c);
        status = 204;
    } else if (r == sizeof routes / sizeof routes[0]) {
        status = send_error(c, 404, NULL, "unknown_url", "unknown route '%.200s'", uri);
    } else if (strcmp(method, routes[r].method)) {
        status = send_405(c, routes[r].method, "%.200s takes %s, not %.16s", uri, routes[r].method, method);
    } else if (!strncmp(uri, "/v1/", 4) && !key_ok(s, c)) {
        status = send_error(c, 401, NULL, "invalid_api_key",
                            "missing or incorrect API key: send the header 'Authorization: Bearer KEY'");
    } else if (ep == EP_MODELS) {
        status = ep_models(c, s);
    } else if (ep == EP_HEALTH) {
        status = ep_health(c, s);
    } else if (ep == EP_METRICS) {
        status = ep_metrics(c, s);
    } else if (s->draining) {
        status = send_error(c, 503, NULL, NULL, "the server is shutting down");
    } else if (!is_json_type(mg_get_header(c, "Content-Type"))) {
        /* text/plain and form bodies are what a web page may send without a CORS preflight */
        mg_disable_connection_keep_alive(c); /* its body is not read */
        status = send_error(c, 415, NULL, "unsupported_media_type",
                            "the body must be JSON sent as 'Content-Type: application/json', not '%.60s'",
                            mg_get_header(c, "Content-Type") ? mg_get_header(c, "Content-Type") : "(none)");
    } else {
        char *body = NULL;
        size_t len = 0;
        status = read_body(c, s, &body, &len);
        if (!status) {
            json_tokener *tok = json_tokener_new_ex(64); /* nesting deeper than 64 is refused */
            json_object *req = tok && len <= (size_t)INT32_MAX ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
            enum json_tokener_error je = tok ? json_tokener_get_error(tok) : json_tokener_continue;
            size_t used = tok ? json_tokener_get_parse_end(tok) : 0;
            while (req && used < len && strchr(" \t\r\n", body[used])) used++;
            if (!tok) {
                status = send_error(c, 500, NULL, NULL, "out of memory");
            } else if (!utf8_valid((const unsigned char *)body, len)) {
                status = send_error(c, 400, NULL, NULL, "the body is not valid UTF-8");
            } else if (!req || je != json_tokener_success || used != len) {
                status = send_error(c, 400, NULL, NULL, "the body is not valid JSON: %s",
                                    req && je == json_tokener_success ? "text after the value"
                                    : je == json_tokener_continue     ? "it ends early"
                                                                      : json_tokener_error_desc(je));
            } else if (!json_object_is_type(req, json_type_object)) {
                status = send_error(c, 400, NULL, NULL, "the body must be a JSON object");
            } else {
                status = ep == EP_CHAT          ? ep_chat(c, s, req)
                         : ep == EP_EMBEDDINGS ? ep_embeddings(c, s, req)
                         : ep == EP_SPEECH     ? ep_speech(c, s, req)
                                               : ep_completions(c, s, req);
            }
            json_object_put(req);
            if (tok) json_tokener_free(tok);
            free(body);
        }
    }
    count(s, ep, status);
    return status > 0 ? status : 500;
}

/* The errors civetweb answers itself, before a request reaches handle(): a malformed request (400),
 * a bad Content-Length (411), headers over max_request_size (413), another HTTP version (505), a
 * websocket handshake (404). Its own error page repeats the request's version in the status line,
 * which for a request line it could not parse is whatever bytes follow (a bare LF included), and
 * for a websocket handshake it sends no status line or headers at all. So they are written here,
 * whole: an HTTP/1.1 status line and an OpenAI-shaped JSON error like the others. */
static int civetweb_error(struct mg_connection *c, int status, const char *errmsg) {
    serve_http *h = mg_get_user_data(mg_get_context(c));
    char msg[256];
    size_t n = 0;
    for (const char *p = errmsg ? errmsg : ""; *p && n < sizeof msg - 1; p++) /* printable ASCII only */
        msg[n++] = *p >= ' ' && *p < 0x7f ? *p : '?';
    msg[n] = 0;
    json_object *o = error_object(msg, status >= 500 ? "server_error" : "invalid_request_error", NULL, NULL);
    size_t len;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    mg_printf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
              status, mg_get_response_code_text(c, status), len);
    mg_write(c, t, len);
    json_object_put(o);
    count(h->s, EP_OTHER, status);
    return 0;
}

/* civetweb's connection callbacks, to the guard (serve_guard.c) */
static serve_guard *guard_of(const struct mg_connection *c) {
    serve_http *h = mg_get_user_data(mg_get_context(c));
    return h ? h->guard : NULL;
}
static int on_open(const struct mg_connection *c, void **conn_data) {
    *conn_data = NULL;
    serve_guard_open(guard_of(c));
    return 0;
}
static int on_request(struct mg_connection *c) {
    serve_guard_request(guard_of(c), c);
    return 0; /* civetweb goes on to handle() */
}
static void on_request_end(const struct mg_connection *c, int status) {
    (void)status;
    serve_guard_request_end(guard_of(c), c);
}
static void on_close(const struct mg_connection *c) { serve_guard_close(guard_of(c), c); }

serve_http_opts serve_http_default_opts(void) {
    serve_http_opts o;
    memset(&o, 0, sizeof o);
    o.host = "127.0.0.1";
    o.n_threads = 16;
    o.timeout_ms = 10000;
    o.idle_ms = 5000;
    o.per_client = 32;
    return o;
}

serve_http *serve_http_start(serve_server *s, const serve_http_opts *o, int *bound_port) {
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->s = s;
    h->o = *o;
    if (!(h->guard = serve_guard_new(o->n_threads, o->per_client, o->timeout_ms))) {
        free(h);
        cli_fail("out of memory");
        return NULL;
    }
    const char *host = o->host;
    char ports[300], threads[16], timeout[16], idle[16];
    if (strchr(host, ':')) snprintf(ports, sizeof ports, "[%s]:%d", host, o->port);
    else snprintf(ports, sizeof ports, "%s:%d", host, o->port);
    snprintf(threads, sizeof threads, "%d", o->n_threads);
    snprintf(timeout, sizeof timeout, "%d", o->timeout_ms);
    snprintf(idle, sizeof idle, "%d", o->idle_ms);
    /* civetweb's own CORS answers (every origin allowed) are off: handle() answers preflights */
    const char *opts[] = {"listening_ports", ports, "num_threads", threads, "request_timeout_ms", timeout,
                          "keep_alive_timeout_ms", idle, "linger_timeout_ms", "100", "max_request_size", "16384",
                          "enable_keep_alive", "yes", "listen_backlog", "512", "access_control_allow_origin", "",
                          "access_control_allow_methods", "", "access_control_allow_headers", "", NULL};
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.http_error = civetweb_error;
    cb.init_connection = on_open;
    cb.begin_request = on_request;
    cb.end_request = on_request_end;
    cb.connection_close = on_close;
    mg_init_library(0);
    h->ctx = mg_start(&cb, h, opts);
    if (!h->ctx) {
        cli_fail("cannot listen on %s (in use, or not an address of this machine?)", ports);
        serve_guard_free(h->guard);
        free(h);
        mg_exit_library();
        return NULL;
    }
    struct mg_server_port sp[4];
    int n = mg_get_server_ports(h->ctx, 4, sp);
    *bound_port = h->port = n > 0 ? sp[0].port : o->port;
    serve_guard_set_port(h->guard, h->port);
    mg_set_request_handler(h->ctx, "/", handle, h); /* after h->port is known: handle() checks Host against it */
    return h;
}

void serve_http_stop(serve_http *h) {
    if (!h) return;
    mg_stop(h->ctx);
    mg_exit_library();
    serve_guard_free(h->guard);
    free(h);
}
