/*
 * serve.h - `wgml serve`, an OpenAI-compatible HTTP server:
 *
 *   serve_sched.c     the slots and the one scheduler thread: requests (jobs)
 *                     wait in a queue for a free slot; every step advances all
 *                     busy slots together in one batched forward pass
 *                     (wgml_batch): each decoding slot's next token plus a
 *                     chunk of one new prompt; text is released to the job
 *                     with stop strings and split UTF-8 characters held back.
 *   serve_http.c      HTTP through civetweb: routing, the checks every request
 *                     passes (framing, Host, Origin, API key, content type,
 *                     body limits), the body, civetweb's own errors.
 *   serve_guard.c     what keeps hostile clients out: connection limits (idle,
 *                     slow and too many connections closed), the Host and
 *                     Origin rules (docs/serve.md, Security).
 *   serve_reply.c     what is written back: JSON errors and bodies, streams,
 *                     server-sent events, the CORS header.
 *   serve_generate.c  /v1/chat/completions and /v1/completions (serve_chat.c:
 *                     the prompt through the model's chat template; serve_tools.c:
 *                     tools, tool_choice and the calls parsed from the reply).
 *   serve_embed.c     /v1/embeddings.      serve_speech.c  /v1/audio/speech.
 *   serve_vision.c    image inputs: /v1/embeddings with {"image": ...} items
 *                     and /v1/classify (base64 data URLs through image_file.c).
 *   serve_transcribe.c  /v1/audio/transcriptions and /v1/audio/translations
 *                     (multipart/form-data uploads, audio through libsndfile).
 *   serve_info.c      /v1/models, /health and /metrics.
 *   cmd_serve.c       the command: options, the models, signals and draining.
 *
 * Locking: one mutex (serve_server.mu) guards the queue, every job's shared
 * fields and the metrics; each job has a condition variable its HTTP thread
 * waits on. Slots are the scheduler thread's alone. Rendering a chat template
 * and tokenizing take no lock (the library allows them on any thread while
 * the model generates, wgml.h), so a huge request never holds up the decode
 * loop.
 */
#ifndef WGML_SERVE_H
#define WGML_SERVE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

#define SERVE_MAX_STOP 4       /* stop strings per request (as OpenAI) */
#define SERVE_STOP_MAX_LEN 256 /* bytes of one stop string */

typedef enum serve_finish {
    SERVE_RUNNING = 0,
    SERVE_FINISH_STOP,      /* EOS/end of turn or a stop string */
    SERVE_FINISH_LENGTH,    /* max_tokens, or the context is full */
    SERVE_FINISH_CANCELLED, /* the client went away */
    SERVE_FINISH_ERROR,     /* the step failed (error holds why) */
} serve_finish;

/* One request's generation. The HTTP thread fills the request part, the
 * scheduler the rest; both hold a reference (refs) and the last one frees it. */
typedef struct serve_job {
    /* the request (read-only once queued) */
    int32_t *prompt;
    int n_prompt;
    int max_tokens; /* -1: until the end of the context */
    wgml_sampler_params sampler;
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    wgml_grammar *grammar; /* response_format or grammar: what the text must follow (NULL: none) */
    int32_t *bias_tok;     /* logit_bias */
    float *bias;
    int n_bias;
    /* tool calls (serve_tools.c): 1 from the first token (grammar is the calls'), 2 from where the
     * trigger appears (tool_grammar); the calls' text is kept in calls, not released as text */
    int tool_mode;
    wgml_tools *tools; /* the request's tools: the calls' grammar and parser (owned) */
    const char *trigger; /* mode 2: where calls begin (wgml_tools_trigger) */
    int trigger_at_start;
    /* shared, under serve_server.mu */
    int refs;
    pthread_cond_t cv;
    char *text; /* released text */
    size_t len, cap;
    serve_finish finish;
    char error[WGML_ERROR_MESSAGE_MAX];
    int n_gen, n_cached;
    int cancelled;                           /* set by the HTTP thread */
    double t_queued, t_start, t_first, t_end; /* ms (cli_now_ms) */
    /* the scheduler's own */
    char held[2 * SERVE_STOP_MAX_LEN + 512]; /* generated text not yet released */
    size_t held_len;
    int tool_active;  /* the calls began: text goes to calls (read by the HTTP thread once finished) */
    int tool_bind;    /* the trigger was just seen: the slot's grammar is to be set */
    int seen_text;    /* a character other than white space was generated (ends an at-start trigger) */
    char *calls;
    size_t calls_len, calls_cap;
    int32_t prev; /* the last token, for its successor's text */
} serve_job;

