/*
 * serve_generate.c - POST /v1/chat/completions and /v1/completions: the
 * request's parameters, its prompt (through the chat template: serve_chat.c)
 * tokenized and queued as a job for the scheduler (serve_sched.c), then one
 * JSON answer or server-sent events as the text is released. A client that
 * goes away cancels its job: a stream's at its next write (or keep-alive
 * comment), a non-streamed one's when its connection is seen closed.
 */
#include <civetweb.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

/* ---- request parameters ---- */

typedef struct {
    int stream, include_usage, max_tokens;
    wgml_sampler_params sampler;
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    wgml_grammar *grammar; /* response_format / grammar */
    int32_t *bias_tok;     /* logit_bias */
    float *bias;
    int n_bias;
    char err[WGML_ERROR_MESSAGE_MAX + 64];
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


static int add_stop(gen_params *g, json_object *v) {
    if (!json_object_is_type(v, json_type_string)) return bad(g, "stop", "'stop' must be a string or an array of strings");
    size_t n = (size_t)json_object_get_string_len(v);
    if (n == 0 || n > SERVE_STOP_MAX_LEN)
        return bad(g, "stop", "a stop string must have 1 to %d bytes", SERVE_STOP_MAX_LEN);
    if (serve_has_nul(v, 0)) return bad(g, "stop", "a stop string cannot contain U+0000");
    if (g->n_stop >= SERVE_MAX_STOP) return bad(g, "stop", "at most %d stop strings", SERVE_MAX_STOP);
    if (!(g->stop[g->n_stop] = strdup(json_object_get_string(v)))) return bad(g, "stop", "out of memory");
    g->n_stop++;
    return 0;
}

static int parse_format(json_object *req, gen_params *g);

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
        if (!serve_is_number(v) || !(t >= 0 && t <= 2)) return bad(g, "temperature", "'temperature' must be a number in [0, 2]");
        g->sampler.temperature = (float)t;
    }
    if (json_object_object_get_ex(req, "top_p", &v) && v) {
        double t = json_object_get_double(v);
        if (!serve_is_number(v) || !(t > 0 && t <= 1)) return bad(g, "top_p", "'top_p' must be a number in (0, 1]");
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
    if (parse_format(req, g)) return -1;
    if (json_object_object_get_ex(req, "logit_bias", &v) && v && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_object))
            return bad(g, "logit_bias", "'logit_bias' must be an object of token ids and biases");
        const int n = json_object_object_length(v);
        if (n > 1024) return bad(g, "logit_bias", "at most 1024 logit biases");
        g->bias_tok = malloc((size_t)(n ? n : 1) * sizeof *g->bias_tok);
        g->bias = malloc((size_t)(n ? n : 1) * sizeof *g->bias);
        if (!g->bias_tok || !g->bias) return bad(g, "logit_bias", "out of memory");
        json_object_object_foreach(v, key, val) {
            char *end;
            errno = 0;
            const long id = strtol(key, &end, 10);
            if (!*key || *end || errno || id < 0 || id > INT32_MAX)
                return bad(g, "logit_bias", "logit_bias key '%.40s' is not a token id", key);
            const double b = json_object_get_double(val);
            if (!serve_is_number(val) || !(b >= -100 && b <= 100))
                return bad(g, "logit_bias", "the bias of token %ld must be a number in [-100, 100]", id);
            g->bias_tok[g->n_bias] = (int32_t)id, g->bias[g->n_bias++] = (float)b;
        }
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
    wgml_grammar_free(g->grammar);
    g->grammar = NULL;
    free(g->bias_tok), free(g->bias);
    g->bias_tok = NULL, g->bias = NULL, g->n_bias = 0;
}

/* response_format ({"type": "text" | "json_object" | "json_schema", ...}) and llama.cpp's
 * `grammar` (GBNF text): the grammar the reply must follow */
