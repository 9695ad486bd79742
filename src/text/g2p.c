/*
 * g2p.c - the G2P object (normalize, split, phonemize the pieces, join,
 * post-process: kokoro-js's phonemize()) and its espeak-ng backend, which
 * runs the espeak-ng program as separate processes (see g2p.h).
 *
 * One espeak-ng process per piece, as the shared test data was checked
 * with: a process starts in a few milliseconds, and a piece in a process of
 * its own is read exactly as kokoro-js's phonemizer reads it (one
 * espeak_Synth of the whole piece; --stdin reads all of standard input at
 * once and drops its last byte, so a line end is sent after the piece;
 * without --stdin espeak-ng would read line by line, cutting lines at 999
 * bytes). Several pieces in one process cannot be told apart reliably: a
 * piece gives no, one or several output lines.
 * The pieces of a text run a few processes at a time. Each child's standard
 * input is a socket (send() with MSG_NOSIGNAL: a child that dies early
 * cannot raise SIGPIPE in the host program), its output and error output
 * are pipes; one poll() loop writes and reads them all, so neither side
 * can block the other whatever the sizes. Every descriptor is close-on-exec
 * so that a child holds only its own three.
 * A child is contained: it runs in a process group of its own with a time
 * limit that grows with its text (g2p.h), measured on the monotonic clock;
 * past it the group is killed (a shell script standing in for espeak-ng,
 * or audio code starting a helper, leaves no process behind) and the child
 * reaped. A child that closed its output is waited for without blocking,
 * so one that never exits is caught too. Its environment is built anew,
 * with only what espeak-ng reads (its data path and the locale) and PATH:
 * the host's secrets (WGML_API_KEY) never reach it. espeak-ng 1.51 reads
 * HOME only to look for ~/espeak-ng-data, which would change its phonemes
 * from user to user; ESPEAK_DATA_PATH names such data on purpose.
 */
#include "text/g2p.h"

#include "core/alloc.h"
#include "core/error.h"
#include "text/unicode.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ESPEAK_HINT "text input needs espeak-ng (apt-get install espeak-ng); phoneme input works without it"

struct wgml_g2p {
    wgml_g2p_backend be;
    char *name;
};

wgml_status wgml_g2p_open(const wgml_g2p_backend *backend, wgml_g2p **out, wgml_error *err) {
    if (out) *out = NULL;
    if (!backend || !out || !backend->phonemize_pieces) {
        if (backend && backend->free_user) backend->free_user(backend->user);
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_g2p_open: a backend with phonemize_pieces is needed");
    }
    wgml_g2p *g = wgml_calloc(1, sizeof *g);
    char *name = wgml_strdup(backend->name ? backend->name : "phonemizer");
    if (!g || !name) {
        wgml_free(g);
        wgml_free(name);
        if (backend->free_user) backend->free_user(backend->user);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening the phonemizer");
    }
    g->be = *backend;
    g->be.name = g->name = name;
    *out = g;
    return WGML_OK;
}

void wgml_g2p_free(wgml_g2p *g) {
    if (!g) return;
    if (g->be.free_user) g->be.free_user(g->be.user);
    wgml_free(g->name);
    wgml_free(g);
}

/* The number of non-space code points of s[0..len). */
static size_t count_nonspace(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        int cl;
        n += !g2p_en_space(uni_decode(s + i, len - i, &cl));
        i += (size_t)cl;
    }
    return n;
}

/* The words' phonemes said alone, from the backend (post-processed like the
 * whole), or when it has none or fails, their letters lower-cased: the
 * alignment then lines up the letters that IPA shares with English. Only
 * running out of memory fails. */
static wgml_status words_alone(wgml_g2p *g, int american, const char *norm, const g2p_span *w, size_t n, char **ph,
                               wgml_error *err) {
    wgml_status st = WGML_OK;
    char *buf = wgml_malloc(strlen(norm) + n + 1);
    const char **list = wgml_calloc(n ? n : 1, sizeof *list);
    if (!buf || !list) goto oom;
    char *p = buf;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, norm + w[i].off, w[i].len);
        p[w[i].len] = '\0';
        list[i] = p;
        p += w[i].len + 1;
    }
    int from_backend = 0;
    if (g->be.phonemize_words && n) {
        wgml_error e2;
        if (!g->be.phonemize_words(g->be.user, american ? "en-us" : "en-gb", list, n, ph, &e2)) {
            from_backend = 1;
            for (size_t i = 0; i < n && from_backend; i++) {
                char *pp = NULL;
                if (!ph[i] || g2p_check_utf8(ph[i], &e2)) {
                    from_backend = 0;
                } else if (!g2p_en_postprocess(ph[i], american, &pp, &e2)) {
                    wgml_free(ph[i]);
                    ph[i] = pp;
                }
            }
            if (!from_backend)
                for (size_t i = 0; i < n; i++) {
                    wgml_free(ph[i]);
                    ph[i] = NULL;
                }
        } else if (e2.code == WGML_ERR_OUT_OF_MEMORY) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s", e2.message);
            goto done;
        }
    }
    if (!from_backend)
        for (size_t i = 0; i < n; i++) {
            if (!(ph[i] = wgml_strdup(list[i]))) goto oom;
            for (char *q = ph[i]; *q; q++)
                if (*q >= 'A' && *q <= 'Z') *q = (char)(*q + 32);
        }
