/*
 * wg_record.c - recording a step's dispatches without creating anything.
 *
 * The n-th dispatch of a step owns parameter slot n: 256 bytes of one
 * uniform buffer, bound at offset n * 256. Its parameters are compared with a
 * host shadow of the slot and written (in one write per step covering the
 * changed slots) only when they differ - a decode step repeats the previous
 * one's parameters, so it writes none. Per-step values (position, token
 * count) live in a separate 16-byte step uniform.
 *
 * A step of more than WG_MAX_SLOTS dispatches is submitted in parts of
 * WG_MAX_SLOTS (wg_record), each after its parameters are written; the
 * readbacks come after the last.
 *
 * Bind groups are cached per slot, keyed by a hash of the kernel and its
 * bindings (buffer, offset, size); a few ways per slot keep the prompt
 * (matmul) and decode (matvec) variants of the same slot alive together.
 */
#include <string.h>

#include "backend/webgpu/wg_internal.h"
#include "core/alloc.h"
#include "core/error.h"

wgml_status wg_record_init(wg_backend *wb, wgml_error *err) {
    wb->shadow = wgml_calloc(WG_MAX_SLOTS, WG_PARAM_SLOT);
    wb->slot_valid = wgml_calloc(WG_MAX_SLOTS, 1);
    wb->bgs = wgml_calloc((size_t)WG_MAX_SLOTS * WG_BG_WAYS, sizeof *wb->bgs);
    if (!wb->shadow || !wb->slot_valid || !wb->bgs)
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "webgpu: out of memory for the dispatch tables");
    wgml_status st = wgml_gpu_buffer_create(wb->gpu, (uint64_t)WG_MAX_SLOTS * WG_PARAM_SLOT, WGML_GPU_UNIFORM,
                                            "wgml params", &wb->params, err);
    if (!st) st = wgml_gpu_buffer_create(wb->gpu, 16, WGML_GPU_UNIFORM, "wgml step", &wb->step_buf, err);
    if (!st) st = wgml_gpu_buffer_create(wb->gpu, 256, WGML_GPU_STORAGE, "wgml dummy", &wb->dummy, err);
    wb->dirty_lo = WG_MAX_SLOTS;
    wb->dirty_hi = -1;
    return st;
}

