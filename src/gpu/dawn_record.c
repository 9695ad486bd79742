/*
 * dawn_record.c - recording, submitting and reading back (gpu.h over Dawn).
 *
 * Recording. Dispatches go into one compute pass of one command encoder,
 * opened lazily; a copy closes the pass; wgml_gpu_submit appends the copies of
 * the readback ranges into a persistent staging buffer (MapRead|CopyDst, grown
 * only when too small), submits once, waits, and copies out. A steady-state
 * step therefore creates no GPU object and allocates no host memory.
 *
 * Profiling. With timestamps enabled and profiling on, each dispatch gets its
 * own compute pass with timestampWrites into query sets of 256 pass pairs
 * (added as needed, kept); submit resolves them into the same staging buffer,
 * after the readbacks, and adds the times to a per-label table.
 */
#include "core/alloc.h"
#include "gpu/dawn_internal.h"

#include <stdlib.h>
#include <string.h>

static void drop_deferred(wgml_gpu *g) {
    for (int i = 0; i < g->n_deferred; i++) {
        dawn_deferred *d = &g->deferred[i];
        if (d->k) {
            wgml_dawn_kernel_unref(d->k);
            wgml_dawn_bindgroup_unref(d->bg);
        } else {
            wgpuBufferRelease(d->src);
            wgpuBufferRelease(d->dst);
        }
    }
    g->n_deferred = 0;
}

void wgml_dawn_discard_recording(wgml_gpu *g) {
    drop_deferred(g);
    if (g->pass) {
        wgpuComputePassEncoderEnd(g->pass);
        wgpuComputePassEncoderRelease(g->pass);
        g->pass = NULL;
    }
    if (g->encoder) {
        wgpuCommandEncoderRelease(g->encoder);
        g->encoder = NULL;
    }
    g->n_pairs = 0;
}

static int range_ok(uint64_t offset, uint64_t size, uint64_t total) {
    return offset <= total && size <= total - offset;
}

void wgml_gpu_write(wgml_gpu *gpu, wgml_gpu_buffer *buf, uint64_t offset, const void *data, size_t size) {
    if (!gpu || gpu->status != WGML_OK || size == 0) return;
    if (!buf || !data) {
        wgml_dawn_set_status(gpu, WGML_ERR_GPU, "wgml_gpu_write: NULL buffer or data");
        return;
    }
    if ((offset | size) & 3 || !range_ok(offset, size, buf->size)) {
        wgml_dawn_set_status(
            gpu, WGML_ERR_GPU,
            "wgml_gpu_write: offset %llu, size %zu: must be multiples of 4 within the buffer's %llu bytes",
            (unsigned long long)offset, size, (unsigned long long)buf->size);
        return;
    }
    wgpuQueueWriteBuffer(gpu->queue, buf->buf, offset, data, size);
    gpu->counters.write_bytes += size;
}

/* ---- recording ------------------------------------------------------------------ */

static int ensure_encoder(wgml_gpu *g) {
    if (g->encoder) return 1;
    WGPUCommandEncoderDescriptor d = WGPU_COMMAND_ENCODER_DESCRIPTOR_INIT;
    d.label = wgml_dawn_sv("wgml");
    g->encoder = wgpuDeviceCreateCommandEncoder(g->device, &d);
    if (!g->encoder) wgml_dawn_set_status(g, WGML_ERR_GPU, "cannot create a command encoder");
    return g->encoder != NULL;
}

static void end_pass(wgml_gpu *g) {
    if (!g->pass) return;
    wgpuComputePassEncoderEnd(g->pass);
    wgpuComputePassEncoderRelease(g->pass);
    g->pass = NULL;
}

