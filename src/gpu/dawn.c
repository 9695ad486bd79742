/*
 * dawn.c - the GPU layer (gpu.h) over Dawn's native webgpu.h: device, errors,
 * waits, buffers, kernels, bind groups. Recording and submitting are in
 * dawn_record.c, finding adapters in dawn_adapter.c.
 *
 * A wgml_gpu owns one WebGPU instance, adapter, device and queue. Everything
 * runs on the caller's thread.
 *
 * Errors. Three routes, so that nothing is lost and nothing aborts:
 *  - calls that create something (buffer, kernel, bind group) wrap the Dawn
 *    call in error scopes (out-of-memory, validation, internal) and return the
 *    error synchronously; a WGSL error comes back with the compiler's
 *    "line:col: message" from the shader's compilation info;
 *  - anything else (recording, submits) reaches the uncaptured-error callback,
 *    and device loss the device-lost callback: both set a sticky status that
 *    every later call reports (the recording calls become no-ops).
 * Waits go through wgpuInstanceWaitAny in 50 ms slices (the instance is created
 * with timedWaitAnyEnable), checking for device loss between slices, and give
 * up after WGML_GPU_TIMEOUT seconds (default 120): no wait hangs forever.
 * Callback results live in the wgml_gpu, not on the stack, because a callback
 * whose wait was abandoned can still run later (at the latest when the
 * instance is released).
 *
 * Pipeline cache. Dawn stores what it compiles (Tint's output, the Vulkan
 * driver's pipeline cache data) through the blob-cache callbacks of a
 * WGPUDawnCacheDeviceDescriptor chained into the device descriptor, and
 * loads it back when it compiles the same pipeline again, in this process or
 * a later one. pipeline_cache.c keeps those blobs on disk (location, env vars
 * and safety there); the isolation key names the adapter, its driver, the
 * requested features and the caller's cache_key (the backend's kernel sources).
 *
 * WGML_GPU_MEMORY_LIMIT=bytes makes buffer creation fail with the error an
 * out-of-memory device gives once that many bytes are in use: a cap on a
 * shared GPU, and how tests make a model too large for the device without
 * allocating gigabytes.
 */
#include "core/alloc.h"
#include "gpu/dawn_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_SLICE_NS 50000000 /* 50 ms */

/* ---- status ------------------------------------------------------------------- */

/* Dawn's messages span lines (" - While calling ..."): one line, single spaces. */
static void one_line(char *s) {
    char *w = s;
    for (const char *r = s; *r; r++) {
        char c = (*r == '\n' || *r == '\r' || *r == '\t') ? ' ' : *r;
        if (c == ' ' && (w == s || w[-1] == ' ')) continue;
        *w++ = c;
    }
    while (w > s && w[-1] == ' ')
        w--;
    *w = '\0';
}

void wgml_dawn_set_status(wgml_gpu *g, wgml_status code, const char *fmt, ...) WGML_PRINTF(3, 4);
void wgml_dawn_set_status(wgml_gpu *g, wgml_status code, const char *fmt, ...) {
    /* The first error wins, except that device loss overrides a plain error. */
    if (g->status == WGML_ERR_DEVICE_LOST || (g->status != WGML_OK && code != WGML_ERR_DEVICE_LOST)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->message, sizeof g->message, fmt, ap);
    va_end(ap);
    one_line(g->message);
    g->status = code;
}

wgml_status wgml_dawn_sticky(const wgml_gpu *g, wgml_error *err) { return wgml_fail(err, g->status, "%s", g->message); }

static const char *error_type_name(int type) {
    switch (type) {
    case WGPUErrorType_Validation: return "validation error";
    case WGPUErrorType_OutOfMemory: return "out of memory";
    case WGPUErrorType_Internal: return "internal error";
    default: return "error";
    }
}

static void on_uncaptured_error(WGPUDevice const *device, WGPUErrorType type, WGPUStringView message, void *u1,
                                void *u2) {
    wgml_gpu *g = u1;
    if (g->destroying) return;
    char m[WGML_ERROR_MESSAGE_MAX];
    wgml_dawn_sv_copy(m, sizeof m, message);
    wgml_dawn_set_status(g, WGML_ERR_GPU, "WebGPU %s: %s", error_type_name((int)type), m);
}

static void on_device_lost(WGPUDevice const *device, WGPUDeviceLostReason reason, WGPUStringView message, void *u1,
                           void *u2) {
    wgml_gpu *g = u1;
    if (g->destroying || reason == WGPUDeviceLostReason_CallbackCancelled ||
        reason == WGPUDeviceLostReason_FailedCreation)
        return;
    char m[WGML_ERROR_MESSAGE_MAX];
    wgml_dawn_sv_copy(m, sizeof m, message);
    wgml_dawn_set_status(g, WGML_ERR_DEVICE_LOST, "device lost (%s): %s",
                         reason == WGPUDeviceLostReason_Destroyed ? "destroyed" : "driver", m);
}

