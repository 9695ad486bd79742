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
 *   application/json 415 (an audio upload's: not multipart/form-data, checked
 *   by serve_transcribe.c, which reads those bodies itself), body over the
 *   limit 413, a body not in within the time limit 408, malformed JSON or a
 *   bad parameter 400, prompt longer than the context 400
 *   (context_length_exceeded), queue full 503.
 * Then the endpoint answers (serve_generate.c, serve_embed.c, serve_speech.c,
 * serve_transcribe.c, serve_info.c), writing through serve_reply.c.
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

enum {
    EP_CHAT,
    EP_COMPLETIONS,
    EP_EMBEDDINGS,
    EP_SPEECH,
    EP_TRANSCRIBE,
    EP_TRANSLATE,
    EP_CLASSIFY,
    EP_MODELS,
    EP_HEALTH,
    EP_METRICS,
    EP_OTHER
};
const char *const serve_endpoint_names[SERVE_N_ENDPOINTS] = {
    "chat_completions", "completions", "embeddings", "audio_speech", "audio_transcriptions", "audio_translations",
    "classify",         "models",      "health",     "metrics",      "other"};

const int serve_status_codes[SERVE_N_STATUS] = {200, 400, 401, 403, 404, 405, 408, 413, 415, 429, 499, 500, 503};

static void count(serve_server *s, int ep, int status) {
    int k = SERVE_N_STATUS - 1;
    for (int i = 0; i < SERVE_N_STATUS; i++)
        if (serve_status_codes[i] == status) k = i;
    pthread_mutex_lock(&s->mu);
    s->metrics.requests[ep][k]++;
    pthread_mutex_unlock(&s->mu);
}

/* ---- routing ---- */

