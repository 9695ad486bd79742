/*
 * serve_info.c - GET /v1/models, /health and /metrics (Prometheus text).
 */
#include <civetweb.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

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
    if (info->tasks & WGML_TASK_EMBED_IMAGE) json_object_array_add(caps, json_object_new_string("embeddings.images"));
    if (info->tasks & WGML_TASK_CLASSIFY) json_object_array_add(caps, json_object_new_string("classify"));
    if (info->tasks & WGML_TASK_SPEECH) {
        json_object_array_add(caps, json_object_new_string("audio.speech"));
        json_object *voices = json_object_new_array();
        for (int i = 0; wgml_speech_voice(model, i); i++)
            json_object_array_add(voices, json_object_new_string(wgml_speech_voice(model, i)));
        json_object_object_add(m, "voices", voices);
    }
    if (info->tasks & WGML_TASK_TRANSCRIBE) {
        json_object_array_add(caps, json_object_new_string("audio.transcriptions"));
        json_object_array_add(caps, json_object_new_string("audio.translations"));
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

int serve_ep_models(struct mg_connection *c, serve_server *s) {
    json_object *arr = json_object_new_array();
    json_object_array_add(arr, model_entry(s, s->model, &s->info, s->model_id, s->n_ctx));
    for (int i = 0; i < s->n_extra; i++)
        json_object_array_add(arr, model_entry(s, s->extra[i].model, &s->extra[i].info, s->extra[i].id,
                                               s->extra[i].info.n_ctx_train));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(o, "data", arr);
    return serve_send_json(c, 200, o);
}

int serve_ep_health(struct mg_connection *c, serve_server *s) {
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
    return serve_send_json(c, draining ? 503 : 200, o);
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

int serve_ep_metrics(struct mg_connection *c, serve_server *s) {
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
                sb_printf(&b, "wgml_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", serve_endpoint_names[e],
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
    int status = b.p ? serve_send_body(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len, NULL, NULL)
                     : serve_send_error(c, 500, NULL, NULL, "out of memory");
    free(b.p);
    return status;
}
