/*
 * serve_reply.c - what `wgml serve` writes back: OpenAI-shaped JSON errors,
 * JSON and plain bodies, streamed bodies (chunked for HTTP/1.1, to the close
 * for HTTP/1.0) and server-sent events, the CORS header for an origin --cors
 * allows, and the checks on request text every endpoint shares.
 */
#include <civetweb.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "serve.h"

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

void serve_add_cors(struct mg_connection *c) {
    const char *o = cors_origin(c);
    if (!o) return;
    mg_response_header_add(c, "Access-Control-Allow-Origin", o, -1);
    mg_response_header_add(c, "Vary", "Origin", -1);
}

int serve_send_body(struct mg_connection *c, int status, const char *type, const char *body, size_t len,
                     const char *extra_name, const char *extra_value) {
    char cl[32];
    snprintf(cl, sizeof cl, "%zu", len);
    mg_response_header_start(c, status);
    mg_response_header_add(c, "Content-Type", type, -1);
    mg_response_header_add(c, "Content-Length", cl, -1);
    if (extra_name) mg_response_header_add(c, extra_name, extra_value, -1);
    serve_add_cors(c);
    mg_response_header_send(c);
    if (len) mg_write(c, body, len);
    return status;
}

int serve_send_json(struct mg_connection *c, int status, json_object *o) {
    size_t len;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    serve_send_body(c, status, "application/json", t, len, NULL, NULL);
    json_object_put(o);
    return status;
}

json_object *serve_error_object(const char *message, const char *type, const char *param, const char *code) {
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
    json_object *o = serve_error_object(msg, type, param, code);
    size_t len;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    serve_send_body(c, status, "application/json", t, len, allow ? "Allow" : NULL, allow);
    json_object_put(o);
    return status;
}

int serve_send_error(struct mg_connection *c, int status, const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = send_error_allow(c, status, param, code, NULL, fmt, ap);
    va_end(ap);
    return r;
}

int serve_send_405(struct mg_connection *c, const char *allow, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = send_error_allow(c, 405, NULL, "method_not_allowed", allow, fmt, ap);
    va_end(ap);
    return r;
}

int serve_is_number(json_object *v) { return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double); }

/* Whether a string anywhere in v holds U+0000. Texts go on as C strings (the template
 * engine, the tokenizers, the G2P), which would cut them at the NUL without a word: such
 * a request gets a 400 instead. */
int serve_has_nul(json_object *v, int depth) {
    if (depth > 64) return 0; /* json-c's parser nests no deeper */
    if (json_object_is_type(v, json_type_string))
        return memchr(json_object_get_string(v), 0, (size_t)json_object_get_string_len(v)) != NULL;
    if (json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++)
            if (serve_has_nul(json_object_array_get_idx(v, i), depth + 1)) return 1;
    } else if (json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, k, x) {
            (void)k;
            if (serve_has_nul(x, depth + 1)) return 1;
        }
    }
    return 0;
}

/* Streamed bodies. HTTP/1.1 gets them chunked; HTTP/1.0 has no chunked encoding, so
 * there the body goes out as it is, and the connection closes at its end. */
static int http10(struct mg_connection *c) {
    const struct mg_request_info *ri = mg_get_request_info(c);
    return ri && ri->http_version && !strcmp(ri->http_version, "1.0");
}

void serve_stream_start(struct mg_connection *c, const char *content_type) {
    mg_response_header_start(c, 200);
    mg_response_header_add(c, "Content-Type", content_type, -1);
    if (!strcmp(content_type, "text/event-stream")) mg_response_header_add(c, "Cache-Control", "no-cache", -1);
    if (http10(c)) mg_response_header_add(c, "Connection", "close", -1);
    else mg_response_header_add(c, "Transfer-Encoding", "chunked", -1);
    serve_add_cors(c);
    mg_response_header_send(c);
}

/* 0, or -1 when the client is gone */
int serve_stream_write(struct mg_connection *c, const void *b, size_t n) {
    if (!n) return 0;
    return (http10(c) ? mg_write(c, b, n) : mg_send_chunk(c, b, (unsigned)n)) > 0 ? 0 : -1;
}

void serve_stream_end(struct mg_connection *c) {
    if (!http10(c)) mg_send_chunk(c, "", 0);
}

/* Writes one server-sent event; 0, or -1 when the client is gone. */
int serve_sse(struct mg_connection *c, json_object *o) {
    size_t len;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    char *buf = malloc(len + 9);
    int rc = -1;
    if (buf) {
        memcpy(buf, "data: ", 6);
        memcpy(buf + 6, t, len);
        memcpy(buf + 6 + len, "\n\n", 2);
        rc = serve_stream_write(c, buf, len + 8);
        free(buf);
    }
    json_object_put(o);
    return rc;
}

/* 400 for an endpoint of a task the model does not have (the name of the task's API). */
int serve_no_task(struct mg_connection *c, serve_server *s, const char *what) {
    uint32_t tasks = s->info.tasks;
    for (int i = 0; i < s->n_extra; i++) tasks |= s->extra[i].info.tasks;
    char served[224] = "";
    if (tasks & WGML_TASK_GENERATE) strcat(served, " /v1/chat/completions /v1/completions");
    if (tasks & (WGML_TASK_EMBED | WGML_TASK_EMBED_IMAGE)) strcat(served, " /v1/embeddings");
    if (tasks & WGML_TASK_CLASSIFY) strcat(served, " /v1/classify");
    if (tasks & WGML_TASK_SPEECH) strcat(served, " /v1/audio/speech");
    if (tasks & WGML_TASK_TRANSCRIBE) strcat(served, " /v1/audio/transcriptions /v1/audio/translations");
    return serve_send_error(c, 400, "model", "model_not_supported", "no model of this server can %s (it serves:%s)", what,
                      served);
}
