/*
 * wg_compose.c - turning the WGSL files in kernels/ into pipelines.
 *
 * WGSL has no includes or conditional compilation, so kernels are composed:
 *
 *   prelude      enables (f16, subgroups), const WG, alias KVT, the Step uniform
 *   reduce.wgsl  workgroup reductions (when the kernel uses them)
 *   out_x.wgsl   the output and the input x of the kernels that may run in place
 *   audio_math.wgsl  tanh, sigmoid, sin/cos, twiddles, atan2 (the audio kernels)
 *   [matrix kernels] mm_common.wgsl, generated bindings + accessors
 *                (ww, bias_at, out_get, out_set for the weights present),
 *                and the weight decoder w_<type>.wgsl
 *   the kernel file itself
 *
 * and a small preprocessor keeps lines between `#ifdef NAME` / `#ifndef NAME`
 * / `#else` / `#endif` according to the variant's defined names. The tokens
 * SUBGROUP_ARGS and KERNEL_INIT in an entry point become the subgroup
 * builtins and their setup (or nothing). Pipelines are compiled on first use
 * and cached for the life of the backend, keyed by (kernel, type, flags).
 */
#include "backend/webgpu/wg_internal.h"
#include "backend/webgpu/wgsl_sources.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = wgml_realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void putf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sbuf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

#define MAX_DEFS 16
typedef struct {
    const char *name[MAX_DEFS];
    int n;
} defs;

static void def(defs *d, const char *name) {
    if (d->n < MAX_DEFS) d->name[d->n++] = name;
}

static int defined(const defs *d, const char *s, size_t len) {
    for (int i = 0; i < d->n; i++)
        if (strlen(d->name[i]) == len && memcmp(d->name[i], s, len) == 0) return 1;
    return 0;
}

/* Appends src with #ifdef blocks resolved and the entry-point tokens replaced. */
static void preprocess(sbuf *out, const char *src, const defs *d, const char *sg_args, const char *init) {
    int keep[16] = {1}, depth = 0;
    const char *p = src;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        while (q < p + n && (*q == ' ' || *q == '\t'))
            q++;
        size_t rest = (size_t)(p + n - q);
        if (rest >= 6 && (strncmp(q, "#ifdef", 6) == 0 || strncmp(q, "#ifndef", 7) == 0)) {
            int neg = q[3] == 'n';
            const char *name = q + (neg ? 7 : 6);
            while (*name == ' ')
                name++;
            size_t nl = (size_t)(p + n - name);
            while (nl && (name[nl - 1] == ' ' || name[nl - 1] == '\r'))
                nl--;
            int v = defined(d, name, nl) != neg;
            if (depth < 15) depth++;
            keep[depth] = keep[depth - 1] && v;
        } else if (rest >= 5 && strncmp(q, "#else", 5) == 0) {
            if (depth > 0) keep[depth] = keep[depth - 1] && !keep[depth];
        } else if (rest >= 6 && strncmp(q, "#endif", 6) == 0) {
            if (depth > 0) depth--;
        } else if (keep[depth]) {
            /* token replacement within the line */
            const char *line = p;
            size_t left = n;
            while (left) {
                const char *a = NULL, *rep = NULL;
                size_t tl = 0;
                for (size_t i = 0; i < left; i++) {
                    if (left - i >= 13 && memcmp(line + i, "SUBGROUP_ARGS", 13) == 0) {
                        a = line + i, rep = sg_args, tl = 13;
                        break;
                    }
                    if (left - i >= 11 && memcmp(line + i, "KERNEL_INIT", 11) == 0) {
                        a = line + i, rep = init, tl = 11;
                        break;
                    }
                }
                if (!a) {
                    put(out, line, left);
                    break;
                }
                put(out, line, (size_t)(a - line));
                put(out, rep, strlen(rep));
                left -= (size_t)(a - line) + tl;
                line = a + tl;
            }
            put(out, "\n", 1);
        }
        if (!eol) break;
        p = eol + 1;
    }
}

int wg_matvec_rows(const wg_backend *wb, uint32_t flags) {
    /* A lane-rows SwiGLU carries two weights' state per row: with half the
     * rows it stays in registers (TinyLlama Q4_K_M gate+up on lavapipe:
     * 22.6 ms per call with R = 4, 10.1 with 2, 11.1 with 1). */
    if (wb->mv_lane_rows && (flags & WGF_SWIGLU) && wb->mv_rows >= 2) return wb->mv_rows / 2;
    return wb->mv_rows;
}

/* What the kinds' table (WG_KINDS, wg_internal.h) says of each kind. */
typedef struct {
    const char *file, *label, *define;
    unsigned props;
    const char *in_is_out[3];
} kind_info;