/* ---- waiting ------------------------------------------------------------------- */

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Waits for a future of this device. Sets the sticky status on timeout. */
wgml_status wgml_dawn_wait(wgml_gpu *g, WGPUFuture f, const char *what, wgml_error *err) {
    uint64_t deadline = now_ns() + g->timeout_ns;
    for (;;) {
        WGPUFutureWaitInfo w = {f, 0};
        WGPUWaitStatus ws = wgpuInstanceWaitAny(g->instance, 1, &w, WAIT_SLICE_NS);
        if (ws == WGPUWaitStatus_Success && w.completed) return WGML_OK;
        if (ws != WGPUWaitStatus_TimedOut) {
            wgml_dawn_set_status(g, WGML_ERR_GPU, "waiting for %s failed (wait status %d)", what, (int)ws);
            return wgml_dawn_sticky(g, err);
        }
        wgpuInstanceProcessEvents(g->instance); /* delivers a device loss */
        if (g->status == WGML_ERR_DEVICE_LOST) return wgml_dawn_sticky(g, err);
        if (now_ns() > deadline) {
            wgml_dawn_set_status(g, WGML_ERR_GPU, "timed out after %g s waiting for %s (WGML_GPU_TIMEOUT)",
                                 (double)g->timeout_ns * 1e-9, what);
            return wgml_dawn_sticky(g, err);
        }
    }
}

/* ---- error scopes ------------------------------------------------------------- */

enum { SCOPE_OOM = 1, SCOPE_INTERNAL = 2, SCOPE_VALIDATION = 4 };

static void scope_push(wgml_gpu *g, int filters) {
    if (filters & SCOPE_OOM) wgpuDevicePushErrorScope(g->device, WGPUErrorFilter_OutOfMemory);
    if (filters & SCOPE_INTERNAL) wgpuDevicePushErrorScope(g->device, WGPUErrorFilter_Internal);
    if (filters & SCOPE_VALIDATION) wgpuDevicePushErrorScope(g->device, WGPUErrorFilter_Validation);
}

static void on_pop(WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView message, void *u1, void *u2) {
    dawn_callback_result *r = u1;
    r->done = 1;
    r->status = (int)status;
    r->type = (int)type;
    wgml_dawn_sv_copy(r->message, sizeof r->message, message);
}

/* Pops what scope_push pushed; returns the first error as WGML_ERR_GPU
 * ("<what>: <message>"), or the sticky status if the device is gone. */
static wgml_status scope_pop(wgml_gpu *g, int filters, const char *what, wgml_error *err) {
    static const int order[3] = {SCOPE_VALIDATION, SCOPE_INTERNAL, SCOPE_OOM};
    wgml_status st = WGML_OK;
    for (int i = 0; i < 3; i++) {
        if (!(filters & order[i])) continue;
        WGPUPopErrorScopeCallbackInfo cb = WGPU_POP_ERROR_SCOPE_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_WaitAnyOnly;
        cb.callback = on_pop;
        cb.userdata1 = &g->scope;
        memset(&g->scope, 0, sizeof g->scope);
        WGPUFuture f = wgpuDevicePopErrorScope(g->device, cb);
        if (wgml_dawn_wait(g, f, "an error scope", err) != WGML_OK) return g->status;
        if (st != WGML_OK) continue;
        if (g->scope.status == WGPUPopErrorScopeStatus_Success && g->scope.type != WGPUErrorType_NoError) {
            one_line(g->scope.message);
            st = wgml_fail(err, WGML_ERR_GPU, "%s: %s: %s", what, error_type_name(g->scope.type), g->scope.message);
        }
    }
    if (g->status == WGML_ERR_DEVICE_LOST) return wgml_dawn_sticky(g, err);
    return st;
}

/* ---- device -------------------------------------------------------------------- */

typedef struct device_request {
    int done;
    WGPURequestDeviceStatus status;
    WGPUDevice device;
    char message[256];
} device_request;

static void on_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message, void *u1, void *u2) {
    device_request *r = u1;
    r->done = 1;
    r->status = status;
    r->device = device;
    wgml_dawn_sv_copy(r->message, sizeof r->message, message);
}

static uint64_t timeout_from_env(void) {
    const char *s = getenv("WGML_GPU_TIMEOUT");
    double sec = s && *s ? strtod(s, NULL) : 0;
    if (!(sec > 0) || sec > 1e6) sec = 120;
    return (uint64_t)(sec * 1e9);
}

static uint64_t memory_limit_from_env(void) {
    const char *s = getenv("WGML_GPU_MEMORY_LIMIT");
    if (!s || !*s) return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    return *end || *s == '-' ? 0 : (uint64_t)v;
}

/* ---- pipeline cache ---------------------------------------------------------------- */

#ifdef WGML_DAWN_BLOB_CACHE /* cmake/webgpu.cmake: this Dawn's header has the blob cache */

/* Dawn's load callback (WGPUDawnLoadCacheDataFunction) over pipeline_cache.c. */
static size_t cache_load(void const *key, size_t key_size, void *value, size_t value_size, void *user) {
    return wgml_pipeline_cache_load(user, key, key_size, value, value_size);
}