/* Room for one more timed pass: the query chunk and the slot array. */
static int reserve_timed_pass(wgml_gpu *g) {
    int chunk = g->n_pairs / WGML_DAWN_PAIRS_PER_CHUNK;
    if (chunk == g->n_chunks) {
        if (g->n_chunks == g->cap_chunks) {
            int cap = g->cap_chunks ? 2 * g->cap_chunks : 4;
            dawn_query_chunk *nc = wgml_realloc(g->chunks, (size_t)cap * sizeof *nc);
            if (!nc) return 0;
            g->chunks = nc;
            g->cap_chunks = cap;
        }
        dawn_query_chunk c = {0};
        WGPUQuerySetDescriptor qd = WGPU_QUERY_SET_DESCRIPTOR_INIT;
        qd.label = wgml_dawn_sv("wgml timestamps");
        qd.type = WGPUQueryType_Timestamp;
        qd.count = 2 * WGML_DAWN_PAIRS_PER_CHUNK;
        c.set = wgpuDeviceCreateQuerySet(g->device, &qd);
        if (!c.set) return 0;
        if (wgml_dawn_create_buffer(g, WGML_DAWN_PAIRS_PER_CHUNK * 16,
                                    WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc, "wgml timestamp resolve",
                                    &c.resolve, NULL) != WGML_OK) {
            wgpuQuerySetRelease(c.set);
            return 0;
        }
        g->chunks[g->n_chunks++] = c;
    }
    if (g->n_pairs == g->cap_pairs) {
        int cap = g->cap_pairs ? 2 * g->cap_pairs : 256;
        int *np = wgml_realloc(g->pair_slot, (size_t)cap * sizeof *np);
        if (!np) return 0;
        g->pair_slot = np;
        g->cap_pairs = cap;
    }
    return 1;
}

/* Room for one more deferred command; 0 (and the sticky status) on OOM. */
static dawn_deferred *defer(wgml_gpu *g) {
    if (g->n_deferred == g->cap_deferred) {
        int cap = g->cap_deferred ? 2 * g->cap_deferred : 256;
        dawn_deferred *nd = wgml_realloc(g->deferred, (size_t)cap * sizeof *nd);
        if (!nd) {
            wgml_dawn_set_status(g, WGML_ERR_OUT_OF_MEMORY, "out of memory recording a dispatch");
            return NULL;
        }
        g->deferred = nd;
        g->cap_deferred = cap;
    }
    dawn_deferred *d = &g->deferred[g->n_deferred++];
    memset(d, 0, sizeof *d);
    return d;
}

static void encode_dispatch(wgml_gpu *gpu, wgml_gpu_kernel *k, wgml_gpu_bindgroup *bg, uint32_t x, uint32_t y,
                            uint32_t z);
static void encode_copy(wgml_gpu *gpu, WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset,
                        uint64_t size);

void wgml_gpu_dispatch(wgml_gpu *gpu, wgml_gpu_kernel *k, wgml_gpu_bindgroup *bg, uint32_t x, uint32_t y, uint32_t z) {
    if (!gpu || gpu->status != WGML_OK) return;
    if (!k || !bg) {
        wgml_dawn_set_status(gpu, WGML_ERR_GPU, "wgml_gpu_dispatch: NULL kernel or bind group");
        return;
    }
    if (gpu->n_deferred || k->pending || !bg->group) {
        /* A pipeline is still compiling: keep the order, encode at submit. */
        dawn_deferred *d = defer(gpu);
        if (!d) return;
        d->k = k;
        d->bg = bg;
        d->x = x, d->y = y, d->z = z;
        k->refs++;
        bg->refs++;
        return;
    }
    encode_dispatch(gpu, k, bg, x, y, z);
}

