/*
 * serve_guard.c - what keeps hostile clients from taking `wgml serve` down:
 * the connections civetweb holds, and who may talk to the server at all.
 *
 * Connections. civetweb gives each connection a worker thread for as long as
 * it lives, also while it waits for a request that may never come. So:
 *   - civetweb itself ends a connection whose request head has not arrived
 *     within --timeout (request_timeout_ms, counted from its first byte wait)
 *     and a kept-alive one idle past --idle-timeout (keep_alive_timeout_ms);
 *   - the body must arrive within --timeout of the head: a reaper thread
 *     shuts a late body's socket for reading, so the handler's read ends and
 *     it answers 408 (civetweb's own reads only time out between bytes);
 *   - one client address holds at most --max-client-connections: a new one
 *     beyond closes that address's oldest idle connection (one waiting for a
 *     request), or, when none of its connections is idle, is itself refused
 *     with 429;
 *   - the workers are never all idle: when fewer than GUARD_RESERVE would be
 *     left free, the oldest idle connection of any address is closed. So a
 *     request finds a worker at once, whatever idle sockets are open.
 * civetweb's API gives out neither a connection's socket nor, before its
 * first request, even its address, and cannot close it from another thread.
 * So the guard keeps its own table of the server's sockets, keyed by the
 * client's address and port (unique among the sockets of one server port):
 * when a connection opens, it lists the process's sockets (/proc/self/fd)
 * and enters each new one of the server's port as idle; a request's head
 * (begin_request, whose request info has the client's address and port)
 * marks its socket busy, the request's end idle again, the connection's
 * close removes it. To close a connection, the guard shuts its socket down:
 * the worker's read then fails at once and civetweb closes the connection
 * as usual. civetweb calls connection_close, which takes the guard's mutex,
 * before it closes the socket, and the guard checks a socket's addresses
 * again under that mutex before it shuts it: it never shuts a socket that
 * was closed and reused for another connection meanwhile.
 *
 * Who may talk (serve_guard_check_host, serve_guard_origin): without an API
 * key, a Host header must name this server (a loopback name, the address it
 * listens on, or any IP literal when it listens on all addresses), so that a
 * web page cannot reach it through DNS rebinding; and an Origin header must be
 * the server's own origin or one given with --cors, so that a page cannot
 * make the user's browser drive it.
 */
#include <arpa/inet.h>
#include <civetweb.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"

#define GUARD_RESERVE 4     /* workers kept free of idle connections */
#define GUARD_REAP_MS 100   /* how often the reaper looks for late bodies */

typedef enum { CONN_IDLE, CONN_BODY, CONN_BUSY } conn_state;

/* A client's address and port, IPv4-mapped IPv6 addresses as IPv4. */
typedef struct conn_key {
    unsigned char addr[16];
    int len; /* 4 or 16 */
    int port;
} conn_key;

typedef struct guard_conn {
    struct guard_conn *prev, *next;
    conn_key key;
    int fd;
    conn_state state;
    double since; /* ms: when it entered its state */
    int closing;  /* shut down by the guard: going away, not counted */
    int cut;      /* its body was late: the reaper shut it for reading */
} guard_conn;

struct serve_guard {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    guard_conn *head, *tail; /* oldest first */
    int n, n_workers, per_client, timeout_ms, server_port;
    serve_guard_stats stats;
    int stop;
    pthread_t reaper;
    int reaper_started;
};

/* ---- the server's sockets ---- */

static void key_set(conn_key *k, const unsigned char *a, int len, int port) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}; /* ::ffff:a.b.c.d */
    if (len == 16 && !memcmp(a, mapped, 12)) a += 12, len = 4;
    memset(k, 0, sizeof *k);
    memcpy(k->addr, a, (size_t)len);
    k->len = len;
    k->port = port;
}

/* civetweb's printed address and port as a key; 0 when it does not parse. */
static int key_from_text(conn_key *k, const char *addr, int port) {
    unsigned char a[16];
    if (inet_pton(AF_INET, addr, a) == 1) key_set(k, a, 4, port);
    else if (inet_pton(AF_INET6, addr, a) == 1) key_set(k, a, 16, port);
    else return 0;
    return 1;
}

static int same_addr(const conn_key *a, const conn_key *b) { return a->len == b->len && !memcmp(a->addr, b->addr, 16); }
static int same_key(const conn_key *a, const conn_key *b) { return same_addr(a, b) && a->port == b->port; }

