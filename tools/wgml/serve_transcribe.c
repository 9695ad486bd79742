/*
 * serve_transcribe.c - POST /v1/audio/transcriptions and /v1/audio/translations
 * on the server's Whisper model, as OpenAI defines them: a multipart/form-data
 * body (RFC 7578) with the audio in `file` and the fields `model` (ignored, as
 * elsewhere), `language` (a code such as "en", or a Whisper language's English
 * name; absent, "" or "auto": detected), `prompt`, `response_format` (json, the
 * default; text, srt, verbose_json, vtt), `temperature` (0-1; at 0 the
 * official fallback raises it when a window fails, as OpenAI documents),
 * `timestamp_granularities[]` ("segment", "word" or both, with verbose_json:
 * "word" computes word timestamps, the body's "words"; "word" alone leaves
 * "segments" out, as OpenAI does) and `stream` ("true": server-sent events, OpenAI's
 * {"type": "transcript.text.delta", "delta"} per segment as its window is
 * decoded, then {"type": "transcript.text.done", "text"}; with
 * response_format json or text only); wgml's extensions `max_tokens` (per 30 s
 * window, 1-448; default 224) and `no_fallback` ("true": keep each window's
 * first decoding), which bound a request's work. Unknown fields are ignored;
 * a field given twice (but timestamp_granularities[]) is refused.
 *
 * The body is parsed here (no civetweb form callbacks: the whole body is in
 * memory, read within --timeout like every body, and bounded by
 * --max-upload): boundaries per RFC 2046 with CRLF line ends, at most 64
 * parts, part headers of at most 8 KiB, field values of at most 4 KiB
 * (prompt 16 KiB), UTF-8 without U+0000. The audio is decoded by libsndfile
 * (audio_file.c: WAV, FLAC, OGG, MP3, ...) up to --max-audio seconds.
 *
 * Limits: at most 1 + min(--queue, 3) transcription requests are in the
 * server at once (one transcribing, the others waiting with their bodies in
 * memory); one more gets 503 before its body is read. One request at a time
 * on the model (transcribe_mu): a thread of the request's own decodes the
 * audio and transcribes under the lock, segment by segment into memory, while
 * this HTTP thread writes (a stream's deltas) or waits; so a slow reader slows
 * only its own stream, and a client gone (a stream's failed write, or a
 * non-streamed request's closed connection, looked at every 100 ms) stops
 * the transcription at its next segment.
 */
#include <civetweb.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

#define FORM_MAX_PARTS 64
#define FORM_MAX_HEADERS 8192 /* bytes of one part's header block */
#define FORM_MAX_FIELD 4096   /* bytes of a field's value (not the file) */
#define FORM_MAX_PROMPT 16384
#define FORM_MAX_BOUNDARY 200 /* RFC 2046 allows 70; some clients go further */

/* ---- multipart/form-data ---- */

typedef struct form_part {
    char name[64];
    char filename[256];
    const unsigned char *data;
    size_t len;
} form_part;

static int is_token_char(unsigned char c) { return c > 32 && c < 127 && !strchr("()<>@,;:\\\"/[]?={}", c); }

/* A header parameter's value at p (a token, or a quoted string with \ escapes) into out (cut to its
 * size, NUL-terminated); returns the position after it, or NULL when it is malformed. */
static const char *param_value(const char *p, const char *end, char *out, size_t size) {
    size_t n = 0;
    if (p < end && *p == '"') {
        for (p++; p < end && *p != '"'; p++) {
            if (*p == '\\' && p + 1 < end) p++;
            if ((unsigned char)*p < 32 && *p != '\t') return NULL;
            if (n + 1 < size) out[n++] = *p;
        }
        if (p >= end) return NULL; /* no closing quote */
        p++;
    } else {
        for (; p < end && is_token_char((unsigned char)*p); p++)
            if (n + 1 < size) out[n++] = *p;
    }
    out[n] = 0;
    return p;
}