/* Prometheus histogram with fixed bucket bounds (seconds). */
#define SERVE_HIST_BUCKETS 12
typedef struct serve_hist {
    uint64_t count[SERVE_HIST_BUCKETS + 1]; /* per bucket, +Inf last (not cumulative) */
    double sum;
    uint64_t n;
} serve_hist;

#define SERVE_N_ENDPOINTS 11 /* chat, completions, embeddings, audio_speech, audio_transcriptions, audio_translations,
                               classify, models, health, metrics, other (serve_http.c) */
#define SERVE_N_STATUS 13
extern const int serve_status_codes[SERVE_N_STATUS]; /* the statuses counted (the last also counts others) */
typedef struct serve_metrics {
    uint64_t requests[SERVE_N_ENDPOINTS][SERVE_N_STATUS]; /* [endpoint][status index] */
    uint64_t prompt_tokens, cached_tokens, generated_tokens, steps, step_rows, cancelled;
    serve_hist ttft, per_token, duration, queue_wait;
    double busy_slot_seconds; /* integral of busy slots over time */
} serve_metrics;

typedef struct serve_slot {
    serve_job *job; /* NULL: free */
    int fed;        /* prompt tokens evaluated */
    int32_t pending; /* the last token picked, evaluated in the next step */
    int has_pending;
} serve_slot;

/* A model the server holds: the main one (serve_server.model) and, with
 * several --model, one that embeds, one that speaks and one that transcribes
 * beside it. */
#define SERVE_MAX_MODELS 5
typedef struct serve_model {
    wgml_model *model;
    wgml_model_info info;
    const char *id; /* the name /v1/models lists and responses carry */
} serve_model;

typedef struct serve_server {
    wgml_model *model; /* the main model: the one that generates if one does (slots, batch, template) */
    wgml_model_info info;
    const char *model_id; /* the name /v1/models lists */
    serve_model extra[SERVE_MAX_MODELS - 1]; /* the others (set by the caller after serve_init) */
    int n_extra;
    wgml_batch *batch; /* NULL for a model that does not generate (an embedding model) */
    /* one /v1/embeddings and one /v1/audio/speech request at a time on their models (with several
     * --model they are different models and run side by side) */
    pthread_mutex_t embed_mu, speech_mu;
    /* one transcription at a time on the model; transcribe_busy (under mu): requests in the server (reading,
     * waiting or running; serve_transcribe.c bounds it) */
    pthread_mutex_t transcribe_mu;
    int transcribe_busy;
    size_t max_upload;  /* the largest multipart body (an audio upload) */
    double max_audio_s; /* the longest audio an upload may hold */
    int n_slots, n_ctx, chunk, max_queue;
    wgml_kv_type kv; /* --kv-type: the slots' caches, transcriptions' cross keys and values */
    const char *api_key; /* NULL: none */
    size_t max_body;
    int keepalive_ms; /* a streamed request with nothing to send gets an SSE comment this often (0: never) */
    double created; /* unix seconds */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    serve_job **queue; /* FIFO: max_queue waiting, plus jobs bound for free slots */
    int q_len;
    serve_slot *slots;
    int busy;
    int stopping; /* the scheduler ends (after draining) */
    int draining; /* new requests are refused with 503 */
    pthread_t thread;
    int thread_started;
    wgml_batch_item *items; /* the scheduler's step: n_slots items and their slots */
    int *slot_of;
    const char *chat_template; /* the model's, the built-in fallback for its architecture, or --chat-template-file's */
    int template_fallback;
    const char *template_file; /* --chat-template-file (NULL: none) */
    char *template_owned;      /* its text */
    wgml_tool_format tool_format; /* how the template's model writes tool calls (wgml_tool_format_of) */
    serve_metrics metrics;
    double last_busy_t;
    uint64_t next_id;
} serve_server;

/* ---- serve_tools.c ---- */

typedef struct serve_tools {
    struct json_object *json; /* the request's `tools` (borrowed); NULL: none */
    wgml_tool_choice choice;
    wgml_tools *tools;        /* the library's: checked tools, the calls' grammar, the parser */
    char err[WGML_ERROR_MESSAGE_MAX + 64];
    const char *bad_param;
} serve_tools;

/* tools, tool_choice, parallel_tool_calls (with the template's format, s->tool_format); -1 with
 * t->err and t->bad_param on a bad one. */
int serve_tools_parse(serve_server *s, struct json_object *req, serve_tools *t);
void serve_tools_free(serve_tools *t);
/* {"tools": [...]} for the template's extra variables (malloc'ed), NULL without tools. */
char *serve_tools_extra_json(const serve_tools *t);
/* The calls in a reply's call text as OpenAI's tool_calls array, or NULL when it holds none
 * (or something that is not a call of these tools: then it is text). */
