/*
 * web.c - the GPU layer (gpu.h) in the browser: every verb is a wasm import
 * implemented in JavaScript over navigator.gpu (web/gpu.js).
 *
 * Objects cross the boundary as small integer handles into a JS table; the C
 * structs here keep what gpu.h hands back without asking JS (sizes, labels,
 * adapter info, counters). Strings and arrays are passed as pointers into the
 * wasm memory, 64-bit sizes as doubles (exact below 2^53).
 *
 * Waiting. Four imports are asynchronous in JS - device creation, buffer
 * creation (inside error scopes, so that out-of-memory and size errors come
 * back from this call), kernel creation (compilation messages, async pipeline
 * creation) and submit (mapAsync of the readbacks). The JS side makes them
 * look synchronous to C: with JSPI they are WebAssembly.Suspending imports of
 * promising exports; without JSPI the module is rewritten by binaryen's
 * Asyncify (web/dist/wgml-asyncify.wasm) and web/engine.js unwinds and rewinds
 * the stack around them. Everything else (writes, recording, bind groups) is a
 * plain synchronous call.
 *
 * Errors. gpu.js keeps error scopes pushed while commands are recorded and
 * pops them at the next submit, so a validation, out-of-memory or internal
 * error of a write, a bind group or a dispatch comes back from that submit;
 * uncaptured errors and device loss set the same sticky status (kept in JS,
 * read with gpu_status), which every status-returning call reports.
 *
 * Not here: timestamp queries (profiling records no kernel times in the
 * browser) and more than one adapter (the browser chooses it).
 */
#include "core/alloc.h"
#include "core/error.h"
#include "gpu/gpu.h"

#include <stdio.h>
#include <string.h>

#define JS(name) __attribute__((import_module("wgml"), import_name(#name)))

/* Layouts shared with web/gpu.js (explicit, 8-byte aligned doubles). */
typedef struct web_binding {
    uint32_t binding, buffer;
    double offset, size;
} web_binding;

typedef struct web_readback {
    uint32_t buffer, dst, size, pad;
    double offset;
} web_readback;

_Static_assert(sizeof(web_binding) == 24, "web_binding layout");
_Static_assert(sizeof(web_readback) == 24, "web_readback layout");

/* Creation calls return a handle > 0, or minus a wgml_status with the message in msg. */
JS(gpu_create) int js_gpu_create(int want_f16, int want_subgroups, const char *adapter, char *msg, int cap);
JS(gpu_destroy) void js_gpu_destroy(int gpu);
JS(gpu_info_str) int js_gpu_info_str(int gpu, int which, char *buf, int cap);
JS(gpu_info_num) double js_gpu_info_num(int gpu, int which);
JS(gpu_status) int js_gpu_status(int gpu, char *msg, int cap);
JS(gpu_lose) void js_gpu_lose(int gpu);
JS(gpu_buffer_create) int js_gpu_buffer_create(int gpu, double size, int usage, const char *label, char *msg, int cap);
JS(gpu_buffer_destroy) void js_gpu_buffer_destroy(int buf);
JS(gpu_write) void js_gpu_write(int gpu, int buf, double offset, const void *data, double size);
JS(gpu_kernel_create)
int js_gpu_kernel_create(int gpu, const char *wgsl, const char *entry, const char *label, char *msg, int cap);
JS(gpu_kernel_destroy) void js_gpu_kernel_destroy(int kernel);
JS(gpu_bindgroup_create)
int js_gpu_bindgroup_create(int gpu, int kernel, const web_binding *b, int n, char *msg, int cap);
JS(gpu_bindgroup_destroy) void js_gpu_bindgroup_destroy(int bindgroup);
JS(gpu_dispatch) void js_gpu_dispatch(int gpu, int kernel, int bindgroup, uint32_t x, uint32_t y, uint32_t z);
JS(gpu_copy) void js_gpu_copy(int gpu, int src, double src_offset, int dst, double dst_offset, double size);
JS(gpu_submit) int js_gpu_submit(int gpu, const web_readback *reads, int n, char *msg, int cap);