/* Whether fd is a connected socket of server_port; its client's key into *k. */
static int fd_key(int fd, int server_port, conn_key *k) {
    struct sockaddr_storage peer, self;
    socklen_t pl = sizeof peer, sl = sizeof self;
    if (getsockname(fd, (struct sockaddr *)&self, &sl)) return 0;
    int sport = self.ss_family == AF_INET    ? ntohs(((const struct sockaddr_in *)&self)->sin_port)
                : self.ss_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)&self)->sin6_port)
                                             : -1;
    if (sport != server_port || getpeername(fd, (struct sockaddr *)&peer, &pl)) return 0; /* (a listener has no peer) */
    if (peer.ss_family == AF_INET) {
        const struct sockaddr_in *p = (const struct sockaddr_in *)&peer;
        key_set(k, (const unsigned char *)&p->sin_addr, 4, ntohs(p->sin_port));
    } else if (peer.ss_family == AF_INET6) {
        const struct sockaddr_in6 *p = (const struct sockaddr_in6 *)&peer;
        key_set(k, (const unsigned char *)&p->sin6_addr, 16, ntohs(p->sin6_port));
    } else {
        return 0;
    }
    return 1;
}

static void unlink_conn(serve_guard *g, guard_conn *r) {
    if (r->prev) r->prev->next = r->next;
    else g->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else g->tail = r->prev;
    g->n--;
    free(r);
}

static guard_conn *find(serve_guard *g, const conn_key *k) {
    for (guard_conn *r = g->head; r; r = r->next)
        if (same_key(&r->key, k)) return r;
    return NULL;
}

/* Whether r's socket is still r's connection (under g->mu): else it was closed, and r goes. */
static int still_there(serve_guard *g, guard_conn *r) {
    conn_key k;
    if (fd_key(r->fd, g->server_port, &k) && same_key(&k, &r->key)) return 1;
    unlink_conn(g, r);
    return 0;
}

/* Enters the server's sockets not yet known as idle connections, and drops the entries whose
 * socket is gone (under g->mu). Lists /proc/self/fd where there is one, else tries the first 4096. */
static void scan(serve_guard *g) {
    double now = cli_now_ms();
    DIR *d = opendir("/proc/self/fd");
    int skip = d ? dirfd(d) : -1;
    struct dirent *e = NULL;
    for (int fd = 0;; fd++) {
        if (d) {
            if (!(e = readdir(d))) break;
            char *end;
            long x = strtol(e->d_name, &end, 10);
            if (end == e->d_name || *end || x == skip || x < 0 || x > 1 << 30) continue;
            fd = (int)x;
        } else if (fd >= 4096) {
            break;
        }
        conn_key k;
        if (!fd_key(fd, g->server_port, &k)) continue;
        guard_conn *r = find(g, &k);
        if (r) {
            r->fd = fd;
            continue;
        }
        if (!(r = calloc(1, sizeof *r))) continue; /* not tracked: civetweb's time limits still hold */
        r->key = k;
        r->fd = fd;
        r->state = CONN_IDLE;
        r->since = now;
        r->prev = g->tail;
        if (g->tail) g->tail->next = r;
        else g->head = r;
        g->tail = r;
        g->n++;
    }
    if (d) closedir(d);
    for (guard_conn *r = g->head, *next; r; r = next) {
        next = r->next;
        still_there(g, r);
    }
}

/* Ends r's connection (under g->mu): its worker's next read fails and civetweb closes it. */
static void shut(serve_guard *g, guard_conn *r, int how) {
    if (!still_there(g, r)) return;
    shutdown(r->fd, how);
    if (how == SHUT_RDWR) r->closing = 1;
}

/* The oldest idle connection (of a's address, or of anyone with a NULL) not already closing. */
static guard_conn *oldest_idle(serve_guard *g, const conn_key *a) {
    guard_conn *best = NULL;
    for (guard_conn *r = g->head; r; r = r->next)
        if (r->state == CONN_IDLE && !r->closing && (!a || same_addr(&r->key, a)) && (!best || r->since < best->since))
            best = r;
    return best;
}

/* Turns r away: a 429 if its socket takes it at once, then shut down (under g->mu). */
static void refuse(serve_guard *g, guard_conn *r) {
    static const char body[] = "{\"error\": {\"message\": \"too many connections from this address\", "
                               "\"type\": \"rate_limit_error\", \"param\": null, \"code\": null}}";
    char msg[320];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     sizeof body - 1, body);
    if (n > 0 && still_there(g, r)) {
        (void)!send(r->fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        shut(g, r, SHUT_RDWR);
    }
    g->stats.refused++;
}

/* ---- the civetweb callbacks ---- */