/* Whether s[0..n) is UTF-8 (JSON text must be): no overlong forms, surrogates or values past U+10FFFF. */
int serve_utf8_valid(const unsigned char *s, size_t n) {
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
int serve_read_body(struct mg_connection *c, serve_server *s, size_t limit, char **out, size_t *len) {
    const struct mg_request_info *ri = mg_get_request_info(c);
    serve_http *h = mg_get_user_data(mg_get_context(c));
    *out = NULL;
    if (ri->content_length > (long long)limit)
        return serve_send_error(c, 413, NULL, NULL, "the body has %lld bytes; the limit is %zu", ri->content_length,
                                limit);
    size_t cap = ri->content_length >= 0 ? (size_t)ri->content_length + 1 : 65536, n = 0;
    char *b = malloc(cap);
    if (!b) return serve_send_error(c, 500, NULL, NULL, "out of memory");
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > limit + 1) break;
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                return serve_send_error(c, 500, NULL, NULL, "out of memory");
            }
            b = nb, cap *= 2;
        }
        int r = mg_read(c, b + n, cap - n - 1);
        if (r <= 0 && serve_guard_body_late(h->guard, c)) {
            free(b);
            mg_disable_connection_keep_alive(c);
            return serve_send_error(c, 408, NULL, "request_timeout", "the body did not arrive within %d ms",
                              h->o.timeout_ms);
        }
        if (r < 0) {
            free(b);
            return serve_send_error(c, 400, NULL, NULL, "reading the body failed");
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    serve_guard_body_done(h->guard, c);
    if (ri->content_length >= 0 && n < (size_t)ri->content_length) {
        free(b);
        return serve_send_error(c, 400, NULL, NULL, "the body ended after %zu of its %lld bytes", n, ri->content_length);
    }
    if (n > limit) {
        free(b);
        return serve_send_error(c, 413, NULL, NULL, "the body exceeds the limit of %zu bytes", limit);
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
                  {"/v1/audio/transcriptions", "POST", EP_TRANSCRIBE},
                  {"/v1/audio/translations", "POST", EP_TRANSLATE},
                  {"/v1/classify", "POST", EP_CLASSIFY},
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
        status = serve_send_error(c, 400, NULL, NULL, "a request may not have both Content-Length and Transfer-Encoding");
    } else if (!s->api_key && !serve_guard_host_ok(host, h->o.host, h->port)) {
        status = serve_send_error(c, 403, NULL, "host_not_allowed",
                            "Host '%.100s' is not this server's address; without --api-key only a loopback name or the "
                            "address it listens on is served (a guard against DNS rebinding)", host);
    } else if (!serve_guard_origin_ok(origin, host, h->o.cors, h->o.n_cors)) {
        status = serve_send_error(c, 403, NULL, "origin_not_allowed",
                            "cross-origin requests from '%.100s' are refused: start the server with --cors ORIGIN to "
                            "allow a web page's origin", origin);
    } else if (!strcmp(method, "OPTIONS") && r < sizeof routes / sizeof routes[0]) {
        /* a CORS preflight from an origin --cors allows (any other was refused above), or a plain OPTIONS */
        mg_response_header_start(c, 204);
        mg_response_header_add(c, "Allow", routes[r].method, -1);
        if (origin && mg_get_header(c, "Access-Control-Request-Method")) {
            serve_add_cors(c);
            mg_response_header_add(c, "Access-Control-Allow-Methods", routes[r].method, -1);
            mg_response_header_add(c, "Access-Control-Allow-Headers", "Authorization, Content-Type", -1);
            mg_response_header_add(c, "Access-Control-Max-Age", "600", -1);
        }
        mg_response_header_add(c, "Content-Length", "0", -1);
        mg_response_header_send(c);
        status = 204;
    } else if (r == sizeof routes / sizeof routes[0]) {
        status = serve_send_error(c, 404, NULL, "unknown_url", "unknown route '%.200s'", uri);
    } else if (strcmp(method, routes[r].method)) {
        status = serve_send_405(c, routes[r].method, "%.200s takes %s, not %.16s", uri, routes[r].method, method);
    } else if (!strncmp(uri, "/v1/", 4) && !key_ok(s, c)) {
        status = serve_send_error(c, 401, NULL, "invalid_api_key",
                            "missing or incorrect API key: send the header 'Authorization: Bearer KEY'");
    } else if (ep == EP_MODELS) {
        status = serve_ep_models(c, s);
    } else if (ep == EP_HEALTH) {
        status = serve_ep_health(c, s);
    } else if (ep == EP_METRICS) {
        status = serve_ep_metrics(c, s);
    } else if (s->draining) {
        status = serve_send_error(c, 503, NULL, NULL, "the server is shutting down");
    } else if (ep == EP_TRANSCRIBE || ep == EP_TRANSLATE) {
        /* an audio upload (multipart/form-data): its own content type, body limit and parser */
        status = serve_ep_transcribe(c, s, ep == EP_TRANSLATE);
    } else if (!is_json_type(mg_get_header(c, "Content-Type"))) {
        /* text/plain and form bodies are what a web page may send without a CORS preflight */
        mg_disable_connection_keep_alive(c); /* its body is not read */
        status = serve_send_error(c, 415, NULL, "unsupported_media_type",
                            "the body must be JSON sent as 'Content-Type: application/json', not '%.60s'",
                            mg_get_header(c, "Content-Type") ? mg_get_header(c, "Content-Type") : "(none)");
    } else {
        char *body = NULL;
        size_t len = 0;
        status = serve_read_body(c, s, s->max_body, &body, &len);
        if (!status) {
            json_tokener *tok = json_tokener_new_ex(64); /* nesting deeper than 64 is refused */
            json_object *req = tok && len <= (size_t)INT32_MAX ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
            enum json_tokener_error je = tok ? json_tokener_get_error(tok) : json_tokener_continue;
            size_t used = tok ? json_tokener_get_parse_end(tok) : 0;
            while (req && used < len && strchr(" \t\r\n", body[used])) used++;
            if (!tok) {
                status = serve_send_error(c, 500, NULL, NULL, "out of memory");
            } else if (!serve_utf8_valid((const unsigned char *)body, len)) {
                status = serve_send_error(c, 400, NULL, NULL, "the body is not valid UTF-8");
            } else if (!req || je != json_tokener_success || used != len) {
                status = serve_send_error(c, 400, NULL, NULL, "the body is not valid JSON: %s",
                                    req && je == json_tokener_success ? "text after the value"
                                    : je == json_tokener_continue     ? "it ends early"
                                                                      : json_tokener_error_desc(je));
            } else if (!json_object_is_type(req, json_type_object)) {
                status = serve_send_error(c, 400, NULL, NULL, "the body must be a JSON object");
            } else {
                status = ep == EP_CHAT          ? serve_ep_chat(c, s, req)
                         : ep == EP_EMBEDDINGS ? serve_ep_embeddings(c, s, req)
                         : ep == EP_SPEECH     ? serve_ep_speech(c, s, req)
                         : ep == EP_CLASSIFY   ? serve_ep_classify(c, s, req)
                                               : serve_ep_completions(c, s, req);
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
    json_object *o = serve_error_object(msg, status >= 500 ? "server_error" : "invalid_request_error", NULL, NULL);
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