/* The numbers and strings gpu_info_num / gpu_info_str answer (web/gpu.js: INFO_NUM, INFO_STR). */
enum {
    NUM_MAX_BUFFER,
    NUM_MAX_STORAGE_BINDING,
    NUM_MAX_UNIFORM_BINDING,
    NUM_MAX_STORAGE_PER_STAGE,
    NUM_MAX_INVOCATIONS,
    NUM_MAX_WG_X,
    NUM_MAX_WG_Y,
    NUM_MAX_WG_Z,
    NUM_MAX_WG_STORAGE,
    NUM_MAX_WG_PER_DIM,
    NUM_STORAGE_ALIGN,
    NUM_UNIFORM_ALIGN,
    NUM_SUBGROUP_MIN,
    NUM_SUBGROUP_MAX,
    NUM_HAS_F16,
    NUM_HAS_SUBGROUPS,
    NUM_HAS_TIMESTAMPS,
    NUM_ON_F16,
    NUM_ON_SUBGROUPS,
    NUM_TYPE,
    NUM_VENDOR_ID,
    NUM_DEVICE_ID
};
enum { STR_NAME, STR_VENDOR, STR_ARCHITECTURE, STR_DRIVER };

struct wgml_gpu {
    int h;
    wgml_gpu_adapter_info info;
    wgml_gpu_features enabled;
    wgml_gpu_counters counters;
};

struct wgml_gpu_buffer {
    wgml_gpu *gpu;
    int h;
    uint64_t size;
};

struct wgml_gpu_kernel {
    wgml_gpu *gpu;
    int h;
    char *label;
};

struct wgml_gpu_bindgroup {
    int h;
};

/* A failed creation: -status and the message JS wrote. */
static wgml_status js_fail(int r, const char *msg, wgml_error *err) {
    wgml_status code = (wgml_status)(-r);
    if (code <= WGML_OK || code > WGML_ERR_TOKENIZER) code = WGML_ERR_GPU;
    return wgml_fail(err, code, "%s", msg);
}

/* ---- device ------------------------------------------------------------------ */

static void read_info(wgml_gpu *g) {
    wgml_gpu_adapter_info *o = &g->info;
    memset(o, 0, sizeof *o);
    js_gpu_info_str(g->h, STR_NAME, o->name, (int)sizeof o->name);
    js_gpu_info_str(g->h, STR_VENDOR, o->vendor, (int)sizeof o->vendor);
    js_gpu_info_str(g->h, STR_ARCHITECTURE, o->architecture, (int)sizeof o->architecture);
    js_gpu_info_str(g->h, STR_DRIVER, o->driver, (int)sizeof o->driver);
    snprintf(o->backend, sizeof o->backend, "browser");
    snprintf(o->source, sizeof o->source, "navigator.gpu");
#define NUM(which) js_gpu_info_num(g->h, which)
    o->type = (wgml_gpu_adapter_type)NUM(NUM_TYPE);
    o->vendor_id = (uint32_t)NUM(NUM_VENDOR_ID);
    o->device_id = (uint32_t)NUM(NUM_DEVICE_ID);
    o->has_f16 = NUM(NUM_HAS_F16) != 0;
    o->has_subgroups = NUM(NUM_HAS_SUBGROUPS) != 0;
    o->has_timestamps = NUM(NUM_HAS_TIMESTAMPS) != 0;
    o->subgroup_min_size = (uint32_t)NUM(NUM_SUBGROUP_MIN);
    o->subgroup_max_size = (uint32_t)NUM(NUM_SUBGROUP_MAX);
    o->max_buffer_size = (uint64_t)NUM(NUM_MAX_BUFFER);
    o->max_storage_binding_size = (uint64_t)NUM(NUM_MAX_STORAGE_BINDING);
    o->max_uniform_binding_size = (uint64_t)NUM(NUM_MAX_UNIFORM_BINDING);
    o->max_storage_buffers_per_stage = (uint32_t)NUM(NUM_MAX_STORAGE_PER_STAGE);
    o->max_workgroup_invocations = (uint32_t)NUM(NUM_MAX_INVOCATIONS);
    o->max_workgroup_size_x = (uint32_t)NUM(NUM_MAX_WG_X);
    o->max_workgroup_size_y = (uint32_t)NUM(NUM_MAX_WG_Y);
    o->max_workgroup_size_z = (uint32_t)NUM(NUM_MAX_WG_Z);
    o->max_workgroup_storage = (uint32_t)NUM(NUM_MAX_WG_STORAGE);
    o->max_workgroups_per_dimension = (uint32_t)NUM(NUM_MAX_WG_PER_DIM);
    o->min_storage_offset_alignment = (uint32_t)NUM(NUM_STORAGE_ALIGN);
    o->min_uniform_offset_alignment = (uint32_t)NUM(NUM_UNIFORM_ALIGN);
    g->enabled.f16 = NUM(NUM_ON_F16) != 0;
    g->enabled.subgroups = NUM(NUM_ON_SUBGROUPS) != 0;
    g->enabled.timestamps = 0;
#undef NUM
}

