/*
 * cpu_backend.c - the CPU backend object: memory, steps, counters, timing.
 *
 * The CPU backend is the numerical reference for every other backend and the
 * fallback when no GPU is usable. Buffers are plain host memory; weights are
 * used in place from the GGUF mapping (weight_create copies nothing), except
 * those whose kernels read a layout of their own (kernels.h, `packed`):
 * those are rewritten into it once, here.
 * Ops execute when called (see cpu_ops.c), so begin/end only bracket a step
 * and report the first error any op recorded.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/kernels.h"
#include "core/alloc.h"
#include "core/error.h"

/* *buf grown to at least size bytes (contents not kept). */
static void *grow(cpu_backend *cb, uint8_t **buf, size_t *have, size_t size, const char *what) {
    if (size <= *have && *buf) return *buf;
    size_t want = size + size / 4 + 4096;
    void *p = wgml_aligned_alloc(want);
    if (!p) {
        cpu_error(cb, WGML_ERR_OUT_OF_MEMORY, "cpu backend: out of memory for %zu bytes of %s", want, what);
        return NULL;
    }
    wgml_aligned_free(*buf);
    *buf = p;
    *have = want;
    return p;
}

void *cpu_scratch(cpu_backend *cb, size_t size) { return grow(cb, &cb->scratch, &cb->scratch_size, size, "scratch"); }

void *cpu_scratch_unfold(cpu_backend *cb, size_t size) {
    return grow(cb, &cb->unfold, &cb->unfold_size, size, "a convolution's signal");
}

int cpu_check(cpu_backend *cb, const char *op, const wgml_tensor *t) {
    if (!t || !t->buf) {
        cpu_error(cb, WGML_ERR_INVALID_ARGUMENT, "%s: missing tensor", op);
        return 0;
    }
    size_t n = wgml_tensor_extent(t); /* a strided view's whole span (copy's input) */
    if (n == 0 || t->offset > t->buf->size || n > t->buf->size - t->offset) {
        cpu_error(cb, WGML_ERR_INVALID_ARGUMENT, "%s: tensor '%s' [%lld x %lld %s] at offset %zu exceeds its buffer of %zu bytes",
                  op, t->name ? t->name : "?", (long long)t->ne[0], (long long)wgml_tensor_nrows(t),
                  wgml_dtype_name(t->type), t->offset, t->buf->size);
        return 0;
    }
    return 1;
}

double cpu_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void cpu_profile_add(cpu_backend *cb, const char *name, double ms, double flop) {
    for (int i = 0; i < cb->n_prof; i++) {
        if (strcmp(cb->prof[i].name, name) == 0) {
            cb->prof[i].calls++;
            cb->prof[i].total_ms += ms;
            cb->prof[i].flop += flop;
            return;
        }
    }
    if (cb->n_prof < CPU_MAX_PROFILE) cb->prof[cb->n_prof++] = (wgml_kernel_time){name, 1, ms, flop};
}

/* A buffer of host memory, zeroed unless it is about to be filled whole. */
static wgml_status buffer_alloc(wgml_backend *be, size_t size, int zero, wgml_buffer **out, wgml_error *err) {
    cpu_backend *cb = (cpu_backend *)be;
    *out = NULL;
    wgml_buffer *b = wgml_calloc(1, sizeof *b);
    void *data = b ? wgml_aligned_alloc(size) : NULL;
    if (!data) {
        wgml_free(b);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "cpu backend: cannot allocate a buffer of %zu bytes", size);
    }
    if (zero) memset(data, 0, size);
    b->data = data;
    b->size = size;
    b->owned = 1;
    cb->stats.buffers_created++;
    cb->stats.device_memory_bytes += size;
    *out = b;
    return WGML_OK;
}