/* Dawn's store callback (WGPUDawnStoreCacheDataFunction) over pipeline_cache.c. */
static void cache_store(void const *key, size_t key_size, void const *value, size_t value_size, void *user) {
    wgml_pipeline_cache_store(user, key, key_size, value, value_size);
}

/* Opens the on-disk pipeline cache for this adapter (g->cache stays NULL when
 * it is off) and fills desc to chain into the device descriptor. The isolation
 * key keeps apart what differs in compiled code: the adapter and driver (a
 * driver update changes the description), the features asked for, and the
 * caller's key (the kernel sources). */
static void cache_open(wgml_gpu *g, const char *caller_key, const WGPUFeatureName *features, size_t n_features,
                       WGPUDawnCacheDeviceDescriptor *desc) {
    const wgml_gpu_adapter_info *a = &g->info;
    char feat[64] = "";
    for (size_t i = 0; i < n_features; i++) {
        size_t len = strlen(feat);
        snprintf(feat + len, sizeof feat - len, "%s%d", i ? "," : "", (int)features[i]);
    }
    int n = snprintf(g->cache_isolation, sizeof g->cache_isolation,
                     "wgml pipelines|%s|%04x:%04x|%s|%s|%s|%s|features %s|kernels %s", a->backend, a->vendor_id,
                     a->device_id, a->name, a->vendor, a->architecture, a->driver, feat, caller_key ? caller_key : "");
    if (n < 0 || (size_t)n >= sizeof g->cache_isolation) return; /* cannot name it exactly: no cache */
    g->cache = wgml_pipeline_cache_open(NULL, g->cache_isolation);
    if (!g->cache) return;
    /* (the header's _INIT macro says nullptr, which C11 lacks) */
    memset(desc, 0, sizeof *desc);
    desc->chain.sType = WGPUSType_DawnCacheDeviceDescriptor;
    desc->isolationKey = wgml_dawn_sv(g->cache_isolation);
    desc->loadDataFunction = cache_load;
    desc->storeDataFunction = cache_store;
    desc->functionUserdata = g->cache;
}
#endif

wgml_status wgml_gpu_create(const wgml_gpu_options *options, wgml_gpu **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_create: out is NULL");
    *out = NULL;
    wgml_gpu_options opt = {0};
    if (options) opt = *options;
    wgml_gpu_adapter_info chosen;
    wgml_status st = wgml_dawn_choose(&opt, &chosen, err);
    if (st != WGML_OK) return st;

    wgml_gpu *g = wgml_calloc(1, sizeof *g);
    if (!g) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "wgml_gpu_create: out of memory");
    g->timeout_ns = timeout_from_env();
    g->memory_limit = memory_limit_from_env();
    st = wgml_dawn_open(chosen.source, &g->instance, &g->adapter, err);
    if (st != WGML_OK) {
        wgml_free(g);
        return st;
    }
    wgml_dawn_adapter_info(g->adapter, chosen.source, &g->info);
    if (strcmp(g->info.name, chosen.name) != 0) {
        wgml_fail(err, WGML_ERR_NO_ADAPTER, "%s: listed as '%s' but opened as '%s'", chosen.source, chosen.name,
                  g->info.name);
        wgml_gpu_destroy(g);
        return WGML_ERR_NO_ADAPTER;
    }

    WGPUFeatureName features[3];
    size_t n_features = 0;
    if (opt.want_f16 && g->info.has_f16) features[n_features++] = WGPUFeatureName_ShaderF16;
    if (opt.want_subgroups && g->info.has_subgroups) features[n_features++] = WGPUFeatureName_Subgroups;
    if (opt.want_timestamps && g->info.has_timestamps) features[n_features++] = WGPUFeatureName_TimestampQuery;
    /* The adapter's maxima: large weights need maxBufferSize and
     * maxStorageBufferBindingSize far above WebGPU's defaults. */
    WGPULimits limits = WGPU_LIMITS_INIT;
    if (wgpuAdapterGetLimits(g->adapter, &limits) != WGPUStatus_Success) {
        wgml_fail(err, WGML_ERR_GPU, "%s: cannot read the adapter's limits", g->info.name);
        wgml_gpu_destroy(g);
        return WGML_ERR_GPU;
    }
    limits.nextInChain = NULL;

    WGPUDeviceDescriptor dd = WGPU_DEVICE_DESCRIPTOR_INIT;
#ifdef WGML_DAWN_BLOB_CACHE
    WGPUDawnCacheDeviceDescriptor cache_desc;
    cache_open(g, opt.cache_key, features, n_features, &cache_desc);
    if (g->cache) dd.nextInChain = &cache_desc.chain;
