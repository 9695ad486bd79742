/*
 * fetch.c - wgml_model_fetch: a model named by URL or Hugging Face name
 * (net/hub.h) found in the cache or downloaded into it (net/http.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/cache_dir.h"
#include "core/error.h"
#include "core/hash.h"
#include "net/http.h"
#include "net/hub.h"

#define FETCH_LIST_MAX ((size_t)32 << 20) /* bytes of a repository's file list */
#define FETCH_PATH_MAX 4096

wgml_fetch_params wgml_fetch_default_params(void) {
    wgml_fetch_params p;
    memset(&p, 0, sizeof p);
    return p;
}

int wgml_model_is_remote(const char *model) {
    wgml_hub_spec s;
    return model && wgml_hub_parse(model, 1, &s, NULL) == WGML_OK && s.kind != WGML_HUB_LOCAL;
}

typedef struct fetch_ctx {
    const wgml_fetch_params *p;
    char models[FETCH_PATH_MAX]; /* the cache's models folder */
    char endpoint[512];          /* Hugging Face, without a trailing '/' */
    const char *token;           /* for the endpoint only */
    int offline;
} fetch_ctx;

static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
}

static wgml_status models_dir(const wgml_fetch_params *p, char *out, size_t cap, wgml_error *err) {
    int n = -1;
    const char *dir = getenv("WGML_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (p->cache_dir && *p->cache_dir) {
        n = snprintf(out, cap, "%s", p->cache_dir);
    } else if (dir && *dir) {
        if (strcasecmp(dir, "off") == 0)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "a model by URL is kept in a cache, and WGML_CACHE_DIR=off turns caches off: set it to a "
                             "folder");
        n = snprintf(out, cap, "%s/models", dir);
    } else if (xdg && xdg[0] == '/') {
        n = snprintf(out, cap, "%s/wgml/models", xdg);
    } else if (home && *home) {
        n = snprintf(out, cap, "%s/.cache/wgml/models", home);
    } else {
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "no folder for downloaded models: set WGML_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
    }
    if (n <= 0 || (size_t)n >= cap) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the cache folder's path is too long");
    return WGML_OK;
}

/* ---- FILE.meta: what the cached copy was checked against ---- */

typedef struct meta {
    char url[WGML_HUB_URL_MAX];
    char etag[160];
    char modified[64]; /* Last-Modified, for servers without ETags */
    char sha256[65];
    long long size;
} meta;

static int read_meta(const char *dest, meta *m) {
    memset(m, 0, sizeof *m);
    m->size = -1;
    char path[FETCH_PATH_MAX + 8], line[WGML_HUB_URL_MAX + 16];
    if (snprintf(path, sizeof path, "%s.meta", dest) >= (int)sizeof path) return -1;
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    while (fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *v = strchr(line, ' ');
        if (!v) continue;
        *v++ = '\0';
        if (!strcmp(line, "url")) snprintf(m->url, sizeof m->url, "%s", v);
        else if (!strcmp(line, "etag")) snprintf(m->etag, sizeof m->etag, "%s", v);
        else if (!strcmp(line, "modified")) snprintf(m->modified, sizeof m->modified, "%s", v);
        else if (!strcmp(line, "sha256") && strlen(v) == 64) snprintf(m->sha256, sizeof m->sha256, "%s", v);
        else if (!strcmp(line, "size")) m->size = strtoll(v, NULL, 10);
    }
    fclose(fp);
    return m->url[0] ? 0 : -1;
}

static void write_meta(const char *dest, const meta *m) {
    char path[FETCH_PATH_MAX + 8], tmp[FETCH_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s.meta", dest);
    snprintf(tmp, sizeof tmp, "%s.meta.tmp", dest);
    FILE *fp = fopen(tmp, "wb");
    if (!fp) return;
    int ok = fprintf(fp, "url %s\netag %s\nmodified %s\nsha256 %s\nsize %lld\n", m->url, m->etag, m->modified,
                     m->sha256, m->size) > 0;
    if (fclose(fp) == 0 && ok) rename(tmp, path);
    else remove(tmp);
}

static int regular_file(const char *path, long long *size) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    if (size) *size = (long long)sb.st_size;
    return 1;
}