struct json_object *serve_tools_calls(const wgml_tools *tools, const char *text, size_t len);

/* ---- serve_sched.c ---- */
/* A model with the GENERATE task gets the slots and the batch; one without (an
 * embedding model: /v1/embeddings only) gets neither, and its scheduler idles. */
wgml_status serve_init(serve_server *s, wgml_model *m, int n_slots, int n_ctx, int chunk, wgml_kv_type kv,
                       wgml_error *err);
void serve_free(serve_server *s); /* after serve_stop */
int serve_start(serve_server *s); /* the scheduler thread; 0 on success */
void serve_stop(serve_server *s); /* ends it: jobs still running finish as cancelled */

serve_job *serve_job_new(void);
void serve_job_unref(serve_server *s, serve_job *j); /* under s->mu */
/* Queues a job (under s->mu); 0, or -1 when the queue is full. */
int serve_submit(serve_server *s, serve_job *j);
/* The number of busy slots and queued jobs (under s->mu). */
void serve_load(const serve_server *s, int *busy, int *queued);
void serve_hist_add(serve_hist *h, double seconds);
extern const double serve_hist_bounds[SERVE_HIST_BUCKETS];

/* The model that does task (a WGML_TASK_* bit): the main one or an extra; NULL if none
 * (out gets it as a serve_model; valid while the server lives). */
const serve_model *serve_model_for(serve_server *s, uint32_t task, serve_model *out);

/* ---- serve_chat.c ---- */
/* The prompt of an OpenAI messages array through the model's chat template
 * (malloc'ed), or NULL with msg saying why (a template's raise_exception). */
struct json_object;
char *serve_chat_prompt(serve_server *s, struct json_object *messages, const char *extra_json, char *msg,
                        size_t msg_size);
/* Loads the template once (at start): 0, or -1 after printing why. */
int serve_chat_init(serve_server *s);

/* ---- serve_guard.c ---- */
struct mg_connection;
typedef struct serve_guard serve_guard;
typedef struct serve_guard_stats {
    uint64_t evicted;       /* idle connections closed to make room */
    uint64_t refused;       /* connections turned away with 429 (their client's all busy) */
    uint64_t body_timeouts; /* bodies that did not arrive within the time limit */
    int open;               /* connections open now */
} serve_guard_stats;
/* n_workers: civetweb's threads; per_client: connections one address may hold; timeout_ms: for a body. */
serve_guard *serve_guard_new(int n_workers, int per_client, int timeout_ms);
void serve_guard_free(serve_guard *g); /* after mg_stop */
void serve_guard_get_stats(serve_guard *g, serve_guard_stats *out);
/* The port the server listens on (its sockets are found by it); before the first connection. */
void serve_guard_set_port(serve_guard *g, int port);
/* civetweb's callbacks: a connection opens (init_connection), its request head arrived (begin_request),
 * its body is read, its request ended (end_request), it closes (connection_close). */
void serve_guard_open(serve_guard *g);
void serve_guard_request(serve_guard *g, const struct mg_connection *c);
void serve_guard_body_done(serve_guard *g, const struct mg_connection *c);
void serve_guard_request_end(serve_guard *g, const struct mg_connection *c);
void serve_guard_close(serve_guard *g, const struct mg_connection *c);
/* Whether the body is past its time limit (the reaper has cut it off). */
int serve_guard_body_late(serve_guard *g, const struct mg_connection *c);
/* Whether the client closed its connection (while it waits for an answer). */
int serve_guard_client_gone(serve_guard *g, const struct mg_connection *c);
/* Whether a Host header (NULL: none) names this server listening on listen_host:port. */
int serve_guard_host_ok(const char *host_header, const char *listen_host, int port);
/* Whether an Origin header (NULL: none) may use the server: the server's own, or one of --cors ("*": any). */
int serve_guard_origin_ok(const char *origin, const char *host_header, const char *const *cors, int n_cors);

/* ---- serve_http.c ---- */
#define SERVE_MAX_CORS 16
typedef struct serve_http_opts {
    const char *host; /* the address to listen on */
    int port;         /* 0: any free one */
    int n_threads;    /* civetweb's workers: one per connection being served */
    int timeout_ms;   /* a request's head, and then its body, must arrive within this; a write may stall this long */
    int idle_ms;      /* a kept-alive connection is closed after this long without a request */
    int per_client;   /* connections one client address may hold */
    const char *cors[SERVE_MAX_CORS]; /* origins whose pages may call the server ("*": any; needs an API key) */
    int n_cors;
} serve_http_opts;
/* The defaults: 10 s, 5 s, 32 connections per address, no CORS (host, port and threads to be set). */
serve_http_opts serve_http_default_opts(void);
typedef struct serve_http {
    struct mg_context *ctx;
    serve_server *s;
    serve_guard *guard;
    serve_http_opts o;
    int port; /* the port bound */
} serve_http; /* civetweb's user data: mg_get_user_data(mg_get_context(c)) in every handler */
extern const char *const serve_endpoint_names[SERVE_N_ENDPOINTS];
/* The body, NUL-terminated, into *out (malloc'ed): 0, or the HTTP status of the failure (after
 * answering: 413 over limit bytes, 408 not in within --timeout, 400 cut short). */