/* Finds the parameter key (case-insensitive) in the ';'-separated list [p, end): 1 and its value in out. */
static int header_param(const char *p, const char *end, const char *key, char *out, size_t size) {
    const size_t kl = strlen(key);
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        if (!semi) return 0;
        p = semi + 1;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        const char *k = p;
        while (p < end && is_token_char((unsigned char)*p) && *p != '=') p++;
        const size_t n = (size_t)(p - k);
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (p >= end || *p != '=') continue;
        p++;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        char tmp[FORM_MAX_BOUNDARY + 64];
        const char *after = param_value(p, end, tmp, sizeof tmp);
        if (!after) return 0;
        if (n == kl && !strncasecmp(k, key, kl)) {
            snprintf(out, size, "%s", tmp);
            return 1;
        }
        p = after;
    }
    return 0;
}

/* The boundary of a multipart/form-data Content-Type, or 0 when it is not one (or has none). */
static int form_boundary(const char *ct, char *out, size_t size) {
    if (!ct) return 0;
    while (*ct == ' ' || *ct == '\t') ct++;
    if (strncasecmp(ct, "multipart/form-data", 19)) return 0;
    const char *p = ct + 19, *end = ct + strlen(ct);
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p < end && *p != ';') return 0;
    if (!header_param(p, end, "boundary", out, size)) return 0;
    const size_t n = strlen(out);
    return n >= 1 && n <= FORM_MAX_BOUNDARY;
}

static const unsigned char *find(const unsigned char *h, size_t hn, const void *needle, size_t nn) {
    return nn <= hn ? memmem(h, hn, needle, nn) : NULL;
}

/* Splits body into its parts: 0, or -1 with msg saying what is wrong. */
static int form_parse(const unsigned char *body, size_t n, const char *boundary, form_part *parts, int *n_parts,
                      char *msg, size_t msg_size) {
    char delim[FORM_MAX_BOUNDARY + 5];
    const int dl = snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    *n_parts = 0;
    /* the first delimiter: at the start (no preamble), else after a CRLF */
    size_t p;
    if (n >= (size_t)dl - 2 && !memcmp(body, delim + 2, (size_t)dl - 2)) {
        p = (size_t)dl - 2;
    } else {
        const unsigned char *d = find(body, n, delim, (size_t)dl);
        if (!d) return snprintf(msg, msg_size, "the body has no part delimited by its boundary"), -1;
        p = (size_t)(d - body) + (size_t)dl;
    }
    for (;;) {
        /* after a delimiter: "--" ends the body; else optional white space and CRLF, then a part */
        if (n - p >= 2 && body[p] == '-' && body[p + 1] == '-') return 0;
        while (p < n && (body[p] == ' ' || body[p] == '\t')) p++;
        if (n - p < 2 || body[p] != '\r' || body[p + 1] != '\n')
            return snprintf(msg, msg_size, "a boundary is not followed by CRLF or \"--\" (the body ends early?)"), -1;
        p += 2;
        if (*n_parts == FORM_MAX_PARTS)
            return snprintf(msg, msg_size, "the body has more than %d parts", FORM_MAX_PARTS), -1;
        form_part *part = &parts[(*n_parts)++];
        memset(part, 0, sizeof *part);
        /* the headers: lines up to an empty one */
        size_t hend;
        if (n - p >= 2 && body[p] == '\r' && body[p + 1] == '\n') {
            hend = p; /* no headers */
        } else {
            const size_t look = n - p < FORM_MAX_HEADERS + 4 ? n - p : FORM_MAX_HEADERS + 4;
            const unsigned char *e = find(body + p, look, "\r\n\r\n", 4);
            if (!e)
                return snprintf(msg, msg_size, "part %d's headers do not end (within %d bytes)", *n_parts,
                                FORM_MAX_HEADERS), -1;
            hend = (size_t)(e - body) + 2; /* at the empty line's CRLF */
        }
        int disposition = 0;
        for (size_t q = p; q < hend;) {
            const unsigned char *le = find(body + q, hend - q, "\r\n", 2);
            const size_t lend = le ? (size_t)(le - body) : hend;
            const char *line = (const char *)body + q, *end = (const char *)body + lend;
            if (memchr(line, 0, (size_t)(end - line)))
                return snprintf(msg, msg_size, "part %d's headers hold a NUL byte", *n_parts), -1;
            if (end - line >= 20 && !strncasecmp(line, "Content-Disposition:", 20)) {
                const char *v = line + 20;
                while (v < end && (*v == ' ' || *v == '\t')) v++;
                if (end - v < 9 || strncasecmp(v, "form-data", 9))
                    return snprintf(msg, msg_size, "part %d's Content-Disposition is not form-data", *n_parts), -1;
                if (!header_param(v + 9, end, "name", part->name, sizeof part->name))
                    return snprintf(msg, msg_size, "part %d's Content-Disposition has no name", *n_parts), -1;
                header_param(v + 9, end, "filename", part->filename, sizeof part->filename);
                disposition = 1;
            }
            q = lend + 2;
        }
        if (!disposition) return snprintf(msg, msg_size, "part %d has no Content-Disposition", *n_parts), -1;
        p = hend + 2;
        /* the content: up to the next delimiter */
        const unsigned char *d = find(body + p, n - p, delim, (size_t)dl);
        if (!d) return snprintf(msg, msg_size, "part '%s' does not end with the boundary", part->name), -1;
        part->data = body + p;
        part->len = (size_t)(d - body) - p;
        p = (size_t)(d - body) + (size_t)dl;
    }
}