wgml_status wgml_gpu_create(const wgml_gpu_options *options, wgml_gpu **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_create: out is NULL");
    *out = NULL;
    wgml_gpu_options opt = {0};
    if (options) opt = *options;
    wgml_gpu *g = wgml_calloc(1, sizeof *g);
    if (!g) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "wgml_gpu_create: out of memory");
    /* The browser picks the adapter (allow_software is its decision too). */
    char msg[WGML_ERROR_MESSAGE_MAX] = "";
    int h = js_gpu_create(opt.want_f16, opt.want_subgroups, opt.adapter ? opt.adapter : "", msg, (int)sizeof msg);
    if (h <= 0) {
        wgml_free(g);
        return js_fail(h, msg, err);
    }
    g->h = h;
    read_info(g);
    *out = g;
    return WGML_OK;
}

void wgml_gpu_destroy(wgml_gpu *g) {
    if (!g) return;
    js_gpu_destroy(g->h);
    wgml_free(g);
}

int wgml_gpu_list_adapters(wgml_gpu_adapter_info *out, int cap, wgml_error *err) {
    if (cap < 0 || (cap > 0 && !out)) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_list_adapters: bad output array");
        return -1;
    }
    wgml_gpu *g = NULL;
    wgml_gpu_options opt = {.allow_software = 1};
    wgml_status st = wgml_gpu_create(&opt, &g, err);
    if (st == WGML_ERR_NO_ADAPTER) return 0;
    if (st || !g) return -1;
    if (cap > 0) out[0] = g->info;
    wgml_gpu_destroy(g);
    return 1;
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
    char msg[WGML_ERROR_MESSAGE_MAX] = "";
    int code = js_gpu_status(gpu->h, msg, (int)sizeof msg);
    if (code != WGML_OK) return wgml_fail(err, (wgml_status)code, "%s", msg);
    wgml_error_clear(err);
    return WGML_OK;
}

void wgml_gpu_lose_device(wgml_gpu *gpu) {
    if (gpu) js_gpu_lose(gpu->h);
}

/* ---- buffers ------------------------------------------------------------------- */

wgml_status wgml_gpu_buffer_create(wgml_gpu *gpu, uint64_t size, int usage, const char *label, wgml_gpu_buffer **out,
                                   wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_buffer_create: out is NULL");
    *out = NULL;
    if (!gpu) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_buffer_create: gpu is NULL");
    if (!label) label = "buffer";
    if (size == 0 || size > ((uint64_t)1 << 52) || !(usage & (WGML_GPU_STORAGE | WGML_GPU_UNIFORM)) ||
        (usage & ~(WGML_GPU_STORAGE | WGML_GPU_UNIFORM)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "buffer '%s': bad size %llu or usage %d", label,
                         (unsigned long long)size, usage);
    wgml_gpu_buffer *b = wgml_calloc(1, sizeof *b);
    if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "buffer '%s': out of memory", label);
    b->gpu = gpu;
    b->size = (size + 3) & ~(uint64_t)3; /* whole words, so that every copy can reach the tail */
    char msg[WGML_ERROR_MESSAGE_MAX] = "";
    int h = js_gpu_buffer_create(gpu->h, (double)b->size, usage, label, msg, (int)sizeof msg);
    if (h <= 0) {
        wgml_free(b);
        return js_fail(h, msg, err);
    }
    b->h = h;
    gpu->counters.buffers_created++;
    gpu->counters.memory_bytes += b->size;
    *out = b;
    return WGML_OK;
}

void wgml_gpu_buffer_destroy(wgml_gpu_buffer *buf) {
    if (!buf) return;
    js_gpu_buffer_destroy(buf->h);
    buf->gpu->counters.memory_bytes -= buf->size;
    wgml_free(buf);
}

uint64_t wgml_gpu_buffer_size(const wgml_gpu_buffer *buf) { return buf ? buf->size : 0; }

