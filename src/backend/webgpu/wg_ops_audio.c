/*
 * wg_ops_audio.c - the ops of the audio models (ops.h: im2col, col2im,
 * instance_norm, lstm, stft, istft, nsf_source) as dispatches of conv.wgsl,
 * instance_norm.wgsl, lstm.wgsl, spectral.wgsl and nsf.wgsl.
 *
 * As in wg_ops_nn.c, a vector argument (a bias, a window, a weight row) may
 * be a weight, bound as its one window at its element offset, or an
 * activation, bound whole with its element offset in the parameters; an
 * input in the output's buffer (out itself for instance_norm in place, or
 * apart from it: validate.c rejects a partial overlap) is read through the
 * output's read_write binding, in the kernel's variant for it
 * (WGF_IN<i>_IS_OUT), since WebGPU forbids binding a buffer that a dispatch
 * writes a second time.
 *
 * The elementwise kernels (im2col, col2im, stft, istft, nsf_source's
 * samples) run one invocation per element written, over a grid of rows of up
 * to FLAT_COLS elements (as copy.wgsl), so any size fits the 65535
 * workgroups of a grid dimension. nsf_source keeps its phase table (P and r
 * per frame and harmonic, 16 bytes each) in a scratch buffer the backend
 * owns (wb->scratch), grown as needed and freed with the backend.
 */
#include "backend/webgpu/wg_internal.h"
#include "core/dtype.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_GROUPS 65535u         /* workgroups per grid dimension (WebGPU's default limit) */
#define FLAT_COLS  (64u * 32768u) /* the elements written, as rows of this many */
#define WG_SIZE    64u            /* WG of these kernels (wg_compose.c) */
#define LSTM_H_MAX 2048           /* lstm.wgsl's HMAX with BIG */

/* Input i of a dispatch writing out, at `binding`: a weight (if allowed: f32,
 * or f16 where f16_ok; its one window) or an activation, bound or read
 * through out (flag); *off: its element offset. */
static int input(wg_backend *wb, const char *op, const wgml_tensor *t, const wgml_tensor *out, int i, uint32_t binding,
                 int weight_ok, uint32_t *off, uint32_t *flags, wgml_gpu_binding *b, int *nb) {
    if (weight_ok && t && t->buf && t->buf->is_weight) {
        if (!wg_weight(wb, op, t)) return 0;
        if (t->buf->n_windows != 1) {
            wg_error(wb, WGML_ERR_UNSUPPORTED, "%s: weight '%s' does not fit one binding", op, t->name ? t->name : "?");
            return 0;
        }
        /* f32 and f16 weights keep GGUF's layout (wg_repack.c): a row view's first element */
        *off = (uint32_t)(t->offset / (t->type == WGML_F16 ? 2 : 4));
        b[(*nb)++] = (wgml_gpu_binding){binding, t->buf->win[0].gpu, 0, 0};
        return 1;
    }
    if (!wg_act(wb, op, t, off)) return 0;
    if (t->buf == out->buf)
        *flags |= WGF_IN0_IS_OUT << i;
    else
        b[(*nb)++] = wg_bind(binding, t);
    return 1;
}

/* An optional vector input: as input(), or the dummy buffer at its binding
 * when absent (the kernel reads it only under its flag). *present: whether
 * there is one. */
static int opt_input(wg_backend *wb, const char *op, const wgml_tensor *t, const wgml_tensor *out, int i,
                     uint32_t binding, uint32_t *off, uint32_t *flags, wgml_gpu_binding *b, int *nb, int *present) {
    *present = t != NULL;
    if (t) return input(wb, op, t, out, i, binding, 1, off, flags, b, nb);
    b[(*nb)++] = (wgml_gpu_binding){binding, wb->dummy, 0, 0};
    return 1;
}

/* Whether n elements (invocations) can be indexed with u32 in a flat grid. */
static int flat_fits(wg_backend *wb, const char *op, uint64_t n) {
    if (n <= (uint64_t)UINT32_MAX - FLAT_COLS) return 1;
    wg_error(wb, WGML_ERR_UNSUPPORTED, "%s: %llu elements to write (WebGPU's 32-bit indices allow fewer)", op,
             (unsigned long long)n);
    return 0;
}