/* ---- the transcription, in a thread of the request's own ---- */

typedef struct tr_piece {
    struct tr_piece *next;
    char text[]; /* a segment's text */
} tr_piece;

typedef struct {
    /* the request (read-only) */
    serve_server *s;
    wgml_model *model;
    const unsigned char *audio;
    size_t audio_len;
    char name[112]; /* the file part's name, for messages ("" none) */
    wgml_transcribe_params p;
    int stream;
    /* the thread's result (read after the join) */
    wgml_status st;
    wgml_error err;
    int bad_audio; /* the audio could not be read: msg says why */
    char msg[512];
    wgml_transcribe_result res;
    cli_transcript t;
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tr_piece *head, *tail;
    int done, oom, gone;
    int stopped; /* the server stopped it (the thread's own until the join) */
} tr_job;

static int on_segment(void *user, const wgml_transcript_segment *seg) {
    tr_job *k = user;
    int oom = cli_transcript_add(&k->t, seg) != 0; /* the thread's own: read after the join */
    tr_piece *piece = NULL;
    if (!oom && k->stream) {
        const size_t n = strlen(seg->text ? seg->text : "");
        if ((piece = malloc(sizeof *piece + n + 1))) {
            piece->next = NULL;
            memcpy(piece->text, seg->text ? seg->text : "", n + 1);
        } else {
            oom = 1;
        }
    }
    pthread_mutex_lock(&k->mu);
    if (oom) k->oom = 1;
    if (piece && !k->gone) {
        if (k->tail) k->tail->next = piece;
        else k->head = piece;
        k->tail = piece;
        pthread_cond_signal(&k->cv);
        piece = NULL;
    }
    int stop = k->oom || k->gone;
    pthread_mutex_unlock(&k->mu);
    free(piece);
    pthread_mutex_lock(&k->s->mu);
    if (k->s->stopping) k->stopped = stop = 1; /* the drain's time is over */
    pthread_mutex_unlock(&k->s->mu);
    return stop;
}