static void encode_dispatch(wgml_gpu *gpu, wgml_gpu_kernel *k, wgml_gpu_bindgroup *bg, uint32_t x, uint32_t y,
                            uint32_t z) {
    if (!ensure_encoder(gpu)) return;
    gpu->counters.dispatches++;
    if (gpu->profiling && gpu->enabled.timestamps && reserve_timed_pass(gpu)) {
        end_pass(gpu);
        int p = gpu->n_pairs++;
        gpu->pair_slot[p] = k->time_slot;
        WGPUPassTimestampWrites tw = WGPU_PASS_TIMESTAMP_WRITES_INIT;
        tw.querySet = gpu->chunks[p / WGML_DAWN_PAIRS_PER_CHUNK].set;
        tw.beginningOfPassWriteIndex = (uint32_t)(2 * (p % WGML_DAWN_PAIRS_PER_CHUNK));
        tw.endOfPassWriteIndex = tw.beginningOfPassWriteIndex + 1;
        WGPUComputePassDescriptor pd = WGPU_COMPUTE_PASS_DESCRIPTOR_INIT;
        pd.label = wgml_dawn_sv(k->label);
        pd.timestampWrites = &tw;
        WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(gpu->encoder, &pd);
        wgpuComputePassEncoderSetPipeline(pass, k->pipeline);
        wgpuComputePassEncoderSetBindGroup(pass, 0, bg->group, 0, NULL);
        wgpuComputePassEncoderDispatchWorkgroups(pass, x, y, z);
        wgpuComputePassEncoderEnd(pass);
        wgpuComputePassEncoderRelease(pass);
        return;
    }
    if (!gpu->pass) {
        WGPUComputePassDescriptor pd = WGPU_COMPUTE_PASS_DESCRIPTOR_INIT;
        gpu->pass = wgpuCommandEncoderBeginComputePass(gpu->encoder, &pd);
    }
    wgpuComputePassEncoderSetPipeline(gpu->pass, k->pipeline);
    wgpuComputePassEncoderSetBindGroup(gpu->pass, 0, bg->group, 0, NULL);
    wgpuComputePassEncoderDispatchWorkgroups(gpu->pass, x, y, z);
}

void wgml_gpu_copy(wgml_gpu *gpu, wgml_gpu_buffer *src, uint64_t src_offset, wgml_gpu_buffer *dst, uint64_t dst_offset,
                   uint64_t size) {
    if (!gpu || gpu->status != WGML_OK || size == 0) return;
    if (!src || !dst) {
        wgml_dawn_set_status(gpu, WGML_ERR_GPU, "wgml_gpu_copy: NULL buffer");
        return;
    }
    if ((src_offset | dst_offset | size) & 3 || !range_ok(src_offset, size, src->size) ||
        !range_ok(dst_offset, size, dst->size)) {
        wgml_dawn_set_status(gpu, WGML_ERR_GPU,
                             "wgml_gpu_copy: %llu bytes from %llu to %llu: unaligned or out of range",
                             (unsigned long long)size, (unsigned long long)src_offset, (unsigned long long)dst_offset);
        return;
    }
    if (gpu->n_deferred) {
        dawn_deferred *d = defer(gpu);
        if (!d) return;
        d->src = src->buf, d->dst = dst->buf;
        d->src_offset = src_offset, d->dst_offset = dst_offset, d->size = size;
        wgpuBufferAddRef(d->src);
        wgpuBufferAddRef(d->dst);
        return;
    }
    encode_copy(gpu, src->buf, src_offset, dst->buf, dst_offset, size);
}

static void encode_copy(wgml_gpu *gpu, WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset,
                        uint64_t size) {
    if (!ensure_encoder(gpu)) return;
    end_pass(gpu);
    wgpuCommandEncoderCopyBufferToBuffer(gpu->encoder, src, src_offset, dst, dst_offset, size);
}

/* Encodes the deferred commands, in order, once every pipeline is there. */
static wgml_status replay_deferred(wgml_gpu *g, wgml_error *err) {
    if (!g->n_deferred) return WGML_OK;
    wgml_status st = wgml_gpu_kernels_wait(g, NULL, NULL, err);
    for (int i = 0; st == WGML_OK && i < g->n_deferred; i++) {
        dawn_deferred *d = &g->deferred[i];
        if (!d->k) {
            encode_copy(g, d->src, d->src_offset, d->dst, d->dst_offset, d->size);
            continue;
        }
        wgml_error e;
        if (wgml_dawn_make_bindgroup(g, d->bg, &e) != WGML_OK) {
            wgml_dawn_set_status(g, e.code, "%s", e.message);
            break;
        }
        encode_dispatch(g, d->k, d->bg, d->x, d->y, d->z);
    }
    drop_deferred(g);
    return g->status == WGML_OK ? st : wgml_dawn_sticky(g, err);
}

/* ---- submitting ------------------------------------------------------------------ */

static void on_map(WGPUMapAsyncStatus status, WGPUStringView message, void *u1, void *u2) {
    dawn_callback_result *r = u1;
    r->done = 1;
    r->status = (int)status;
    wgml_dawn_sv_copy(r->message, sizeof r->message, message);
}

