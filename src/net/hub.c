/*
 * hub.c - the names of remote models, their cache paths, and choosing a
 * file from a repository's list (hub.h).
 */
#include "net/hub.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "chat/jinja_impl.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#define HUB_MAX_FILES 20000

static int name_char(int c) { return isalnum(c) || c == '.' || c == '_' || c == '-'; }

/* A repository owner or name: [A-Za-z0-9._-], not starting with '.' or '-', 1..95 bytes. */
static int copy_name(const char *s, size_t n, char *out, size_t cap) {
    if (n == 0 || n >= cap || s[0] == '.' || s[0] == '-') return -1;
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)s[i])) return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int wgml_hub_safe_path(const char *p) {
    size_t len = strlen(p);
    if (len == 0 || len > 400) return 0;
    int parts = 0;
    for (const char *s = p;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || s[0] == '.' || ++parts > 8) return 0;
        for (size_t i = 0; i < n; i++)
            if (!name_char((unsigned char)s[i])) return 0;
        if (!e) return 1;
        s = e + 1;
    }
}

/* "owner/repo[:tag]" or "owner/repo/file" (file allowed when with_file). */
static wgml_status parse_repo(const char *s, int with_file, wgml_hub_spec *out, const char *model, wgml_error *err) {
    const char *slash = strchr(s, '/');
    if (!slash || copy_name(s, (size_t)(slash - s), out->owner, sizeof out->owner))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "'%.200s': a Hugging Face model is OWNER/REPO (letters, digits, '.', '_', '-')", model);
    const char *rest = slash + 1, *slash2 = strchr(rest, '/'), *colon = strchr(rest, ':');
    if (slash2 && (!colon || slash2 < colon)) {
        if (!with_file || copy_name(rest, (size_t)(slash2 - rest), out->repo, sizeof out->repo))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "'%.200s': not OWNER/REPO[:TAG]", model);
        const char *file = slash2 + 1;
        if (!wgml_hub_safe_path(file) || strlen(file) >= sizeof out->file)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "'%.200s': the file's path may hold only letters, digits, '.', '_', '-' and '/'", model);
        strcpy(out->file, file);
        return WGML_OK;
    }
    size_t rn = colon ? (size_t)(colon - rest) : strlen(rest);
    if (copy_name(rest, rn, out->repo, sizeof out->repo))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "'%.200s': a Hugging Face model is OWNER/REPO (letters, digits, '.', '_', '-')", model);
    if (colon && copy_name(colon + 1, strlen(colon + 1), out->tag, sizeof out->tag))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "'%.200s': the tag after ':' is a quantization such as Q4_K_M",
                         model);
    return WGML_OK;
}

wgml_status wgml_hub_parse(const char *model, int check_local, wgml_hub_spec *s, wgml_error *err) {
    memset(s, 0, sizeof *s);
    if (!model) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "no model named");
    struct stat sb;
    if (check_local && stat(model, &sb) == 0) return WGML_OK;
    if (strncasecmp(model, "http://", 7) == 0 || strncasecmp(model, "https://", 8) == 0) {
        size_t n = strlen(model);
        if (n >= sizeof s->url)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the model's URL is longer than %zu bytes",
                             sizeof s->url - 1);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)model[i] <= ' ' || model[i] == 0x7f)
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "the model's URL has a space or control character (write it %%-encoded)");
        if (wgml_hub_url_cache_path(model, NULL, 0) != 0)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "'%.200s': the URL has no host", model);
        memcpy(s->url, model, n + 1);
        s->kind = WGML_HUB_URL;
        return WGML_OK;
    }
    if (strncmp(model, "hf://", 5) == 0) {
        wgml_status st = parse_repo(model + 5, 1, s, model, err);
        if (!st) s->kind = WGML_HUB_HF;
        return st;
    }
    /* owner/repo:TAG - only with the tag (a bare owner/repo is a path), and no other ':' or '/' */
    const char *colon = strchr(model, ':'), *slash = strchr(model, '/');
    if (colon && slash && slash < colon && !strchr(slash + 1, '/') && !strchr(colon + 1, ':') && model[0] != '/' &&
        model[0] != '.') {
        wgml_hub_spec t;
        memset(&t, 0, sizeof t);
        if (parse_repo(model, 0, &t, model, NULL) == WGML_OK && t.tag[0]) {
            *s = t;
            s->kind = WGML_HUB_HF;
        }
    }
    return WGML_OK;
}

