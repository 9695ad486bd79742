/*
 * hub.h - models named by URL or by Hugging Face repository, fetched into a
 * cache (the public side is wgml_model_fetch in wgml.h; docs/models-by-url.md).
 *
 * The forms (anything else is a local path, and so is any of these that
 * names an existing file or folder):
 *   https://host/path/model.gguf     (or http://) the file at that URL
 *   hf://owner/repo/path/file.gguf   a file of a Hugging Face repository
 *   hf://owner/repo:TAG, owner/repo:TAG
 *                                    the repository's GGUF whose name has TAG
 *                                    (a quantization: Q4_K_M, Q8_0, f16...)
 *   hf://owner/repo                  its Q4_K_M GGUF, else Q8_0, else the
 *                                    first; a repository with no GGUF but a
 *                                    config.json and safetensors is fetched
 *                                    as a folder (model/hf.h reads it)
 * Hugging Face is $HF_ENDPOINT (https://huggingface.co by default); the file
 * list comes from its /api/models/OWNER/REPO/tree/main, files from
 * /OWNER/REPO/resolve/main/PATH. $HF_TOKEN, when set, goes to that host.
 *
 * The cache is MODELS/url/HOST/PATH for URLs and MODELS/hf/OWNER/REPO/PATH
 * for repositories, MODELS being $WGML_CACHE_DIR/models, else
 * $XDG_CACHE_HOME/wgml/models, else ~/.cache/wgml/models. Beside each file:
 * FILE.meta (the URL, ETag, size and SHA-256 it was checked against), while
 * downloading FILE.part and FILE.part.etag; and MODELS/.locks/HASH, which
 * one process holds while it fetches FILE (another waits, then finds it there).
 *
 * The functions below are the pure parts, for tests and the fuzzer; the
 * network side is net/http.h.
 */
#ifndef WGML_NET_HUB_H
#define WGML_NET_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

#define WGML_HUB_URL_MAX 2048

typedef enum wgml_hub_kind {
    WGML_HUB_LOCAL = 0, /* not one of the forms: a path */
    WGML_HUB_URL,       /* http:// or https:// */
    WGML_HUB_HF,        /* a Hugging Face repository, a file of it or one to pick */
} wgml_hub_kind;

typedef struct wgml_hub_spec {
    wgml_hub_kind kind;
    char url[WGML_HUB_URL_MAX]; /* URL */
    char owner[96], repo[96];   /* HF */
    char file[512];             /* HF: the file named, or "" to pick one */
    char tag[64];               /* HF: the quantization to pick, or "" */
} wgml_hub_spec;

/* Reads `model` into *s. WGML_HUB_LOCAL when it is no remote form, or names
 * an existing path (check_local set); a malformed remote form is
 * WGML_ERR_INVALID_ARGUMENT saying what is wrong. */
wgml_status wgml_hub_parse(const char *model, int check_local, wgml_hub_spec *s, wgml_error *err);

/* "url/HOST/SEG/.../NAME" for a URL, each part reduced to [A-Za-z0-9._-]
 * (a port joined to the host with '_', no user:password@, a query as a
 * folder named by its hash before the file name). 0, or -1 when the URL has
 * no host or the result does not fit cap. */
int wgml_hub_url_cache_path(const char *url, char *out, size_t cap);

/* 1 when p is a relative path of 1 to 8 parts, each of [A-Za-z0-9._-] not
 * starting with '.', at most 400 bytes: what a repository's file may be
 * called to be written into the cache. */
int wgml_hub_safe_path(const char *p);

/* One file of a repository. */
typedef struct wgml_hub_file {
    const char *path;
    int64_t size;       /* -1 when not known */
    const char *sha256; /* the LFS object id, or NULL (files kept in git itself) */
} wgml_hub_file;

/* A repository's file list: Hugging Face's tree JSON (an array of
 * {"type": "file", "path", "size", "lfs": {"oid"}}) into *files / *n, one
 * allocation (wgml_free(*files) frees the strings too). Entries that are
 * not files, or whose path is not wgml_hub_safe_path, are left out. */
wgml_status wgml_hub_parse_tree(const char *json, size_t len, wgml_hub_file **files, int *n, wgml_error *err);

/* Chooses what to fetch from a file list: the indexes into idx (cap n) and
 * the count, 1 for a model file, more for a folder (its config.json,
 * safetensors and tokenizer files), *folder set then. tag "" picks the
 * default. 0 when nothing fits, with a message naming what there is. */
int wgml_hub_pick(const wgml_hub_file *files, int n, const char *tag, int *idx, int *folder, wgml_error *err);

#endif
