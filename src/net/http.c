/*
 * http.c - downloads over libcurl, resumable and verified (http.h).
 */
#include "net/http.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/error.h"

void wgml_http_url_shown(const char *url, char *out, size_t cap) {
    const char *s = strstr(url, "://"), *host = s ? s + 3 : url, *at = NULL;
    for (const char *p = host; *p && *p != '/' && *p != '?' && *p != '#'; p++)
        if (*p == '@') at = p;
    size_t n = 0;
    if (s) {
        size_t k = (size_t)(host - url);
        n = k < cap - 1 ? k : cap - 1;
        memcpy(out, url, n);
    }
    for (const char *p = at ? at + 1 : host; *p && *p != '?' && *p != '#' && n + 1 < cap; p++) out[n++] = *p;
    out[n] = '\0';
}

#ifndef WGML_HAVE_CURL

wgml_status wgml_http_get(const char *url, size_t max, const wgml_http_opts *o, char **body, size_t *len,
                          long *status, wgml_error *err) {
    (void)url, (void)max, (void)o, (void)len;
    if (body) *body = NULL;
    if (status) *status = 0;
    return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this build of wgml has no HTTP client (libcurl)");
}

wgml_status wgml_http_download(const char *url, const char *path, const wgml_http_expect *expect,
                               const wgml_http_opts *o, wgml_http_result *res, wgml_error *err) {
    (void)url, (void)path, (void)expect, (void)o, (void)res;
    return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this build of wgml has no HTTP client (libcurl)");
}

wgml_status wgml_sha256_file(const char *path, char hex[65], wgml_error *err) {
    (void)path, (void)hex;
    return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this build of wgml has no SHA-256 (libcrypto)");
}

#else

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HTTP_STR_(x) #x
#define HTTP_STR(x) HTTP_STR_(x)
#define HTTP_USER_AGENT \
    "wgml/" HTTP_STR(WGML_VERSION_MAJOR) "." HTTP_STR(WGML_VERSION_MINOR) "." HTTP_STR(WGML_VERSION_PATCH)
#define HTTP_ATTEMPTS 6           /* tries in a row that bring (almost) nothing: the first and five more */
#define HTTP_PROGRESS (64 << 10)  /* a try that brings this many bytes starts the count again */
#define HTTP_MAX_TRIES 1000       /* tries of one download in all */
#define HTTP_MAX_REDIRECTS 10L
#define HTTP_CONNECT_TIMEOUT 30L  /* seconds to connect */
#define HTTP_STALL_SECONDS 60L    /* a transfer below one byte per second this long is dropped */

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init = CURLE_OK;
static void curl_init_once(void) { g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- one transfer ---- */

typedef struct xfer {
    long status;             /* of the response being read */
    char etag[160];          /* ETag of the final response */
    char linked_etag[160];   /* X-Linked-Etag from any response of the chain (Hugging Face's 302) */
    char modified[64];       /* Last-Modified of the final response */
    int64_t linked_size;     /* X-Linked-Size, or -1 */
    int64_t content_length;  /* of the final response, or -1 */
    int64_t range_start;     /* Content-Range: bytes START-END/TOTAL, or -1 */
    int64_t range_total;
    /* the body: into fp from offset (a download), or into buf (a GET) */
    FILE *fp;
    int64_t offset;          /* bytes in the file before this response's body */
    int64_t written;         /* body bytes of this response kept */
    int body_started;
    int bad_range;           /* a 206 that does not start where asked */
    int write_failed;
    char *buf;
    size_t len, max;
    int too_big;
    const wgml_http_opts *o;
    int cancelled;
} xfer;

static int64_t parse_i64(const char *s, const char *end) {
    int64_t v = 0;
    int any = 0;
    while (s < end && *s == ' ') s++;
    for (; s < end && isdigit((unsigned char)*s); s++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*s - '0'), any = 1;
    }
    return any ? v : -1;
}

/* A header's value without quotes and "W/" (ETags), into out. */
static void header_value(const char *v, const char *end, char *out, size_t cap) {
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
    if (end - v >= 2 && (v[0] == 'W' || v[0] == 'w') && v[1] == '/') v += 2;
    if (end - v >= 2 && *v == '"' && end[-1] == '"') v++, end--;
    size_t n = (size_t)(end - v);
    if (n >= cap) n = 0; /* an oversized value is no ETag at all */
    memcpy(out, v, n);
    out[n] = '\0';
}

