/*
 * pipeline_cache.h - compiled GPU pipelines kept on disk between runs.
 *
 * Dawn hands its compiled artefacts (Tint's output, the driver's pipeline
 * cache data) to a blob cache through two callbacks: load(key) and
 * store(key, value). This module is that blob cache, as one file per entry
 * in a directory:
 *
 *   $WGML_CACHE_DIR if set ("off" disables the cache),
 *   else $XDG_CACHE_HOME/wgml/pipelines (an absolute XDG_CACHE_HOME),
 *   else $HOME/.cache/wgml/pipelines,
 *
 * created (mode 0700) at the first store. Entries of one device are
 * isolated from every other by an isolation key (the adapter, its driver and
 * the build's kernel sources), which takes part in every file's name and is
 * stored in the file. The cache is an optimisation only: any failure (no
 * directory, no space, an unreadable, truncated or corrupt file, out of
 * memory) is a miss or a store skipped, never an error.
 *
 * Its functions are thread-safe: Dawn may call the callbacks from its own
 * threads. Processes sharing a directory are safe too: an entry is written to
 * a temporary file and renamed into place, so a reader sees a whole file or
 * none. It does not depend on webgpu.h (src/gpu/dawn.c plugs it into Dawn),
 * so that it can be tested without a GPU.
 */
#ifndef WGML_GPU_PIPELINE_CACHE_H
#define WGML_GPU_PIPELINE_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Limits of one entry: larger keys and values are never stored nor read. */
#define WGML_PIPELINE_CACHE_MAX_KEY   (16u << 20)
#define WGML_PIPELINE_CACHE_MAX_VALUE (64u << 20)

typedef struct wgml_pipeline_cache wgml_pipeline_cache;

/* What a cache did since it was opened. */
typedef struct wgml_pipeline_cache_counters {
    uint64_t hits;     /* values handed to the caller */
    uint64_t misses;   /* loads that found nothing usable (absent, rejected, unreadable) */
    uint64_t stores;   /* entries written */
    uint64_t rejected; /* files found corrupt (size, magic, version, checksum) and deleted; also misses */
} wgml_pipeline_cache_counters;

/* The directory the environment selects (see above) into out (NUL-terminated).
 * Returns 0 when the cache is off: WGML_CACHE_DIR=off, or no WGML_CACHE_DIR,
 * XDG_CACHE_HOME nor HOME, or a path that does not fit cap. */
int wgml_pipeline_cache_default_dir(char *out, size_t cap);

/* Opens the cache in `dir` (NULL: wgml_pipeline_cache_default_dir) for the
 * entries of `isolation_key` (any text, NULL = ""). Touches no file. Returns
 * NULL when the cache is off or memory is short: callers then run without. */
wgml_pipeline_cache *wgml_pipeline_cache_open(const char *dir, const char *isolation_key);

/* Frees the cache (NULL-safe). Files stay. */
void wgml_pipeline_cache_close(wgml_pipeline_cache *pc);

/* Dawn's load callback: the size of the value stored for key, or 0 for a
 * miss. When value is not NULL and value_size is at least that size, the
 * value is copied there. Dawn asks twice, first for the size (value NULL),
 * then with a buffer of that size; the value read for the first call is kept
 * for the second, so that both see the same entry even if another process
 * replaces the file in between. A NULL cache or key is a miss. */
size_t wgml_pipeline_cache_load(wgml_pipeline_cache *pc, const void *key, size_t key_size, void *value,
                                size_t value_size);

/* Dawn's store callback: writes the entry (replacing any with the same key).
 * Failures are silent; after the directory cannot be created, stores stop.
 * A NULL cache, key or value, an empty value, or sizes past the limits: nothing. */
void wgml_pipeline_cache_store(wgml_pipeline_cache *pc, const void *key, size_t key_size, const void *value,
                               size_t value_size);

/* wgml's own entries (a model's list of kernels), in the same files and with
 * the same checks, but not counted: get reads key's value into a new
 * allocation (*value, wgml_free it) and returns its size, 0 (and NULL) for
 * a miss, deleting a corrupt file; put writes one like store. */
size_t wgml_pipeline_cache_get(wgml_pipeline_cache *pc, const void *key, size_t key_size, void **value);
void wgml_pipeline_cache_put(wgml_pipeline_cache *pc, const void *key, size_t key_size, const void *value,
                             size_t value_size);

/* The counters so far (all zero for a NULL cache). */
void wgml_pipeline_cache_get_counters(const wgml_pipeline_cache *pc, wgml_pipeline_cache_counters *c);

/* The cache's directory ("" for a NULL cache). */
const char *wgml_pipeline_cache_dir(const wgml_pipeline_cache *pc);

/* The path of the file that holds key's entry, into out (for tests and tools).
 * Returns 0 if it does not fit cap. */
int wgml_pipeline_cache_entry_path(const wgml_pipeline_cache *pc, const void *key, size_t key_size, char *out,
                                   size_t cap);

#endif