static int parse_format(json_object *req, gen_params *g) {
    json_object *rf = NULL, *gr = NULL, *v;
    json_object_object_get_ex(req, "response_format", &rf);
    json_object_object_get_ex(req, "grammar", &gr);
    wgml_error err;
    if (gr) {
        if (!json_object_is_type(gr, json_type_string)) return bad(g, "grammar", "'grammar' must be a string of GBNF");
        if (rf && !json_object_is_type(rf, json_type_null))
            return bad(g, "grammar", "'grammar' and 'response_format' cannot both be given");
        if (wgml_grammar_create(json_object_get_string(gr), (size_t)json_object_get_string_len(gr), &g->grammar, &err))
            return bad(g, "grammar", "%s", err.message);
        return 0;
    }
    if (!rf || json_object_is_type(rf, json_type_null)) return 0;
    if (!json_object_is_type(rf, json_type_object) || !json_object_object_get_ex(rf, "type", &v) ||
        !json_object_is_type(v, json_type_string))
        return bad(g, "response_format", "'response_format' must be an object with a 'type'");
    const char *type = json_object_get_string(v);
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) {
        if (wgml_grammar_from_json_schema(NULL, 0, &g->grammar, &err)) return bad(g, "response_format", "%s", err.message);
        return 0;
    }
    if (strcmp(type, "json_schema"))
        return bad(g, "response_format", "response_format type '%s' is not one of text, json_object, json_schema", type);
    json_object *js, *schema = NULL;
    if (!json_object_object_get_ex(rf, "json_schema", &js) || !json_object_is_type(js, json_type_object))
        return bad(g, "response_format", "'response_format.json_schema' must be an object");
    if (json_object_object_get_ex(js, "name", &v) && !json_object_is_type(v, json_type_string))
        return bad(g, "response_format", "'response_format.json_schema.name' must be a string");
    if (json_object_object_get_ex(js, "strict", &v) && v && !json_object_is_type(v, json_type_boolean))
        return bad(g, "response_format", "'response_format.json_schema.strict' must be a boolean");
    json_object_object_get_ex(js, "schema", &schema);
    if (schema && !json_object_is_type(schema, json_type_object) && !json_object_is_type(schema, json_type_boolean))
        return bad(g, "response_format", "'response_format.json_schema.schema' must be a JSON Schema (an object)");
    /* no schema: any JSON object; the schema is written back to text for the converter */
    const char *text = schema ? json_object_to_json_string_ext(schema, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
    if (wgml_grammar_from_json_schema(text, text ? strlen(text) : 0, &g->grammar, &err))
        return bad(g, "response_format", "%s", err.message);
    return 0;
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
/* After a finished job (no lock needed: the scheduler is done with it): its tool calls as OpenAI's
 * tool_calls array, or NULL (then any call text the job kept is text of the reply). */
static json_object *job_calls(const serve_job *j) {
    if (!j->tool_mode || !j->tool_active || !j->calls_len) return NULL;
    return serve_tools_calls(j->tools, j->calls, j->calls_len);
}

static int stream_job(struct mg_connection *c, serve_server *s, serve_job *j, const char *id, int chat,
                      const gen_params *g) {
    serve_stream_start(c, "text/event-stream");
    int dead = chat && serve_sse(c, chunk(s, id, chat, g->include_usage, choice(chat, 1, "", 0, 1, NULL)));
    size_t sent = 0;
    char *piece = NULL;
    serve_finish fin = SERVE_RUNNING;
    while (!dead) {
        pthread_mutex_lock(&s->mu);
        if (wait_job(s, j, sent, s->keepalive_ms)) {
            pthread_mutex_unlock(&s->mu);
            if (serve_stream_write(c, ": keep-alive\n\n", 14)) dead = 1;
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
        if (n && serve_sse(c, chunk(s, id, chat, g->include_usage, choice(chat, 1, piece, n, 0, NULL)))) dead = 1;
        if (fin) break;
    }
    free(piece);
    if (dead) {
        cancel(s, j);
        return 499;
    }
    if (fin == SERVE_FINISH_ERROR) {
        json_object *e = serve_error_object(j->error, "server_error", NULL, NULL);
        serve_sse(c, e);
    } else {
        json_object *calls = job_calls(j);
        const char *why = finish_name(fin);
        if (calls) { /* each call whole, keyed by its index, as OpenAI's deltas are */
            for (size_t k = 0; k < json_object_array_length(calls); k++)
                json_object_object_add(json_object_array_get_idx(calls, k), "index", json_object_new_int((int)k));
            json_object *ch = choice(chat, 1, NULL, 0, 0, NULL), *d;
            json_object_object_get_ex(ch, "delta", &d);
            json_object_object_add(d, "tool_calls", calls);
            if (serve_sse(c, chunk(s, id, chat, g->include_usage, ch))) dead = 1;
            why = "tool_calls";
        } else if (j->tool_active && j->calls_len) { /* not a call after all: text */
            if (serve_sse(c, chunk(s, id, chat, g->include_usage, choice(chat, 1, j->calls, j->calls_len, 0, NULL)))) dead = 1;
        }
        if (!dead && serve_sse(c, chunk(s, id, chat, g->include_usage, choice(chat, 1, NULL, 0, 0, why)))) dead = 1;
        if (!dead && g->include_usage) {
            json_object *u = chunk(s, id, chat, 0, NULL);
            json_object_object_add(u, "usage", usage_object(j));
            dead = serve_sse(c, u) != 0;
        }
    }
    if (!dead) serve_stream_write(c, "data: [DONE]\n\n", 14);
    serve_stream_end(c);
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
    if (j->finish == SERVE_FINISH_ERROR) return serve_send_error(c, 500, NULL, NULL, "generation failed: %s", j->error);
    if (j->finish == SERVE_FINISH_CANCELLED) return serve_send_error(c, 503, NULL, NULL, "the server is shutting down");
    json_object *o = envelope(s, id, chat ? "chat.completion" : "text_completion");
    json_object *arr = json_object_new_array();
    json_object *calls = job_calls(j);
    if (calls) { /* the text before the calls (if any but white space) is the content */
        int blank = 1;
        for (size_t k = 0; k < j->len && blank; k++) blank = strchr(" \t\r\n", j->text[k]) != NULL;
        json_object *ch = choice(chat, 0, blank ? NULL : j->text, blank ? 0 : j->len, 1, "tool_calls"), *m;
        json_object_object_get_ex(ch, "message", &m);
        if (blank) json_object_object_add(m, "content", NULL);
        json_object_object_add(m, "tool_calls", calls);
        json_object_array_add(arr, ch);
    } else if (j->tool_active && j->calls_len) { /* call text that is not a call: the reply's text */
        char *all = malloc(j->len + j->calls_len + 1);
        if (!all) {
            json_object_put(o), json_object_put(arr);
            return serve_send_error(c, 500, NULL, NULL, "out of memory");
        }
        if (j->len) memcpy(all, j->text, j->len);
        memcpy(all + j->len, j->calls, j->calls_len);
        json_object_array_add(arr, choice(chat, 0, all, j->len + j->calls_len, 1, finish_name(j->finish)));
        free(all);
    } else {
        json_object_array_add(arr, choice(chat, 0, j->text ? j->text : "", j->len, 1, finish_name(j->finish)));
    }
    json_object_object_add(o, "choices", arr);
    json_object_object_add(o, "usage", usage_object(j));
    return serve_send_json(c, 200, o);
}

/* Tokenizes, queues and answers a generation request whose prompt text is ready. */
static int generate(struct mg_connection *c, serve_server *s, const char *text, int add_bos, int chat,
                    gen_params *g, serve_tools *tools) {
    for (int i = 0; i < g->n_bias; i++)
        if (g->bias_tok[i] >= s->info.n_vocab)
            return serve_send_error(c, 400, "logit_bias", NULL, "logit_bias: token %d is not in the vocabulary (0..%d)",
                                    (int)g->bias_tok[i], s->info.n_vocab - 1);
    size_t tlen = strlen(text);
    wgml_error err;
    /* no lock: tokenizing reads the vocabulary only (wgml.h), beside the scheduler's steps */
    int n = wgml_tokenize(s->model, text, tlen, add_bos, NULL, 0, &err);
    int32_t *toks = n > 0 ? malloc((size_t)n * sizeof *toks) : NULL;
    if (toks) n = wgml_tokenize(s->model, text, tlen, add_bos, toks, n, &err);
    if (n < 0) {
        free(toks);
        return serve_send_error(c, 400, chat ? "messages" : "prompt", NULL, "the prompt cannot be tokenized: %s", err.message);
    }
    if (n == 0) return serve_send_error(c, 400, chat ? "messages" : "prompt", NULL, "the prompt is empty");
    if (!toks) return serve_send_error(c, 500, NULL, NULL, "out of memory");
    if (n > s->n_ctx - 1) {
        free(toks);
        return serve_send_error(c, 400, chat ? "messages" : "prompt", "context_length_exceeded",
                          "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens "
                          "(the reply needs at least one more).",
                          s->n_ctx, chat ? "messages" : "prompt", n);
    }
    serve_job *j = serve_job_new();
    if (!j) {
        free(toks);
        return serve_send_error(c, 500, NULL, NULL, "out of memory");
    }
    j->prompt = toks;
    j->n_prompt = n;
    j->max_tokens = g->max_tokens;
    j->sampler = g->sampler;
    for (int i = 0; i < g->n_stop; i++) j->stop[i] = g->stop[i];
    j->n_stop = g->n_stop;
    g->n_stop = 0; /* the job owns them now */
    j->grammar = g->grammar;
    g->grammar = NULL;
    j->bias_tok = g->bias_tok, j->bias = g->bias, j->n_bias = g->n_bias; /* the job owns them now */
    g->bias_tok = NULL, g->bias = NULL, g->n_bias = 0;
    if (tools && tools->tools && tools->choice != WGML_TOOL_CHOICE_NONE) { /* the job owns the tools now */
        j->tools = tools->tools;
        tools->tools = NULL;
        if (tools->choice == WGML_TOOL_CHOICE_AUTO) {
            j->tool_mode = 2;
            j->trigger = wgml_tools_trigger(j->tools, &j->trigger_at_start);
        } else {
            j->tool_mode = 1;
            j->tool_active = 1;
        }
    }
    char id[48];
    pthread_mutex_lock(&s->mu);
    snprintf(id, sizeof id, "%s-%llx%06llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)s->created,
             (unsigned long long)++s->next_id);
    int full = serve_submit(s, j);
    pthread_mutex_unlock(&s->mu);
    int status;
    if (full) {
        status = serve_send_error(c, 503, NULL, NULL, "all %d slots are busy and %d requests wait: try again later",
                            s->n_slots, s->max_queue);
    } else {
        status = g->stream ? stream_job(c, s, j, id, chat, g) : answer_job(c, s, j, id, chat);
    }
    pthread_mutex_lock(&s->mu);
    serve_job_unref(s, j);
    pthread_mutex_unlock(&s->mu);
    return status;
}

int serve_ep_completions(struct mg_connection *c, serve_server *s, json_object *req) {
    if (!(s->info.tasks & WGML_TASK_GENERATE)) return serve_no_task(c, s, "generate text");
    gen_params g;
    if (parse_gen(req, 0, &g)) {
        free_gen(&g);
        return serve_send_error(c, 400, g.bad_param, NULL, "%s", g.err);
    }
    json_object *p;
    const char *text = NULL;
    if (json_object_object_get_ex(req, "prompt", &p) && p) {
        if (json_object_is_type(p, json_type_string)) text = json_object_get_string(p);
        else if (json_object_is_type(p, json_type_array) && json_object_array_length(p) == 1 &&
                 json_object_is_type(json_object_array_get_idx(p, 0), json_type_string))
            text = json_object_get_string(json_object_array_get_idx(p, 0));
    }
    int status = !text           ? serve_send_error(c, 400, "prompt", NULL, "'prompt' must be a string (or an array of one string)")
                 : serve_has_nul(p, 0) ? serve_send_error(c, 400, "prompt", NULL, "'prompt' cannot contain U+0000")
                                 : generate(c, s, text, 1, 0, &g, NULL);
    free_gen(&g);
    return status;
}

int serve_ep_chat(struct mg_connection *c, serve_server *s, json_object *req) {
    if (!(s->info.tasks & WGML_TASK_GENERATE)) return serve_no_task(c, s, "generate text");
    gen_params g;
    if (parse_gen(req, 1, &g)) {
        free_gen(&g);
        return serve_send_error(c, 400, g.bad_param, NULL, "%s", g.err);
    }
    json_object *msgs;
    int status;
    if (!json_object_object_get_ex(req, "messages", &msgs) || !json_object_is_type(msgs, json_type_array) ||
        json_object_array_length(msgs) == 0) {
        status = serve_send_error(c, 400, "messages", NULL, "'messages' must be a non-empty array");
    } else if (serve_has_nul(msgs, 0)) {
        status = serve_send_error(c, 400, "messages", NULL, "'messages' cannot contain U+0000");
    } else {
        serve_tools t;
        if (serve_tools_parse(s, req, &t)) {
            status = serve_send_error(c, 400, t.bad_param, NULL, "%s", t.err);
        } else if (t.tools && t.choice != WGML_TOOL_CHOICE_NONE && g.grammar) {
            status = serve_send_error(c, 400, "tools", NULL, "tools cannot be combined with response_format or grammar");
        } else {
            char msg[512] = "";
            char *extra = serve_tools_extra_json(&t);
            char *prompt = t.json && !extra ? NULL : serve_chat_prompt(s, msgs, extra, msg, sizeof msg);
            if (!prompt && !msg[0]) snprintf(msg, sizeof msg, "out of memory");
            status = prompt ? generate(c, s, prompt, 0, 1, &g, &t) : serve_send_error(c, 400, "messages", NULL, "%s", msg);
            free(prompt);
            free(extra);
        }
        serve_tools_free(&t);
    }
    free_gen(&g);
    return status;
}
