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

static const char *help =
    "usage: wgml serve -m MODEL [options]\n"
    "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
    "GET /v1/models, GET /health, GET /metrics (Prometheus). Requests share --parallel slots\n"
    "decoded together in one batched step per token; others wait in a queue. An embedding\n"
    "model (the bert family) serves POST /v1/embeddings instead, a speech model (kokoro)\n"
    "POST /v1/audio/speech (wav or pcm). -m may be given up to 3 times, one model per task:\n"
    "an LLM, an embedding model and a speech model from one process.\n\n"
    CLI_MODEL_OPTS_HELP
    "  --host ADDR           address to listen on (default 127.0.0.1)\n"
    "  --port N              port (default 8080; 0: any free port, printed)\n"
    "  --parallel N          slots: requests generated at the same time (default 4)\n"
    "  -c, --ctx-size N      context of each slot in tokens (default: the model's, at most 4096)\n"
    "  --api-key KEY         require 'Authorization: Bearer KEY' on /v1/ (default: $WGML_API_KEY)\n"
    "  --queue N             requests that may wait for a slot; beyond, 503 (default 64)\n"
    "  --chunk N             prompt tokens evaluated per step beside the running streams (default 64)\n"
    "  --max-body BYTES      largest request body; beyond, 413 (default 1048576)\n"
    "  --alias NAME          the model's id in /v1/models and responses (default: the file name)\n"
    "  --drain-timeout S     on Ctrl-C/SIGTERM, seconds to let running requests finish (default 30)\n"
    "  --kv-type T           KV cache: auto, f16 or f32 (default auto)\n"
    "  --sse-keepalive MS    a streamed request that waits (queued, or its prompt evaluated)\n"
    "                        gets an SSE comment this often; a client gone is noticed then (default\n"
    "                        1000; 0: never)\n"
    "  --timeout S           a request's head, then its body, must arrive within S seconds, and a\n"
    "                        write to a client may stall this long (default 10)\n"
    "  --idle-timeout S      a kept-alive connection with no request for S seconds is closed (default 5)\n"
    "  --max-client-connections N\n"
    "                        connections one client address may hold; a new one beyond closes its\n"
    "                        oldest idle one, or gets 429 if none is idle (default 32)\n"
    "  --cors ORIGIN         let web pages of ORIGIN (\"https://app.example\") call the server: CORS\n"
    "                        preflights answered, Access-Control-Allow-Origin on responses; may be\n"
    "                        repeated; \"*\" (any origin) only with --api-key. Without it, requests\n"
    "                        with another Origin get 403 (docs/serve.md, Security)\n";

static volatile sig_atomic_t signals_seen;

static void on_signal(int sig) {
    (void)sig;
    if (++signals_seen >= 2) _exit(130);
}