done:
    wgml_free(buf);
    wgml_free(list);
    return st;
oom:
    st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory phonemizing words");
    goto done;
}

/* Where the words are (wgml_g2p_phonemize_words): each piece aligned with
 * its words said alone gives every non-space code point of the joined
 * phonemes a word; the post-processing only adds and removes white space,
 * so the k-th non-space code point of the joined string is the k-th of the
 * final one. Normalized words then gather into the text's words. */
static wgml_status place_words(wgml_g2p *g, int american, const char *text, const char *norm, const g2p_span *spans,
                               size_t n_spans, char *const *results, const char *final, wgml_g2p_word **out_words,
                               size_t *out_n, wgml_error *err) {
    g2p_span *nw = NULL, *units = NULL;
    size_t n_nw = 0, n_units = 0, n_final = 0;
    char **alone = NULL;
    int *group = NULL, *labels = NULL;
    size_t *first = NULL, *last = NULL, *at = NULL;
    wgml_g2p_word *words = NULL;
    wgml_status st = g2p_en_words(norm, spans, n_spans, &nw, &n_nw, err);
    if (st || !n_nw) goto done;
    if (!(alone = wgml_calloc(n_nw, sizeof *alone)) || !(group = wgml_malloc(n_nw * sizeof *group)) ||
        !(first = wgml_malloc(n_nw * sizeof *first)) || !(last = wgml_malloc(n_nw * sizeof *last)))
        goto oom;
    if ((st = words_alone(g, american, norm, nw, n_nw, alone, err))) goto done;
    for (size_t w = 0; w < n_nw; w++)
        first[w] = SIZE_MAX, last[w] = 0;
    /* each piece: its words, aligned */
    size_t base = 0, w0 = 0;
    for (size_t i = 0, k = 0; i < n_spans; i++) {
        if (spans[i].punct) {
            base += count_nonspace(norm + spans[i].off, spans[i].len);
            continue;
        }
        const char *r = results[k++];
        const size_t nr = count_nonspace(r, strlen(r));
        size_t w1 = w0;
        while (w1 < n_nw && nw[w1].off < spans[i].off + spans[i].len)
            w1++;
        if (w1 > w0 && nr) {
            wgml_free(labels);
            if (!(labels = wgml_malloc(nr * sizeof *labels))) goto oom;
            if ((st = g2p_align_piece(r, (const char *const *)alone + w0, w1 - w0, labels, nr, err))) goto done;
            for (size_t c = 0; c < nr; c++) {
                const size_t w = w0 + (size_t)labels[c];
                if (first[w] == SIZE_MAX) first[w] = base + c;
                last[w] = base + c;
            }
        }
        base += nr;
        w0 = w1;
    }
    /* the byte offset of each non-space code point of the final string */
    const size_t flen = strlen(final);
    n_final = count_nonspace(final, flen);
    if (n_final != base) goto done; /* cannot happen with kokoro-js's post-processing; then no words */
    if (!(at = wgml_malloc((n_final + 1) * sizeof *at))) goto oom;
    for (size_t i = 0, c = 0; i < flen;) {
        int cl;
        if (!g2p_en_space(uni_decode(final + i, flen - i, &cl))) at[c++] = i;
        i += (size_t)cl;
    }
    at[n_final] = flen;
    if ((st = g2p_text_groups(text, norm, nw, n_nw, &units, &n_units, group, err))) goto done;
    if (!(words = wgml_malloc((n_units ? n_units : 1) * sizeof *words))) goto oom;
    size_t n = 0;
    for (size_t w = 0; w < n_nw;) {
        const int u = group[w];
        size_t a = SIZE_MAX, b = 0;
        for (; w < n_nw && group[w] == u; w++)
            if (first[w] != SIZE_MAX) {
                if (first[w] < a) a = first[w];
                if (last[w] > b) b = last[w];
            }
        if (a == SIZE_MAX) continue; /* said as nothing */
        const size_t end = at[b] + (size_t)uni_char_len(final + at[b], flen - at[b]);
        words[n++] = (wgml_g2p_word){units[u].off, units[u].len, at[a], end - at[a]};
    }
    *out_words = words;
    *out_n = n;
    words = NULL;
done:
    if (alone)
        for (size_t w = 0; w < n_nw; w++)
            wgml_free(alone[w]);
    wgml_free(alone);
    wgml_free(nw);
    wgml_free(units);
    wgml_free(group);
    wgml_free(labels);
    wgml_free(first);
    wgml_free(last);
    wgml_free(at);
    wgml_free(words);
    return st;
oom:
    st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory placing words in their phonemes");
    goto done;
}