static void *tr_thread(void *arg) {
    tr_job *k = arg;
    pthread_mutex_lock(&k->s->transcribe_mu);
    pthread_mutex_lock(&k->mu);
    const int gone = k->gone;
    pthread_mutex_unlock(&k->mu);
    pthread_mutex_lock(&k->s->mu);
    k->stopped = k->s->stopping;
    pthread_mutex_unlock(&k->s->mu);
    if (!gone && !k->stopped) { /* decoded under the lock: one request's audio in memory at a time */
        cli_audio a;
        if (cli_audio_read_memory(k->audio, k->audio_len, *k->name ? k->name : NULL, k->s->max_audio_s, &a,
                                  k->msg, sizeof k->msg)) {
            k->bad_audio = 1;
        } else {
            k->st = wgml_transcribe(k->model, a.pcm, a.n, a.sample_rate, &k->p, on_segment, k, &k->res, &k->err);
            cli_audio_free(&a);
        }
    }
    pthread_mutex_unlock(&k->s->transcribe_mu);
    pthread_mutex_lock(&k->mu);
    k->done = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

static int space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Runs the transcription in its own thread; a stream's deltas go out as they come. Returns 1 when a
 * stream was started (headers sent), 0 when not, -1 when the thread could not start. */
static int run(struct mg_connection *c, tr_job *k) {
    serve_http *h = mg_get_user_data(mg_get_context(c));
    if (pthread_mutex_init(&k->mu, NULL)) return -1;
    pthread_condattr_t ca;
    int cv_ok = !pthread_condattr_init(&ca) && !pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) &&
                !pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!cv_ok) {
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, tr_thread, k)) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    int sent = 0, started_text = 0;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        if (!k->head && !k->done) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 100 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&k->cv, &k->mu, &ts);
        }
        tr_piece *list = k->head;
        k->head = k->tail = NULL;
        const int done = k->done;
        pthread_mutex_unlock(&k->mu);
        /* a client that left: a stream's failed write, or (before anything was written) its closed connection */
        int gone = !done && (!k->stream || !sent) && h && serve_guard_client_gone(h->guard, c);
        while (list) {
            tr_piece *next = list->next;
            const char *d = list->text;
            if (!started_text) { /* the text starts at its first non-space: the deltas add up to it */
                while (space(*d)) d++;
                started_text = *d != 0;
            }
            if (!gone && *d) {
                if (!sent) serve_stream_start(c, "text/event-stream");
                sent = 1;
                json_object *e = json_object_new_object();
                json_object_object_add(e, "type", json_object_new_string("transcript.text.delta"));
                json_object_object_add(e, "delta", json_object_new_string(d));
                gone = serve_sse(c, e) != 0;
            }
            free(list);
            list = next;
        }
        pthread_mutex_lock(&k->mu);
        if (gone) k->gone = 1; /* the transcription stops at its next segment */
        if (done && !k->head) break;
    }
    pthread_mutex_unlock(&k->mu);
    pthread_join(t, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    return sent;
}

/* ---- the endpoint ---- */

typedef enum { FMT_JSON, FMT_TEXT, FMT_SRT, FMT_VERBOSE_JSON, FMT_VTT } tr_format;

/* Text for a message: v cut to at most max bytes, not inside a UTF-8 sequence, then "..." when cut. */
static const char *clip(const char *v, size_t max, char *out, size_t size) {
    size_t n = strlen(v);
    int cut = n > max;
    if (cut) {
        n = max;
        while (n && ((unsigned char)v[n] & 0xc0) == 0x80) n--; /* back to a character's first byte */
    }
    snprintf(out, size, "%.*s%s", (int)n, v, cut ? "..." : "");
    return out;
}

/* A field's value as a NUL-terminated string (copied into out): 0, or a 400 sent. */
static int field_text(struct mg_connection *c, const form_part *f, char *out, size_t size, int *status) {
    if (f->len >= size) {
        *status = serve_send_error(c, 400, f->name, NULL, "'%s' is longer than %zu bytes", f->name, size - 1);
        return -1;
    }
    if (memchr(f->data, 0, f->len) || !serve_utf8_valid(f->data, f->len)) {
        *status = serve_send_error(c, 400, f->name, NULL, "'%s' must be UTF-8 text without U+0000", f->name);
        return -1;
    }
    memcpy(out, f->data, f->len);
    out[f->len] = 0;
    return 0;
}