#endif
    dd.label = wgml_dawn_sv("wgml");
    dd.requiredFeatureCount = n_features;
    dd.requiredFeatures = features;
    dd.requiredLimits = &limits;
    /* Callbacks run on our thread only: in the calls we make, and in
     * wgpuInstanceProcessEvents (called while waiting and by wgml_gpu_status). */
    dd.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowProcessEvents;
    dd.deviceLostCallbackInfo.callback = on_device_lost;
    dd.deviceLostCallbackInfo.userdata1 = g;
    dd.uncapturedErrorCallbackInfo.callback = on_uncaptured_error;
    dd.uncapturedErrorCallbackInfo.userdata1 = g;
    device_request req = {0};
    WGPURequestDeviceCallbackInfo cb = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = on_device;
    cb.userdata1 = &req;
    WGPUFutureWaitInfo w = {wgpuAdapterRequestDevice(g->adapter, &dd, cb), 0};
    WGPUWaitStatus ws = wgpuInstanceWaitAny(g->instance, 1, &w, WGML_DAWN_REQUEST_TIMEOUT_NS);
    if (ws != WGPUWaitStatus_Success || !req.done || req.status != WGPURequestDeviceStatus_Success || !req.device) {
        wgml_fail(err, WGML_ERR_GPU, "%s: device request failed: %s", g->info.name,
                  req.done ? req.message : "no answer");
        if (req.device) wgpuDeviceRelease(req.device);
        wgml_gpu_destroy(g); /* releasing the instance ends a pending request while req lives */
        return WGML_ERR_GPU;
    }
    g->device = req.device;
    g->queue = wgpuDeviceGetQueue(g->device);
    g->enabled.f16 = wgpuDeviceHasFeature(g->device, WGPUFeatureName_ShaderF16) != 0;
    g->enabled.subgroups = wgpuDeviceHasFeature(g->device, WGPUFeatureName_Subgroups) != 0;
    g->enabled.timestamps = wgpuDeviceHasFeature(g->device, WGPUFeatureName_TimestampQuery) != 0;
    *out = g;
    return WGML_OK;
}

void wgml_dawn_release_buffer(wgml_gpu *g, WGPUBuffer *b, uint64_t size) {
    if (!*b) return;
    wgpuBufferDestroy(*b);
    wgpuBufferRelease(*b);
    *b = NULL;
    g->counters.memory_bytes -= size;
}

void wgml_gpu_destroy(wgml_gpu *g) {
    if (!g) return;
    wgml_dawn_discard_recording(g);
    g->destroying = 1;
    wgml_dawn_release_buffer(g, &g->staging, g->staging_size);
    for (int i = 0; i < g->n_chunks; i++) {
        wgpuQuerySetDestroy(g->chunks[i].set);
        wgpuQuerySetRelease(g->chunks[i].set);
        wgml_dawn_release_buffer(g, &g->chunks[i].resolve, WGML_DAWN_PAIRS_PER_CHUNK * 16);
    }
    if (g->queue) wgpuQueueRelease(g->queue);
    if (g->device) {
        wgpuDeviceDestroy(g->device);
        wgpuInstanceProcessEvents(g->instance);
        wgpuDeviceRelease(g->device);
    }
    if (g->adapter) wgpuAdapterRelease(g->adapter);
    if (g->instance) wgpuInstanceRelease(g->instance); /* runs any callback still pending */
    wgml_pipeline_cache_close(g->cache);               /* after the device: Dawn may store while it winds down */
    for (int i = 0; i < g->n_pending; i++) {
        dawn_pending *p = g->pending[i];
        if (p->k) p->k->pending = NULL; /* a kernel outliving its gpu */
        if (p->pipeline) wgpuComputePipelineRelease(p->pipeline);
        wgml_free(p);
    }
    wgml_free(g->pending);
    wgml_free(g->deferred);
    for (int i = 0; i < g->n_times; i++)
        wgml_free((char *)g->times[i].label);
    wgml_free(g->times);
    wgml_free(g->chunks);
    wgml_free(g->pair_slot);
    wgml_free(g);
}

const wgml_gpu_adapter_info *wgml_gpu_info(const wgml_gpu *gpu) {
    static const wgml_gpu_adapter_info none;
    return gpu ? &gpu->info : &none;
}

wgml_gpu_features wgml_gpu_enabled(const wgml_gpu *gpu) {
    wgml_gpu_features none = {0, 0, 0};
    return gpu ? gpu->enabled : none;
}

wgml_status wgml_gpu_status(wgml_gpu *gpu, wgml_error *err) {
    if (!gpu) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_status: gpu is NULL");
    if (gpu->status == WGML_OK) wgpuInstanceProcessEvents(gpu->instance); /* a pending device loss */
    if (gpu->status != WGML_OK) return wgml_dawn_sticky(gpu, err);
    wgml_error_clear(err);
    return WGML_OK;
}

void wgml_gpu_lose_device(wgml_gpu *gpu) {
    if (!gpu || !gpu->device) return;
    wgpuDeviceDestroy(gpu->device);
    wgpuInstanceProcessEvents(gpu->instance);
    wgml_dawn_set_status(gpu, WGML_ERR_DEVICE_LOST, "device lost: destroyed by wgml_gpu_lose_device");
}

/* ---- buffers ------------------------------------------------------------------- */

/* Creates a device buffer inside error scopes, so that a size over the limits
 * or an allocation failure comes back here rather than as a sticky error. */