/* Appends s[0..n) reduced to [A-Za-z0-9._-] ("." and ".." made "_"), and a '/'. */
static int put_part(char *out, size_t cap, size_t *k, const char *s, size_t n) {
    if (n == 0) return 0;
    int dots = (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
    if (n > 200) return -1;
    for (size_t i = 0; i < n; i++) {
        if (*k + 2 >= cap) return -1;
        char c = s[i];
        out[(*k)++] = dots ? '_' : name_char((unsigned char)c) ? c : '_';
    }
    if (*k + 2 >= cap) return -1;
    out[(*k)++] = '/';
    out[*k] = '\0';
    return 0;
}

int wgml_hub_url_cache_path(const char *url, char *out, size_t cap) {
    const char *p = strstr(url, "://");
    if (!p) return -1;
    const char *host = p + 3, *end = host;
    while (*end && *end != '/' && *end != '?' && *end != '#') end++;
    for (const char *q = host; q < end; q++)
        if (*q == '@') host = q + 1; /* user:password@ is never part of a path */
    if (host == end) return -1;
    if (!out) return 0; /* only the check */
    char buf[WGML_HUB_URL_MAX + 64];
    size_t k = 0;
    buf[0] = '\0';
    if (put_part(buf, sizeof buf, &k, "url", 3) || put_part(buf, sizeof buf, &k, host, (size_t)(end - host)))
        return -1;
    for (char *c = buf + 4; *c; c++)
        if (*c == ':') *c = '_';
    const char *path = end, *q = path;
    while (*q && *q != '?' && *q != '#') q++;
    const char *query = *q == '?' ? q + 1 : NULL;
    const char *qend = query ? query + strcspn(query, "#") : NULL;
    /* the folders, then the query's hash folder, then the file name */
    const char *last = path, *s = path;
    for (const char *c = path; c < q; c++)
        if (*c == '/') last = c + 1;
    for (; s < last;) {
        const char *e = memchr(s, '/', (size_t)(last - s));
        if (!e) break;
        if (put_part(buf, sizeof buf, &k, s, (size_t)(e - s))) return -1;
        s = e + 1;
    }
    if (query && qend > query) {
        char h[32];
        snprintf(h, sizeof h, "q%016llx", (unsigned long long)wgml_fnv64(WGML_FNV64_BASIS, query, (size_t)(qend - query)));
        if (put_part(buf, sizeof buf, &k, h, strlen(h))) return -1;
    }
    size_t fn = (size_t)(q - last);
    if (fn == 0) {
        if (put_part(buf, sizeof buf, &k, "index", 5)) return -1;
    } else if (put_part(buf, sizeof buf, &k, last, fn)) {
        return -1;
    }
    buf[--k] = '\0'; /* the last '/' */
    if (k + 1 > cap) return -1;
    memcpy(out, buf, k + 1);
    return 0;
}

/* ---- a repository's file list ---- */

static const jv *dict_get(jinja_env *e, jv d, const char *key) {
    jv *v = NULL;
    if (d.t == JV_DICT) jx_dict_gets(e, d.u.d, key, strlen(key), &v);
    return v;
}

wgml_status wgml_hub_parse_tree(const char *json, size_t len, wgml_hub_file **files, int *n, wgml_error *err) {
    *files = NULL;
    *n = 0;
    jinja_limits lim = jinja_default_limits();
    lim.max_memory = (size_t)256 << 20;
    lim.max_depth = 16;
    jinja_env *e = NULL;
    wgml_status st = jinja_env_create(&lim, &e, err);
    if (st) return st;
    jv root;
    if (jx_json_parse(e, json, len, "file list", &root)) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "the repository's file list: %s", e->msg);
    } else if (root.t != JV_LIST) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "the repository's file list is not a JSON array");
    } else if (root.u.l->n > HUB_MAX_FILES) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "the repository lists more than %d files", HUB_MAX_FILES);
    }
    /* one allocation: the array, then the strings */
    size_t count = 0, bytes = 0;
    for (size_t pass = 0; !st && pass < 2; pass++) {
        char *strs = pass ? (char *)(*files + count) : NULL;
        size_t k = 0;
        for (size_t i = 0; i < root.u.l->n; i++) {
            jv it = root.u.l->v[i];
            const jv *type = dict_get(e, it, "type"), *path = dict_get(e, it, "path"), *size = dict_get(e, it, "size");
            const jv *lfs = dict_get(e, it, "lfs"), *oid = lfs ? dict_get(e, *lfs, "oid") : NULL;
            if (!type || type->t != JV_STR || strcmp(type->u.s->s, "file") != 0 || !path || path->t != JV_STR ||
                strlen(path->u.s->s) != path->u.s->len || !wgml_hub_safe_path(path->u.s->s))
                continue;
            int sha_ok = oid && oid->t == JV_STR && oid->u.s->len == 64;
            for (size_t c = 0; sha_ok && c < 64; c++) sha_ok = isxdigit((unsigned char)oid->u.s->s[c]);
            if (!pass) {
                count++;
                bytes += path->u.s->len + 1 + (sha_ok ? 65 : 0);
                continue;
            }
            wgml_hub_file *f = &(*files)[k++];
            f->path = strcpy(strs, path->u.s->s);
            strs += path->u.s->len + 1;
            f->size = size && size->t == JV_INT && size->u.i >= 0 ? size->u.i : -1;
            f->sha256 = NULL;
            if (sha_ok) {
                for (size_t c = 0; c < 64; c++) strs[c] = (char)tolower((unsigned char)oid->u.s->s[c]);
                strs[64] = '\0';
                f->sha256 = strs;
                strs += 65;
            }
        }
        if (!pass && !(*files = wgml_malloc(count * sizeof **files + bytes + 1)))
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    }
    jinja_env_free(e);
    if (st) {
        wgml_free(*files);
        *files = NULL;
        return st;
    }
    *n = (int)count;
    return WGML_OK;
}