static wgml_status phonemize(wgml_g2p *g, const char *lang, const char *text, char **out, wgml_g2p_word **words,
                             size_t *n_words, wgml_error *err) {
    const g2p_lang *L = g2p_lang_find(lang);
    if (!L)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown language '%s' (%s)", lang ? lang : "(null)",
                         g2p_lang_list());
    if (L->english < 0) { /* the official espeak G2P; no word times */
        wgml_status st = g2p_check_utf8(text, err);
        if (st) return st;
        st = g2p_espeak_official(L, text, g->be.phonemize_pieces, g->be.user, out, err);
        if (!st && (st = g2p_check_utf8(*out, err))) {
            wgml_free(*out);
            *out = NULL;
        }
        return st;
    }
    int american = L->english;
    char *norm = NULL, *buf = NULL, *joined = NULL;
    char **results = NULL;
    const char **pieces = NULL;
    g2p_span *spans = NULL;
    size_t n_spans = 0, n_pieces = 0;
    wgml_status st = g2p_en_normalize(text, &norm, err);
    if (!st) st = g2p_en_split(norm, &spans, &n_spans, err);
    if (st) goto done;
    for (size_t i = 0; i < n_spans; i++)
        n_pieces += !spans[i].punct;
    if (n_pieces) {
        /* every piece NUL-terminated in one buffer */
        buf = wgml_malloc(strlen(norm) + n_pieces + 1);
        pieces = wgml_calloc(n_pieces, sizeof *pieces);
        results = wgml_calloc(n_pieces, sizeof *results);
        if (!buf || !pieces || !results) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory phonemizing text");
            goto done;
        }
        char *p = buf;
        for (size_t i = 0, k = 0; i < n_spans; i++) {
            if (spans[i].punct) continue;
            memcpy(p, norm + spans[i].off, spans[i].len);
            p[spans[i].len] = '\0';
            pieces[k++] = p;
            p += spans[i].len + 1;
        }
        st = g->be.phonemize_pieces(g->be.user, american ? "en-us" : "en-gb", pieces, n_pieces, results, err);
        if (st) goto done;
        for (size_t k = 0; k < n_pieces; k++) {
            if (!results[k]) {
                st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s gave no phonemes for '%s'", g->name, pieces[k]);
                goto done;
            }
            if ((st = g2p_check_utf8(results[k], err)) != WGML_OK) {
                wgml_error_prefix(err, "%s's output for '%s'", g->name, pieces[k]);
                goto done;
            }
        }
    }
    /* the join: punctuation verbatim, each piece by its phonemes */
    size_t total = 1;
    for (size_t i = 0, k = 0; i < n_spans; i++)
        total += spans[i].punct ? spans[i].len : strlen(results[k++]);
    joined = wgml_malloc(total);
    if (!joined) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory phonemizing text");
        goto done;
    }
    char *q = joined;
    for (size_t i = 0, k = 0; i < n_spans; i++) {
        const char *s = spans[i].punct ? norm + spans[i].off : results[k++];
        size_t len = spans[i].punct ? spans[i].len : strlen(s);
        memcpy(q, s, len);
        q += len;
    }
    *q = '\0';
    st = g2p_en_postprocess(joined, american, out, err);
    if (!st && words) st = place_words(g, american, text, norm, spans, n_spans, results, *out, words, n_words, err);
    if (st && *out) {
        wgml_free(*out);
        *out = NULL;
    }
done:
    if (results)
        for (size_t k = 0; k < n_pieces; k++)
            wgml_free(results[k]);
    wgml_free(results);
    wgml_free(pieces);
    wgml_free(buf);
    wgml_free(joined);
    wgml_free(spans);
    wgml_free(norm);
    return st;
}