void serve_guard_open(serve_guard *g) {
    pthread_mutex_lock(&g->mu);
    scan(g); /* the new connection, and any others that opened meanwhile, come last */
    /* each address over its limit: its oldest idle connection goes, or, when all of them are busy, its newest */
    for (guard_conn *r = g->head; r; r = r->next) {
        if (r->closing) continue;
        int same = 0;
        for (guard_conn *o = g->head; o; o = o->next) same += !o->closing && same_addr(&o->key, &r->key);
        if (same <= g->per_client) continue;
        guard_conn *v = oldest_idle(g, &r->key), *last = NULL;
        for (guard_conn *o = g->head; o; o = o->next)
            if (!o->closing && same_addr(&o->key, &r->key)) last = o;
        if (v && v != last) {
            shut(g, v, SHUT_RDWR);
            g->stats.evicted++;
        } else {
            refuse(g, last);
        }
        break; /* one new connection: one over the limit at most (another open will look again) */
    }
    /* the workers: never all held by idle connections */
    int live = 0;
    for (guard_conn *o = g->head; o; o = o->next) live += !o->closing;
    if (live > g->n_workers - GUARD_RESERVE) {
        guard_conn *v = oldest_idle(g, NULL);
        if (v) {
            shut(g, v, SHUT_RDWR);
            g->stats.evicted++;
        }
    }
    pthread_mutex_unlock(&g->mu);
}

/* The entry of c's socket (under g->mu), entered now if the scan had not seen it. */
static guard_conn *entry(serve_guard *g, const struct mg_connection *c) {
    const struct mg_request_info *ri = mg_get_request_info(c);
    conn_key k;
    if (!ri || !key_from_text(&k, ri->remote_addr, ri->remote_port)) return NULL;
    guard_conn *r = find(g, &k);
    if (!r) {
        scan(g);
        r = find(g, &k);
    }
    return r;
}

static void set_state(serve_guard *g, const struct mg_connection *c, conn_state st) {
    pthread_mutex_lock(&g->mu);
    guard_conn *r = entry(g, c);
    if (r) {
        r->state = st;
        r->since = cli_now_ms();
    }
    pthread_mutex_unlock(&g->mu);
}

void serve_guard_request(serve_guard *g, const struct mg_connection *c) { set_state(g, c, CONN_BODY); }
void serve_guard_body_done(serve_guard *g, const struct mg_connection *c) { set_state(g, c, CONN_BUSY); }
void serve_guard_request_end(serve_guard *g, const struct mg_connection *c) { set_state(g, c, CONN_IDLE); }

void serve_guard_close(serve_guard *g, const struct mg_connection *c) {
    const struct mg_request_info *ri = mg_get_request_info(c);
    conn_key k;
    pthread_mutex_lock(&g->mu); /* also when it is not known: a shut() in progress finishes first */
    guard_conn *r = ri && key_from_text(&k, ri->remote_addr, ri->remote_port) ? find(g, &k) : NULL;
    if (r) unlink_conn(g, r);
    pthread_mutex_unlock(&g->mu);
}