int cmd_serve(int argc, char **argv) {
    cli_model_opts mo = {0};
    const char *host = "127.0.0.1", *api_key = getenv("WGML_API_KEY"), *alias = NULL;
    long long port = 8080, parallel = 4, ctx = 0, queue = 64, chunk = 64, max_body = 1 << 20, drain = 30,
              keepalive = 1000, timeout = 10, idle = 5, per_client = 32;
    serve_http_opts ho = serve_http_default_opts();
    wgml_kv_type kv = WGML_KV_DEFAULT;
    const char *paths[SERVE_MAX_MODELS];
    int n_paths = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { /* may come several times: one model per task */
            if (!(v = cli_value(argc, argv, &i))) return CLI_USAGE;
            if (n_paths == SERVE_MAX_MODELS)
                return cli_usage_error("at most %d models: one that generates, one that embeds, one that speaks",
                                       SERVE_MAX_MODELS);
            paths[n_paths++] = v;
            continue;
        }
        int r = cli_model_option(argc, argv, &i, &mo);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (!strcmp(a, "--host")) {
            if (!(host = cli_value(argc, argv, &i))) return CLI_USAGE;
            if (!*host || strlen(host) > 255) return cli_usage_error("--host: give an address");
        } else if (!strcmp(a, "--port")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 0, 65535, &port)) return CLI_USAGE;
        } else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 256, &parallel)) return CLI_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 8, 1 << 20, &ctx)) return CLI_USAGE;
        } else if (!strcmp(a, "--api-key")) {
            if (!(api_key = cli_value(argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--queue")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 0, 4096, &queue)) return CLI_USAGE;
        } else if (!strcmp(a, "--chunk")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 4096, &chunk)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-body")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1024, 1LL << 30, &max_body)) return CLI_USAGE;
        } else if (!strcmp(a, "--alias")) {
            if (!(alias = cli_value(argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--drain-timeout")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 0, 3600, &drain)) return CLI_USAGE;
        } else if (!strcmp(a, "--sse-keepalive")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 0, 3600 * 1000, &keepalive)) return CLI_USAGE;
        } else if (!strcmp(a, "--timeout")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 3600, &timeout)) return CLI_USAGE;
        } else if (!strcmp(a, "--idle-timeout")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 3600, &idle)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-client-connections")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 1024, &per_client)) return CLI_USAGE;
        } else if (!strcmp(a, "--cors")) {
            if (!(v = cli_value(argc, argv, &i))) return CLI_USAGE;
            if (ho.n_cors == SERVE_MAX_CORS) return cli_usage_error("--cors: at most %d origins", SERVE_MAX_CORS);
            if (strcmp(v, "*") && strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
                return cli_usage_error("--cors: give an origin such as https://app.example (scheme, host and "
                                       "port, no path) or *");
            if (strcmp(v, "*") && strchr(strchr(v, ':') + 3, '/'))
                return cli_usage_error("--cors: '%s' has a path; an origin is a scheme, a host and a port", v);
            ho.cors[ho.n_cors++] = v;
        } else if (!strcmp(a, "--kv-type")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_kv_type(v, &kv)) return CLI_USAGE;
        } else {
            return cli_usage_error("unknown option '%s'", a);
        }
    }
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
        const char *base = strrchr(paths[k], '/');
        ids[k] = base ? base + 1 : paths[k];
        uint32_t t = infos[k].tasks & (WGML_TASK_GENERATE | WGML_TASK_EMBED | WGML_TASK_SPEECH);
        if (n_paths > 1 && (!t || (t & seen))) {
            for (int j = 0; j <= k; j++) wgml_model_free(models[j]);
            return cli_fail("%s: %s; with several --model each must do what the others do not (generate, embed, speak)",
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
    s.max_queue = (int)queue;
    s.api_key = api_key;
    s.max_body = (size_t)max_body;
    s.keepalive_ms = (int)keepalive;
    s.created = (double)time(NULL);
    s.model_id = alias ? alias : ids[main_i];
    wgml_error err;
    int rc = CLI_OK;
    wgml_status st = serve_init(&s, m, (int)parallel, (int)ctx, (int)chunk, kv, &err);
    if (st) {
        rc = cli_fail_err(&err);
        for (int k = 0; k < n_paths; k++) wgml_model_free(models[k]);
        return rc;
    }
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
    ho.port = (int)port;
    ho.n_threads = (int)(parallel + queue + per_client + 8);
    ho.timeout_ms = (int)timeout * 1000;
    ho.idle_ms = (int)idle * 1000;
    ho.per_client = (int)per_client;
    serve_http *h = serve_http_start(&s, &ho, &bound);
    if (!h) {
        serve_stop(&s);
        serve_free(&s);
        for (int k = 0; k < n_paths; k++) wgml_model_free(models[k]);
        return CLI_FAIL;
    }
    if (s.batch)
        fprintf(stderr, "wgml serve: %s on %s (%s), %d slots of %d tokens%s\n", s.model_id, s.info.backend,
                s.info.adapter, s.n_slots, s.n_ctx, s.template_fallback ? ", chat template: built-in fallback" : "");
    else if (s.info.tasks & WGML_TASK_EMBED)
        fprintf(stderr, "wgml serve: %s on %s (%s), embeddings of texts up to %d tokens\n", s.model_id,
                s.info.backend, s.info.adapter, s.n_ctx);
    else
        fprintf(stderr, "wgml serve: %s on %s (%s), speech\n", s.model_id, s.info.backend, s.info.adapter);
    for (int k = 0; k < s.n_extra; k++)
        fprintf(stderr, "wgml serve: also %s (%s) for %s\n", s.extra[k].id, s.extra[k].info.architecture,
                s.extra[k].info.tasks & WGML_TASK_EMBED ? "/v1/embeddings" : "/v1/audio/speech");
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
        pthread_mutex_unlock(&s.mu);
        if ((!busy && !queued) || cli_now_ms() - t0 > (double)drain * 1e3) break;
        usleep(50 * 1000);
    }
    serve_stop(&s); /* what still runs is cancelled; its threads answer and return */
    serve_http_stop(h);
    serve_free(&s);
    for (int k = 0; k < n_paths; k++) wgml_model_free(models[k]);
    fprintf(stderr, "wgml serve: stopped\n");
    return rc;
}