wgml_status wgml_g2p_phonemize(wgml_g2p *g, const char *lang, const char *text, char **out, wgml_error *err) {
    if (out) *out = NULL;
    if (!g || !text || !out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_g2p_phonemize: NULL argument");
    return phonemize(g, lang, text, out, NULL, NULL, err);
}

wgml_status wgml_g2p_phonemize_words(wgml_g2p *g, const char *lang, const char *text, char **out, wgml_g2p_word **words,
                                     size_t *n_words, wgml_error *err) {
    if (out) *out = NULL;
    if (words) *words = NULL;
    if (n_words) *n_words = 0;
    if (!g || !text || !out || !words || !n_words)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_g2p_phonemize_words: NULL argument");
    return phonemize(g, lang, text, out, words, n_words, err);
}

wgml_status wgml_g2p_open_espeak(const char *program, wgml_g2p **out, wgml_error *err) {
    return wgml_g2p_open_espeak_limit(program, WGML_G2P_ESPEAK_LIMIT_BASE_MS, WGML_G2P_ESPEAK_LIMIT_PER_KB_MS, out,
                                      err);
}

#if defined(__EMSCRIPTEN__) || defined(__wasi__)

wgml_status wgml_g2p_open_espeak_limit(const char *program, unsigned base_ms, unsigned per_kb_ms, wgml_g2p **out,
                                       wgml_error *err) {
    (void)program, (void)base_ms, (void)per_kb_ms;
    if (out) *out = NULL;
    return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                     "text input needs espeak-ng, which the WebAssembly build cannot run (no processes); "
                     "phoneme input works without it");
}

#else /* processes */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Processes at a time: each is short and mostly CPU. */
#define ESPEAK_MAX_JOBS     8
/* How much of a child's error output is kept for the message. */
#define ESPEAK_MSG_MAX      200
/* How much of a piece a time-out message quotes (it may be megabytes). */
#define ESPEAK_QUOTE_MAX    60
/* The longest wait between checks on a child that closed its output but
 * has not exited yet (espeak-ng exits right after: the first check or two). */
#define ESPEAK_REAP_WAIT_MS 50

typedef struct espeak_backend {
    char *program; /* the resolved path */
    int jobs;
    unsigned limit_base_ms, limit_per_kb_ms;
    char **envp; /* the children's environment, NULL-terminated, its strings in the same allocation */
} espeak_backend;

static void espeak_free(void *user) {
    espeak_backend *e = user;
    if (!e) return;
    wgml_free(e->program);
    wgml_free(e->envp);
    wgml_free(e);
}

/* The variables the children get, when set: espeak-ng's data path, the
 * locale (its UTF-8 handling), and PATH for a program that is a script. */
static const char *const espeak_env_names[] = {"PATH", "ESPEAK_DATA_PATH", "LANG", "LC_ALL", "LC_CTYPE"};
#define ESPEAK_ENV_N        (sizeof espeak_env_names / sizeof espeak_env_names[0])

/* Copies the kept variables out of the environment now (a later setenv
 * cannot pull pointers from under a spawn): one allocation, the pointers
 * first, then the "NAME=value" strings. */
static wgml_status espeak_make_env(espeak_backend *e, wgml_error *err) {
    const char *val[ESPEAK_ENV_N];
    size_t size = (ESPEAK_ENV_N + 1) * sizeof(char *);
    for (size_t i = 0; i < ESPEAK_ENV_N; i++)
        if ((val[i] = getenv(espeak_env_names[i]))) size += strlen(espeak_env_names[i]) + strlen(val[i]) + 2;
    char **envp = wgml_malloc(size);
    if (!envp) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening espeak-ng");
    char *p = (char *)(envp + ESPEAK_ENV_N + 1);
    size_t k = 0;
    for (size_t i = 0; i < ESPEAK_ENV_N; i++) {
        if (!val[i]) continue;
        envp[k++] = p;
        p += sprintf(p, "%s=%s", espeak_env_names[i], val[i]) + 1;
    }
    envp[k] = NULL;
    e->envp = envp;
    return WGML_OK;
}

/* Milliseconds on the monotonic clock: a time limit that the wall clock
 * (NTP, a manual change) cannot stretch or cut short. */
static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int executable_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* *out: name as given when it has a '/', else the first executable named
 * so on PATH; NULL when there is none. Fails only when out of memory. */