int serve_guard_client_gone(serve_guard *g, const struct mg_connection *c) {
    pthread_mutex_lock(&g->mu);
    guard_conn *r = entry(g, c);
    int gone = 0;
    if (r && still_there(g, r)) {
        /* an end of stream (or a reset) where the client could only be waiting for the answer */
        char b;
        ssize_t n = recv(r->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    pthread_mutex_unlock(&g->mu);
    return gone;
}

int serve_guard_body_late(serve_guard *g, const struct mg_connection *c) {
    pthread_mutex_lock(&g->mu);
    guard_conn *r = entry(g, c);
    int late = r && (r->cut || (r->state == CONN_BODY && cli_now_ms() - r->since > g->timeout_ms));
    pthread_mutex_unlock(&g->mu);
    return late;
}

/* ---- the reaper: bodies that do not arrive in time ---- */

static void *reaper(void *arg) {
    serve_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = cli_now_ms();
        for (guard_conn *r = g->head, *next; r; r = next) {
            next = r->next;
            if (r->state == CONN_BODY && !r->closing && !r->cut && now - r->since > g->timeout_ms) {
                r->cut = 1;
                g->stats.body_timeouts++;
                shut(g, r, SHUT_RD); /* its handler's read ends; it can still write the 408 */
            }
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += GUARD_REAP_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g->wake, &g->mu, &until);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

serve_guard *serve_guard_new(int n_workers, int per_client, int timeout_ms) {
    serve_guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->n_workers = n_workers, g->per_client = per_client, g->timeout_ms = timeout_ms;
    g->server_port = -1;
    if (pthread_mutex_init(&g->mu, NULL)) {
        free(g);
        return NULL;
    }
    if (pthread_cond_init(&g->wake, NULL)) {
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    if (pthread_create(&g->reaper, NULL, reaper, g)) {
        serve_guard_free(g);
        return NULL;
    }
    g->reaper_started = 1;
    return g;
}

void serve_guard_set_port(serve_guard *g, int port) {
    pthread_mutex_lock(&g->mu);
    g->server_port = port;
    pthread_mutex_unlock(&g->mu);
}

void serve_guard_free(serve_guard *g) {
    if (!g) return;
    if (g->reaper_started) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_signal(&g->wake);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->reaper, NULL);
    }
    while (g->head) unlink_conn(g, g->head); /* none after mg_stop; kept safe anyway */
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void serve_guard_get_stats(serve_guard *g, serve_guard_stats *out) {
    pthread_mutex_lock(&g->mu);
    *out = g->stats;
    out->open = 0;
    for (guard_conn *r = g->head; r; r = r->next) out->open += !r->closing;
    pthread_mutex_unlock(&g->mu);
}

/* ---- who may talk ---- */

/* host[0..n) as an address: 4 or 6, else 0. */
static int ip_literal(const char *host, size_t n, unsigned char *out) {
    char b[64];
    if (n == 0 || n >= sizeof b) return 0;
    memcpy(b, host, n), b[n] = 0;
    if (inet_pton(AF_INET, b, out) == 1) return 4;
    if (inet_pton(AF_INET6, b, out) == 1) return 6;
    return 0;
}

static int is_loopback(const unsigned char *a, int fam) {
    static const unsigned char v6_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return fam == 4 ? a[0] == 127 : fam == 6 && !memcmp(a, v6_lo, 16);
}

/* Splits a Host header (or the authority of an origin) into its name (brackets off) and port (-1: none);
 * 0 when it is malformed. */
static int split_authority(const char *v, size_t len, const char **name, size_t *nlen, long *port) {
    const char *colon;
    if (len && v[0] == '[') {
        const char *close = memchr(v, ']', len);
        if (!close) return 0;
        *name = v + 1, *nlen = (size_t)(close - v - 1);
        colon = close + 1 < v + len ? close + 1 : NULL;
        if (colon && *colon != ':') return 0;
    } else {
        colon = memchr(v, ':', len);
        *name = v, *nlen = colon ? (size_t)(colon - v) : len;
    }
    *port = -1;
    if (colon) {
        const char *p = colon + 1, *end = v + len;
        if (p == end || end - p > 5) return 0;
        long x = 0;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9') return 0;
            x = x * 10 + (*p - '0');
        }
        if (x > 65535) return 0;
        *port = x;
    }
    return *nlen > 0;
}

int serve_guard_host_ok(const char *host_header, const char *listen_host, int port) {
    if (!host_header) return 1; /* HTTP/1.0 may send none; a browser always does */
    const char *name;
    size_t n;
    long p;
    if (!split_authority(host_header, strlen(host_header), &name, &n, &p)) return 0;
    if (p >= 0 ? p != port : port != 80) return 0; /* no port: 80 */
    unsigned char a[16], l[16];
    int fam = ip_literal(name, n, a);
    if (fam && is_loopback(a, fam)) return 1;
    if (!fam && n == 9 && !strncasecmp(name, "localhost", 9)) return 1;
    /* the address it listens on, as given; any IP literal when that is all addresses */
    size_t ln = strlen(listen_host);
    if (ln && listen_host[0] == '[' && listen_host[ln - 1] == ']') listen_host++, ln -= 2;
    if (ln == n && !strncasecmp(name, listen_host, n)) return 1;
    int lfam = ip_literal(listen_host, ln, l);
    static const unsigned char any[16] = {0};
    if (fam && lfam && !memcmp(l, any, lfam == 4 ? 4 : 16)) return 1;
    if (fam && lfam == fam && !memcmp(a, l, fam == 4 ? 4 : 16)) return 1;
    return 0;
}

int serve_guard_origin_ok(const char *origin, const char *host_header, const char *const *cors, int n_cors) {
    if (!origin) return 1;
    for (int i = 0; i < n_cors; i++)
        if (!strcmp(cors[i], "*") || !strcasecmp(cors[i], origin)) return 1;
    /* the server's own origin: a page it served (it serves none today, but a proxy in front may) */
    return host_header && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host_header);
}
