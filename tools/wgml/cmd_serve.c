/*
 * cmd_serve.c - `wgml serve`: an OpenAI-compatible HTTP server for a model
 * (serve.h: the scheduler in serve_sched.c, HTTP in serve_http.c).
 *
 * Ctrl-C or SIGTERM drains: new requests get 503, the running and queued
 * ones finish (up to --drain-timeout seconds, then they are cancelled), and
 * the process exits 0. A second signal exits at once.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"

typedef struct {
    cli_model_opts mo;
    const char *paths[SERVE_MAX_MODELS]; /* -m, once per task */
    int n_paths;
    const char *host, *api_key, *alias;
    int port, parallel, ctx, queue, chunk, max_body, max_upload, max_audio, drain, keepalive, timeout, idle, per_client;
    wgml_kv_type kv;
    serve_http_opts ho;
    const char *template_file;
} serve_opts;

/* --cors: an origin (scheme, host and port) or "*" */
static int check_origin(void *base, const char *opt, const char *v) {
    if (strcmp(v, "*") && strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
        return cli_usage_error("%s: give an origin such as https://app.example (scheme, host and port, no path) or *",
                               opt), 0;
    if (strcmp(v, "*") && strchr(strchr(v, ':') + 3, '/'))
        return cli_usage_error("%s: '%s' has a path; an origin is a scheme, a host and a port", opt, v), 0;
    return 1;
}

static const cli_opt options[] = {
    CLI_LIST("--model", "-m", serve_opts, paths, n_paths, "FILE", NULL,
           "GGUF model (default: $WGML_MODEL, else the shipped stories260K.gguf);\n"
           "up to 5, one per task: generate, embed, speak, transcribe, embed images"),
    CLI_INCLUDE(cli_device_table, serve_opts, mo),
    CLI_GROUP("Server:"),
    CLI_STRING("--host", NULL, serve_opts, host, "ADDR", "address to listen on (default 127.0.0.1)"),
    CLI_INT("--port", NULL, serve_opts, port, "N", 0, 65535, "port (default 8080; 0: any free port, printed)"),
    CLI_INT("--parallel", "-np", serve_opts, parallel, "N", 1, 256,
            "slots: requests generated at the same time (default 4)"),
    CLI_INT("--ctx-size", "-c", serve_opts, ctx, "N", 8, 1 << 20,
            "context of each slot in tokens (default: the model's, at most 4096)"),
    CLI_STRING("--api-key", NULL, serve_opts, api_key, "KEY",
               "require 'Authorization: Bearer KEY' on /v1/ (default: $WGML_API_KEY)"),
    CLI_INT("--queue", NULL, serve_opts, queue, "N", 0, 4096,
            "requests that may wait for a slot; beyond, 503 (default 64)"),
    CLI_INT("--chunk", NULL, serve_opts, chunk, "N", 1, 4096,
            "prompt tokens evaluated per step beside the running streams (default 64)"),
    CLI_INT("--max-body", NULL, serve_opts, max_body, "BYTES", 1024, 1 << 30,
            "largest request body; beyond, 413 (default 1048576)"),
    CLI_INT("--max-upload", NULL, serve_opts, max_upload, "BYTES", 1024, 1 << 30,
            "largest audio upload (/v1/audio/transcriptions, translations);\n"
            "beyond, 413 (default 26214400: 25 MiB, as OpenAI)"),
    CLI_INT("--max-audio", NULL, serve_opts, max_audio, "S", 1, 24 * 3600,
            "longest audio an upload may hold, in seconds (default 3600)"),
    CLI_STRING("--chat-template-file", NULL, serve_opts, template_file, "FILE",
               "a Jinja chat template to use instead of the model's (as a GGUF's\ntokenizer.chat_template)"),
    CLI_STRING("--alias", NULL, serve_opts, alias, "NAME",
               "the model's id in /v1/models and responses (default: the file name)"),
    CLI_INT("--drain-timeout", NULL, serve_opts, drain, "S", 0, 3600,
            "on Ctrl-C/SIGTERM, seconds to let running requests finish (default 30)"),
    CLI_KV_TYPE(serve_opts, kv),
    CLI_INT("--sse-keepalive", NULL, serve_opts, keepalive, "MS", 0, 3600 * 1000,
            "a streamed request that waits (queued, or its prompt evaluated)\n"
            "gets an SSE comment this often; a client gone is noticed then (default\n"
            "1000; 0: never)"),
    CLI_INT("--timeout", NULL, serve_opts, timeout, "S", 1, 3600,
            "a request's head, then its body, must arrive within S seconds, and a\n"
            "write to a client may stall this long (default 10)"),
    CLI_INT("--idle-timeout", NULL, serve_opts, idle, "S", 1, 3600,
            "a kept-alive connection with no request for S seconds is closed (default 5)"),
    CLI_INT("--max-client-connections", NULL, serve_opts, per_client, "N", 1, 1024,
            "connections one client address may hold; a new one beyond closes its\n"
            "oldest idle one, or gets 429 if none is idle (default 32)"),
    CLI_LIST("--cors", NULL, serve_opts, ho.cors, ho.n_cors, "ORIGIN", check_origin,
           "let web pages of ORIGIN (\"https://app.example\") call the server: CORS\n"
           "preflights answered, Access-Control-Allow-Origin on responses; may be\n"
           "repeated; \"*\" (any origin) only with --api-key. Without it, requests\n"
           "with another Origin get 403 (docs/serve.md, Security)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml serve -m MODEL [options]\n",
    .about = "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
             "GET /v1/models, GET /health, GET /metrics (Prometheus). Requests share --parallel slots\n"
             "decoded together in one batched step per token; others wait in a queue. An embedding\n"
             "model (the bert family) serves POST /v1/embeddings instead, a speech model (kokoro)\n"
             "POST /v1/audio/speech (wav or pcm), a Whisper model POST /v1/audio/transcriptions and\n"
             "/v1/audio/translations (file uploads), a vision model (CLIP, SigLIP, ViT) POST /v1/embeddings\n"
             "of images and, with a classifier head, POST /v1/classify. -m may be given several times, one\n"
             "model per task: an LLM, an embedding model, a speech model, a Whisper model and a vision\n"
             "model from one process.\n",
    .opts = options,
};

static volatile sig_atomic_t signals_seen;

static void on_signal(int sig) {
    (void)sig;
    if (++signals_seen >= 2) _exit(130);
}

int cmd_serve(int argc, char **argv) {
    serve_opts o = {.host = "127.0.0.1", .api_key = getenv("WGML_API_KEY"), .port = 8080, .parallel = 4,
                    .queue = 64, .chunk = 64, .max_body = 1 << 20, .max_upload = 25 << 20, .max_audio = 3600, .drain = 30, .keepalive = 1000, .timeout = 10,
                    .idle = 5, .per_client = 32, .ho = serve_http_default_opts()};
    int rc = cli_parse(&spec, &o, argc, argv, NULL);
    if (rc >= 0) return rc;
    if (!*o.host || strlen(o.host) > 255) return cli_usage_error("--host: give an address");
    cli_model_opts mo = o.mo;
    serve_http_opts ho = o.ho;
    const char *host = o.host, *api_key = o.api_key, *alias = o.alias, **paths = o.paths;
    int n_paths = o.n_paths;
    const int parallel = o.parallel, queue = o.queue, per_client = o.per_client;
    if (api_key && !*api_key) api_key = NULL;
    for (int k = 0; k < ho.n_cors; k++)
        if (!strcmp(ho.cors[k], "*") && !api_key)
            return cli_usage_error("--cors '*' lets every web page use the server: only with --api-key");
    if (!api_key && strcmp(host, "127.0.0.1") && strcmp(host, "localhost") && strcmp(host, "::1"))
        fprintf(stderr, "wgml serve: warning: listening on %s without an API key: anyone who can reach it can use "
                        "it (--api-key KEY)\n", host);
    /* the models: the main one generates if one does; each task at most once */
    wgml_model *models[SERVE_MAX_MODELS] = {NULL};
    wgml_model_info infos[SERVE_MAX_MODELS];
    const char *ids[SERVE_MAX_MODELS];
    if (!n_paths) paths[n_paths++] = getenv("WGML_MODEL") ? getenv("WGML_MODEL") : WGML_DEFAULT_MODEL;
    int main_i = 0;
    uint32_t seen = 0;
    for (int k = 0; k < n_paths; k++) {
        mo.model = paths[k];
        if (!(models[k] = cli_load_model(&mo, NULL))) {
            for (int j = 0; j < k; j++) wgml_model_free(models[j]);
            return CLI_FAIL;
        }
        wgml_model_get_info(models[k], &infos[k]);
        /* the model's id: a file's name; a Hugging Face name as given, without "hf://" */
        const char *base = strrchr(paths[k], '/');
        ids[k] = base ? base + 1 : paths[k];
        if (wgml_model_is_remote(paths[k]) && strncmp(paths[k], "http", 4) != 0)
            ids[k] = strncmp(paths[k], "hf://", 5) == 0 ? paths[k] + 5 : paths[k];
        uint32_t t = infos[k].tasks & (WGML_TASK_GENERATE | WGML_TASK_EMBED | WGML_TASK_SPEECH | WGML_TASK_TRANSCRIBE |
                                       WGML_TASK_EMBED_IMAGE);
        if (n_paths > 1 && (!t || (t & seen))) {
            for (int j = 0; j <= k; j++) wgml_model_free(models[j]);
            return cli_fail("%s: %s; with several --model each must do what the others do not (generate, embed, speak, "
                            "transcribe, embed images)",
                            paths[k], t ? "a second model for the same task" : "a model that does none of the tasks served");
        }
        seen |= t;
        if (t & WGML_TASK_GENERATE) main_i = k;
    }
    wgml_model *m = models[main_i];
    serve_server s;
    memset(&s, 0, sizeof s);
    for (int k = 0; k < n_paths; k++)
        if (k != main_i) s.extra[s.n_extra++] = (serve_model){models[k], infos[k], ids[k]};
    s.max_queue = queue;
    s.api_key = api_key;
    s.max_body = (size_t)o.max_body;
    s.max_upload = (size_t)o.max_upload;
    s.max_audio_s = o.max_audio;
    s.keepalive_ms = o.keepalive;
    s.created = (double)time(NULL);
    s.model_id = alias ? alias : ids[main_i];
    wgml_error err;
    rc = CLI_OK;
    wgml_status st = serve_init(&s, m, parallel, o.ctx, o.chunk, o.kv, &err);
    if (st) {
        rc = cli_fail_err(&err);
        for (int k = 0; k < n_paths; k++) wgml_model_free(models[k]);
        return rc;
    }
    s.template_file = o.template_file;
    if (serve_chat_init(&s) || serve_start(&s)) {
        serve_free(&s);
        for (int k = 0; k < n_paths; k++) wgml_model_free(models[k]);
        return CLI_FAIL;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int bound = 0;
    /* each connection holds a civetweb thread while it lives: enough for every slot and queue place, one
     * client's idle connections, and a few to spare (the guard keeps idle ones from taking the rest) */
    ho.host = host;
    ho.port = o.port;
    ho.n_threads = parallel + queue + per_client + 8;
    ho.timeout_ms = o.timeout * 1000;
    ho.idle_ms = o.idle * 1000;
    ho.per_client = per_client;
    serve_http *h = serve_http_start(&s, &ho, &bound);
    if (!h) {
        serve_stop(&s);
        serve_free(&s);
        for (int k = 0; k < n_paths; k++) wgml_model_free(models[k]);
        return CLI_FAIL;
    }
    if (s.batch)
        fprintf(stderr, "wgml serve: %s on %s (%s), %d slots of %d tokens%s\n", s.model_id, s.info.backend,
                s.info.adapter, s.n_slots, s.n_ctx, s.template_file ? ", chat template: --chat-template-file" : s.template_fallback ? ", chat template: built-in fallback" : "");
    else if (s.info.tasks & WGML_TASK_EMBED)
        fprintf(stderr, "wgml serve: %s on %s (%s), embeddings of texts up to %d tokens\n", s.model_id,
                s.info.backend, s.info.adapter, s.n_ctx);
    else if (s.info.tasks & WGML_TASK_TRANSCRIBE)
        fprintf(stderr, "wgml serve: %s on %s (%s), speech recognition\n", s.model_id, s.info.backend, s.info.adapter);
    else if (s.info.tasks & WGML_TASK_EMBED_IMAGE)
        fprintf(stderr, "wgml serve: %s on %s (%s), image embeddings%s\n", s.model_id, s.info.backend, s.info.adapter,
                s.info.tasks & WGML_TASK_CLASSIFY ? " and classification" : "");
    else
        fprintf(stderr, "wgml serve: %s on %s (%s), speech\n", s.model_id, s.info.backend, s.info.adapter);
    for (int k = 0; k < s.n_extra; k++)
        fprintf(stderr, "wgml serve: also %s (%s) for %s\n", s.extra[k].id, s.extra[k].info.architecture,
                s.extra[k].info.tasks & WGML_TASK_EMBED        ? "/v1/embeddings"
                : s.extra[k].info.tasks & WGML_TASK_TRANSCRIBE ? "/v1/audio/transcriptions, /v1/audio/translations"
                : s.extra[k].info.tasks & WGML_TASK_CLASSIFY   ? "/v1/embeddings (images), /v1/classify"
                : s.extra[k].info.tasks & WGML_TASK_EMBED_IMAGE ? "/v1/embeddings (images)"
                                                                : "/v1/audio/speech");
    printf("listening on http://%s%s%s:%d\n", strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", bound);
    fflush(stdout);
    while (!signals_seen) usleep(50 * 1000);
    fprintf(stderr, "wgml serve: draining (a second signal exits at once)\n");
    pthread_mutex_lock(&s.mu);
    s.draining = 1;
    pthread_mutex_unlock(&s.mu);
    double t0 = cli_now_ms();
    for (;;) {
        int busy, queued;
        pthread_mutex_lock(&s.mu);
        serve_load(&s, &busy, &queued);
        busy += s.transcribe_busy; /* transcriptions run beside the slots */
        pthread_mutex_unlock(&s.mu);
        if ((!busy && !queued) || cli_now_ms() - t0 > (double)o.drain * 1e3) break;
        usleep(50 * 1000);
    }
    serve_stop(&s); /* what still runs is cancelled; its threads answer and return */
    serve_http_stop(h);
    serve_free(&s);
    for (int k = 0; k < n_paths; k++) wgml_model_free(models[k]);
    fprintf(stderr, "wgml serve: stopped\n");
    return rc;
}