/* Rows [row0, row0 + rows) of weight b from GGUF-layout bytes, in b's layout. */
static void weight_fill(wgml_buffer *b, int64_t row0, int64_t rows, const uint8_t *src) {
    uint8_t *dst = b->data + (size_t)row0 * b->row_bytes;
    if (!b->packed) {
        memcpy(dst, src, (size_t)rows * b->row_bytes);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        b->packed->repack(src + (size_t)r * b->row_bytes, dst + (size_t)r * b->row_bytes, b->ne0);
}

static wgml_status buffer_create(wgml_backend *be, size_t size, wgml_buffer_usage usage, wgml_buffer **out,
                                 wgml_error *err) {
    (void)usage;
    return buffer_alloc(be, size, 1, out, err);
}

static wgml_status weight_create(wgml_backend *be, uint32_t type, int64_t ne0, int64_t ne1, const void *data,
                                 const char *name, wgml_buffer **out, wgml_error *err) {
    *out = NULL;
    const size_t row = wgml_row_size(type, ne0), size = row * (size_t)ne1;
    const cpu_type_kernels *k = cpu_kernels_get(type);
    const cpu_type_kernels *packed = k && k->packed && ne0 % wgml_dtype_get(type)->block_size == 0 ? k->packed : NULL;
    if (!data || packed) { /* the backend owns the bytes: streamed (filled by weight_write), or repacked */
        wgml_status st = buffer_alloc(be, size, !data, out, err);
        if (st) {
            wgml_error_prefix(err, "weight '%s'", name ? name : "?");
            return st;
        }
        (*out)->row_bytes = row;
        (*out)->ne0 = ne0;
        (*out)->packed = packed;
        if (data) weight_fill(*out, 0, ne1, data);
        return WGML_OK;
    }
    wgml_buffer *b = wgml_calloc(1, sizeof *b);
    if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "cpu backend: out of memory");
    b->data = (uint8_t *)data; /* read-only by contract: ops never write weights */
    b->size = size;
    b->row_bytes = row;
    b->ne0 = ne0;
    *out = b;
    return WGML_OK;
}

static int weight_in_place(wgml_backend *be, const wgml_buffer *b) {
    (void)be;
    return !b->owned;
}

static wgml_status weight_write(wgml_backend *be, wgml_buffer *b, int64_t row0, int64_t rows, const void *data,
                                wgml_error *err) {
    (void)be;
    if (!b->owned || rows < 0 || row0 < 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cpu backend: weight_write to a weight with data");
    size_t row = b->row_bytes;
    if (!row || (size_t)(row0 + rows) * row > b->size)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cpu backend: rows %lld..%lld past the weight",
                         (long long)row0, (long long)(row0 + rows));
    weight_fill(b, row0, rows, data);
    return WGML_OK;
}

static void buffer_free(wgml_backend *be, wgml_buffer *b) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!b) return;
    if (b->owned) {
        cb->stats.device_memory_bytes -= b->size;
        wgml_aligned_free(b->data);
    }
    wgml_free(b);
}

static wgml_status buffer_write(wgml_backend *be, wgml_buffer *b, size_t offset, const void *data, size_t size,
                                wgml_error *err) {
    (void)be;
    if (!b->owned) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cpu backend: write to a read-only weight buffer");
    if (offset > b->size || size > b->size - offset)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cpu backend: write of %zu bytes at %zu past a buffer of %zu",
                         size, offset, b->size);
    memcpy(b->data + offset, data, size);
    return WGML_OK;
}

static wgml_status buffer_read(wgml_backend *be, wgml_buffer *b, size_t offset, void *data, size_t size,
                               wgml_error *err) {
    (void)be;
    if (offset > b->size || size > b->size - offset)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cpu backend: read of %zu bytes at %zu past a buffer of %zu",
                         size, offset, b->size);
    memcpy(data, b->data + offset, size);
    return WGML_OK;
}

static void begin(wgml_backend *be, const wgml_step *step) {
    cpu_backend *cb = (cpu_backend *)be;
    cb->step = *step;
    cb->in_step = 1;
    wgml_sticky_clear(&cb->sticky);
    cb->stats.steps++;
}

static wgml_status end(wgml_backend *be, wgml_error *err) {
    cpu_backend *cb = (cpu_backend *)be;
    cb->in_step = 0;
    cb->stats.submits++;
    return wgml_sticky_report(&cb->sticky, err);
}