static wgml_status find_program(const char *name, char **out, wgml_error *err) {
    *out = NULL;
    if (strchr(name, '/')) {
        if (executable_file(name) && !(*out = wgml_strdup(name))) goto oom;
        return WGML_OK;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    size_t nlen = strlen(name);
    for (const char *p = path;;) {
        const char *e = strchr(p, ':');
        size_t dlen = e ? (size_t)(e - p) : strlen(p);
        char *cand = wgml_malloc(dlen + nlen + 3);
        if (!cand) goto oom;
        if (dlen)
            memcpy(cand, p, dlen);
        else
            cand[dlen++] = '.'; /* an empty entry is the current folder */
        cand[dlen] = '/';
        memcpy(cand + dlen + 1, name, nlen + 1);
        if (executable_file(cand)) {
            *out = cand;
            return WGML_OK;
        }
        wgml_free(cand);
        if (!e) return WGML_OK;
        p = e + 1;
    }
oom:
    return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory looking for espeak-ng");
}

/* ---- running the processes ---- */

typedef struct espeak_job {
    int used;
    pid_t pid;                  /* also its process group */
    int64_t limit_ms, deadline; /* deadline: now_ms() */
    int wait_ms;                /* the next wait for a child that closed its output, doubling */
    int fd_in, fd_out, fd_err;  /* -1 once closed */
    size_t index;               /* of the piece */
    const char *text;
    size_t len, sent; /* the piece, then one "\n" (English) */
    int nl;           /* 1: the line end follows. Not for the official non-English G2P, whose library call
                         sees the piece as it is: espeak-ng reads a lone "।" as a word then, and as the end
                         of a clause before a line end */
    char *buf;        /* standard output */
    size_t n, cap;
    char msg[ESPEAK_MSG_MAX + 1]; /* the start of the error output */
    size_t n_msg;
} espeak_job;

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Moves fd above the standard descriptors (so that the child's dup2 onto
 * 0-2 neither clobbers it nor leaves it close-on-exec), close-on-exec. */
static int above_stdio(int fd) {
    if (fd < 0 || fd > 2) return fd;
    int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return nfd;
}

static wgml_status job_start(const espeak_backend *e, const char *voice, int tie, espeak_job *j, size_t index,
                             const char *text, wgml_error *err) {
    int sv[2] = {-1, -1}, po[2] = {-1, -1}, pe[2] = {-1, -1};
    memset(j, 0, sizeof *j);
    j->fd_in = j->fd_out = j->fd_err = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(po, O_CLOEXEC) != 0 ||
        pipe2(pe, O_CLOEXEC) != 0) {
        int e0 = errno;
        for (int k = 0; k < 2; k++)
            close_fd(&sv[k]), close_fd(&po[k]), close_fd(&pe[k]);
        return wgml_fail(err, WGML_ERR_IO, "cannot make pipes for espeak-ng: %s", strerror(e0));
    }
    for (int k = 0; k < 2; k++)
        sv[k] = above_stdio(sv[k]), po[k] = above_stdio(po[k]), pe[k] = above_stdio(pe[k]);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc = -1, fa_ok = 0, at_ok = 0;
    if (sv[0] >= 0 && sv[1] >= 0 && po[0] >= 0 && po[1] >= 0 && pe[0] >= 0 && pe[1] >= 0) {
        rc = posix_spawn_file_actions_init(&fa);
        fa_ok = rc == 0;
        if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
        if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, po[1], 1);
        if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
        if (!rc) at_ok = (rc = posix_spawnattr_init(&at)) == 0;
        /* A process group of its own, for the kill at the time limit; and
         * signals as a plain program has them, whatever the host blocks or
         * ignores (a server ignores SIGPIPE: a child writing to a host that
         * is gone should die, not linger). */
        sigset_t none, dfl;
        sigemptyset(&none);
        sigemptyset(&dfl);
        sigaddset(&dfl, SIGPIPE);
        sigaddset(&dfl, SIGHUP);
        sigaddset(&dfl, SIGINT);
        sigaddset(&dfl, SIGTERM);
        if (!rc)
            rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        if (!rc) rc = posix_spawnattr_setpgroup(&at, 0);
        if (!rc) rc = posix_spawnattr_setsigmask(&at, &none);
        if (!rc) rc = posix_spawnattr_setsigdefault(&at, &dfl);
        if (!rc) {
            /* English as kokoro-js's phonemizer reads it; the other languages with '^' between the
             * letters of one phoneme, as the official G2P's library call writes them (g2p_lang.c) */
            char *argv_en[] = {e->program, "-q", "--ipa", "-v", (char *)voice, "--stdin", NULL};
            char *argv_tie[] = {e->program, "-q", "--ipa", "--tie=^", "-v", (char *)voice, "--stdin", NULL};
            rc = posix_spawn(&j->pid, e->program, &fa, &at, tie ? argv_tie : argv_en, e->envp);
        }
    } else {
        rc = errno ? errno : EMFILE;
    }
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    if (at_ok) posix_spawnattr_destroy(&at);
    close_fd(&sv[1]);
    close_fd(&po[1]);
    close_fd(&pe[1]);
    if (rc != 0) {
        close_fd(&sv[0]);
        close_fd(&po[0]);
        close_fd(&pe[0]);
        return wgml_fail(err, WGML_ERR_IO, "cannot run espeak-ng '%s': %s", e->program, strerror(rc));
    }
    j->used = 1;
    j->fd_in = sv[0];
    j->fd_out = po[0];
    j->fd_err = pe[0];
    fcntl(j->fd_in, F_SETFL, fcntl(j->fd_in, F_GETFL) | O_NONBLOCK);
    fcntl(j->fd_out, F_SETFL, fcntl(j->fd_out, F_GETFL) | O_NONBLOCK);
    fcntl(j->fd_err, F_SETFL, fcntl(j->fd_err, F_GETFL) | O_NONBLOCK);
    j->index = index;
    j->text = text;
    j->len = strlen(text);
    j->nl = !tie;
    /* the limit counts the bytes written: the piece and its line end */
    double limit = e->limit_base_ms + (double)(j->len + 1) * e->limit_per_kb_ms / 1000.0;
    j->limit_ms = limit < 1e9 ? (int64_t)limit : (int64_t)1e9; /* 11 days: no overflow in the sums below */
    j->deadline = now_ms() + j->limit_ms;
    j->wait_ms = 1;
    return WGML_OK;
}