/* One file: url into dest. size/sha256: what the file list says it is (-1 / NULL when not known). */
static wgml_status fetch_one(const fetch_ctx *c, const char *url, const char *dest, long long size, const char *sha256,
                             int with_token, wgml_error *err) {
    char show[600];
    wgml_http_url_shown(url, show, sizeof show);
    long long have_size = -1;
    int have = regular_file(dest, &have_size);
    if (c->offline) {
        if (have) return WGML_OK;
        return wgml_fail(err, WGML_ERR_NETWORK,
                         "%s is not in the cache (%s), and wgml is offline (WGML_OFFLINE or HF_HUB_OFFLINE)", show, dest);
    }
    meta m;
    int known = have && read_meta(dest, &m) == 0 && strcmp(m.url, url) == 0 && m.size == have_size;
    if (known && sha256 && !strcmp(m.sha256, sha256) && (size < 0 || m.size == size)) return WGML_OK;
    /* a server that gave neither ETag nor Last-Modified: nothing to revalidate with, and
     * fetching the whole file on every use would be worse than keeping it */
    if (known && !sha256 && !m.etag[0] && !m.modified[0]) return WGML_OK;

    /* the folder, then the lock that keeps two processes from writing the same file */
    char dir[FETCH_PATH_MAX], lockp[FETCH_PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", dest);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    if (slash && wgml_make_dirs(dir) != 0)
        return wgml_fail(err, WGML_ERR_IO, "cannot make the cache folder '%s': %s", dir, strerror(errno));
    /* MODELS/.locks/HASH: one small file per cached file, kept (deleting a lock another process
     * waits on would let a third one in beside it) */
    snprintf(lockp, sizeof lockp, "%s/.locks", c->models);
    if (wgml_make_dirs(lockp) != 0)
        return wgml_fail(err, WGML_ERR_IO, "cannot make the cache folder '%s': %s", lockp, strerror(errno));
    snprintf(lockp, sizeof lockp, "%s/.locks/%016llx", c->models,
             (unsigned long long)wgml_fnv64(WGML_FNV64_BASIS, dest, strlen(dest)));
    int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0) return wgml_fail(err, WGML_ERR_IO, "cannot open '%s': %s", lockp, strerror(errno));
    while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {
    }
    /* another process may have fetched it while this one waited */
    have = regular_file(dest, &have_size);
    known = have && read_meta(dest, &m) == 0 && strcmp(m.url, url) == 0 && m.size == have_size;
    wgml_status st = WGML_OK;
    if (known && sha256 && !strcmp(m.sha256, sha256) && (size < 0 || m.size == size)) goto done;

    wgml_http_expect ex = {.size = size};
    if (sha256) snprintf(ex.sha256, sizeof ex.sha256, "%s", sha256);
    ex.etag = known && m.etag[0] ? m.etag : NULL;
    ex.modified = known && m.modified[0] ? m.modified : NULL;
    wgml_http_opts o = {with_token ? c->token : NULL, c->p->progress, c->p->progress_user, c->p->log, c->p->log_user};
    wgml_http_result r;
    st = wgml_http_download(url, dest, &ex, &o, &r, err);
    if (st && have && r.status == 0 && st == WGML_ERR_NETWORK) { /* no connection: the copy there will do */
        wgml_note(c->p->log, c->p->log_user, "using the cached copy: %s", err ? err->message : show);
        st = WGML_OK;
        goto done;
    }
    if (!st && !r.not_modified) {
        meta w;
        memset(&w, 0, sizeof w);
        snprintf(w.url, sizeof w.url, "%s", url);
        snprintf(w.etag, sizeof w.etag, "%s", r.etag);
        snprintf(w.modified, sizeof w.modified, "%s", r.modified);
        snprintf(w.sha256, sizeof w.sha256, "%s", r.sha256);
        w.size = r.size;
        write_meta(dest, &w);
    }
done:
    flock(lock, LOCK_UN);
    close(lock);
    return st;
}

/* ---- a repository's files as the cache holds them (offline) ---- */

typedef struct list {
    wgml_hub_file *f;
    char **names;
    int n, cap;
} list;

static int skip_cached(const char *name) {
    static const char *const ends[] = {".meta", ".part", ".etag", ".lock", ".tmp"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
        size_t k = strlen(ends[i]);
        if (n >= k && strcmp(name + n - k, ends[i]) == 0) return 1;
    }
    return name[0] == '.';
}