/* n elements as *rows rows of *cols, and the grid: columns over x, rows over y and z. */
static void flat_grid(uint64_t n, uint32_t *cols, uint32_t *rows, uint32_t grid[3]) {
    *cols = n < FLAT_COLS ? (uint32_t)n : FLAT_COLS;
    *rows = wg_div_up(n, *cols);
    grid[0] = wg_div_up(*cols, WG_SIZE);
    grid[1] = *rows < MAX_GROUPS ? *rows : MAX_GROUPS;
    grid[2] = wg_div_up(*rows, MAX_GROUPS);
}

/* Parameter blocks of flat kernels start with n, x_off, o_off, cols, rows (uint32 each). */
#define FLAT_HEAD(T)                                                                               \
    _Static_assert(offsetof(T, n) == 0 && offsetof(T, cols) == 12 && offsetof(T, rows) == 16, \
                   #T " must start with n, x_off, o_off, cols, rows")

/* A flat kernel over n elements: sets the block's n, cols and rows and dispatches its grid. */
static void flat_dispatch(wg_backend *wb, wg_kind kind, uint32_t flags, void *params, size_t size,
                          const wgml_gpu_binding *b, int nb, uint64_t n) {
    wgml_gpu_kernel *k = wg_get_kernel(wb, kind, 0, flags);
    if (!k || n == 0) return;
    uint32_t head[5], grid[3];
    memcpy(head, params, sizeof head);
    head[0] = (uint32_t)n;
    flat_grid(n, &head[3], &head[4], grid);
    memcpy(params, head, sizeof head);
    wg_dispatch_kernel(wb, k, params, size, b, nb, grid[0], grid[1], grid[2]);
}

/* ---- im2col, col2im (conv.wgsl) ---- */

typedef struct {
    uint32_t n, x_off, o_off, cols, rows, C, K, Ct, T, stride, dil, pad, reflect, c0, b_off, flags;
} conv_params;
_Static_assert(sizeof(conv_params) == 64, "conv_params must match ConvParams in conv.wgsl");
FLAT_HEAD(conv_params);


/* Without an x (zeros into channels [c0, c0 + zero_c)), the kernel unfolds an
 * empty signal (T 0, zero padding): every row it reads is padding, so it
 * writes zeros and reads nothing (x bound to the dummy buffer). */
void wg_op_im2col(wg_backend *wb, const wgml_im2col_args *a) {
    const int64_t T = a->x ? wgml_tensor_nrows(a->x) : 0, C = a->x ? a->x->ne[0] : a->zero_c,
                  T_out = wgml_tensor_nrows(a->out);
    conv_params p = {.C = (uint32_t)C,
                     .K = (uint32_t)a->kernel,
                     .Ct = (uint32_t)(a->out->ne[0] / a->kernel),
                     .T = (uint32_t)T,
                     .stride = (uint32_t)a->stride,
                     .dil = (uint32_t)a->dilation,
                     .pad = a->x ? (uint32_t)a->pad_l : 0u,
                     .reflect = a->x && a->reflect ? 1u : 0u,
                     .c0 = (uint32_t)a->c0};
    uint32_t flags = 0;
    wgml_gpu_binding b[2];
    int nb = 0;
    const uint64_t n = (uint64_t)T_out * (uint64_t)a->kernel * (uint64_t)C;
    if (!flat_fits(wb, "im2col", n) || !wg_act(wb, "im2col", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!a->x)
        b[nb++] = (wgml_gpu_binding){2, wb->dummy, 0, 0};
    else if (!input(wb, "im2col", a->x, a->out, 0, 2, 0, &p.x_off, &flags, b, &nb))
        return;
    flat_dispatch(wb, WGK_IM2COL, flags, &p, sizeof p, b, nb, n);
}

void wg_op_col2im(wg_backend *wb, const wgml_col2im_args *a) {
    const int64_t C = a->out->ne[0], T_out = wgml_tensor_nrows(a->out);
    conv_params p = {.C = (uint32_t)C,
                     .K = (uint32_t)a->kernel,
                     .T = (uint32_t)wgml_tensor_nrows(a->y),
                     .stride = (uint32_t)a->stride,
                     .pad = (uint32_t)a->pad};
    uint32_t flags = 0;
    wgml_gpu_binding b[3];
    int nb = 0, has_bias;
    const uint64_t n = (uint64_t)T_out * (uint64_t)C;
    if (!flat_fits(wb, "col2im", n) || !wg_act(wb, "col2im", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!input(wb, "col2im", a->y, a->out, 0, 2, 0, &p.x_off, &flags, b, &nb) ||
        !opt_input(wb, "col2im", a->bias, a->out, 1, 4, &p.b_off, &flags, b, &nb, &has_bias))
        return;
    p.flags = has_bias ? 1u : 0u;
    flat_dispatch(wb, WGK_COL2IM, flags, &p, sizeof p, b, nb, n);
}

/* ---- instance_norm (instance_norm.wgsl) ---- */

typedef struct {
    uint32_t n, rows, x_off, o_off, w_off, b_off, flags, cg, groups, pad0, pad1;
    float eps;
} inorm_params;
_Static_assert(sizeof(inorm_params) == 48, "inorm_params must match InormParams in instance_norm.wgsl");

void wg_op_instance_norm(wg_backend *wb, const wgml_instance_norm_args *a) {
    const int64_t C = a->x->ne[0], T = wgml_tensor_nrows(a->x);
    /* a workgroup: cg columns (16 at most, so that wide signals still make many
     * workgroups) times WG/cg stripes of rows */
    uint32_t cg = 1;
    while (cg < 16 && (int64_t)cg < C)
        cg *= 2;
    inorm_params p = {.n = (uint32_t)C, .rows = (uint32_t)T, .cg = cg, .eps = a->eps};
    uint32_t flags = 0;
    wgml_gpu_binding b[4];
    int nb = 0, has_w, has_b;
    if (!wg_act(wb, "instance_norm", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!input(wb, "instance_norm", a->x, a->out, 0, 2, 0, &p.x_off, &flags, b, &nb) ||
        !opt_input(wb, "instance_norm", a->w, a->out, 1, 4, &p.w_off, &flags, b, &nb, &has_w) ||
        !opt_input(wb, "instance_norm", a->b, a->out, 2, 5, &p.b_off, &flags, b, &nb, &has_b))
        return;
    p.flags = (has_w ? 1u : 0u) | (has_b ? 2u : 0u);
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_INSTANCE_NORM, 0, flags);
    if (!k || C == 0 || T == 0) return;
    p.groups = wg_div_up((uint64_t)C, cg);
    const uint32_t gx = p.groups < MAX_GROUPS ? p.groups : MAX_GROUPS, gy = wg_div_up(p.groups, MAX_GROUPS);
    wg_dispatch_kernel(wb, k, &p, sizeof p, b, nb, gx, gy, 1);
}

/* ---- lstm (lstm.wgsl) ---- */

typedef struct {
    uint32_t T, H, dirs, gx_off, w_off, o_off, f16w, pad0;
} lstm_params;
_Static_assert(sizeof(lstm_params) == 32, "lstm_params must match LstmParams in lstm.wgsl");

void wg_op_lstm(wg_backend *wb, const wgml_lstm_args *a) {
    const int H = a->hidden, dirs = a->bidirectional ? 2 : 1;
    const int64_t T = wgml_tensor_nrows(a->gx);
    if (H > LSTM_H_MAX) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "lstm: hidden size %d (at most %d on WebGPU: h lives in workgroup memory)",
                 H, LSTM_H_MAX);
        return;
    }
    const uint32_t kflags = H > 1024 ? WGF_LSTM_BIG : 0, shared = H > 1024 ? 16384u : 8192u;
    if (wb->info->max_workgroup_storage < shared) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "lstm: hidden size %d needs %u bytes of workgroup memory, %s has %u", H,
                 shared, wb->info->name, wb->info->max_workgroup_storage);
        return;
    }
    if (wb->info->max_workgroup_invocations < 256 || wb->info->max_workgroup_size_x < 256) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "lstm: needs workgroups of 256 invocations, %s allows %u (%u along x)",
                 wb->info->name, wb->info->max_workgroup_invocations, wb->info->max_workgroup_size_x);
        return;
    }
    lstm_params p = {
        .T = (uint32_t)T, .H = (uint32_t)H, .dirs = (uint32_t)dirs, .f16w = a->w_hh->type == WGML_F16 ? 1u : 0u};
    uint32_t flags = kflags;
    wgml_gpu_binding b[3];
    int nb = 0;
    if (!wg_act(wb, "lstm", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!input(wb, "lstm", a->gx, a->out, 0, 2, 0, &p.gx_off, &flags, b, &nb) ||
        !input(wb, "lstm", a->w_hh, a->out, 1, 4, 1, &p.w_off, &flags, b, &nb))
        return;
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_LSTM, 0, flags);
    if (!k || T == 0) return;
    wg_dispatch_kernel(wb, k, &p, sizeof p, b, nb, (uint32_t)dirs, 1, 1);
}

