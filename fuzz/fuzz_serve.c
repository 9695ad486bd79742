/*
 * fuzz_serve.c - libFuzzer target: `wgml serve` (tools/wgml/serve_*.c, on
 * civetweb and json-c) answering hostile HTTP requests over a real socket.
 *
 * Once, at start: stories260K on the CPU backend (1 thread), 2 slots of 64
 * tokens, prompt chunks of 16, a queue of 2 and an 8 KiB body limit (so that
 * every generation ends within 64 tokens and the 413 paths are reachable),
 * listening on 127.0.0.1 on a free port. Byte 0 of an input says what the
 * rest is ('c', 'p', 'r', 'g', 'm', 'd'; any other byte, modulo 6, in that
 * order):
 *
 *   c  the body of POST /v1/chat/completions   (a well-formed HTTP/1.1
 *   p  the body of POST /v1/completions          request around it)
 *   r  a raw request sent as is: request line, headers, body, or several
 *      pipelined (what reaches civetweb's parser, the routing and the limits)
 *   g  a path for GET (bytes outside '!'..'~' %-encoded; '/' put first)
 *   m  byte 1: bits 0-2 the count (2 + n mod 5), bit 3 completions instead of
 *      chat; the rest a body sent on that many connections at once (the
 *      batched slots, the queue and its 503)
 *   d  byte 1: bit 3 completions instead of chat, bits 4-7 how many 64-byte
 *      blocks of the answer to read before closing; the rest a body: a client
 *      that goes away (cancellation)
 *
 * Every request is sent (a raw one then the socket shut for writing: the
 * server takes that for the client leaving) and the whole answer
 * read with a 5 s receive timeout (a timeout is a hang: abort). Checked, on
 * every response in the answer (pipelined requests get several): an HTTP/1.0
 * or HTTP/1.1 status line; framing by Content-Length, chunks, or the end of
 * the connection; a status this kind of request may get ('c' and 'p': 200,
 * 400, 413; 'm': those and 503; 'g': 200, 400, 404, 405; 'r': 200, 400, 404,
 * 405, 411, 413, 505, the ones civetweb raises before routing included, and
 * the guards' 403, 408 and 415, and 204 to an OPTIONS); a
 * JSON body that parses, an error with error.message (civetweb's own too), a
 * chat.completion or text_completion with one choice, finish_reason "stop" or
 * "length" and usage within the context; a stream (text/event-stream,
 * chunked, or to the close for HTTP/1.0) of `data: ` events, JSON chunks without an error, one
 * finish_reason, `data: [DONE]` last. The only other bodies are /metrics and
 * the empty 204 to an OPTIONS. After every 'r', 'm' and 'd'
 * input and every 64th input, GET /health must answer 200 "ok" with every
 * slot free and the queue empty within 3 s (a request that wedged a slot or
 * the scheduler). ASan, UBSan and LSan watch the server's threads as well
 * (civetweb itself is Debian's library, not instrumented: its allocations
 * are tracked, its memory accesses are not).
 */
#include "../tools/wgml/cli.h"
#include "../tools/wgml/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define N_SLOTS        2
#define N_CTX          64
#define CHUNK          16
#define MAX_QUEUE      2
#define MAX_BODY       8192
#define RECV_TIMEOUT_S 5
#define IDLE_WAIT_MS   3000
#define MAX_ANSWER     (4u << 20)
#define MAX_CONNS      6

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_serve: check failed: %s (line %d)\n", #c, __LINE__);                                 \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)
#define CHECK_MSG(c, ...)                                                                                              \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_serve: ");                                                                           \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, " (line %d)\n", __LINE__);                                                                 \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

enum { M_CHAT, M_COMPLETIONS, M_RAW, M_GET, M_MULTI, M_DISCONNECT };

static wgml_model *model;
static serve_server srv;
static serve_http *http;
static int port;