/* ---- choosing a file ---- */

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* "-00001-of-00003.gguf": one part of a split model. */
static int is_split(const char *name) {
    const char *of = strstr(name, "-of-");
    return of && of - name >= 6 && of[-6] == '-' && isdigit((unsigned char)of[-1]) && isdigit((unsigned char)of[4]);
}

/* tag appears in name as a word: after the start or a character that is not a letter or digit,
 * before the end, '.' or '-' (so Q4_K does not take Q4_K_M, nor Q4_K_M IQ4_K_M). */
static int has_tag(const char *name, const char *tag) {
    size_t n = strlen(name), k = strlen(tag);
    for (size_t i = 0; k && i + k <= n; i++) {
        if (strncasecmp(name + i, tag, k) != 0) continue;
        int before = i == 0 || !isalnum((unsigned char)name[i - 1]);
        char a = name[i + k];
        if (before && (a == '\0' || a == '.' || a == '-')) return 1;
    }
    return 0;
}

/* A model file to choose by its name: a GGUF (not a projector, not a split part), or else whisper.cpp's ggml-*.bin. */
static int candidate(const char *path, int bins) {
    const char *b = base_name(path);
    if (bins) return strncmp(b, "ggml-", 5) == 0 && ends_with(b, ".bin");
    return ends_with(b, ".gguf") && !strstr(b, "mmproj") && !is_split(b);
}

/* Among files matching tag (or any, tag NULL), the one with the shortest name, then the first in byte order. */
static int best(const wgml_hub_file *f, int n, int bins, const char *tag) {
    int pick = -1;
    for (int i = 0; i < n; i++) {
        if (!candidate(f[i].path, bins) || (tag && !has_tag(base_name(f[i].path), tag))) continue;
        if (pick < 0) {
            pick = i;
            continue;
        }
        size_t a = strlen(f[i].path), b = strlen(f[pick].path);
        if (a < b || (a == b && strcmp(f[i].path, f[pick].path) < 0)) pick = i;
    }
    return pick;
}

/* The files of a Hugging Face folder that model/hf.h reads (top level only). */
static int folder_file(const char *p) {
    static const char *const names[] = {"config.json",          "preprocessor_config.json", "tokenizer.json",
                                        "tokenizer_config.json", "special_tokens_map.json",  "spiece.model",
                                        "vocab.txt",             "merges.txt",               "vocab.json",
                                        "model.safetensors.index.json"};
    if (strchr(p, '/')) return 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(p, names[i]) == 0) return 1;
    return ends_with(p, ".safetensors");
}

int wgml_hub_pick(const wgml_hub_file *files, int n, const char *tag, int *idx, int *folder, wgml_error *err) {
    *folder = 0;
    int ggufs = 0, bins = 0;
    for (int i = 0; i < n; i++) ggufs += candidate(files[i].path, 0), bins += candidate(files[i].path, 1);
    int use_bins = !ggufs && bins;
    if (ggufs || bins) {
        int i = -1;
        if (tag && *tag) {
            i = best(files, n, use_bins, tag);
        } else {
            static const char *const order[] = {"Q4_K_M", "Q8_0"};
            for (size_t k = 0; i < 0 && !use_bins && k < sizeof order / sizeof *order; k++)
                i = best(files, n, 0, order[k]);
            if (i < 0) i = best(files, n, use_bins, NULL);
        }
        if (i >= 0) {
            idx[0] = i;
            return 1;
        }
        char names[320] = "";
        for (int k = 0; k < n; k++)
            if (candidate(files[k].path, use_bins) && strlen(names) + strlen(files[k].path) + 3 < sizeof names)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? ", " : "", files[k].path);
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "no model file of the repository has '%s' in its name (there are: %s)",
                  tag, names);
        return 0;
    }
    if (tag && *tag) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the repository has no GGUF file to choose '%s' from", tag);
        return 0;
    }
    int config = 0, weights = 0, k = 0;
    for (int i = 0; i < n; i++) {
        if (!folder_file(files[i].path)) continue;
        config += strcmp(files[i].path, "config.json") == 0;
        weights += ends_with(files[i].path, ".safetensors");
        idx[k++] = i;
    }
    if (config && weights) {
        *folder = 1;
        return k;
    }
    wgml_fail(err, WGML_ERR_UNSUPPORTED,
              "the repository has no GGUF file, no ggml-*.bin and no config.json with safetensors (%d files)", n);
    return 0;
}