/* Sends what the socket takes now; closes it when all is sent or the child
 * stopped reading (its exit status then tells). */
static void job_write(espeak_job *j) {
    while (j->fd_in >= 0) {
        if (j->sent == j->len + (size_t)j->nl) { /* all written (an empty piece without its line end) */
            close_fd(&j->fd_in);
            return;
        }
        const char *p = j->sent < j->len ? j->text + j->sent : "\n";
        size_t left = j->sent < j->len ? j->len - j->sent : 1;
        ssize_t w = send(j->fd_in, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            close_fd(&j->fd_in); /* EPIPE, ECONNRESET: the child is gone */
            return;
        }
        j->sent += (size_t)w;
        if (j->sent == j->len + (size_t)j->nl) close_fd(&j->fd_in);
    }
}

/* Reads what is there; returns 0, or -1 when out of memory. */
static int job_read(espeak_job *j, int which) {
    int *fd = which ? &j->fd_err : &j->fd_out;
    for (;;) {
        char tmp[4096];
        ssize_t r = read(*fd, tmp, sizeof tmp);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (r <= 0) {
            close_fd(fd);
            return 0;
        }
        if (which) {
            size_t take = ESPEAK_MSG_MAX - j->n_msg < (size_t)r ? ESPEAK_MSG_MAX - j->n_msg : (size_t)r;
            memcpy(j->msg + j->n_msg, tmp, take);
            j->n_msg += take;
            continue;
        }
        if (j->n + (size_t)r + 1 > j->cap) {
            size_t cap = j->cap ? j->cap : 256;
            while (cap < j->n + (size_t)r + 1)
                cap *= 2;
            char *nb = wgml_realloc(j->buf, cap);
            if (!nb) return -1;
            j->buf = nb;
            j->cap = cap;
        }
        memcpy(j->buf + j->n, tmp, (size_t)r);
        j->n += (size_t)r;
    }
}

/* Kills the child's process group and reaps the child, which SIGKILL makes
 * prompt; closes the job's descriptors. An unreaped child keeps its group
 * alive, so the kill cannot reach a group that is someone else's by now. */
static void job_kill(espeak_job *j) {
    int status;
    close_fd(&j->fd_in);
    close_fd(&j->fd_out);
    close_fd(&j->fd_err);
    if (kill(-j->pid, SIGKILL) != 0) kill(j->pid, SIGKILL);
    while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
        continue;
    j->used = 0;
}

/* Reaps the child, which closed its output, if it has exited: 1 with its
 * status, else 0. Never blocks: a child may close its output and hang. */
static int job_try_reap(espeak_job *j, int *status) {
    for (;;) {
        pid_t r = waitpid(j->pid, status, WNOHANG);
        if (r == 0) return 0;
        if (r > 0) break;
        if (errno == EINTR) continue;
        *status = 0; /* ECHILD: the host ignores SIGCHLD, children are reaped for it; the output is complete */
        break;
    }
    j->used = 0;
    return 1;
}

/* How many bytes of text a message quotes: at most ESPEAK_QUOTE_MAX, cut
 * between code points. */