static void stop_server(void) {
    serve_stop(&srv);
    serve_http_stop(http);
    serve_free(&srv);
    wgml_model_free(model);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    signal(SIGPIPE, SIG_IGN);
    char path[4200];
    const char *shared = getenv("WGML_SHARED");
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared ? shared : "../shared");
    if (access(path, R_OK) != 0) snprintf(path, sizeof path, "%s/models/stories260K.gguf", WGML_SOURCE_DIR);
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.n_threads = 1;
    wgml_error err;
    if (wgml_model_load(path, &mp, &model, &err) != WGML_OK) {
        fprintf(stderr, "fuzz_serve: %s: %s\n", path, err.message);
        abort();
    }
    srv.max_queue = MAX_QUEUE;
    srv.max_body = MAX_BODY;
    srv.created = (double)time(NULL);
    srv.model_id = "stories260K";
    if (serve_init(&srv, model, N_SLOTS, N_CTX, CHUNK, WGML_KV_DEFAULT, &err) != WGML_OK) {
        fprintf(stderr, "fuzz_serve: serve_init: %s\n", err.message);
        abort();
    }
    CHECK(serve_chat_init(&srv) == 0);
    CHECK(serve_start(&srv) == 0);
    serve_http_opts ho = serve_http_default_opts();
    ho.n_threads = N_SLOTS + MAX_QUEUE + MAX_CONNS + ho.per_client + 8;
    http = serve_http_start(&srv, &ho, &port);
    CHECK(http != NULL && port > 0);
    atexit(stop_server);
    return 0;
}

/* ---- the client ---- */

typedef struct {
    char *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        CHECK(b->p != NULL);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct timeval tv = {RECV_TIMEOUT_S, 0};
    CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int r;
    while ((r = connect(fd, (struct sockaddr *)&a, sizeof a)) != 0 && errno == EINTR) {}
    CHECK_MSG(r == 0, "connect to 127.0.0.1:%d: %s", port, strerror(errno));
    return fd;
}

/* Sends all of p (the server may close early, after an error: then what is left is dropped). */
static void send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        CHECK_MSG(w >= 0 || errno == EPIPE || errno == ECONNRESET, "send: %s", strerror(errno));
        if (w < 0) return;
        p += w, n -= (size_t)w;
    }
}

/* Reads the answer until the server closes (or up to `limit` bytes); a timeout is a hang. */
static void recv_all(int fd, buf *b, size_t limit) {
    char tmp[8192];
    while (b->len < limit) {
        size_t want = limit - b->len < sizeof tmp ? limit - b->len : sizeof tmp;
        ssize_t r = recv(fd, tmp, want, 0);
        if (r < 0 && errno == EINTR) continue;
        CHECK_MSG(!(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)),
                  "no answer within %d s: the server hangs (%zu bytes so far)", RECV_TIMEOUT_S, b->len);
        if (r < 0 && errno == ECONNRESET) break;
        CHECK_MSG(r >= 0, "recv: %s", strerror(errno));
        if (r == 0) break;
        put(b, tmp, (size_t)r);
        CHECK_MSG(b->len <= MAX_ANSWER, "an answer over %u bytes", MAX_ANSWER);
    }
}

/* ---- the answer ---- */

typedef struct {
    int status;
    int http10;    /* an HTTP/1.0 status line */
    char type[64]; /* the Content-Type up to ';' */
    int chunked;
    buf body; /* de-chunked */
} response;

/* The value of header `name` in the header block h[0..n), NUL-terminated into out; 0 when absent. */
static int header(const char *h, size_t n, const char *name, char *out, size_t out_size) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < n;) {
        const char *e = memchr(h + i, '\n', n - i);
        size_t end = e ? (size_t)(e - h) : n;
        if (end - i > nl && h[i + nl] == ':' && !strncasecmp(h + i, name, nl)) {
            size_t v = i + nl + 1;
            while (v < end && (h[v] == ' ' || h[v] == '\t'))
                v++;
            size_t ve = end;
            while (ve > v && (h[ve - 1] == '\r' || h[ve - 1] == ' '))
                ve--;
            size_t k = ve - v < out_size - 1 ? ve - v : out_size - 1;
            memcpy(out, h + v, k);
            out[k] = 0;
            return 1;
        }
        i = end + 1;
    }
    return 0;
}