static int header_is(const char *h, size_t n, const char *name, const char **value) {
    size_t k = strlen(name);
    if (n <= k || strncasecmp(h, name, k) != 0 || h[k] != ':') return 0;
    *value = h + k + 1;
    return 1;
}

static size_t on_header(char *h, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t n = size * nmemb;
    const char *end = h + n, *v;
    if (n >= 5 && strncmp(h, "HTTP/", 5) == 0) { /* a new response of the chain */
        const char *sp = memchr(h, ' ', n);
        x->status = sp ? (long)parse_i64(sp + 1, end) : 0;
        x->etag[0] = '\0';
        x->modified[0] = '\0';
        x->content_length = x->range_start = x->range_total = -1;
    } else if (header_is(h, n, "etag", &v)) {
        header_value(v, end, x->etag, sizeof x->etag);
    } else if (header_is(h, n, "last-modified", &v)) {
        header_value(v, end, x->modified, sizeof x->modified);
    } else if (header_is(h, n, "x-linked-etag", &v)) {
        header_value(v, end, x->linked_etag, sizeof x->linked_etag);
    } else if (header_is(h, n, "x-linked-size", &v)) {
        x->linked_size = parse_i64(v, end);
    } else if (header_is(h, n, "content-length", &v)) {
        x->content_length = parse_i64(v, end);
    } else if (header_is(h, n, "content-range", &v)) { /* bytes START-END/TOTAL */
        while (v < end && *v == ' ') v++;
        if (end - v > 6 && strncasecmp(v, "bytes ", 6) == 0) {
            const char *dash = memchr(v, '-', (size_t)(end - v)), *slash = memchr(v, '/', (size_t)(end - v));
            x->range_start = parse_i64(v + 6, dash ? dash : end);
            x->range_total = slash ? parse_i64(slash + 1, end) : -1;
        }
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t n = size * nmemb;
    if (x->status < 200 || x->status >= 300) return n; /* an error page: not kept */
    if (x->fp) {
        if (!x->body_started) {
            x->body_started = 1;
            if (x->status == 206) {
                if (x->range_start != x->offset) {
                    x->bad_range = 1;
                    return 0;
                }
            } else { /* the whole file: what the partial file held goes */
                x->offset = 0;
                if (fflush(x->fp) || ftruncate(fileno(x->fp), 0) || fseek(x->fp, 0, SEEK_SET)) {
                    x->write_failed = 1;
                    return 0;
                }
            }
        }
        if (fwrite(data, 1, n, x->fp) != n) {
            x->write_failed = 1;
            return 0;
        }
        x->written += (int64_t)n;
        return n;
    }
    if (x->len + n > x->max) {
        x->too_big = 1;
        return 0;
    }
    memcpy(x->buf + x->len, data, n);
    x->len += n;
    x->buf[x->len] = '\0';
    return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)ultotal, (void)ulnow;
    xfer *x = user;
    if (!x->o || !x->o->progress || !x->fp || x->status < 200 || x->status >= 300) return 0;
    int64_t base = x->status == 206 ? x->offset : 0;
    uint64_t done = (uint64_t)(base + dlnow), total = dltotal > 0 ? (uint64_t)(base + dltotal) : 0;
    if (total < done) total = done;
    if (x->o->progress(x->o->progress_user, "download", done, total)) {
        x->cancelled = 1;
        return 1;
    }
    return 0;
}

static wgml_status setup(CURL *c, const char *url, const wgml_http_opts *o, xfer *x, struct curl_slist *hdrs,
                         wgml_error *err) {
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init != CURLE_OK)
        return wgml_fail(err, WGML_ERR_NETWORK, "libcurl did not start: %s", curl_easy_strerror(g_curl_init));
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, HTTP_MAX_REDIRECTS);
    curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L); /* the token stays with the first host */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, HTTP_CONNECT_TIMEOUT);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, HTTP_STALL_SECONDS);
    curl_easy_setopt(c, CURLOPT_USERAGENT, HTTP_USER_AGENT);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (hdrs) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (o && o->token && *o->token) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, o->token);
    }
    return WGML_OK;
}