static void on_done(WGPUQueueWorkDoneStatus status, WGPUStringView message, void *u1, void *u2) {
    dawn_callback_result *r = u1;
    r->done = 1;
    r->status = (int)status;
    wgml_dawn_sv_copy(r->message, sizeof r->message, message);
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static wgml_status grow_staging(wgml_gpu *g, uint64_t need, wgml_error *err) {
    uint64_t size = g->staging_size ? g->staging_size : 4096;
    while (size < need)
        size *= 2;
    WGPUBuffer b;
    wgml_status st =
        wgml_dawn_create_buffer(g, size, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "wgml readback", &b, err);
    if (st != WGML_OK) return st;
    wgml_dawn_release_buffer(g, &g->staging, g->staging_size);
    g->staging = b;
    g->staging_size = size;
    return WGML_OK;
}

static void add_times(wgml_gpu *g, const uint64_t *ts) {
    for (int p = 0; p < g->n_pairs; p++) {
        uint64_t t0 = ts[2 * p], t1 = ts[2 * p + 1];
        wgml_gpu_kernel_time *t = &g->times[g->pair_slot[p]];
        t->calls++;
        if (t1 > t0) t->total_ms += (double)(t1 - t0) * 1e-6;
    }
}

wgml_status wgml_gpu_submit(wgml_gpu *gpu, const wgml_gpu_readback *reads, int n_reads, wgml_error *err) {
    if (!gpu) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_submit: gpu is NULL");
    if (gpu->status != WGML_OK) {
        wgml_dawn_discard_recording(gpu);
        return wgml_dawn_sticky(gpu, err);
    }
    if (n_reads < 0 || (n_reads > 0 && !reads))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_submit: bad readback list");
    /* Staging layout: each readback's word-aligned range, then the timestamps. */
    uint64_t need = 0;
    for (int i = 0; i < n_reads; i++) {
        const wgml_gpu_readback *r = &reads[i];
        if (!r->src || (!r->dst && r->size) || !range_ok(r->offset, r->size, r->src->size))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "wgml_gpu_submit: readback %d (%zu bytes at %llu) is outside its buffer", i, r->size,
                             (unsigned long long)r->offset);
        need += round_up(r->offset + r->size, 4) - (r->offset & ~(uint64_t)3);
    }
    wgml_status replayed = replay_deferred(gpu, err);
    if (replayed != WGML_OK) {
        wgml_dawn_discard_recording(gpu);
        return replayed;
    }
    uint64_t ts_offset = round_up(need, 8);
    uint64_t total = gpu->n_pairs ? ts_offset + (uint64_t)gpu->n_pairs * 16 : need;
    if (total > gpu->staging_size) {
        wgml_status st = grow_staging(gpu, total, err);
        if (st != WGML_OK) return st;
    }
    if (!ensure_encoder(gpu)) return wgml_dawn_sticky(gpu, err);
    end_pass(gpu);
    for (int c = 0; c * WGML_DAWN_PAIRS_PER_CHUNK < gpu->n_pairs; c++) {
        int n = gpu->n_pairs - c * WGML_DAWN_PAIRS_PER_CHUNK;
        if (n > WGML_DAWN_PAIRS_PER_CHUNK) n = WGML_DAWN_PAIRS_PER_CHUNK;
        wgpuCommandEncoderResolveQuerySet(gpu->encoder, gpu->chunks[c].set, 0, (uint32_t)(2 * n),
                                          gpu->chunks[c].resolve, 0);
        wgpuCommandEncoderCopyBufferToBuffer(gpu->encoder, gpu->chunks[c].resolve, 0, gpu->staging,
                                             ts_offset + (uint64_t)c * WGML_DAWN_PAIRS_PER_CHUNK * 16,
                                             (uint64_t)n * 16);
    }
    uint64_t at = 0;
    for (int i = 0; i < n_reads; i++) {
        uint64_t lo = reads[i].offset & ~(uint64_t)3, hi = round_up(reads[i].offset + reads[i].size, 4);
        if (hi > lo)
            wgpuCommandEncoderCopyBufferToBuffer(gpu->encoder, reads[i].src->buf, lo, gpu->staging, at, hi - lo);
        at += hi - lo;
    }
    WGPUCommandBufferDescriptor cd = WGPU_COMMAND_BUFFER_DESCRIPTOR_INIT;
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(gpu->encoder, &cd);
    wgpuCommandEncoderRelease(gpu->encoder);
    gpu->encoder = NULL;
    wgpuQueueSubmit(gpu->queue, 1, &cmd);
    wgpuCommandBufferRelease(cmd);
    gpu->counters.submits++;
    if (gpu->status != WGML_OK) {
        gpu->n_pairs = 0;
        return wgml_dawn_sticky(gpu, err);
    }

    wgml_status st;
    if (total == 0) {
        WGPUQueueWorkDoneCallbackInfo cb = WGPU_QUEUE_WORK_DONE_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_WaitAnyOnly;
        cb.callback = on_done;
        cb.userdata1 = &gpu->done;
        memset(&gpu->done, 0, sizeof gpu->done);
        st = wgml_dawn_wait(gpu, wgpuQueueOnSubmittedWorkDone(gpu->queue, cb), "the GPU", err);
    } else {
        WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_WaitAnyOnly;
        cb.callback = on_map;
        cb.userdata1 = &gpu->map;
        memset(&gpu->map, 0, sizeof gpu->map);
        WGPUFuture f = wgpuBufferMapAsync(gpu->staging, WGPUMapMode_Read, 0, (size_t)round_up(total, 8), cb);
        st = wgml_dawn_wait(gpu, f, "the GPU", err);
        if (st == WGML_OK && gpu->map.status != WGPUMapAsyncStatus_Success) {
            wgml_dawn_set_status(gpu, WGML_ERR_GPU, "reading back results failed: %s", gpu->map.message);
            st = wgml_dawn_sticky(gpu, err);
        }
        if (st == WGML_OK && gpu->status == WGML_OK) {
            const uint8_t *m = wgpuBufferGetConstMappedRange(gpu->staging, 0, (size_t)round_up(total, 8));
            if (!m) {
                wgml_dawn_set_status(gpu, WGML_ERR_GPU, "reading back results failed: no mapped range");
            } else {
                at = 0;
                for (int i = 0; i < n_reads; i++) {
                    uint64_t lo = reads[i].offset & ~(uint64_t)3, hi = round_up(reads[i].offset + reads[i].size, 4);
                    if (reads[i].size) memcpy(reads[i].dst, m + at + (reads[i].offset - lo), reads[i].size);
                    at += hi - lo;
                    gpu->counters.read_bytes += reads[i].size;
                }
                if (gpu->n_pairs) add_times(gpu, (const uint64_t *)(const void *)(m + ts_offset));
            }
        }
        if (gpu->map.done && gpu->map.status == WGPUMapAsyncStatus_Success) wgpuBufferUnmap(gpu->staging);
    }
    gpu->n_pairs = 0;
    if (st != WGML_OK) return st;
    if (gpu->status != WGML_OK) return wgml_dawn_sticky(gpu, err);
    return WGML_OK;
}