/* Parses the response at a[*pos..n) into r and moves *pos past it. */
static void parse_response(const char *a, size_t n, size_t *pos, response *r) {
    const char *p = a + *pos;
    size_t left = n - *pos;
    CHECK_MSG(left >= 13 && !memcmp(p, "HTTP/1.", 7) && (p[7] == '0' || p[7] == '1') && p[8] == ' ' && p[9] >= '1' &&
                  p[9] <= '5' && p[10] >= '0' && p[10] <= '9' && p[11] >= '0' && p[11] <= '9' &&
                  (p[12] == ' ' || p[12] == '\r'),
              "not an HTTP/1.x status line: '%.80s'", p);
    r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    r->http10 = p[7] == '0';
    const char *end = NULL;
    for (size_t i = 0; i + 4 <= left; i++)
        if (!memcmp(p + i, "\r\n\r\n", 4)) {
            end = p + i;
            break;
        }
    CHECK_MSG(end != NULL, "a response's headers do not end (status %d)", r->status);
    size_t hlen = (size_t)(end - p) + 2;
    char v[64];
    r->type[0] = 0;
    if (header(p, hlen, "Content-Type", v, sizeof v)) {
        char *semi = strchr(v, ';');
        if (semi) *semi = 0;
        snprintf(r->type, sizeof r->type, "%s", v);
    }
    r->chunked = header(p, hlen, "Transfer-Encoding", v, sizeof v) && !strcasecmp(v, "chunked");
    long long clen = -1;
    if (header(p, hlen, "Content-Length", v, sizeof v)) {
        char *e;
        clen = strtoll(v, &e, 10);
        CHECK_MSG(*v && !*e && clen >= 0, "a bad Content-Length '%s'", v);
    }
    size_t b = (size_t)(end - p) + 4;
    r->body.len = 0;
    put(&r->body, "", 0);
    if (r->chunked) {
        CHECK_MSG(clen < 0, "both chunked and a Content-Length");
        for (;;) {
            char *e;
            CHECK_MSG(b < left, "a chunked body ends early");
            unsigned long long k = strtoull(p + b, &e, 16);
            CHECK_MSG(e != p + b && (size_t)(e - p) + 2 <= left && !memcmp(e, "\r\n", 2), "a bad chunk header");
            b = (size_t)(e - p) + 2;
            CHECK_MSG(k <= left - b && left - b - k >= 2 && !memcmp(p + b + k, "\r\n", 2), "a chunk runs short");
            put(&r->body, p + b, (size_t)k);
            b += (size_t)k + 2;
            if (!k) break;
        }
    } else if (clen >= 0) {
        CHECK_MSG((unsigned long long)clen <= left - b, "the body has %zu of its %lld bytes", left - b, clen);
        put(&r->body, p + b, (size_t)clen);
        b += (size_t)clen;
    } else {
        put(&r->body, p + b, left - b); /* to the end of the connection */
        b = left;
    }
    *pos += b;
}