wgml_status wgml_dawn_create_buffer(wgml_gpu *g, uint64_t size, WGPUBufferUsage usage, const char *label,
                                    WGPUBuffer *out, wgml_error *err) {
    WGPUBufferDescriptor d = WGPU_BUFFER_DESCRIPTOR_INIT;
    d.label = wgml_dawn_sv(label);
    d.usage = usage;
    d.size = size;
    char what[320];
    snprintf(what, sizeof what, "buffer '%s' (%llu bytes)", label, (unsigned long long)size);
    if (g->memory_limit && (size > g->memory_limit || g->counters.memory_bytes > g->memory_limit - size))
        return wgml_fail(err, WGML_ERR_GPU,
                         "%s: out of memory: %llu of the device's %llu bytes (WGML_GPU_MEMORY_LIMIT) are in use", what,
                         (unsigned long long)g->counters.memory_bytes, (unsigned long long)g->memory_limit);
    scope_push(g, SCOPE_OOM | SCOPE_VALIDATION);
    WGPUBuffer b = wgpuDeviceCreateBuffer(g->device, &d);
    wgml_status st = scope_pop(g, SCOPE_OOM | SCOPE_VALIDATION, what, err);
    if (st == WGML_OK && !b) st = wgml_fail(err, WGML_ERR_GPU, "%s: creation failed", what);
    if (st != WGML_OK) {
        if (b) wgpuBufferRelease(b);
        return st;
    }
    g->counters.buffers_created++;
    g->counters.memory_bytes += size;
    *out = b;
    return WGML_OK;
}

wgml_status wgml_gpu_buffer_create(wgml_gpu *gpu, uint64_t size, int usage, const char *label, wgml_gpu_buffer **out,
                                   wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_buffer_create: out is NULL");
    *out = NULL;
    if (!gpu) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_buffer_create: gpu is NULL");
    if (!label) label = "buffer";
    if (gpu->status != WGML_OK) return wgml_dawn_sticky(gpu, err);
    if (size == 0 || size > UINT64_MAX - 3 || !(usage & (WGML_GPU_STORAGE | WGML_GPU_UNIFORM)) ||
        (usage & ~(WGML_GPU_STORAGE | WGML_GPU_UNIFORM)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "buffer '%s': bad size %llu or usage %d", label,
                         (unsigned long long)size, usage);
    wgml_gpu_buffer *b = wgml_calloc(1, sizeof *b);
    if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "buffer '%s': out of memory", label);
    WGPUBufferUsage u = WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    if (usage & WGML_GPU_STORAGE) u |= WGPUBufferUsage_Storage;
    if (usage & WGML_GPU_UNIFORM) u |= WGPUBufferUsage_Uniform;
    b->gpu = gpu;
    b->size = (size + 3) & ~(uint64_t)3; /* whole words, so that every copy can reach the tail */
    wgml_status st = wgml_dawn_create_buffer(gpu, b->size, u, label, &b->buf, err);
    if (st != WGML_OK) {
        wgml_free(b);
        return st;
    }
    *out = b;
    return WGML_OK;
}

void wgml_gpu_buffer_destroy(wgml_gpu_buffer *buf) {
    if (!buf) return;
    wgml_dawn_release_buffer(buf->gpu, &buf->buf, buf->size);
    wgml_free(buf);
}

uint64_t wgml_gpu_buffer_size(const wgml_gpu_buffer *buf) { return buf ? buf->size : 0; }

/* ---- kernels -------------------------------------------------------------------- */