static int quote_len(const char *text, size_t len) {
    if (len <= ESPEAK_QUOTE_MAX) return (int)len;
    size_t n = ESPEAK_QUOTE_MAX;
    while (n && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--;
    return (int)n;
}

static void job_clear(espeak_job *j) {
    wgml_free(j->buf);
    j->buf = NULL;
    j->n = j->cap = 0;
}

/* The error output's first line, for messages. */
static const char *job_message(espeak_job *j) {
    j->msg[j->n_msg] = '\0';
    char *nl = strchr(j->msg, '\n');
    if (nl) *nl = '\0';
    return j->n_msg ? j->msg : "no error output";
}

/* The finished job's standard output as it is. */
static wgml_status job_raw(espeak_job *j, char **out, wgml_error *err) {
    if (j->n && memchr(j->buf, '\0', j->n))
        return wgml_fail(err, WGML_ERR_FORMAT, "espeak-ng wrote a NUL byte for '%s'", j->text);
    char *s = wgml_malloc(j->n + 1);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory reading espeak-ng's output");
    if (j->n) memcpy(s, j->buf, j->n);
    s[j->n] = '\0';
    *out = s;
    return WGML_OK;
}

/* The finished job's output as kokoro-js's phonemizer gives it: its lines,
 * empty ones dropped, joined with a space. */
static wgml_status job_result(espeak_job *j, char **out, wgml_error *err) {
    char *s = wgml_malloc(j->n + 1), *q = s;
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory reading espeak-ng's output");
    if (j->n && memchr(j->buf, '\0', j->n)) {
        wgml_free(s);
        return wgml_fail(err, WGML_ERR_FORMAT, "espeak-ng wrote a NUL byte for '%s'", j->text);
    }
    for (size_t i = 0; i < j->n;) {
        const char *line = j->buf + i, *nl = memchr(line, '\n', j->n - i);
        size_t len = nl ? (size_t)(nl - line) : j->n - i;
        if (len) {
            if (q != s) *q++ = ' ';
            memcpy(q, line, len);
            q += len;
        }
        i += len + 1;
    }
    *q = '\0';
    *out = s;
    return WGML_OK;
}

/* Runs espeak-ng on each of n texts, a few processes at a time; out[i]
 * gets text i's output as job_result makes it, or with raw its standard
 * output as it is. */
static wgml_status espeak_run(const espeak_backend *e, const char *lang, const char *const *pieces, size_t n, int raw,
                              char **out, wgml_error *err) {
    const g2p_lang *L = g2p_lang_find(lang);
    const char *voice = L ? L->voice : "en-us";
    const int tie = L && L->english < 0; /* the official non-English G2P reads '^' ties */
    espeak_job jobs[ESPEAK_MAX_JOBS];
    struct pollfd pf[3 * ESPEAK_MAX_JOBS];
    int who[3 * ESPEAK_MAX_JOBS];
    const int n_jobs = e->jobs;
    wgml_status st = WGML_OK;
    size_t next = 0, active = 0;
    for (int k = 0; k < n_jobs; k++)
        jobs[k].used = 0;
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    while (!st && (next < n || active)) {
        for (int k = 0; k < n_jobs && next < n && !st; k++) {
            if (jobs[k].used) continue;
            st = job_start(e, voice, tie, &jobs[k], next, pieces[next], err);
            if (!st) {
                next++;
                active++;
                job_write(&jobs[k]);
            }
        }
        if (st) break;
        /* the wait: until the first deadline, or the next check on a child
         * that closed its output (no descriptor then; poll just sleeps) */
        int np = 0;
        int64_t now = now_ms(), wait = -1;
        for (int k = 0; k < n_jobs; k++) {
            espeak_job *j = &jobs[k];
            if (!j->used) continue;
            if (j->fd_in >= 0) pf[np] = (struct pollfd){j->fd_in, POLLOUT, 0}, who[np++] = 3 * k;
            if (j->fd_out >= 0) pf[np] = (struct pollfd){j->fd_out, POLLIN, 0}, who[np++] = 3 * k + 1;
            if (j->fd_err >= 0) pf[np] = (struct pollfd){j->fd_err, POLLIN, 0}, who[np++] = 3 * k + 2;
            int64_t left = j->deadline > now ? j->deadline - now : 0;
            if (j->fd_in < 0 && j->fd_out < 0 && j->fd_err < 0 && left > j->wait_ms) left = j->wait_ms;
            if (wait < 0 || left < wait) wait = left;
        }
        int ready = poll(pf, (nfds_t)np, (int)wait);
        if (ready < 0) {
            if (errno != EINTR) {
                st = wgml_fail(err, WGML_ERR_IO, "waiting for espeak-ng: %s", strerror(errno));
                break;
            }
            np = 0; /* a signal: no events, but the deadlines below are checked */
        }
        for (int p = 0; p < np && !st; p++) {
            if (!pf[p].revents) continue;
            espeak_job *j = &jobs[who[p] / 3];
            int which = who[p] % 3;
            if (which == 0)
                job_write(j);
            else if (job_read(j, which - 1) < 0)
                st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory reading espeak-ng's output");
        }
        for (int k = 0; k < n_jobs && !st; k++) {
            espeak_job *j = &jobs[k];
            if (!j->used || j->fd_in >= 0 || j->fd_out >= 0 || j->fd_err >= 0) continue;
            int status;
            if (!job_try_reap(j, &status)) {
                j->wait_ms = j->wait_ms * 2 < ESPEAK_REAP_WAIT_MS ? j->wait_ms * 2 : ESPEAK_REAP_WAIT_MS;
                continue;
            }
            active--;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                st = raw ? job_raw(j, &out[j->index], err) : job_result(j, &out[j->index], err);
            } else if (WIFEXITED(status)) {
                st = wgml_fail(err, WGML_ERR_IO, "espeak-ng (%s -v %s) failed with exit status %d on '%s': %s",
                               e->program, voice, WEXITSTATUS(status), j->text, job_message(j));
            } else {
                int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
                st = wgml_fail(err, WGML_ERR_IO, "espeak-ng (%s) was killed by signal %d (%s) on '%s'", e->program, sig,
                               strsignal(sig), j->text);
            }
            job_clear(j);
        }
        /* past its limit (checked after the reaping: an answer that came
         * in time is taken): the cleanup below kills it */
        now = now_ms();
        for (int k = 0; k < n_jobs && !st; k++) {
            espeak_job *j = &jobs[k];
            if (!j->used || now < j->deadline) continue;
            const int q = quote_len(j->text, j->len);
            const char *more = (size_t)q < j->len ? "..." : "";
            st = wgml_fail(err, WGML_ERR_IO, "espeak-ng gave no answer within %.1f s (killed): %s -v %s on '%.*s%s'",
                           (double)j->limit_ms / 1000.0, e->program, voice, q, j->text, more);
        }
    }
    if (st) {
        for (int k = 0; k < n_jobs; k++) {
            if (!jobs[k].used) continue;
            job_kill(&jobs[k]);
            job_clear(&jobs[k]);
        }
        for (size_t i = 0; i < n; i++) {
            wgml_free(out[i]);
            out[i] = NULL;
        }
    }
    return st;
}