static int range_ok(uint64_t offset, uint64_t size, uint64_t total) {
    return offset <= total && size <= total - offset;
}

void wgml_gpu_write(wgml_gpu *gpu, wgml_gpu_buffer *buf, uint64_t offset, const void *data, size_t size) {
    if (!gpu || size == 0) return;
    /* Bad arguments become the sticky status through JS (a zero handle). */
    int ok = buf && data && !((offset | size) & 3) && range_ok(offset, size, buf->size);
    js_gpu_write(gpu->h, ok ? buf->h : 0, (double)offset, data, (double)size);
    if (ok) gpu->counters.write_bytes += size;
}

/* ---- kernels and bind groups --------------------------------------------------------- */

wgml_status wgml_gpu_kernel_create(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label,
                                   wgml_gpu_kernel **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_kernel_create: out is NULL");
    *out = NULL;
    if (!gpu || !wgsl || !entry)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_kernel_create: NULL gpu, source or entry");
    if (!label) label = entry;
    wgml_gpu_kernel *k = wgml_calloc(1, sizeof *k);
    char *lab = wgml_strdup(label);
    if (!k || !lab) {
        wgml_free(k);
        wgml_free(lab);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "kernel '%s': out of memory", label);
    }
    char msg[WGML_ERROR_MESSAGE_MAX] = "";
    int h = js_gpu_kernel_create(gpu->h, wgsl, entry, label, msg, (int)sizeof msg);
    if (h <= 0) {
        wgml_free(k);
        wgml_free(lab);
        return js_fail(h, msg, err);
    }
    k->gpu = gpu;
    k->h = h;
    k->label = lab;
    gpu->counters.kernels_created++;
    *out = k;
    return WGML_OK;
}

void wgml_gpu_kernel_destroy(wgml_gpu_kernel *k) {
    if (!k) return;
    js_gpu_kernel_destroy(k->h);
    wgml_free(k->label);
    wgml_free(k);
}

const char *wgml_gpu_kernel_label(const wgml_gpu_kernel *k) { return k ? k->label : ""; }

/* The browser compiles in its GPU process; creation here stays one awaited
 * call per kernel, so nothing is ever pending. */
wgml_status wgml_gpu_kernel_create_async(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label,
                                         wgml_gpu_kernel **out, wgml_error *err) {
    return wgml_gpu_kernel_create(gpu, wgsl, entry, label, out, err);
}

wgml_status wgml_gpu_kernels_wait(wgml_gpu *gpu, wgml_gpu_progress_fn progress, void *user, wgml_error *err) {
    (void)progress;
    (void)user;
    return wgml_gpu_status(gpu, err);
}

int wgml_gpu_kernels_pending(const wgml_gpu *gpu) {
    (void)gpu;
    return 0;
}

size_t wgml_gpu_cache_get(wgml_gpu *gpu, const char *key, void **value) {
    (void)gpu;
    (void)key;
    *value = NULL;
    return 0;
}

void wgml_gpu_cache_put(wgml_gpu *gpu, const char *key, const void *value, size_t size) {
    (void)gpu;
    (void)key;
    (void)value;
    (void)size;
}

double wgml_gpu_kernel_wait_ms(const wgml_gpu *gpu) {
    (void)gpu;
    return 0.0;
}

wgml_status wgml_gpu_bindgroup_create(wgml_gpu *gpu, wgml_gpu_kernel *k, const wgml_gpu_binding *b, int n,
                                      wgml_gpu_bindgroup **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_bindgroup_create: out is NULL");
    *out = NULL;
    if (!gpu || !k || n < 0 || (n > 0 && !b))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_bindgroup_create: bad arguments");
    for (int i = 0; i < n; i++)
        if (!b[i].buffer)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "kernel '%s': binding %u has no buffer", k->label,
                             b[i].binding);
    web_binding local[16];
    web_binding *e = n <= 16 ? local : wgml_malloc((size_t)n * sizeof *e);
    wgml_gpu_bindgroup *bg = wgml_calloc(1, sizeof *bg);
    if (!e || !bg) {
        if (e != local) wgml_free(e);
        wgml_free(bg);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "kernel '%s': bind group: out of memory", k->label);
    }
    for (int i = 0; i < n; i++)
        e[i] = (web_binding){b[i].binding, (uint32_t)b[i].buffer->h, (double)b[i].offset, (double)b[i].size};
    char msg[WGML_ERROR_MESSAGE_MAX] = "";
    int h = js_gpu_bindgroup_create(gpu->h, k->h, e, n, msg, (int)sizeof msg);
    if (e != local) wgml_free(e);
    if (h <= 0) {
        wgml_free(bg);
        return js_fail(h, msg, err);
    }
    bg->h = h;
    gpu->counters.bindgroups_created++;
    *out = bg;
    return WGML_OK;
}