static json_object *parse_json(const char *p, size_t n) {
    json_tokener *tok = json_tokener_new();
    CHECK(tok != NULL);
    json_object *o = json_tokener_parse_ex(tok, p, (int)n);
    int ok = json_tokener_get_error(tok) == json_tokener_success && json_tokener_get_parse_end(tok) == n;
    json_tokener_free(tok);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static int finish_ok(json_object *f) {
    const char *s = json_object_get_string(f);
    return json_object_is_type(f, json_type_string) && (!strcmp(s, "stop") || !strcmp(s, "length"));
}

static void check_usage(json_object *u) {
    CHECK(json_object_is_type(u, json_type_object));
    json_object *p = get(u, "prompt_tokens"), *c = get(u, "completion_tokens"), *t = get(u, "total_tokens");
    CHECK(json_object_is_type(p, json_type_int) && json_object_is_type(c, json_type_int) &&
          json_object_is_type(t, json_type_int));
    int64_t np = json_object_get_int64(p), nc = json_object_get_int64(c);
    CHECK_MSG(np >= 1 && np < srv.n_ctx && nc >= 0 && np + nc <= srv.n_ctx + 1 && json_object_get_int64(t) == np + nc,
              "usage: %lld prompt + %lld completion tokens in a context of %d", (long long)np, (long long)nc,
              srv.n_ctx);
}

/* A JSON answer: an error with a message, or a completion with one finished choice. */
static void check_json(const response *r, int generation) {
    json_object *o = parse_json(r->body.p, r->body.len);
    CHECK_MSG(o && json_object_is_type(o, json_type_object), "status %d: the body is not a JSON object: '%.200s'",
              r->status, r->body.p);
    if (r->status != 200) {
        json_object *e = get(o, "error");
        CHECK_MSG(json_object_is_type(e, json_type_object) && json_object_is_type(get(e, "message"), json_type_string),
                  "status %d without error.message: '%.200s'", r->status, r->body.p);
    } else {
        const char *obj = json_object_get_string(get(o, "object"));
        int completion = obj && (!strcmp(obj, "chat.completion") || !strcmp(obj, "text_completion"));
        CHECK_MSG(completion || !generation, "a 200 to a generation request that is no completion: '%.200s'",
                  r->body.p);
        if (completion) {
            json_object *ch = get(o, "choices");
            CHECK(json_object_is_type(ch, json_type_array) && json_object_array_length(ch) == 1);
            json_object *c0 = json_object_array_get_idx(ch, 0);
            CHECK(finish_ok(get(c0, "finish_reason")));
            if (!strcmp(obj, "chat.completion"))
                CHECK(json_object_is_type(get(get(c0, "message"), "content"), json_type_string));
            else
                CHECK(json_object_is_type(get(c0, "text"), json_type_string));
            check_usage(get(o, "usage"));
        }
    }
    json_object_put(o);
}

/* A stream: `data: {json}` events, one finish_reason, `data: [DONE]` last. */
static void check_stream(const response *r) {
    /* chunked for HTTP/1.1; HTTP/1.0 has no chunked encoding: the body runs to the close */
    CHECK_MSG(r->status == 200 && r->chunked == !r->http10, "an event stream with status %d, chunked %d, HTTP/1.%d",
              r->status, r->chunked, !r->http10);
    const char *p = r->body.p, *end = p + r->body.len;
    int events = 0, finishes = 0, done = 0;
    while (p < end) {
        CHECK_MSG(!done, "events after data: [DONE]");
        CHECK_MSG((size_t)(end - p) > 6 && !memcmp(p, "data: ", 6), "an event that is not 'data: ': '%.80s'", p);
        p += 6;
        const char *e = NULL;
        for (const char *q = p; q + 1 < end; q++)
            if (q[0] == '\n' && q[1] == '\n') {
                e = q;
                break;
            }
        CHECK_MSG(e != NULL, "an event without its blank line: '%.80s'", p);
        events++;
        if (e - p == 6 && !memcmp(p, "[DONE]", 6)) {
            done = 1;
        } else {
            json_object *o = parse_json(p, (size_t)(e - p));
            CHECK_MSG(o && json_object_is_type(o, json_type_object) && !get(o, "error"),
                      "an event that is not a chunk: '%.200s'", p);
            json_object *ch = get(o, "choices");
            CHECK(json_object_is_type(ch, json_type_array));
            if (json_object_array_length(ch)) {
                json_object *f = get(json_object_array_get_idx(ch, 0), "finish_reason");
                if (f) {
                    CHECK(finish_ok(f));
                    finishes++;
                }
            } else {
                check_usage(get(o, "usage")); /* stream_options.include_usage: the last chunk */
            }
            json_object_put(o);
        }
        p = e + 2;
    }
    CHECK_MSG(done, "a stream without data: [DONE] (%d events)", events);
    CHECK_MSG(finishes == 1, "a stream with %d finish_reasons", finishes);
}

static int in(int status, const int *list) {
    for (; *list; list++)
        if (*list == status) return 1;
    return 0;
}

/* Checks every response in an answer; returns how many there were. */
static int check_answer(const buf *a, const int *allowed, int generation) {
    size_t pos = 0;
    int n = 0;
    response r;
    memset(&r, 0, sizeof r);
    while (pos < a->len) {
        parse_response(a->p, a->len, &pos, &r);
        n++;
        CHECK_MSG(in(r.status, allowed), "status %d is not one this request may get: '%.200s'", r.status, r.body.p);
        if (!strcmp(r.type, "text/event-stream")) {
            check_stream(&r);
        } else if (!strcmp(r.type, "application/json")) {
            check_json(&r, generation);
        } else {
            /* /metrics (200), or the answer to an OPTIONS (a CORS preflight): 204 without a type or a body */
            CHECK_MSG(!generation && (r.status == 200 || r.status == 204), "status %d of type '%s': '%.200s'", r.status,
                      r.type, r.body.p);
            if (r.type[0])
                CHECK_MSG(!strncmp(r.body.p, "# HELP wgml_requests_total", 26), "a 200 that is not the metrics");
            else
                CHECK_MSG(r.body.len == 0, "a 200 without a type that has a body: '%.200s'", r.body.p);
        }
    }
    free(r.body.p);
    return n;
}

/* ---- requests ---- */

static void post_request(buf *req, int completions, const uint8_t *body, size_t n) {
    char h[256];
    snprintf(h, sizeof h,
             "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             completions ? "/v1/completions" : "/v1/chat/completions", port, n);
    puts_(req, h);
    put(req, body, n);
}

/* One request on its own connection: its whole answer into *answer. half_close: shut the socket for
 * writing after the request (a raw request may stop short: the end of stream ends it). The server takes
 * the end of a client's stream for the client leaving (as nginx and llama.cpp's server do), so a
 * non-streamed generation asked that way is cancelled and gets no answer. */
static void exchange(const buf *req, buf *answer, int half_close) {
    int fd = dial();
    send_all(fd, req->p, req->len);
    if (half_close) shutdown(fd, SHUT_WR);
    recv_all(fd, answer, MAX_ANSWER + 1);
    close(fd);
}

/* Waits until no slot is busy and nothing is queued: GET /health. */
static void wait_idle(void) {
    char req_text[96];
    snprintf(req_text, sizeof req_text, "GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", port);
    buf req = {0}, a = {0};
    puts_(&req, req_text);
    double t0 = cli_now_ms();
    for (int tries = 0;; tries++) {
        a.len = 0;
        exchange(&req, &a, 0);
        size_t pos = 0;
        response r;
        memset(&r, 0, sizeof r);
        CHECK_MSG(a.len > 0, "GET /health got no answer");
        parse_response(a.p, a.len, &pos, &r);
        CHECK_MSG(r.status == 200 && pos == a.len, "GET /health: status %d: '%.200s'", r.status, r.body.p);
        json_object *o = parse_json(r.body.p, r.body.len);
        CHECK_MSG(o != NULL, "GET /health: not JSON: '%.200s'", r.body.p);
        const char *st = json_object_get_string(get(o, "status"));
        int busy = json_object_get_int(get(o, "slots_busy")), queued = json_object_get_int(get(o, "queue_length"));
        int free_ = json_object_get_int(get(o, "slots_free"));
        CHECK_MSG(st && !strcmp(st, "ok") && busy >= 0 && busy <= N_SLOTS && free_ == N_SLOTS - busy && queued >= 0,
                  "GET /health: '%.200s'", r.body.p);
        json_object_put(o);
        free(r.body.p);
        if (!busy && !queued) break;
        CHECK_MSG(cli_now_ms() - t0 < IDLE_WAIT_MS, "%d slots busy and %d queued %d ms after the last request", busy,
                  queued, IDLE_WAIT_MS);
        usleep(tries < 20 ? 500 : 5000);
    }
    free(req.p);
    free(a.p);
}

static const int ok_generation[] = {200, 400, 413, 0};
static const int ok_multi[] = {200, 400, 413, 503, 0};
static const int ok_get[] = {200, 400, 404, 405, 0};
/* raw requests also meet the guards: a Host not this server's or a foreign Origin 403, a body that is
 * not JSON 415, a body that stops short of its length 408 (the time limit) */
static const int ok_raw[] = {200, 204, 400, 403, 404, 405, 408, 411, 413, 415, 505, 0};

static int mode_of(uint8_t b) {
    switch (b) {
    case 'c': return M_CHAT;
    case 'p': return M_COMPLETIONS;
    case 'r': return M_RAW;
    case 'g': return M_GET;
    case 'm': return M_MULTI;
    case 'd': return M_DISCONNECT;
    default: return b % 6;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned long n_inputs;
    if (size < 1) return 0;
    int mode = mode_of(data[0]);
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    buf req = {0}, a = {0};
    int idle_check = ++n_inputs % 64 == 0;
    switch (mode) {
    case M_CHAT:
    case M_COMPLETIONS:
        post_request(&req, mode == M_COMPLETIONS, rest, n);
        exchange(&req, &a, 0);
        CHECK_MSG(check_answer(&a, ok_generation, 1) == 1, "not one answer to one request");
        break;
    case M_RAW:
        put(&req, rest, n);
        exchange(&req, &a, 1);
        check_answer(&a, ok_raw, 0);
        idle_check = 1;
        break;
    case M_GET: {
        static const char hex[] = "0123456789ABCDEF";
        puts_(&req, "GET ");
        if (!n || rest[0] != '/') puts_(&req, "/");
        for (size_t i = 0; i < n && i < 4096; i++) {
            if (rest[i] > ' ' && rest[i] < 0x7f) {
                put(&req, &rest[i], 1);
            } else {
                char e[3] = {'%', hex[rest[i] >> 4], hex[rest[i] & 15]};
                put(&req, e, 3);
            }
        }
        char tail[80];
        snprintf(tail, sizeof tail, " HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", port);
        puts_(&req, tail);
        exchange(&req, &a, 0);
        CHECK_MSG(check_answer(&a, ok_get, 0) == 1, "not one answer to one request");
        break;
    }
    case M_MULTI: {
        if (n < 1) return 0;
        int k = 2 + (rest[0] & 7) % 5, fds[MAX_CONNS];
        post_request(&req, (rest[0] & 8) != 0, rest + 1, n - 1);
        for (int i = 0; i < k; i++) {
            fds[i] = dial();
            send_all(fds[i], req.p, req.len);
        }
        for (int i = 0; i < k; i++) {
            a.len = 0;
            recv_all(fds[i], &a, MAX_ANSWER + 1);
            close(fds[i]);
            CHECK_MSG(check_answer(&a, ok_multi, 1) == 1, "not one answer to one request");
        }
        idle_check = 1;
        break;
    }
    case M_DISCONNECT: {
        if (n < 1) return 0;
        post_request(&req, (rest[0] & 8) != 0, rest + 1, n - 1);
        int fd = dial();
        send_all(fd, req.p, req.len);
        recv_all(fd, &a, (size_t)(rest[0] >> 4) * 64);
        close(fd);
        idle_check = 1;
        break;
    }
    }
    free(req.p);
    free(a.p);
    if (idle_check) wait_idle();
    return 0;
}