static wgml_status espeak_pieces(void *user, const char *lang, const char *const *pieces, size_t n, char **out,
                                 wgml_error *err) {
    return espeak_run(user, lang, pieces, n, 0, out, err);
}

/* The words said alone, all in one process: each word a paragraph of its
 * own (a blank line between words), which espeak-ng says as one output
 * line, empty when the word says nothing ("-"). Any other count of lines
 * fails (the G2P then places words by their letters). */
static wgml_status espeak_words(void *user, const char *lang, const char *const *words, size_t n, char **out,
                                wgml_error *err) {
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
        total += strlen(words[i]) + 2;
        if (strchr(words[i], '\n') || !words[i][0])
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "a word to phonemize is empty or has a line end");
    }
    char *text = wgml_malloc(total), *raw = NULL;
    if (!text) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory phonemizing words");
    char *p = text;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(words[i]);
        memcpy(p, words[i], l);
        p += l;
        if (i + 1 < n) *p++ = '\n', *p++ = '\n';
    }
    *p = '\0';
    const char *one[1] = {text};
    wgml_status st = espeak_run(user, lang, one, 1, 1, &raw, err);
    wgml_free(text);
    if (st) return st;
    size_t lines = 0, len = strlen(raw);
    if (len && raw[len - 1] == '\n') raw[--len] = '\0';
    for (size_t i = 0; i <= len; i++)
        lines += i == len || raw[i] == '\n';
    if (lines != n) {
        wgml_free(raw);
        return wgml_fail(err, WGML_ERR_FORMAT, "espeak-ng said %zu words as %zu lines", n, lines);
    }
    const char *line = raw;
    for (size_t i = 0; i < n; i++) {
        const char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line) : strlen(line);
        if (!(out[i] = wgml_malloc(l + 1))) {
            for (size_t k = 0; k < i; k++) {
                wgml_free(out[k]);
                out[k] = NULL;
            }
            wgml_free(raw);
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory phonemizing words");
        }
        memcpy(out[i], line, l);
        out[i][l] = '\0';
        line += l + 1;
    }
    wgml_free(raw);
    return WGML_OK;
}

wgml_status wgml_g2p_open_espeak_limit(const char *program, unsigned base_ms, unsigned per_kb_ms, wgml_g2p **out,
                                       wgml_error *err) {
    if (out) *out = NULL;
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_g2p_open_espeak: NULL argument");
    const char *from = "";
    if (!program || !*program) {
        const char *env = getenv("WGML_ESPEAK");
        if (env && *env)
            program = env, from = " (from WGML_ESPEAK)";
        else
            program = "espeak-ng";
    }
    espeak_backend *e = wgml_calloc(1, sizeof *e);
    if (!e) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening espeak-ng");
    wgml_status st = find_program(program, &e->program, err);
    if (!st && e->program) st = espeak_make_env(e, err);
    if (st || !e->program) {
        espeak_free(e);
        if (st) return st;
        if (strchr(program, '/'))
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "'%s'%s is not an executable file: " ESPEAK_HINT, program,
                             from);
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "'%s'%s was not found on PATH: " ESPEAK_HINT, program, from);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    e->jobs = cpus < 2 ? 2 : cpus > ESPEAK_MAX_JOBS ? ESPEAK_MAX_JOBS : (int)cpus;
    e->limit_base_ms = base_ms;
    e->limit_per_kb_ms = per_kb_ms;
    wgml_g2p_backend be = {"espeak-ng", espeak_pieces, espeak_free, e, espeak_words};
    return wgml_g2p_open(&be, out, err);
}

#endif
