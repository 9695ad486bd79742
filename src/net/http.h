/*
 * http.h - the HTTP client behind models by URL (net/hub.h), over libcurl.
 *
 * Two requests: a small GET whose body is kept in memory (a repository's file
 * list), and a file download into a local path that
 *   - resumes: the bytes so far stay in PATH.part, and the next attempt asks
 *     for the rest (Range, with If-Range naming the ETag they came with);
 *     a dropped connection is retried from where it stopped, a few times;
 *   - verifies: the size against what the server or the caller says it is,
 *     and the SHA-256 when it is known (the caller's, or an ETag that is one,
 *     as Hugging Face gives for the files it keeps in LFS), before the file
 *     is renamed to PATH; a mismatch deletes the partial file;
 *   - revalidates: with the ETag (else the Last-Modified date) of the copy
 *     already at PATH, a 304 keeps it.
 * Redirects are followed (http and https only, at most 10). A bearer token
 * goes to the first host only, never to one redirected to, and is never
 * written into a message.
 *
 * Builds without libcurl (the browser's, which fetches in JavaScript) have
 * these functions failing with WGML_ERR_UNSUPPORTED.
 */
#ifndef WGML_NET_HTTP_H
#define WGML_NET_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

typedef struct wgml_http_opts {
    const char *token;         /* "Authorization: Bearer" for the first host, or NULL */
    wgml_progress_fn progress; /* stage "download": bytes of the file, or NULL */
    void *progress_user;
    void (*log)(void *user, const char *line); /* retries and the like, or NULL */
    void *log_user;
} wgml_http_opts;

/* GETs url into a malloc'ed, NUL-terminated buffer of at most max bytes
 * (*body, *len; wgml_free). A status other than 2xx is WGML_ERR_NETWORK
 * naming it; *status (when not NULL) receives the final HTTP status, 0 when
 * no response came. */
wgml_status wgml_http_get(const char *url, size_t max, const wgml_http_opts *o, char **body, size_t *len,
                          long *status, wgml_error *err);

typedef struct wgml_http_expect {
    int64_t size;         /* bytes the file must have, or -1 when not known */
    char sha256[65];      /* lower-case hex, or "" when not known */
    const char *etag;     /* the ETag of the copy at path (a 304 keeps it), or NULL */
    const char *modified; /* else its Last-Modified (If-Modified-Since), or NULL */
} wgml_http_expect;

typedef struct wgml_http_result {
    int not_modified;     /* 1: the server said the copy at path is current (304) */
    char etag[160];       /* the file's ETag (X-Linked-Etag before ETag), or "" */
    char modified[64];    /* its Last-Modified, or "" */
    char sha256[65];      /* the SHA-256 verified, or "" when none was known */
    int64_t size;         /* bytes written */
    long status;          /* the last HTTP status, 0 when no answer came (no connection) */
} wgml_http_result;

/* Downloads url to path as described above. */
wgml_status wgml_http_download(const char *url, const char *path, const wgml_http_expect *expect,
                               const wgml_http_opts *o, wgml_http_result *res, wgml_error *err);

/* The URL as messages and logs show it, into out (cap bytes): without its query and fragment
 * (a signed URL's signature) and without user:password@. */
void wgml_http_url_shown(const char *url, char *out, size_t cap);

/* SHA-256 of a file, as 64 lower-case hex digits and a NUL in hex[65]. */
wgml_status wgml_sha256_file(const char *path, char hex[65], wgml_error *err);

#endif