/* The slot of `label` in the per-label time table (added if new); -1 on OOM. */
static int time_slot(wgml_gpu *g, const char *label) {
    for (int i = 0; i < g->n_times; i++)
        if (strcmp(g->times[i].label, label) == 0) return i;
    if (g->n_times == g->cap_times) {
        int cap = g->cap_times ? 2 * g->cap_times : 16;
        wgml_gpu_kernel_time *nt = wgml_realloc(g->times, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        g->times = nt;
        g->cap_times = cap;
    }
    char *copy = wgml_strdup(label);
    if (!copy) return -1;
    g->times[g->n_times] = (wgml_gpu_kernel_time){copy, 0, 0.0};
    return g->n_times++;
}

static void on_compilation_info(WGPUCompilationInfoRequestStatus status, struct WGPUCompilationInfo const *info,
                                void *u1, void *u2) {
    dawn_callback_result *r = u1;
    r->done = 1;
    r->status = (int)status;
    r->message[0] = '\0';
    if (status != WGPUCompilationInfoRequestStatus_Success || !info) return;
    size_t pos = 0;
    for (size_t i = 0; i < info->messageCount && pos + 1 < sizeof r->message; i++) {
        const WGPUCompilationMessage *m = &info->messages[i];
        if (m->type != WGPUCompilationMessageType_Error) continue;
        char text[WGML_ERROR_MESSAGE_MAX];
        wgml_dawn_sv_copy(text, sizeof text, m->message);
        int w = snprintf(r->message + pos, sizeof r->message - pos, "%s%llu:%llu: %s", pos ? "; " : "",
                         (unsigned long long)m->lineNum, (unsigned long long)m->linePos, text);
        if (w < 0) break;
        pos += (size_t)w;
    }
    one_line(r->message);
}

/* The compiler's error messages for a module ("" if it has none to give). */
static const char *compile_messages(wgml_gpu *g, WGPUShaderModule module) {
    WGPUCompilationInfoCallbackInfo cb = WGPU_COMPILATION_INFO_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = on_compilation_info;
    cb.userdata1 = &g->compile;
    memset(&g->compile, 0, sizeof g->compile);
    WGPUFuture f = wgpuShaderModuleGetCompilationInfo(module, cb);
    if (wgml_dawn_wait(g, f, "shader compilation info", NULL) != WGML_OK) return "";
    return g->compile.message;
}

/* The kernel object, its WGSL module (compilation errors with the
 * compiler's messages) and the descriptor of its pipeline, which the caller
 * makes; the caller releases the module. */
static wgml_status kernel_begin(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label,
                                wgml_gpu_kernel **out, WGPUShaderModule *module, WGPUComputePipelineDescriptor *pd,
                                wgml_error *err) {
    *module = NULL;
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_kernel_create: out is NULL");
    *out = NULL;
    if (!gpu || !wgsl) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_kernel_create: NULL gpu or source");
    if (!label) label = entry ? entry : "kernel";
    if (gpu->status != WGML_OK) return wgml_dawn_sticky(gpu, err);
    wgml_gpu_kernel *k = wgml_calloc(1, sizeof *k);
    char *lab = wgml_strdup(label);
    int slot = k && lab ? time_slot(gpu, label) : -1;
    if (slot < 0) {
        wgml_free(k);
        wgml_free(lab);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "kernel '%s': out of memory", label);
    }
    k->gpu = gpu;
    k->label = lab;
    k->time_slot = slot;
    k->refs = 1;

    char what[300];
    snprintf(what, sizeof what, "kernel '%s'", label);
    WGPUShaderSourceWGSL src = WGPU_SHADER_SOURCE_WGSL_INIT;
    src.code = wgml_dawn_sv(wgsl);
    WGPUShaderModuleDescriptor md = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
    md.nextInChain = &src.chain;
    md.label = wgml_dawn_sv(label);
    const int scopes = SCOPE_OOM | SCOPE_INTERNAL | SCOPE_VALIDATION;
    scope_push(gpu, scopes);
    *module = wgpuDeviceCreateShaderModule(gpu->device, &md);
    wgml_status st = scope_pop(gpu, scopes, what, err);
    if (st == WGML_ERR_GPU && *module) {
        const char *msgs = compile_messages(gpu, *module);
        if (*msgs) st = wgml_fail(err, WGML_ERR_GPU, "%s: WGSL compile error: %s", what, msgs);
    }
    if (st != WGML_OK) {
        if (*module) wgpuShaderModuleRelease(*module);
        *module = NULL;
        wgml_gpu_kernel_destroy(k);
        return st;
    }
    *pd = (WGPUComputePipelineDescriptor)WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
    pd->label = wgml_dawn_sv(k->label);
    pd->compute.module = *module;
    pd->compute.entryPoint = wgml_dawn_sv(entry);
    *out = k;
    return WGML_OK;
}

static void on_pipeline(WGPUCreatePipelineAsyncStatus status, WGPUComputePipeline pipeline, WGPUStringView message,
                        void *u1, void *u2) {
    (void)u2;
    dawn_pending *p = u1;
    p->done = 1;
    p->status = status;
    p->pipeline = pipeline; /* ours to release */
    wgml_dawn_sv_copy(p->message, sizeof p->message, message);
    one_line(p->message);
}

/* Starts k's pipeline on Dawn's workers (wgml_gpu_kernel_create_async). */
static wgml_status start_pipeline(wgml_gpu *gpu, wgml_gpu_kernel *k, const WGPUComputePipelineDescriptor *pd,
                                  wgml_error *err) {
    dawn_pending *p = wgml_calloc(1, sizeof *p);
    if (p && gpu->n_pending == gpu->cap_pending) {
        int cap = gpu->cap_pending ? 2 * gpu->cap_pending : 32;
        dawn_pending **np = wgml_realloc(gpu->pending, (size_t)cap * sizeof *np);
        if (np) {
            gpu->pending = np;
            gpu->cap_pending = cap;
        }
    }
    if (!p || gpu->n_pending == gpu->cap_pending) {
        wgml_free(p);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "kernel '%s': out of memory", k->label);
    }
    WGPUCreateComputePipelineAsyncCallbackInfo cb = WGPU_CREATE_COMPUTE_PIPELINE_ASYNC_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = on_pipeline;
    cb.userdata1 = p;
    p->k = k;
    p->future = wgpuDeviceCreateComputePipelineAsync(gpu->device, pd, cb);
    gpu->pending[gpu->n_pending++] = p;
    k->pending = p;
    return WGML_OK;
}