/* The request's fields into the job; 0, or the status of the 400 sent. */
static int read_fields(struct mg_connection *c, const form_part *parts, int n, tr_job *k, tr_format *fmt,
                       char *language, char *prompt) {
    int status = 0, seen_file = 0, want_words = 0, want_segments = 0;
    static const char *const once[] = {"model",  "language",  "prompt",     "response_format",
                                       "temperature", "stream", "max_tokens", "no_fallback"};
    int seen[sizeof once / sizeof once[0]] = {0};
    char v[FORM_MAX_FIELD + 1], shown[48];
    for (int i = 0; i < n; i++) {
        const form_part *f = &parts[i];
        if (!strcmp(f->name, "file")) {
            if (seen_file++) return serve_send_error(c, 400, "file", NULL, "'file' is given twice: send one audio file");
            k->audio = f->data;
            k->audio_len = f->len;
            /* the name messages show: UTF-8 of at most 100 bytes, else none */
            clip(f->filename, 100, k->name, sizeof k->name);
            if (!serve_utf8_valid((const unsigned char *)k->name, strlen(k->name))) k->name[0] = 0;
            continue;
        }
        for (size_t j = 0; j < sizeof once / sizeof once[0]; j++)
            if (!strcmp(f->name, once[j]) && seen[j]++)
                return serve_send_error(c, 400, f->name, NULL, "'%s' is given twice", f->name);
        if (!strcmp(f->name, "prompt")) {
            if (field_text(c, f, prompt, FORM_MAX_PROMPT + 1, &status)) return status;
            k->p.prompt = *prompt ? prompt : NULL;
            continue;
        }
        const int known = !strcmp(f->name, "language") || !strcmp(f->name, "response_format") ||
                          !strcmp(f->name, "temperature") || !strcmp(f->name, "stream") ||
                          !strcmp(f->name, "max_tokens") || !strcmp(f->name, "no_fallback") ||
                          !strcmp(f->name, "timestamp_granularities[]") || !strcmp(f->name, "timestamp_granularities");
        if (!known) continue; /* model, and what else a client sends: ignored */
        if (field_text(c, f, v, sizeof v, &status)) return status;
        if (!strcmp(f->name, "language")) {
            if (*v && strcmp(v, "auto")) {
                const char *code = cli_language_code(v);
                if (!code)
                    return serve_send_error(c, 400, "language", NULL,
                                            "'language' %s is not a Whisper language: give an ISO-639-1 code such as "
                                            "\"en\" or \"de\"", clip(v, 32, shown, sizeof shown));
                snprintf(language, 8, "%s", code);
                k->p.language = language;
            }
        } else if (!strcmp(f->name, "response_format")) {
            static const char *const names[] = {"json", "text", "srt", "verbose_json", "vtt"};
            int found = -1;
            for (int j = 0; j < 5; j++)
                if (!strcmp(v, names[j])) found = j;
            if (found < 0)
                return serve_send_error(c, 400, "response_format", NULL,
                                        "'response_format' %s is not one of json, text, srt, verbose_json, vtt",
                                        clip(v, 32, shown, sizeof shown));
            *fmt = (tr_format)found;
        } else if (!strcmp(f->name, "temperature")) {
            char *end;
            errno = 0;
            double t = strtod(v, &end);
            if (!*v || *end || errno || !(t >= 0 && t <= 1))
                return serve_send_error(c, 400, "temperature", NULL, "'temperature' must be a number from 0 to 1");
            k->p.temperature = (float)t;
        } else if (!strcmp(f->name, "stream") || !strcmp(f->name, "no_fallback")) {
            const int b = !strcasecmp(v, "true") ? 1 : !strcasecmp(v, "false") ? 0 : -1;
            if (b < 0) return serve_send_error(c, 400, f->name, NULL, "'%s' must be true or false", f->name);
            if (f->name[0] == 's') k->stream = b;
            else k->p.no_fallback = b;
        } else if (!strcmp(f->name, "max_tokens")) {
            char *end;
            errno = 0;
            long t = strtol(v, &end, 10);
            if (!*v || *end || errno || t < 1 || t > 448)
                return serve_send_error(c, 400, "max_tokens", NULL, "'max_tokens' must be an integer from 1 to 448");
            k->p.max_tokens = (int)t;
        } else { /* timestamp_granularities[] */
            if (!strcmp(v, "word")) want_words = 1;
            else if (!strcmp(v, "segment")) want_segments = 1;
            else
                return serve_send_error(c, 400, "timestamp_granularities[]", NULL,
                                        "'timestamp_granularities[]' %s is not \"segment\" or \"word\"",
                                        clip(v, 32, shown, sizeof shown));
        }
    }
    if (want_words && *fmt != FMT_VERBOSE_JSON)
        return serve_send_error(c, 400, "timestamp_granularities[]", NULL,
                                "word timestamps come in response_format verbose_json");
    k->p.word_timestamps = want_words;
    k->t.with_words = want_words;
    k->t.no_segments = want_words && !want_segments;
    if (!seen_file || !k->audio_len)
        return serve_send_error(c, 400, "file", NULL, "'file' is required: the audio, as a file part of the form");
    if (k->stream && *fmt != FMT_JSON && *fmt != FMT_TEXT)
        return serve_send_error(c, 400, "stream", NULL, "a stream is of text events: response_format json or text");
    return 0;
}