wgml_status wgml_gpu_read(wgml_gpu *gpu, wgml_gpu_buffer *buf, uint64_t offset, void *dst, size_t size,
                          wgml_error *err) {
    wgml_gpu_readback r = {buf, offset, size, dst};
    return wgml_gpu_submit(gpu, &r, 1, err);
}

/* ---- counters and timing ---------------------------------------------------------- */

void wgml_gpu_get_counters(const wgml_gpu *gpu, wgml_gpu_counters *c) {
    if (!c) return;
    if (!gpu) {
        memset(c, 0, sizeof *c);
        return;
    }
    *c = gpu->counters;
    wgml_pipeline_cache_counters pc;
    wgml_pipeline_cache_get_counters(gpu->cache, &pc);
    c->cache_hits = pc.hits;
    c->cache_misses = pc.misses;
    c->cache_stores = pc.stores;
}

void wgml_gpu_set_profiling(wgml_gpu *gpu, int on) {
    if (gpu) gpu->profiling = on != 0;
}

int wgml_gpu_kernel_times(const wgml_gpu *gpu, wgml_gpu_kernel_time *out, int cap) {
    if (!gpu) return 0;
    for (int i = 0; out && i < gpu->n_times && i < cap; i++)
        out[i] = gpu->times[i];
    return gpu->n_times;
}