static const char *status_hint(long status, int token) {
    switch (status) {
    case 401: return token ? " (the token was refused)" : " (it needs a token: set HF_TOKEN)";
    case 403: return token ? " (the token has no access to it)" : " (a gated repository needs HF_TOKEN)";
    case 404: return " (not found)";
    case 416: return " (range not satisfiable)";
    case 429: return " (too many requests)";
    default: return "";
    }
}

wgml_status wgml_http_get(const char *url, size_t max, const wgml_http_opts *o, char **body, size_t *len,
                          long *status, wgml_error *err) {
    *body = NULL;
    if (len) *len = 0;
    if (status) *status = 0;
    char shown[512];
    wgml_http_url_shown(url, shown, sizeof shown);
    xfer x = {.linked_size = -1, .content_length = -1, .range_start = -1, .range_total = -1, .max = max, .o = o};
    if (!(x.buf = wgml_malloc(max + 1))) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    x.buf[0] = '\0';
    CURL *c = curl_easy_init();
    wgml_status st = c ? setup(c, url, o, &x, NULL, err) : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
        CURLcode rc = curl_easy_perform(c);
        if (status) *status = x.status;
        if (x.too_big)
            st = wgml_fail(err, WGML_ERR_NETWORK, "%s: the answer is larger than %zu bytes", shown, max);
        else if (rc != CURLE_OK)
            st = wgml_fail(err, WGML_ERR_NETWORK, "%s: %s", shown, curl_easy_strerror(rc));
        else if (x.status < 200 || x.status >= 300)
            st = wgml_fail(err, WGML_ERR_NETWORK, "%s: HTTP %ld%s", shown, x.status,
                           status_hint(x.status, o && o->token && *o->token));
    }
    if (c) curl_easy_cleanup(c);
    if (st) {
        wgml_free(x.buf);
        return st;
    }
    *body = x.buf;
    if (len) *len = x.len;
    return WGML_OK;
}

/* ---- SHA-256 ---- */

static void to_hex(const unsigned char *d, unsigned n, char *hex) {
    static const char k[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) hex[2 * i] = k[d[i] >> 4], hex[2 * i + 1] = k[d[i] & 15];
    hex[2 * n] = '\0';
}

wgml_status wgml_sha256_file(const char *path, char hex[65], wgml_error *err) {
    hex[0] = '\0';
    FILE *fp = fopen(path, "rb");
    if (!fp) return wgml_fail(err, WGML_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *buf = wgml_malloc(1u << 20);
    wgml_status st = ctx && buf ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        st = wgml_fail(err, WGML_ERR_UNSUPPORTED, "SHA-256 is not available (libcrypto)");
    size_t n;
    while (!st && (n = fread(buf, 1, 1u << 20, fp)) > 0)
        if (EVP_DigestUpdate(ctx, buf, n) != 1) st = wgml_fail(err, WGML_ERR_IO, "SHA-256 of '%s' failed", path);
    if (!st && ferror(fp)) st = wgml_fail(err, WGML_ERR_IO, "reading '%s' failed", path);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    if (!st && (EVP_DigestFinal_ex(ctx, d, &dn) != 1 || dn != 32))
        st = wgml_fail(err, WGML_ERR_IO, "SHA-256 of '%s' failed", path);
    if (!st) to_hex(d, 32, hex);
    EVP_MD_CTX_free(ctx);
    wgml_free(buf);
    fclose(fp);
    return st;
}

/* ---- downloads ---- */

static int is_sha256(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n])) return 0;
    return n == 64;
}

static void lower(char *s) {
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

/* The ETag that the partial file's bytes came with, kept beside it (PATH.part.etag). */
static void read_small(const char *path, char *out, size_t cap) {
    out[0] = '\0';
    FILE *fp = fopen(path, "rb");
    if (!fp) return;
    size_t n = fread(out, 1, cap - 1, fp);
    fclose(fp);
    out[n] = '\0';
    if (strchr(out, '\n') || strchr(out, '\r')) out[0] = '\0';
}

static int write_small(const char *path, const char *text) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    int ok = fputs(text, fp) >= 0;
    return fclose(fp) == 0 && ok ? 0 : -1;
}