void wgml_gpu_bindgroup_destroy(wgml_gpu_bindgroup *bg) {
    if (!bg) return;
    js_gpu_bindgroup_destroy(bg->h);
    wgml_free(bg);
}

/* ---- recording and submitting ------------------------------------------------------ */

void wgml_gpu_dispatch(wgml_gpu *gpu, wgml_gpu_kernel *k, wgml_gpu_bindgroup *bg, uint32_t x, uint32_t y, uint32_t z) {
    if (!gpu) return;
    js_gpu_dispatch(gpu->h, k ? k->h : 0, bg ? bg->h : 0, x, y, z);
    gpu->counters.dispatches++;
}

void wgml_gpu_copy(wgml_gpu *gpu, wgml_gpu_buffer *src, uint64_t src_offset, wgml_gpu_buffer *dst, uint64_t dst_offset,
                   uint64_t size) {
    if (!gpu || size == 0) return;
    int ok = src && dst && !((src_offset | dst_offset | size) & 3) && range_ok(src_offset, size, src->size) &&
             range_ok(dst_offset, size, dst->size);
    js_gpu_copy(gpu->h, ok ? src->h : 0, (double)src_offset, ok ? dst->h : 0, (double)dst_offset, (double)size);
}

wgml_status wgml_gpu_submit(wgml_gpu *gpu, const wgml_gpu_readback *reads, int n_reads, wgml_error *err) {
    if (!gpu) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_submit: gpu is NULL");
    if (n_reads < 0 || (n_reads > 0 && !reads))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_submit: bad readback list");
    web_readback local[8];
    web_readback *r = n_reads <= 8 ? local : wgml_malloc((size_t)n_reads * sizeof *r);
    if (!r) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "wgml_gpu_submit: out of memory");
    for (int i = 0; i < n_reads; i++) {
        const wgml_gpu_readback *q = &reads[i];
        if (!q->src || (!q->dst && q->size) || !range_ok(q->offset, q->size, q->src->size)) {
            if (r != local) wgml_free(r);
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "wgml_gpu_submit: readback %d (%zu bytes at %llu) is outside its buffer", i, q->size,
                             (unsigned long long)q->offset);
        }
        r[i] =
            (web_readback){(uint32_t)q->src->h, (uint32_t)(uintptr_t)q->dst, (uint32_t)q->size, 0, (double)q->offset};
    }
    char msg[WGML_ERROR_MESSAGE_MAX] = "";
    int code = js_gpu_submit(gpu->h, r, n_reads, msg, (int)sizeof msg);
    if (r != local) wgml_free(r);
    gpu->counters.submits++;
    if (code != WGML_OK) return wgml_fail(err, (wgml_status)code, "%s", msg);
    for (int i = 0; i < n_reads; i++)
        gpu->counters.read_bytes += reads[i].size;
    wgml_error_clear(err);
    return WGML_OK;
}

wgml_status wgml_gpu_read(wgml_gpu *gpu, wgml_gpu_buffer *buf, uint64_t offset, void *dst, size_t size,
                          wgml_error *err) {
    wgml_gpu_readback r = {buf, offset, size, dst};
    return wgml_gpu_submit(gpu, &r, 1, err);
}

/* ---- counters and timing ------------------------------------------------------------ */

void wgml_gpu_get_counters(const wgml_gpu *gpu, wgml_gpu_counters *c) {
    if (!c) return;
    if (gpu)
        *c = gpu->counters;
    else
        memset(c, 0, sizeof *c);
}

void wgml_gpu_set_profiling(wgml_gpu *gpu, int on) {
    (void)gpu;
    (void)on;
}

int wgml_gpu_kernel_times(const wgml_gpu *gpu, wgml_gpu_kernel_time *out, int cap) {
    (void)gpu;
    (void)out;
    (void)cap;
    return 0;
}
