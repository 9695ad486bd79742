/*
 * wg_manifest.c - the kernels a model needs, compiled at load.
 *
 * Kernels are made when a step first records them (wg_kernel), and compile in
 * the background (wgml_gpu_kernel_create_async) until that step's submit. A
 * model's first step on a device therefore waits for all of its kernels at
 * once. To move that wait into the load, and to let it overlap the weights'
 * upload, the backend remembers the kernels each model used: when it is freed,
 * the keys of its pipelines go into the on-disk pipeline cache (an entry of
 * wgml's own, under the device's isolation key: wgml_gpu_cache_put), named by
 * the model's structure (the caller's model key: its architecture and tensor
 * table). The next load of the same structure starts compiling them all before
 * the weights go up (wg_kernels_prepare) and waits for them, with progress,
 * after (wg_kernels_wait). The list only grows: a later run that needs more
 * (a longer prompt, another input) adds its kernels.
 *
 * The entry is text: "wgml-kernels 1\n", then one key per line in 16 hex
 * digits ((kind << 48) | (wtype << 32) | flags, as wg_kernel keys them). A list
 * that does not parse, or names a kernel kind this build lacks, is ignored
 * whole, and a key for weights the device cannot use is skipped: the cache can
 * make a load faster, never fail it.
 */
#include <stdio.h>
#include <string.h>

#include "backend/webgpu/wg_internal.h"
#include "core/alloc.h"

#define MANIFEST_MAGIC "wgml-kernels 1\n"
#define MANIFEST_MAX 4096 /* keys */

static void entry_key(const wg_backend *wb, char *out, size_t cap) {
    snprintf(out, cap, "wgml kernel list: %s", wb->model_key);
}

int wg_kernels_parse(const char *s, size_t n, uint64_t *keys, int cap) {
    size_t m = strlen(MANIFEST_MAGIC);
    if (n < m || memcmp(s, MANIFEST_MAGIC, m) != 0) return -1;
    int count = 0;
    for (size_t at = m; at < n; at += 17) {
        if (n - at < 17 || s[at + 16] != '\n' || count == cap) return -1;
        uint64_t v = 0;
        for (int i = 0; i < 16; i++) {
            char c = s[at + (size_t)i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return -1;
            v = v << 4 | (uint64_t)d;
        }
        if ((v >> 48) >= WGK_COUNT) return -1;
        keys[count++] = v;
    }
    return count;
}

void wg_kernels_prepare(wgml_backend *be, const char *model_key) {
    wg_backend *wb = (wg_backend *)be;
    if (!model_key || strlen(model_key) >= sizeof wb->model_key) return;
    snprintf(wb->model_key, sizeof wb->model_key, "%s", model_key);
    char key[160];
    entry_key(wb, key, sizeof key);
    void *value;
    size_t n = wgml_gpu_cache_get(wb->gpu, key, &value);
    uint64_t *keys = n ? wgml_malloc(MANIFEST_MAX * sizeof *keys) : NULL;
    int count = keys ? wg_kernels_parse(value, n, keys, MANIFEST_MAX) : -1;
    wgml_free(value);
    for (int i = 0; i < count; i++) {
        uint64_t k = keys[i];
        wg_kind kind = (wg_kind)(k >> 48);
        uint32_t wtype = (uint32_t)(k >> 32) & 0xffffu, flags = (uint32_t)k;
        if (wtype && !be->supports_type(be, wtype)) continue;
        wgml_error err;
        /* Best effort: a kernel that cannot be made now is made (and its
         * error reported) when a step needs it. */
        wg_kernel(wb, kind, wtype, flags, &err);
    }
    wb->n_prepared = wb->n_pipes;
    wgml_free(keys);
}

wgml_status wg_kernels_wait(wgml_backend *be, void (*progress)(void *user, int done, int total), void *user,
                            wgml_error *err) {
    wg_backend *wb = (wg_backend *)be;
    return wgml_gpu_kernels_wait(wb->gpu, progress, user, err);
}

void wg_kernels_remember(wg_backend *wb) {
    if (!wb->model_key[0] || wb->n_pipes <= wb->n_prepared || wb->n_pipes > MANIFEST_MAX) return;
    /* A device that failed may hold a kernel that cannot be made: keep the old list. */
    if (wgml_gpu_status(wb->gpu, NULL) != WGML_OK) return;
    size_t m = strlen(MANIFEST_MAGIC), n = m + (size_t)wb->n_pipes * 17;
    char *s = wgml_malloc(n + 1);
    if (!s) return;
    memcpy(s, MANIFEST_MAGIC, m);
    for (int i = 0; i < wb->n_pipes; i++)
        snprintf(s + m + (size_t)i * 17, 18, "%016llx\n", (unsigned long long)wb->pipes[i].key);
    char key[160];
    entry_key(wb, key, sizeof key);
    wgml_gpu_cache_put(wb->gpu, key, s, n);
    wgml_free(s);
}