static void upload(wgml_backend *be, const wgml_tensor *dst, const void *src, size_t size) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!cpu_check(cb, "upload", dst)) return;
    if (size > wgml_tensor_nbytes(dst) || !dst->buf->owned) {
        cpu_error(cb, WGML_ERR_INVALID_ARGUMENT, "upload: %zu bytes do not fit tensor '%s'", size,
                  dst->name ? dst->name : "?");
        return;
    }
    memcpy(cpu_ptr(dst), src, size);
    cb->stats.upload_bytes += size;
}

static void download(wgml_backend *be, const wgml_tensor *src, void *dst, size_t size) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!cpu_check(cb, "download", src)) return;
    if (size > wgml_tensor_nbytes(src)) {
        cpu_error(cb, WGML_ERR_INVALID_ARGUMENT, "download: %zu bytes exceed tensor '%s'", size,
                  src->name ? src->name : "?");
        return;
    }
    memcpy(dst, cpu_ptr(src), size);
    cb->stats.readback_bytes += size;
}

static void get_stats(wgml_backend *be, wgml_backend_stats *s) { *s = ((cpu_backend *)be)->stats; }

static void set_profiling(wgml_backend *be, int on) {
    cpu_backend *cb = (cpu_backend *)be;
    cb->profiling = on;
    cb->n_prof = 0;
}

static int get_kernel_times(wgml_backend *be, wgml_kernel_time *t, int cap) {
    cpu_backend *cb = (cpu_backend *)be;
    for (int i = 0; i < cb->n_prof && i < cap; i++) t[i] = cb->prof[i];
    return cb->n_prof;
}

static int supports_type(wgml_backend *be, uint32_t type) {
    (void)be;
    return cpu_kernels_get(type) != NULL;
}

static void cpu_free(wgml_backend *be) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!cb) return;
    wgml_threadpool_free(cb->pool);
    wgml_aligned_free(cb->scratch);
    wgml_aligned_free(cb->unfold);
    wgml_free(cb);
}

wgml_status wgml_backend_cpu_create_exact(int n_threads, wgml_backend **out, wgml_error *err) {
    wgml_status st = wgml_backend_cpu_create(n_threads, out, err);
    if (!st) {
        ((cpu_backend *)*out)->exact = 1;
        (*out)->device_name = "exact reference";
    }
    return st;
}

wgml_status wgml_backend_cpu_create(int n_threads, wgml_backend **out, wgml_error *err) {
    *out = NULL;
    cpu_backend *cb = wgml_calloc(1, sizeof *cb);
    if (!cb) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating the CPU backend");
    wgml_status st = wgml_threadpool_create(n_threads, &cb->pool, err);
    if (st) {
        wgml_free(cb);
        return st;
    }
    cb->n_threads = wgml_threadpool_size(cb->pool);
    wgml_backend *b = &cb->base;
    b->name = "cpu";
    b->device_name = cpu_kernels_isa();
    b->n_threads = cb->n_threads;
    b->kv_type = WGML_F16; /* half the bytes attention reads per token at long context */
    b->kv_types = (1u << WGML_F16) | (1u << WGML_F32);
    b->free = cpu_free;
    b->buffer_create = buffer_create;
    b->weight_create = weight_create;
    b->weight_write = weight_write;
    b->weight_in_place = weight_in_place;
    b->buffer_free = buffer_free;
    b->buffer_write = buffer_write;
    b->buffer_read = buffer_read;
    b->begin = begin;
    b->end = end;
    b->upload = upload;
    b->download = download;
    b->run = cpu_run;
    b->supports = cpu_supports;
    b->get_stats = get_stats;
    b->set_profiling = set_profiling;
    b->get_kernel_times = get_kernel_times;
    b->supports_type = supports_type;
    b->measure_bandwidth = cpu_measure_bandwidth;
    b->measure_fma_peak = cpu_measure_fma_peak;
    *out = b;
    return WGML_OK;
}