/* ---- stft, istft (spectral.wgsl) ---- */

typedef struct {
    uint32_t n, x_off, o_off, cols, rows, N, hop, B, L, F, w_off, ph_off;
} spec_params;
_Static_assert(sizeof(spec_params) == 48, "spec_params must match SpecParams in spectral.wgsl");
FLAT_HEAD(spec_params);


void wg_op_stft(wg_backend *wb, const wgml_stft_args *a) {
    const int64_t L = a->x->ne[0], F = wgml_tensor_nrows(a->out), B = a->n_fft / 2 + 1;
    spec_params p = {
        .N = (uint32_t)a->n_fft, .hop = (uint32_t)a->hop, .B = (uint32_t)B, .L = (uint32_t)L, .F = (uint32_t)F};
    uint32_t flags = 0;
    wgml_gpu_binding b[3];
    int nb = 0;
    const uint64_t n = (uint64_t)F * (uint64_t)B;
    if (!flat_fits(wb, "stft", n) || !wg_act(wb, "stft", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!input(wb, "stft", a->x, a->out, 0, 2, 0, &p.x_off, &flags, b, &nb) ||
        !input(wb, "stft", a->window, a->out, 1, 4, 1, &p.w_off, &flags, b, &nb))
        return;
    flat_dispatch(wb, WGK_STFT, flags, &p, sizeof p, b, nb, n);
}

void wg_op_istft(wg_backend *wb, const wgml_istft_args *a) {
    const int64_t L = a->out->ne[0], F = wgml_tensor_nrows(a->mag), B = a->n_fft / 2 + 1;
    spec_params p = {
        .N = (uint32_t)a->n_fft, .hop = (uint32_t)a->hop, .B = (uint32_t)B, .L = (uint32_t)L, .F = (uint32_t)F};
    uint32_t flags = 0;
    wgml_gpu_binding b[4];
    int nb = 0;
    if (!flat_fits(wb, "istft", (uint64_t)L) || !wg_act(wb, "istft", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!input(wb, "istft", a->mag, a->out, 0, 2, 0, &p.x_off, &flags, b, &nb) ||
        !input(wb, "istft", a->phase, a->out, 1, 5, 0, &p.ph_off, &flags, b, &nb) ||
        !input(wb, "istft", a->window, a->out, 2, 4, 1, &p.w_off, &flags, b, &nb))
        return;
    flat_dispatch(wb, WGK_ISTFT, flags, &p, sizeof p, b, nb, (uint64_t)L);
}

/* ---- nsf_source (nsf.wgsl) ---- */

typedef struct {
    uint32_t n, cols, rows, o_off, f0_off, w_off, b_off, N, H, upp, sr, pad0, seed_lo, seed_hi, pad1, pad2;
    float amp, noise_std, amp3, thr;
} nsf_params;
_Static_assert(sizeof(nsf_params) == 80, "nsf_params must match NsfParams in nsf.wgsl");

/* The backend's scratch buffer with at least `need` bytes (it grows by at
 * least half). A buffer outgrown after dispatches of this step were
 * recorded with it is retired, destroyed after the step's submit (a
 * destroyed buffer may not be submitted), so that growing never splits a
 * step into more submits; past 8 retired buffers in a step, the recorded
 * dispatches are submitted first. */
wgml_gpu_buffer *wg_scratch(wg_backend *wb, const char *op, uint64_t need) {
    if (wb->scratch && wb->scratch_size >= need) {
        wb->scratch_step = wb->steps;
        return wb->scratch;
    }
    if (need > wb->info->max_storage_binding_size) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "%s: a table of %llu bytes exceeds the binding limit of %s", op,
                 (unsigned long long)need, wb->info->name);
        return NULL;
    }
    wgml_error e;
    const uint64_t grown = wb->scratch_size + wb->scratch_size / 2;
    if (wb->scratch) {
        const int in_use = wb->in_step && wb->scratch_step == wb->steps;
        if (in_use && wb->n_retired < (int)(sizeof wb->retired / sizeof wb->retired[0])) {
            wb->retired[wb->n_retired++] = wb->scratch;
        } else {
            if (in_use && wb->n_slots > 0) {
                wg_record_flush(wb);
                if (wgml_gpu_submit(wb->gpu, NULL, 0, &e)) {
                    wgml_sticky_set(&wb->sticky, &e);
                    return NULL;
                }
            }
            wg_record_forget(wb, wb->scratch);
            wgml_gpu_buffer_destroy(wb->scratch);
        }
        wb->scratch = NULL;
        wb->scratch_size = 0;
    }
    uint64_t size = need > grown ? need : grown;
    size = size < 65536 ? 65536 : (size + 65535) & ~(uint64_t)65535;
    if (size > wb->info->max_storage_binding_size) size = need;
    if (wgml_gpu_buffer_create(wb->gpu, size, WGML_GPU_STORAGE, "wgml scratch", &wb->scratch, &e)) {
        wg_error(wb, e.code, "%s: %s", op, e.message);
        return NULL;
    }
    wb->scratch_size = size;
    wb->scratch_step = wb->steps;
    return wb->scratch;
}