static const kind_info kinds[WGK_COUNT] = {
#define WG_KIND_INFO(NAME, file, label, define, props, in0, in1, in2)                                                  \
    [WGK_##NAME] = {file, label, define, props, {in0, in1, in2}},
    WG_KINDS(WG_KIND_INFO)
#undef WG_KIND_INFO
};

static const char *kind_file(wg_kind k) { return (unsigned)k < WGK_COUNT ? kinds[k].file : NULL; }

static const char *kind_label(wg_kind k) { return (unsigned)k < WGK_COUNT ? kinds[k].label : "?"; }

/* The name the kind defines for its file's #ifdef (NULL: none). */
static const char *kind_define(wg_kind k) { return (unsigned)k < WGK_COUNT ? kinds[k].define : NULL; }

static int kind_has(wg_kind k, unsigned prop) { return (unsigned)k < WGK_COUNT && (kinds[k].props & prop) != 0; }

/* The names a kernel of the encoders' ops gives its inputs 0..2 read through
 * the output's binding (WGF_IN0_IS_OUT...), NULL where it has none. */
static const char *in_is_out(wg_kind k, int i) { return (unsigned)k < WGK_COUNT ? kinds[k].in_is_out[i] : NULL; }

/* Kernels whose output binding and input x come from out_x.wgsl. */
static int uses_out_x(wg_kind k) { return kind_has(k, WGKP_OUT_X); }

/* Kernels that use audio_math.wgsl (tanh, sigmoid, sin and cos, twiddles, atan2). */
static int uses_audio_math(wg_kind k) { return kind_has(k, WGKP_AUDIO); }

static int is_matrix(wg_kind k) { return kind_has(k, WGKP_MATRIX); }

static int uses_reduce(wg_kind k) { return kind_has(k, WGKP_REDUCE); }

/* Bindings and accessors of a matrix kernel variant (see mm_common.wgsl). */
static void matrix_bindings(sbuf *b, wg_kind kind, uint32_t flags) {
    int nw = (int)(flags >> WGF_NW_SHIFT) & 3;
    if (nw < 1) nw = 1;
    int swiglu = (flags & WGF_SWIGLU) != 0;
    int n_out = kind == WGK_GET_ROWS || swiglu ? 1 : nw;
    if (kind == WGK_GET_ROWS) {
        putf(b, "@group(0) @binding(13) var<storage, read> ids: array<i32>;\n");
    } else {
        putf(b, "@group(0) @binding(2) var<storage, read> x: array<f32>;\n");
    }
    if (flags & WGF_NORM) putf(b, "@group(0) @binding(3) var<storage, read> nw: array<f32>;\n");
    for (int k = 0; k < nw; k++)
        putf(b, "@group(0) @binding(%d) var<storage, read> w%d: array<u32>;\n", 4 + k, k);
    for (int k = 0; k < 3; k++)
        if (flags & (WGF_BIAS0 << k)) putf(b, "@group(0) @binding(%d) var<storage, read> b%d: array<f32>;\n", 7 + k, k);
    for (int k = 0; k < n_out; k++)
        putf(b, "@group(0) @binding(%d) var<storage, read_write> o%d: array<f32>;\n", 10 + k, k);

    putf(b, "fn ww(k: u32, i: u32) -> u32 {\n    switch k {\n");
    for (int k = 1; k < nw; k++)
        putf(b, "        case %du: { return w%d[i]; }\n", k, k);
    putf(b, "        default: { return w0[i]; }\n    }\n}\n");
    putf(b, "fn bias_at(k: u32, r: u32) -> f32 {\n    switch k {\n");
    for (int k = 0; k < 3; k++)
        if (flags & (WGF_BIAS0 << k)) putf(b, "        case %du: { return b%d[P.bo[%d] + r]; }\n", k, k, k);
    putf(b, "        default: { return 0.0; }\n    }\n}\n");
    putf(b, "fn out_get(k: u32, i: u32) -> f32 {\n    switch k {\n");
    for (int k = 1; k < n_out; k++)
        putf(b, "        case %du: { return o%d[i]; }\n", k, k);
    putf(b, "        default: { return o0[i]; }\n    }\n}\n");
    putf(b, "fn out_set(k: u32, i: u32, v: f32) {\n    switch k {\n");
    for (int k = 1; k < n_out; k++)
        putf(b, "        case %du: { o%d[i] = v; }\n", k, k);
    putf(b, "        default: { o0[i] = v; }\n    }\n}\n");
}

static const char *type_file(uint32_t t) {
    switch (t) {
    case WGML_F32: return "w_f32";
    case WGML_F16: return "w_f16";
    case WGML_BF16: return "w_bf16";
    case WGML_Q4_0: return "w_q4_0";
    case WGML_Q4_1: return "w_q4_1";
    case WGML_Q5_0: return "w_q5_0";
    case WGML_Q5_1: return "w_q5_1";
    case WGML_Q8_0: return "w_q8_0";
    case WGML_Q2_K: return "w_q2_k";
    case WGML_Q3_K: return "w_q3_k";
    case WGML_Q4_K: return "w_q4_k";
    case WGML_Q5_K: return "w_q5_k";
    case WGML_Q6_K: return "w_q6_k";
    default: return NULL;
    }
}

int wg_has_decoder(uint32_t type) {
    const char *f = type_file(type);
    return f && wgml_wgsl_source(f) != NULL;
}

static void label_of(char *buf, size_t n, wg_kind kind, uint32_t wtype, uint32_t flags) {
    int k = snprintf(buf, n, "%s", kind_label(kind));
    if (is_matrix(kind) && k > 0 && (size_t)k < n) {
        char tn[16];
        snprintf(tn, sizeof tn, "%s", wgml_dtype_name(wtype));
        for (char *c = tn; *c; c++)
            if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
        k += snprintf(buf + k, n - (size_t)k, ".%s%s%s%s%s", tn, flags & WGF_NORM ? "+norm" : "",
                      flags & WGF_SWIGLU ? "+swiglu" : "", flags & WGF_ADD ? "+add" : "",
                      flags & WGF_ROW_VIEW ? "+view" : "");
    }
}

char *wg_compose_source(wg_backend *wb, wg_kind kind, uint32_t wtype, uint32_t flags, wgml_error *err) {
    const char *file = kind_file(kind);
    const char *body = file ? wgml_wgsl_source(file) : NULL;
    if (!body) {
        wgml_fail(err, WGML_ERR_UNSUPPORTED, "webgpu: no WGSL kernel for %s", kind_label(kind));
        return NULL;
    }
    const char *wsrc = NULL;
    if (is_matrix(kind)) {
        const char *tf = type_file(wtype);
        wsrc = tf ? wgml_wgsl_source(tf) : NULL;
        if (!wsrc) {
            wgml_fail(err, WGML_ERR_UNSUPPORTED, "webgpu: no kernel decodes weights of type %s",
                      wgml_dtype_name(wtype));
            return NULL;
        }
    }
    defs d = {{0}, 0};
    if (wb->tier_subgroups) def(&d, "SUBGROUPS");
    if (flags & WGF_NORM) def(&d, "HAS_NORM");
    if (flags & WGF_ADD) def(&d, "EPI_ADD");
    if (flags & WGF_SWIGLU) def(&d, "SWIGLU");
    if (is_matrix(kind) && (flags & WGF_ROW_VIEW)) def(&d, "ROW_VIEW");
    /* quantized rows are whole blocks of 32 or 256: input reads need no end check */
    if (is_matrix(kind) && wgml_dtype_get(wtype) && wgml_dtype_get(wtype)->block_size >= 32) def(&d, "K_ALIGNED");
    int wg = 64;
    if (kind == WGK_MATVEC && wb->mv_lane_rows) {
        def(&d, "LANE_ROWS");
        wg = wb->mv_lane_wg;
        if (((flags >> WGF_NW_SHIFT) & 3) <= 1 || (flags & WGF_SWIGLU)) {
            def(&d, "ONE_WEIGHT");
        } else if (wg <= 8) {
            /* one copy of the rows' code per fused weight (matvec.wgsl); with
             * wider SIMD the JIT's compile time grows too much (lavapipe at
             * 16 lanes: minutes for the op grid) */
            def(&d, "K_COPIES");
            if (((flags >> WGF_NW_SHIFT) & 3) == 3) def(&d, "NW3");
        }
        /* decoders with per-block words (w_head, w_affine_h, GPB; affine too) */
        if (wsrc && strstr(wsrc, "fn w_head(")) def(&d, "W_HEAD");
        /* decoders giving scale and offset apart (w_affine; mm_common.wgsl) */
        if (wsrc && strstr(wsrc, "fn w_affine")) def(&d, "W_AFFINE");
        if (wb->mv_lane_sg) def(&d, "SG_X");
        if (wb->mv_lane_sg && wb->info->subgroup_max_size == 4) def(&d, "SG_X4");
    } else if (kind == WGK_MATVEC && wb->mv_wg_subgroup) {
        def(&d, "WG_IS_SUBGROUP");
        wg = (int)wb->info->subgroup_max_size;
    }
    if (kind == WGK_BENCH_READ && (flags & WGF_CHUNKED)) def(&d, "CHUNKED");
    if ((kind == WGK_ROPE || kind == WGK_ROPE_STORE) && (flags & WGF_ROPE_POS)) def(&d, "POS");
    if (kind == WGK_ATTN_GENERAL) {
        static const char *const att[] = {"CACHE", "CAUSAL", "SEQ", "KV_SEQ", "POS", "MASK", "RANGE"};
        for (int i = 0; i < 7; i++)
            if (flags & (WGF_ATT_CACHE << i)) def(&d, att[i]);
    }
    if (kind_define(kind)) def(&d, kind_define(kind));
    if (kind == WGK_LSTM && (flags & WGF_LSTM_BIG)) def(&d, "BIG");
    if ((kind == WGK_ADD || kind == WGK_MUL) && (flags & WGF_EW_ROWS)) def(&d, "ROWS");
    for (int i = 0; i < 3; i++)
        if ((flags & (WGF_IN0_IS_OUT << i)) && in_is_out(kind, i)) def(&d, in_is_out(kind, i));
    const char *sg_args =
        wb->tier_subgroups ? ", @builtin(subgroup_invocation_id) sgl: u32, @builtin(subgroup_size) sgs: u32" : "";
    int has_sg = wb->tier_subgroups && strstr(body, "SUBGROUP_ARGS") != NULL;
    const char *init = has_sg ? "_ = S.pos;\n    sg_lane = sgl;\n    sg_size = sgs;" : "_ = S.pos;";

    sbuf b = {0};
    char label[64];
    label_of(label, sizeof label, kind, wtype, flags);
    putf(&b, "// wgml kernel %s (composed by wg_compose.c)\n", label);
    if (wb->tier_f16) putf(&b, "enable f16;\n");
    if (wb->tier_subgroups) putf(&b, "enable subgroups;\n");
    putf(&b, "const WG: u32 = %du;\nalias KVT = %s;\n", wg, wb->tier_f16 ? "f16" : "f32");
    if (kind == WGK_MATVEC) putf(&b, "const R: u32 = %du;\n", wg_matvec_rows(wb, flags));
    putf(&b, "struct Step { pos: u32, n_tokens: u32, kv_len: u32, pad: u32 }\n");
    putf(&b, "@group(0) @binding(0) var<uniform> S: Step;\n");
    if (uses_reduce(kind)) preprocess(&b, wgml_wgsl_source("reduce"), &d, sg_args, init);
    if (uses_out_x(kind)) preprocess(&b, wgml_wgsl_source("out_x"), &d, sg_args, init);
    if (uses_audio_math(kind)) preprocess(&b, wgml_wgsl_source("audio_math"), &d, sg_args, init);
    if (is_matrix(kind)) {
        preprocess(&b, wgml_wgsl_source("mm_common"), &d, sg_args, init);
        matrix_bindings(&b, kind, flags);
        preprocess(&b, wsrc, &d, sg_args, init);
    }
    preprocess(&b, body, &d, sg_args, init);
    if (b.oom) {
        wgml_free(b.s);
        wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory composing a kernel");
        return NULL;
    }
    return b.s;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

wgml_gpu_kernel *wg_kernel(wg_backend *wb, wg_kind kind, uint32_t wtype, uint32_t flags, wgml_error *err) {
    uint64_t key = ((uint64_t)kind << 48) | ((uint64_t)(is_matrix(kind) ? wtype : 0) << 32) | flags;
    for (int i = 0; i < wb->n_pipes; i++)
        if (wb->pipes[i].key == key) return wb->pipes[i].kernel;
    if (wb->n_pipes == wb->cap_pipes) {
        int cap = wb->cap_pipes ? wb->cap_pipes * 2 : 32;
        wg_pipeline *p = wgml_realloc(wb->pipes, (size_t)cap * sizeof *p);
        if (!p) {
            wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory caching a pipeline");
            return NULL;
        }
        wb->pipes = p;
        wb->cap_pipes = cap;
    }
    char *src = wg_compose_source(wb, kind, wtype, flags, err);
    if (!src) return NULL;
    wg_pipeline *p = &wb->pipes[wb->n_pipes];
    memset(p, 0, sizeof *p);
    p->key = key;
    label_of(p->label, sizeof p->label, kind, wtype, flags);
    double t0 = now_ms();
    /* In the background: the step's other kernels compile alongside, and the
     * dispatches wait for them at the submit (gpu.h). */
    wgml_status st = wgml_gpu_kernel_create_async(wb->gpu, src, "main", p->label, &p->kernel, err);
    wb->compile_ms += now_ms() - t0;
    wgml_free(src);
    if (st) return NULL;
    wb->n_pipes++;
    return p->kernel;
}

void wg_pipelines_free(wg_backend *wb) {
    for (int i = 0; i < wb->n_pipes; i++)
        wgml_gpu_kernel_destroy(wb->pipes[i].kernel);
    wgml_free(wb->pipes);
    wb->pipes = NULL;
    wb->n_pipes = wb->cap_pipes = 0;
}