int serve_read_body(struct mg_connection *c, serve_server *s, size_t limit, char **out, size_t *len);
/* Whether s[0..n) is UTF-8: no overlong forms, surrogates or values past U+10FFFF. */
int serve_utf8_valid(const unsigned char *s, size_t n);
/* Listens (*bound_port gets the port). NULL after printing why. */
serve_http *serve_http_start(serve_server *s, const serve_http_opts *o, int *bound_port);
void serve_http_stop(serve_http *h);

/* ---- serve_reply.c: what every endpoint writes back ---- */
struct json_object;
/* Each returns the HTTP status it sent. */
int serve_send_body(struct mg_connection *c, int status, const char *type, const char *body, size_t len,
                    const char *extra_name, const char *extra_value);
int serve_send_json(struct mg_connection *c, int status, struct json_object *o); /* takes o */
/* An OpenAI-shaped error, {"error": {"message", "type", "param", "code"}} (param, code: NULL for null). */
int serve_send_error(struct mg_connection *c, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int serve_send_405(struct mg_connection *c, const char *allow, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
struct json_object *serve_error_object(const char *message, const char *type, const char *param, const char *code);
/* 400 for an endpoint of a task no model of the server has (what: the task, "speak"). */
int serve_no_task(struct mg_connection *c, serve_server *s, const char *what);
/* Access-Control-Allow-Origin and Vary when the request's Origin is one --cors allows. */
void serve_add_cors(struct mg_connection *c);
/* A streamed body: chunked for HTTP/1.1, to the close for HTTP/1.0. write and sse: 0, or -1 when the
 * client is gone. */
void serve_stream_start(struct mg_connection *c, const char *content_type);
int serve_stream_write(struct mg_connection *c, const void *b, size_t n);
void serve_stream_end(struct mg_connection *c);
int serve_sse(struct mg_connection *c, struct json_object *o); /* one server-sent event; takes o */
int serve_is_number(struct json_object *v);
/* Whether a string anywhere in v holds U+0000 (texts go on as C strings: such a request gets 400). */
int serve_has_nul(struct json_object *v, int depth);

/* ---- the endpoints: serve_generate.c, serve_embed.c, serve_speech.c, serve_transcribe.c, serve_info.c ---- */
int serve_ep_chat(struct mg_connection *c, serve_server *s, struct json_object *req);
int serve_ep_completions(struct mg_connection *c, serve_server *s, struct json_object *req);
int serve_ep_embeddings(struct mg_connection *c, serve_server *s, struct json_object *req);
int serve_ep_speech(struct mg_connection *c, serve_server *s, struct json_object *req);

/* ---- serve_vision.c: image inputs ---- */
#define SERVE_MAX_IMAGES 64                          /* images (and texts beside them) in one request */
#define SERVE_MAX_LABELS 1024                        /* label texts of a zero-shot /v1/classify */
#define SERVE_IMAGE_MAX_PIXELS ((size_t)4096 * 4096) /* pixels of one image (width x height) */
#define SERVE_IMAGE_MAX_TOTAL ((size_t)64 << 20)     /* pixels of all a request's images (192 MiB as RGB) */
/* What /v1/embeddings' input holds: 0 strings (or one string), 1 {"image": ...} items only, 2 texts with
 * some as {"text": ...} (serve_input_text reads either form); -1 with msg for a bad item or a mix of
 * images and texts. */
int serve_input_kind(struct json_object *input, char *msg, size_t msg_size);
const char *serve_input_text(struct json_object *item); /* a string's or {"text": ...}'s text, else NULL */
/* /v1/embeddings with image items (serve_ep_embeddings hands them over), and /v1/classify. */
int serve_ep_embed_images(struct mg_connection *c, serve_server *s, struct json_object *req);
int serve_ep_classify(struct mg_connection *c, serve_server *s, struct json_object *req);
/* a multipart/form-data upload: the endpoint checks the content type and reads the body itself */
int serve_ep_transcribe(struct mg_connection *c, serve_server *s, int translate);
int serve_ep_models(struct mg_connection *c, serve_server *s);
int serve_ep_health(struct mg_connection *c, serve_server *s);
int serve_ep_metrics(struct mg_connection *c, serve_server *s);

#endif