/* Creates k's pipeline now, inside error scopes. */
static wgml_status make_pipeline(wgml_gpu *gpu, wgml_gpu_kernel *k, const WGPUComputePipelineDescriptor *pd,
                                 wgml_error *err) {
    char what[300];
    snprintf(what, sizeof what, "kernel '%s'", k->label);
    const int scopes = SCOPE_OOM | SCOPE_INTERNAL | SCOPE_VALIDATION;
    scope_push(gpu, scopes);
    k->pipeline = wgpuDeviceCreateComputePipeline(gpu->device, pd);
    k->layout = k->pipeline ? wgpuComputePipelineGetBindGroupLayout(k->pipeline, 0) : NULL;
    wgml_status st = scope_pop(gpu, scopes, what, err);
    if (st == WGML_OK && (!k->pipeline || !k->layout))
        st = wgml_fail(err, WGML_ERR_GPU, "%s: pipeline creation failed", what);
    return st;
}

static wgml_status kernel_create(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label, int async,
                                 wgml_gpu_kernel **out, wgml_error *err) {
    if (out) *out = NULL;
    WGPUShaderModule module;
    WGPUComputePipelineDescriptor pd;
    wgml_gpu_kernel *k;
    wgml_status st = kernel_begin(gpu, wgsl, entry, label, &k, &module, &pd, err);
    if (st != WGML_OK) return st;
    st = async ? start_pipeline(gpu, k, &pd, err) : make_pipeline(gpu, k, &pd, err);
    wgpuShaderModuleRelease(module); /* a pipeline keeps what it needs */
    if (st != WGML_OK) {
        wgml_gpu_kernel_destroy(k);
        return st;
    }
    gpu->counters.kernels_created++;
    *out = k;
    return WGML_OK;
}

wgml_status wgml_gpu_kernel_create(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label,
                                   wgml_gpu_kernel **out, wgml_error *err) {
    return kernel_create(gpu, wgsl, entry, label, 0, out, err);
}

wgml_status wgml_gpu_kernel_create_async(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label,
                                         wgml_gpu_kernel **out, wgml_error *err) {
    return kernel_create(gpu, wgsl, entry, label, 1, out, err);
}

/* Takes a finished entry's pipeline into its kernel (or releases it). */
static void pending_finish(wgml_gpu *g, dawn_pending *p) {
    wgml_gpu_kernel *k = p->k;
    if (!k) {
        if (p->pipeline) wgpuComputePipelineRelease(p->pipeline);
        return;
    }
    k->pending = NULL;
    if (p->status == WGPUCreatePipelineAsyncStatus_Success && p->pipeline) {
        k->pipeline = p->pipeline;
        k->layout = wgpuComputePipelineGetBindGroupLayout(k->pipeline, 0);
        if (!k->layout) wgml_dawn_set_status(g, WGML_ERR_GPU, "kernel '%s': no bind group layout", k->label);
    } else {
        if (p->pipeline) wgpuComputePipelineRelease(p->pipeline);
        wgml_dawn_set_status(g, WGML_ERR_GPU, "kernel '%s': pipeline creation failed: %s", k->label,
                             p->done ? p->message : "no answer");
    }
}

wgml_status wgml_gpu_kernels_wait(wgml_gpu *g, wgml_gpu_progress_fn progress, void *user, wgml_error *err) {
    if (!g) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_kernels_wait: gpu is NULL");
    if (!g->n_pending) return g->status == WGML_OK ? WGML_OK : wgml_dawn_sticky(g, err);
    double t0 = (double)now_ns();
    int i = 0;
    for (; i < g->n_pending; i++) {
        dawn_pending *p = g->pending[i];
        if (!p->done && wgml_dawn_wait(g, p->future, "a kernel's pipeline", NULL) != WGML_OK) break;
        pending_finish(g, p);
        wgml_free(p);
        if (progress) progress(user, i + 1, g->n_pending);
    }
    /* Entries not waited for (timeout, device loss) stay for wgml_gpu_destroy. */
    memmove(g->pending, g->pending + i, (size_t)(g->n_pending - i) * sizeof *g->pending);
    g->n_pending -= i;
    g->kernel_wait_ms += ((double)now_ns() - t0) * 1e-6;
    return g->status == WGML_OK ? WGML_OK : wgml_dawn_sticky(g, err);
}

int wgml_gpu_kernels_pending(const wgml_gpu *gpu) { return gpu ? gpu->n_pending : 0; }

double wgml_gpu_kernel_wait_ms(const wgml_gpu *gpu) { return gpu ? gpu->kernel_wait_ms : 0.0; }

void wgml_gpu_kernel_destroy(wgml_gpu_kernel *k) { wgml_dawn_kernel_unref(k); }

size_t wgml_gpu_cache_get(wgml_gpu *gpu, const char *key, void **value) {
    *value = NULL;
    return gpu && key ? wgml_pipeline_cache_get(gpu->cache, key, strlen(key), value) : 0;
}

void wgml_gpu_cache_put(wgml_gpu *gpu, const char *key, const void *value, size_t size) {
    if (gpu && key) wgml_pipeline_cache_put(gpu->cache, key, strlen(key), value, size);
}