/* Errors worth another attempt from where the file stopped. */
static int transient(CURLcode rc) {
    switch (rc) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: return 1;
    default: return 0;
    }
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

wgml_status wgml_http_download(const char *url, const char *path, const wgml_http_expect *expect,
                               const wgml_http_opts *o, wgml_http_result *res, wgml_error *err) {
    memset(res, 0, sizeof *res);
    char shown[512];
    wgml_http_url_shown(url, shown, sizeof shown);
    size_t pl = strlen(path);
    char *part = wgml_malloc(pl + 16), *part_etag = wgml_malloc(pl + 16);
    if (!part || !part_etag) {
        wgml_free(part), wgml_free(part_etag);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    }
    snprintf(part, pl + 16, "%s.part", path);
    snprintf(part_etag, pl + 16, "%s.part.etag", path);
    const int token = o && o->token && *o->token;
    void (*note_fn)(void *, const char *) = o ? o->log : NULL;
    void *note_user = o ? o->log_user : NULL;
    wgml_status st = WGML_OK;
    xfer x;
    memset(&x, 0, sizeof x);
    int restarted = 0;
    int64_t kept = -1; /* bytes an earlier attempt of this call left (resumable without an ETag) */
    int fails = 0;     /* tries in a row without progress */
    for (int attempt = 0;; attempt++) {
        /* what is there already: bytes of the same file to continue from, either with their ETag kept
         * beside them (from any earlier run) or left by the attempt before this one */
        char have_etag[160];
        read_small(part_etag, have_etag, sizeof have_etag);
        struct stat sb;
        int64_t offset = 0;
        if (stat(part, &sb) == 0 && S_ISREG(sb.st_mode) && (have_etag[0] || (int64_t)sb.st_size == kept))
            offset = (int64_t)sb.st_size;
        FILE *fp = fopen(part, offset > 0 ? "ab" : "wb");
        if (!fp) {
            st = wgml_fail(err, WGML_ERR_IO, "cannot write '%s': %s", part, strerror(errno));
            break;
        }
        memset(&x, 0, sizeof x);
        x.linked_size = x.content_length = x.range_start = x.range_total = -1;
        x.fp = fp, x.offset = offset, x.o = o;
        struct curl_slist *hdrs = NULL, *h2;
        char line[256];
        if (offset > 0) {
            snprintf(line, sizeof line, "Range: bytes=%lld-", (long long)offset);
            hdrs = curl_slist_append(hdrs, line);
            if (have_etag[0]) {
                snprintf(line, sizeof line, "If-Range: \"%s\"", have_etag);
                if (hdrs && (h2 = curl_slist_append(hdrs, line))) hdrs = h2;
            }
        } else if (expect && expect->etag && *expect->etag && strlen(expect->etag) < 160) {
            snprintf(line, sizeof line, "If-None-Match: \"%s\"", expect->etag);
            hdrs = curl_slist_append(hdrs, line);
        } else if (expect && expect->modified && *expect->modified && strlen(expect->modified) < 64 &&
                   !strpbrk(expect->modified, "\r\n")) {
            snprintf(line, sizeof line, "If-Modified-Since: %s", expect->modified);
            hdrs = curl_slist_append(hdrs, line);
        }
        CURL *c = curl_easy_init();
        st = c ? setup(c, url, o, &x, hdrs, err) : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        CURLcode rc = CURLE_OK;
        if (!st) rc = curl_easy_perform(c);
        if (c) curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        int closed = fclose(fp);
        if (st) break;
        /* the file's identity for a later resumption: the ETag this response gave */
        const char *etag = x.linked_etag[0] ? x.linked_etag : x.etag;
        if ((x.status == 200 || x.status == 206) && x.written > 0) {
            if (etag[0]) write_small(part_etag, etag);
            kept = x.offset + x.written;
        }
        if (x.cancelled) {
            st = wgml_fail(err, WGML_ERR_NETWORK, "%s: download cancelled (%lld bytes kept to resume)", shown,
                           (long long)(x.offset + x.written));
            break;
        }
        if (x.write_failed || closed) {
            st = wgml_fail(err, WGML_ERR_IO, "writing '%s' failed: %s", part, strerror(errno));
            break;
        }
        if (x.status == 304 && rc == CURLE_OK) {
            remove(part), remove(part_etag);
            res->not_modified = 1;
            snprintf(res->etag, sizeof res->etag, "%s", expect && expect->etag ? expect->etag : "");
            snprintf(res->modified, sizeof res->modified, "%s", expect && expect->modified ? expect->modified : "");
            break;
        }
        if (x.bad_range || x.status == 416) { /* start again from the first byte, once */
            remove(part), remove(part_etag);
            if (restarted++) {
                st = wgml_fail(err, WGML_ERR_NETWORK, "%s: the server does not resume at the right byte", shown);
                break;
            }
            continue;
        }
        if (x.status >= 400 || (x.status && x.status < 200) || (x.status >= 300 && x.status < 400)) {
            int again = x.status >= 500 && ++fails < HTTP_ATTEMPTS && attempt + 1 < HTTP_MAX_TRIES;
            if (!again) {
                st = wgml_fail(err, WGML_ERR_NETWORK, "%s: HTTP %ld%s", shown, x.status, status_hint(x.status, token));
                if (x.status != 200 && x.status != 206 && offset == 0) remove(part), remove(part_etag);
                break;
            }
            wgml_note(note_fn, note_user, "%s: HTTP %ld, trying again", shown, x.status);
            pause_ms(250L << fails);
            continue;
        }
        if (rc != CURLE_OK) {
            fails = x.written >= HTTP_PROGRESS ? 0 : fails + 1;
            if (transient(rc) && fails < HTTP_ATTEMPTS && attempt + 1 < HTTP_MAX_TRIES) {
                if (x.offset + x.written > 0)
                    wgml_note(note_fn, note_user, "%s: %s after %lld bytes; resuming", shown,
                              curl_easy_strerror(rc), (long long)(x.offset + x.written));
                else
                    wgml_note(note_fn, note_user, "%s: %s; trying again", shown, curl_easy_strerror(rc));
                pause_ms(fails == 0 ? 0 : 250L << fails);
                continue;
            }
            st = wgml_fail(err, WGML_ERR_NETWORK, "%s: %s", shown, curl_easy_strerror(rc));
            break;
        }
        /* complete: the size the server and the caller give, then the SHA-256 when one is known */
        snprintf(res->etag, sizeof res->etag, "%s", etag);
        snprintf(res->modified, sizeof res->modified, "%s", x.modified);
        int64_t got = x.offset + x.written;
        int64_t want = expect && expect->size >= 0 ? expect->size
                       : x.linked_size >= 0        ? x.linked_size
                       : x.range_total >= 0        ? x.range_total
                       : x.status == 200           ? x.content_length
                                                   : -1;
        if (want >= 0 && got != want) {
            remove(part), remove(part_etag);
            st = wgml_fail(err, WGML_ERR_NETWORK, "%s: got %lld bytes, but the file has %lld; deleted", shown,
                           (long long)got, (long long)want);
            break;
        }
        char sha[65] = "";
        if (expect && expect->sha256[0]) snprintf(sha, sizeof sha, "%s", expect->sha256);
        else if (is_sha256(etag)) memcpy(sha, etag, 65);
        lower(sha);
        if (sha[0]) {
            if (o && o->progress) o->progress(o->progress_user, "verify", 0, 1);
            char have[65];
            if ((st = wgml_sha256_file(part, have, err))) break;
            if (strcmp(have, sha) != 0) {
                remove(part), remove(part_etag);
                st = wgml_fail(err, WGML_ERR_NETWORK, "%s: SHA-256 %.16s... is not the %.16s... the server gives; deleted",
                               shown, have, sha);
                break;
            }
            snprintf(res->sha256, sizeof res->sha256, "%s", have);
            if (o && o->progress) o->progress(o->progress_user, "verify", 1, 1);
        }
        if (rename(part, path) != 0) {
            st = wgml_fail(err, WGML_ERR_IO, "cannot rename '%s' to '%s': %s", part, path, strerror(errno));
            break;
        }
        remove(part_etag);
        res->size = got;
        break;
    }
    res->status = x.status;
    wgml_free(part), wgml_free(part_etag);
    return st;
}

#endif