static int scan(const char *root, const char *rel, int depth, list *l) {
    char path[FETCH_PATH_MAX];
    if (snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel) >= (int)sizeof path) return 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (skip_cached(e->d_name)) continue;
        char sub[FETCH_PATH_MAX], full[FETCH_PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= (int)sizeof sub) continue;
        if (snprintf(full, sizeof full, "%s/%s", root, sub) >= (int)sizeof full) continue;
        struct stat sb;
        if (stat(full, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            if (depth < 8) rc = scan(root, sub, depth + 1, l);
            continue;
        }
        if (!S_ISREG(sb.st_mode) || !wgml_hub_safe_path(sub)) continue;
        if (l->n == l->cap) {
            int cap = l->cap ? 2 * l->cap : 64;
            wgml_hub_file *f = wgml_realloc(l->f, (size_t)cap * sizeof *f);
            if (f) l->f = f;
            char **names = f ? wgml_realloc(l->names, (size_t)cap * sizeof *names) : NULL;
            if (names) l->names = names;
            if (!f || !names) {
                rc = -1;
                break;
            }
            l->cap = cap;
        }
        if (!(l->names[l->n] = wgml_strdup(sub))) {
            rc = -1;
            break;
        }
        l->f[l->n] = (wgml_hub_file){l->names[l->n], (int64_t)sb.st_size, NULL};
        l->n++;
    }
    closedir(d);
    return rc;
}

static void list_free(list *l) {
    for (int i = 0; i < l->n; i++) wgml_free(l->names[i]);
    wgml_free(l->names);
    wgml_free(l->f);
}

/* ---- the forms ---- */

static wgml_status join(char *out, size_t cap, wgml_error *err, const char *a, const char *b, const char *c) {
    int n = snprintf(out, cap, "%s/%s%s%s", a, b, c && *c ? "/" : "", c ? c : "");
    if (n <= 0 || (size_t)n >= cap) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the cache path is too long");
    return WGML_OK;
}

static wgml_status fetch_repo(const fetch_ctx *c, const wgml_hub_spec *s, char *path, size_t cap, wgml_error *err) {
    char repo_dir[FETCH_PATH_MAX], url[WGML_HUB_URL_MAX + 600], dest[FETCH_PATH_MAX];
    char who[200];
    snprintf(who, sizeof who, "%s/%s", s->owner, s->repo);
    wgml_status st = join(repo_dir, sizeof repo_dir, err, c->models, "hf", who);
    if (st) return st;
    if (s->file[0]) { /* a file named */
        snprintf(url, sizeof url, "%s/%s/resolve/main/%s", c->endpoint, who, s->file);
        if ((st = join(dest, sizeof dest, err, repo_dir, s->file, NULL))) return st;
        if ((st = fetch_one(c, url, dest, -1, NULL, 1, err))) return st;
        if (strlen(dest) >= cap) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the cache path is too long");
        strcpy(path, dest);
        return WGML_OK;
    }
    /* a file to choose: from the repository's list, or offline (or with no connection) from the cache */
    wgml_hub_file *files = NULL;
    int n = 0, from_cache = c->offline;
    list l = {0};
    if (!c->offline) {
        char *body = NULL;
        size_t len = 0;
        long status = 0;
        snprintf(url, sizeof url, "%s/api/models/%s/tree/main?recursive=true", c->endpoint, who);
        wgml_http_opts o = {c->token, NULL, NULL, c->p->log, c->p->log_user};
        st = wgml_http_get(url, FETCH_LIST_MAX, &o, &body, &len, &status, err);
        if (!st) {
            st = wgml_hub_parse_tree(body, len, &files, &n, err);
            wgml_free(body);
            if (st) wgml_error_prefix(err, "hf://%s", who);
        } else if (status == 0 && st == WGML_ERR_NETWORK) {
            wgml_note(c->p->log, c->p->log_user, "looking in the cache: %s", err ? err->message : who);
            from_cache = 1, st = WGML_OK;
        }
        if (st) return st;
    }
    if (from_cache) {
        if (scan(repo_dir, "", 0, &l)) {
            list_free(&l);
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        }
        files = l.f, n = l.n;
        if (n == 0) {
            list_free(&l);
            return wgml_fail(err, WGML_ERR_NETWORK, "hf://%s: nothing of it is in the cache (%s)%s", who, repo_dir,
                             c->offline ? ", and wgml is offline (WGML_OFFLINE or HF_HUB_OFFLINE)" : "");
        }
    }
    int *idx = wgml_malloc((size_t)(n ? n : 1) * sizeof *idx), folder = 0, k = 0;
    if (!idx) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st && !(k = wgml_hub_pick(files, n, s->tag, idx, &folder, err))) {
        wgml_error_prefix(err, "hf://%s%s", who, from_cache ? " (in the cache)" : "");
        st = err ? err->code : WGML_ERR_INVALID_ARGUMENT;
    }
    for (int i = 0; !st && i < k; i++) {
        const wgml_hub_file *f = &files[idx[i]];
        snprintf(url, sizeof url, "%s/%s/resolve/main/%s", c->endpoint, who, f->path);
        st = join(dest, sizeof dest, err, repo_dir, f->path, NULL);
        if (!st) st = fetch_one(c, url, dest, from_cache ? -1 : f->size, f->sha256, 1, err);
    }
    if (!st) {
        const char *result = folder ? repo_dir : dest;
        if (strlen(result) >= cap) st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the cache path is too long");
        else strcpy(path, result);
    }
    wgml_free(idx);
    if (from_cache) list_free(&l);
    else wgml_free(files);
    return st;
}