void wgml_dawn_kernel_unref(wgml_gpu_kernel *k) {
    if (!k || --k->refs > 0) return;
    if (k->pending) k->pending->k = NULL; /* its pipeline is released when it arrives */
    if (k->layout) wgpuBindGroupLayoutRelease(k->layout);
    if (k->pipeline) wgpuComputePipelineRelease(k->pipeline);
    wgml_free(k->label);
    wgml_free(k);
}

const char *wgml_gpu_kernel_label(const wgml_gpu_kernel *k) { return k ? k->label : ""; }

/* Creates bg->group from its entries with k's layout, inside error scopes. */
static wgml_status make_group(wgml_gpu *gpu, wgml_gpu_kernel *k, wgml_gpu_bindgroup *bg, const WGPUBindGroupEntry *e,
                              int n, wgml_error *err) {
    WGPUBindGroupDescriptor d = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
    d.label = wgml_dawn_sv(k->label);
    d.layout = k->layout;
    d.entryCount = (size_t)n;
    d.entries = e;
    char what[300];
    snprintf(what, sizeof what, "kernel '%s': bind group", k->label);
    scope_push(gpu, SCOPE_OOM | SCOPE_VALIDATION);
    bg->group = wgpuDeviceCreateBindGroup(gpu->device, &d);
    wgml_status st = scope_pop(gpu, SCOPE_OOM | SCOPE_VALIDATION, what, err);
    if (st == WGML_OK && !bg->group) st = wgml_fail(err, WGML_ERR_GPU, "%s: creation failed", what);
    if (st == WGML_OK) gpu->counters.bindgroups_created++;
    return st;
}

/* Drops what a deferred bind group holds until it is made. */
static void drop_entries(wgml_gpu_bindgroup *bg) {
    for (int i = 0; i < bg->n_entries; i++)
        wgpuBufferRelease(bg->entries[i].buffer);
    wgml_free(bg->entries);
    bg->entries = NULL;
    bg->n_entries = 0;
    wgml_dawn_kernel_unref(bg->k);
    bg->k = NULL;
}

wgml_status wgml_gpu_bindgroup_create(wgml_gpu *gpu, wgml_gpu_kernel *k, const wgml_gpu_binding *b, int n,
                                      wgml_gpu_bindgroup **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_bindgroup_create: out is NULL");
    *out = NULL;
    if (!gpu || !k || n < 0 || (n > 0 && !b))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_bindgroup_create: bad arguments");
    if (gpu->status != WGML_OK) return wgml_dawn_sticky(gpu, err);
    for (int i = 0; i < n; i++)
        if (!b[i].buffer)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "kernel '%s': binding %u has no buffer", k->label,
                             b[i].binding);
    WGPUBindGroupEntry local[16];
    int deferred = k->pending != NULL;
    WGPUBindGroupEntry *e = n <= 16 && !deferred ? local : wgml_malloc((size_t)(n ? n : 1) * sizeof *e);
    wgml_gpu_bindgroup *bg = wgml_calloc(1, sizeof *bg);
    if (!e || !bg) {
        if (e != local) wgml_free(e);
        wgml_free(bg);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "kernel '%s': bind group: out of memory", k->label);
    }
    bg->refs = 1;
    for (int i = 0; i < n; i++) {
        e[i] = WGPU_BIND_GROUP_ENTRY_INIT;
        e[i].binding = b[i].binding;
        e[i].buffer = b[i].buffer->buf;
        e[i].offset = b[i].offset;
        e[i].size = b[i].size ? b[i].size : WGPU_WHOLE_SIZE;
    }
    if (deferred) {
        /* Made at the submit, once the pipeline (and so the layout) is there. */
        for (int i = 0; i < n; i++)
            wgpuBufferAddRef(e[i].buffer);
        bg->entries = e;
        bg->n_entries = n;
        bg->k = k;
        k->refs++;
        *out = bg;
        return WGML_OK;
    }
    wgml_status st = make_group(gpu, k, bg, e, n, err);
    if (e != local) wgml_free(e);
    if (st != WGML_OK) {
        wgml_gpu_bindgroup_destroy(bg);
        return st;
    }
    *out = bg;
    return WGML_OK;
}

wgml_status wgml_dawn_make_bindgroup(wgml_gpu *g, wgml_gpu_bindgroup *bg, wgml_error *err) {
    if (bg->group) return WGML_OK;
    wgml_status st;
    if (!bg->k || !bg->k->layout)
        st = wgml_fail(err, WGML_ERR_GPU, "kernel '%s': bind group without a pipeline", bg->k ? bg->k->label : "?");
    else
        st = make_group(g, bg->k, bg, bg->entries, bg->n_entries, err);
    drop_entries(bg);
    return st;
}

void wgml_gpu_bindgroup_destroy(wgml_gpu_bindgroup *bg) { wgml_dawn_bindgroup_unref(bg); }

void wgml_dawn_bindgroup_unref(wgml_gpu_bindgroup *bg) {
    if (!bg || --bg->refs > 0) return;
    drop_entries(bg);
    if (bg->group) wgpuBindGroupRelease(bg->group);
    wgml_free(bg);
}