/* f0 bound on its own (the rates' dispatch does not write out's buffer). */
static int bind_f0(wg_backend *wb, const wgml_tensor *f0, uint32_t *off, wgml_gpu_binding *b) {
    if (f0->buf && f0->buf->is_weight) {
        if (!wg_weight(wb, "nsf_source", f0)) return 0;
        if (f0->buf->n_windows != 1) {
            wg_error(wb, WGML_ERR_UNSUPPORTED, "nsf_source: weight '%s' does not fit one binding",
                     f0->name ? f0->name : "?");
            return 0;
        }
        *off = (uint32_t)(f0->offset / 4);
        *b = (wgml_gpu_binding){2, f0->buf->win[0].gpu, 0, 0};
        return 1;
    }
    if (!wg_act(wb, "nsf_source", f0, off)) return 0;
    *b = wg_bind(2, f0);
    return 1;
}

void wg_op_nsf_source(wg_backend *wb, const wgml_nsf_source_args *a) {
    const int64_t N = a->f0->ne[0], L = a->out->ne[0];
    const int H = a->harmonics;
    nsf_params p = {.N = (uint32_t)N,
                    .H = (uint32_t)H,
                    .upp = (uint32_t)a->upp,
                    .sr = (uint32_t)a->sample_rate,
                    .seed_lo = (uint32_t)a->seed,
                    .seed_hi = (uint32_t)(a->seed >> 32),
                    .amp = a->amp,
                    .noise_std = a->noise_std,
                    .amp3 = (float)((double)a->amp / 3.0),
                    .thr = a->voiced_threshold};
    uint32_t flags = 0;
    wgml_gpu_binding b[5], rb[2];
    int nb = 0;
    if (!flat_fits(wb, "nsf_source", (uint64_t)L) || !wg_act(wb, "nsf_source", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!input(wb, "nsf_source", a->f0, a->out, 0, 2, 1, &p.f0_off, &flags, b, &nb) ||
        !input(wb, "nsf_source", a->w, a->out, 1, 4, 1, &p.w_off, &flags, b, &nb) ||
        !input(wb, "nsf_source", a->b, a->out, 2, 5, 1, &p.b_off, &flags, b, &nb) ||
        !bind_f0(wb, a->f0, &p.f0_off, &rb[0]))
        return;
    wgml_gpu_kernel *kr = wg_get_kernel(wb, WGK_NSF_RATES, 0, 0), *ks = wg_get_kernel(wb, WGK_NSF_SAMPLES, 0, flags);
    if (!kr || !ks || L == 0) return;
    wgml_gpu_buffer *tab = wg_scratch(wb, "nsf_source", (uint64_t)N * (uint64_t)H * 16);
    if (!tab) return;
    rb[1] = (wgml_gpu_binding){6, tab, 0, 0};
    b[nb++] = (wgml_gpu_binding){6, tab, 0, 0};
    wg_dispatch_kernel(wb, kr, &p, sizeof p, rb, 2, (uint32_t)H, 1, 1);
    uint32_t grid[3];
    p.n = (uint32_t)L;
    flat_grid((uint64_t)L, &p.cols, &p.rows, grid);
    wg_dispatch_kernel(wb, ks, &p, sizeof p, b, nb, grid[0], grid[1], grid[2]);
}