void wg_record_free(wg_backend *wb) {
    if (wb->bgs) {
        for (size_t i = 0; i < (size_t)WG_MAX_SLOTS * WG_BG_WAYS; i++)
            if (wb->bgs[i].bg) wgml_gpu_bindgroup_destroy(wb->bgs[i].bg);
    }
    wgml_free(wb->bgs);
    wgml_free(wb->shadow);
    wgml_free(wb->slot_valid);
    wgml_gpu_buffer_destroy(wb->params);
    wgml_gpu_buffer_destroy(wb->step_buf);
    wgml_gpu_buffer_destroy(wb->dummy);
    wb->bgs = NULL;
    wb->shadow = NULL;
    wb->slot_valid = NULL;
    wb->params = wb->step_buf = wb->dummy = NULL;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t bind_key(const wg_dispatch *d) {
    uint64_t h = mix(0x12345, (uint64_t)(uintptr_t)d->kernel);
    for (int i = 0; i < d->n_bind; i++) {
        h = mix(h, d->bind[i].binding);
        h = mix(h, (uint64_t)(uintptr_t)d->bind[i].buffer);
        h = mix(h, d->bind[i].offset);
        h = mix(h, d->bind[i].size);
    }
    return h | 1; /* 0 marks an empty way */
}

void wg_record(wg_backend *wb, const wg_dispatch *d) {
    if (wb->sticky.status) return;
    if (wb->n_slots >= WG_MAX_SLOTS) {
        /* A step longer than the parameter slots: submit what is recorded (its
         * parameters written first: queue writes run in order with submits),
         * and go on from slot 0. The caller sees one step. */
        wg_record_flush(wb);
        wgml_error err;
        if (wgml_gpu_submit(wb->gpu, NULL, 0, &err)) {
            wgml_sticky_set(&wb->sticky, &err);
            return;
        }
        wb->n_slots = 0;
    }
    int slot = wb->n_slots;
    if (d->params_size > WG_PARAM_SLOT || d->n_bind + 2 > WG_MAX_BINDINGS + 2) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "webgpu: dispatch parameters too large");
        return;
    }
    for (int i = 0; i < 3; i++) {
        if (d->grid[i] > wb->info->max_workgroups_per_dimension) {
            wg_error(wb, WGML_ERR_UNSUPPORTED, "webgpu: %s needs %u workgroups in one dimension (the device allows %u)",
                     wgml_gpu_kernel_label(d->kernel), d->grid[i], wb->info->max_workgroups_per_dimension);
            return;
        }
    }
    wb->n_slots++;
    if (d->grid[0] == 0 || d->grid[1] == 0 || d->grid[2] == 0) return; /* nothing to do (empty window) */

    /* parameters: rewrite the slot only when they changed */
    uint8_t *sh = wb->shadow + (size_t)slot * WG_PARAM_SLOT;
    if (!wb->slot_valid[slot] || memcmp(sh, d->params, d->params_size) != 0) {
        memcpy(sh, d->params, d->params_size);
        wb->slot_valid[slot] = 1;
        if (slot < wb->dirty_lo) wb->dirty_lo = slot;
        if (slot > wb->dirty_hi) wb->dirty_hi = slot;
    }

    /* bind group: cached per slot */
    uint64_t key = bind_key(d);
    wg_bg_entry *ways = wb->bgs + (size_t)slot * WG_BG_WAYS, *hit = NULL, *victim = &ways[0];
    for (int i = 0; i < WG_BG_WAYS; i++) {
        if (ways[i].key == key && ways[i].bg) hit = &ways[i];
        if (!ways[i].bg || ways[i].last_use < victim->last_use) victim = &ways[i];
    }
    if (!hit) {
        wgml_gpu_binding b[WG_MAX_BINDINGS + 2];
        b[0] = (wgml_gpu_binding){0, wb->step_buf, 0, 16};
        b[1] = (wgml_gpu_binding){1, wb->params, (uint64_t)slot * WG_PARAM_SLOT, WG_PARAM_SLOT};
        memcpy(b + 2, d->bind, (size_t)d->n_bind * sizeof *b);
        wgml_gpu_bindgroup *bg;
        wgml_error err;
        if (wgml_gpu_bindgroup_create(wb->gpu, d->kernel, b, d->n_bind + 2, &bg, &err)) {
            wgml_sticky_set(&wb->sticky, &err);
            return;
        }
        if (victim->bg) wgml_gpu_bindgroup_destroy(victim->bg);
        victim->bg = bg;
        victim->key = key;
        hit = victim;
    }
    hit->last_use = ++wb->use_clock;
    wgml_gpu_dispatch(wb->gpu, d->kernel, hit->bg, d->grid[0], d->grid[1], d->grid[2]);
}

void wg_record_flush(wg_backend *wb) {
    uint32_t step[4] = {(uint32_t)wb->step.pos, (uint32_t)wb->step.n_tokens,
                        (uint32_t)(wb->step.pos + wb->step.n_tokens), 0};
    wgml_gpu_write(wb->gpu, wb->step_buf, 0, step, sizeof step);
    if (wb->dirty_hi >= wb->dirty_lo) {
        size_t off = (size_t)wb->dirty_lo * WG_PARAM_SLOT;
        size_t n = (size_t)(wb->dirty_hi - wb->dirty_lo + 1) * WG_PARAM_SLOT;
        wgml_gpu_write(wb->gpu, wb->params, off, wb->shadow + off, n);
    }
    wb->dirty_lo = WG_MAX_SLOTS;
    wb->dirty_hi = -1;
}

void wg_record_forget(wg_backend *wb, const wgml_gpu_buffer *buf) {
    (void)buf;
    /* Bind-group keys hash the buffer pointer; a freed buffer's address may be
     * reused, so drop every cached bind group (frees happen at session end). */
    if (!wb->bgs) return;
    for (size_t i = 0; i < (size_t)WG_MAX_SLOTS * WG_BG_WAYS; i++) {
        if (wb->bgs[i].bg) wgml_gpu_bindgroup_destroy(wb->bgs[i].bg);
        wb->bgs[i].bg = NULL;
        wb->bgs[i].key = 0;
    }
}