int serve_ep_transcribe(struct mg_connection *c, serve_server *s, int translate) {
    serve_model buf;
    const serve_model *sm = serve_model_for(s, WGML_TASK_TRANSCRIBE, &buf);
    const char *ct = mg_get_header(c, "Content-Type");
    char boundary[FORM_MAX_BOUNDARY + 64];
    if (!sm) {
        mg_disable_connection_keep_alive(c); /* its body is not read */
        return serve_no_task(c, s, translate ? "translate speech" : "transcribe speech");
    }
    if (!form_boundary(ct, boundary, sizeof boundary)) {
        mg_disable_connection_keep_alive(c);
        return serve_send_error(c, 415, NULL, "unsupported_media_type",
                                "the body must be a file upload sent as 'Content-Type: multipart/form-data; "
                                "boundary=...', not '%.60s'", ct ? ct : "(none)");
    }
    /* admission: bodies in memory are bounded before one is read */
    const int most = 1 + (s->max_queue < 3 ? s->max_queue : 3);
    pthread_mutex_lock(&s->mu);
    const int admitted = s->transcribe_busy < most;
    if (admitted) s->transcribe_busy++;
    pthread_mutex_unlock(&s->mu);
    if (!admitted) {
        mg_disable_connection_keep_alive(c);
        return serve_send_error(c, 503, NULL, NULL, "%d transcriptions are running or waiting; try again later", most);
    }
    char *body = NULL, *prompt = NULL;
    size_t len = 0;
    form_part *parts = NULL;
    int n_parts = 0, released = 0, status = serve_read_body(c, s, s->max_upload, &body, &len);
    if (status) goto done;
    char msg[512];
    parts = malloc(FORM_MAX_PARTS * sizeof *parts);
    prompt = malloc(FORM_MAX_PROMPT + 1);
    if (!parts || !prompt) {
        status = serve_send_error(c, 500, NULL, NULL, "out of memory");
        goto done;
    }
    if (form_parse((const unsigned char *)body, len, boundary, parts, &n_parts, msg, sizeof msg)) {
        status = serve_send_error(c, 400, NULL, NULL, "the multipart/form-data body is malformed: %s", msg);
        goto done;
    }
    tr_job k;
    memset(&k, 0, sizeof k);
    k.s = s;
    k.model = sm->model;
    k.p = wgml_transcribe_default_params();
    k.p.translate = translate;
    k.p.kv_type = s->kv;
    tr_format fmt = FMT_JSON;
    char language[8];
    if ((status = read_fields(c, parts, n_parts, &k, &fmt, language, prompt))) goto done;
    const int sent = run(c, &k);
    /* the transcription is over: its place (and its body's memory) is free before the answer goes out, so
     * that a client sending its next upload once it has this answer finds the place free */
    free(body);
    free(parts);
    body = NULL;
    parts = NULL;
    k.audio = NULL;
    pthread_mutex_lock(&s->mu);
    s->transcribe_busy--;
    pthread_mutex_unlock(&s->mu);
    released = 1;
    if (sent < 0) {
        status = serve_send_error(c, 500, NULL, NULL, "cannot start a thread for the transcription");
    } else if (k.gone) {
        if (sent) serve_stream_end(c);
        status = 499;
    } else if (k.stopped) {
        if (sent) serve_stream_end(c); /* cut short */
        status = sent ? 200 : serve_send_error(c, 503, NULL, NULL, "the server is shutting down");
    } else if (k.oom) {
        if (sent) serve_stream_end(c); /* cut short */
        status = sent ? 200 : serve_send_error(c, 500, NULL, NULL, "out of memory");
    } else if (k.bad_audio || k.st) {
        const int bad = k.bad_audio || k.st == WGML_ERR_INVALID_ARGUMENT;
        const char *text = k.bad_audio ? k.msg : k.err.message;
        const char *param = k.bad_audio || !strstr(text, "language") ? "file" : "language";
        if (sent) { /* a stream under way: an error event ends it */
            json_object *e = serve_error_object(text, bad ? "invalid_request_error" : "server_error", NULL, NULL);
            json_object_object_add(e, "type", json_object_new_string("error"));
            serve_sse(c, e);
            serve_stream_end(c);
            status = 200; /* what the client got */
        } else {
            status = bad ? serve_send_error(c, 400, param, NULL, "%s", text)
                         : serve_send_error(c, 500, NULL, NULL, "transcription failed: %s", text);
        }
    } else if (k.stream) {
        char *text = cli_transcript_text(&k.t);
        if (!sent) serve_stream_start(c, "text/event-stream");
        json_object *e = json_object_new_object();
        json_object_object_add(e, "type", json_object_new_string("transcript.text.done"));
        json_object_object_add(e, "text", json_object_new_string(text ? text : ""));
        serve_sse(c, e);
        serve_stream_end(c);
        free(text);
        status = 200;
    } else {
        static const cli_transcript_format cf[] = {CLI_TRANSCRIPT_JSON, CLI_TRANSCRIPT_TEXT, CLI_TRANSCRIPT_SRT,
                                                   CLI_TRANSCRIPT_VERBOSE_JSON, CLI_TRANSCRIPT_VTT};
        char *out;
        size_t n;
        /* a translation's language is English (OpenAI: "always english") */
        if (cli_transcript_render(&k.t, cf[fmt], translate ? "translate" : "transcribe",
                                  translate ? "en" : k.res.language, k.res.duration, &out, &n, msg, sizeof msg)) {
            status = serve_send_error(c, 500, NULL, NULL, "%s", msg);
        } else {
            const char *type = fmt == FMT_JSON || fmt == FMT_VERBOSE_JSON ? "application/json"
                               : fmt == FMT_VTT                          ? "text/vtt; charset=utf-8"
                                                                         : "text/plain; charset=utf-8";
            status = serve_send_body(c, 200, type, out, n, NULL, NULL);
            free(out);
        }
    }
    cli_transcript_free(&k.t);
done:
    if (!released) {
        pthread_mutex_lock(&s->mu);
        s->transcribe_busy--;
        pthread_mutex_unlock(&s->mu);
    }
    free(prompt);
    free(parts);
    free(body);
    return status;
}