wgml_status wgml_model_fetch(const char *model, const wgml_fetch_params *params, char *path, size_t cap,
                             wgml_error *err) {
    if (!path || cap == 0) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_fetch: no room for the path");
    path[0] = '\0';
    wgml_hub_spec *s = wgml_malloc(sizeof *s);
    fetch_ctx *c = wgml_malloc(sizeof *c);
    wgml_fetch_params defaults = wgml_fetch_default_params();
    wgml_status st = s && c ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = wgml_hub_parse(model, 1, s, err);
    if (!st && s->kind == WGML_HUB_LOCAL) {
        if (strlen(model) >= cap) st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_fetch: the path is too long");
        else strcpy(path, model);
        goto out;
    }
    if (!st) {
        memset(c, 0, sizeof *c);
        c->p = params ? params : &defaults;
        c->offline = c->p->offline || env_on("WGML_OFFLINE") || env_on("HF_HUB_OFFLINE");
#ifndef WGML_HAVE_CURL
        if (!c->offline) /* before anything is written into the cache */
            st = wgml_fail(err, WGML_ERR_UNSUPPORTED,
                           "'%.200s': this build of wgml has no HTTP client (libcurl) for models by URL", model);
#endif
    }
    if (!st) {
        st = models_dir(c->p, c->models, sizeof c->models, err);
    }
    if (!st) {
        const char *ep = getenv("HF_ENDPOINT");
        if (!ep || !*ep) ep = "https://huggingface.co";
        size_t n = strlen(ep);
        while (n && ep[n - 1] == '/') n--;
        if ((strncasecmp(ep, "http://", 7) && strncasecmp(ep, "https://", 8)) || n >= sizeof c->endpoint)
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "HF_ENDPOINT is not an http:// or https:// URL");
        else
            memcpy(c->endpoint, ep, n), c->endpoint[n] = '\0';
        c->token = c->p->hf_token && *c->p->hf_token ? c->p->hf_token : getenv("HF_TOKEN");
        if (!c->token || !*c->token) c->token = getenv("HUGGING_FACE_HUB_TOKEN");
    }
    if (!st && s->kind == WGML_HUB_URL) {
        char rel[FETCH_PATH_MAX], dest[FETCH_PATH_MAX];
        size_t el = strlen(c->endpoint);
        /* the token goes with a URL of the Hugging Face host only */
        int hf = strncasecmp(s->url, c->endpoint, el) == 0 && s->url[el] == '/';
        if (wgml_hub_url_cache_path(s->url, rel, sizeof rel))
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the model's URL is too long for a cache path");
        if (!st) st = join(dest, sizeof dest, err, c->models, rel, NULL);
        if (!st) st = fetch_one(c, s->url, dest, -1, NULL, hf, err);
        if (!st && strlen(dest) >= cap) st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the cache path is too long");
        if (!st) strcpy(path, dest);
    } else if (!st) {
        st = fetch_repo(c, s, path, cap, err);
    }
out:
    wgml_free(s);
    wgml_free(c);
    return st;
}
