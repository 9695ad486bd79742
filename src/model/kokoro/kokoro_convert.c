/*
 * kokoro_convert.c - the official Kokoro checkpoint (.pth) and voices to a
 * GGUF in wgml's layout (kokoro.h): weight norm folded in double, convolution
 * weights laid out for im2col + matmul, LSTM directions stacked with their
 * two biases summed, AdaIN's "1 +" folded into its fc bias, voices as f32
 * tensors.
 *
 * Two passes over the checkpoint: the first plans every output tensor (name,
 * shape, type) from the names and shapes alone, so that the GGUF header is
 * written first; the second computes and writes each one in turn (only one
 * tensor's floats in memory at a time).
 *
 * Types: with --type F16, BF16 or Q8_0, every matrix of more than one row
 * whose rows suit the type is stored in it, except:
 *   - the prosody path, the matrices F0 and N come from (ALBERT and its
 *     projection, the duration encoder, the shared LSTM, the F0 and N
 *     blocks), which stays F32 unless --prosody-type says otherwise. The
 *     source's phase is the running sum of F0, so any rounding there moves
 *     the phase of the whole rest of the utterance: measured on the
 *     reference cases, F16 or Q8_0 anywhere on that path (F16 LSTM weights
 *     alone included) takes the audio from 21-32 dB SNR against the float64
 *     oracle to 2-10 dB, far beyond the official float32's own 9-23 dB,
 *     while the decoder and vocoder in Q8_0 leave it within 0.7 dB of F32
 *     (docs/kokoro.md). The durations' own head (the duration LSTM and
 *     projection) and the text encoder (the decoder's input only) take the
 *     type;
 *   - the LSTMs' recurrent weights, F16 at most (the lstm op reads f32 or
 *     f16);
 *   - the generator's last convolution, conv_post, and the source's
 *     l_linear, which stay F32 (the audio's spectrum and phase come straight
 *     from them).
 * Vectors, embeddings of the voices and 1-row tensors stay F32. A
 * convolution whose rows (K taps of C_in) are not whole blocks of the type
 * has each tap padded with zero columns until they are (conv_shape: the
 * decoder's convolutions of a concatenation, 514 and 1090 channels in v1.0,
 * most of its weights); F32 and F16 files keep every convolution unpadded.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"
#include "format/file_bytes.h"
#include "format/pth.h"
#include "model/kokoro/kokoro.h"
#include "model/kokoro/voice.h"

typedef enum {
    R_COPY,      /* as stored (GGUF ne = torch sizes reversed), optionally flattened to [rows][cols] */
    R_CONV,      /* Conv1d [Co][Ci][K] (weight norm folded when g is given) -> [Co][K][Ci] */
    R_CONVT,     /* ConvTranspose1d [Ci][Co][K] -> [K][Co][Ci] */
    R_DWCONVT,   /* depthwise ConvTranspose1d [C][1][K] -> one row [K][C] */
    R_LSTM_IH,   /* both directions' weight_ih (columns [c0, c0+n) of each) -> [2*4H][n] */
    R_LSTM_HH,   /* both directions' weight_hh -> [2*4H][H] */
    R_LSTM_BIAS, /* b_ih + b_hh of both directions -> [2*4H] */
    R_FC_BIAS,   /* AdaIN fc bias, 1 added to its first half */
    R_VOICE,     /* a voice file -> [510][256] */
} recipe;

typedef struct {
    char name[96];
    recipe r;
    const pth_tensor *src, *g;      /* the tensor (weight_v with a g), or the forward LSTM one */
    const pth_tensor *src2[3];      /* LSTM: reverse of src; biases: ih, hh (rev: src2[1], src2[2] */
    int64_t c0, n;                  /* R_LSTM_IH columns */
    int64_t ne[2];                  /* GGUF shape: ne[0] per row, ne[1] rows */
    int n_dims;
    uint32_t type;
    const char *voice_path;
} out_tensor;

typedef struct {
    const pth_file *p;       /* the checkpoint, or NULL: the synthetic tensors syn (kokoro_synth) */
    const pth_tensor *syn;
    int64_t n_syn;
    uint64_t seed;
    const kokoro_convert_options *opt;
    const kokoro_config *cfg;
    out_tensor *t;
    int n, cap;
    wgml_error *err;
} plan;

/* dst = a + b when it fits n bytes (else ""). */
static void join(char *dst, size_t n, const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb >= n) {
        dst[0] = 0;
        return;
    }
    memcpy(dst, a, la);
    memcpy(dst + la, b, lb + 1);
}

/* The source's tensor `name` (the checkpoint's, or a synthetic one). */
static const pth_tensor *src_find(const plan *P, const char *name) {
    if (P->p) return pth_find(P->p, name);
    for (int64_t i = 0; i < P->n_syn; i++)
        if (!strcmp(P->syn[i].name, name)) return &P->syn[i];
    return NULL;
}
static const char *src_name(const plan *P) { return P->p ? pth_name(P->p) : "synthetic kokoro"; }

static const pth_tensor *find(const plan *P, const char *a, const char *b) {
    char name[PTH_MAX_NAME];
    join(name, sizeof name, a, b);
    return name[0] ? src_find(P, name) : NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static out_tensor *add(plan *P, const char *name, recipe r, const pth_tensor *src) {
    if (P->n == P->cap) {
        int cap = P->cap ? 2 * P->cap : 256;
        out_tensor *t = wgml_realloc(P->t, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        P->t = t, P->cap = cap;
    }
    out_tensor *o = &P->t[P->n];
    memset(o, 0, sizeof *o);
    size_t len = strlen(name);
    if (len >= sizeof o->name) return NULL; /* no Kokoro name comes near */
    P->n++;
    memcpy(o->name, name, len + 1);
    o->r = r, o->src = src, o->type = WGML_F32, o->n_dims = 2;
    return o;
}

/* Whether GGUF tensor `name` is on the prosody path (F0 and N are computed
 * from it: ALBERT, bert_encoder, the duration encoder, the shared LSTM, the
 * F0 and N blocks and projections). */
static int prosody_tensor(const char *name) {
    static const char *const prefixes[] = {"bert.", "bert_encoder.", "predictor.text_encoder.", "predictor.shared.",
                                           "predictor.F0", "predictor.N"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

/* The type asked for tensor `name`: --prosody-type's on the prosody path, else --type's. */
static uint32_t wanted_type(const plan *P, const char *name) {
    if (prosody_tensor(name)) return P->opt->prosody_type ? P->opt->prosody_type : WGML_F32;
    return P->opt->type;
}

/* The storage type of a matrix [rows][cols] named `name` for the requested type. */
static uint32_t matrix_type(const plan *P, const char *name, int64_t cols, int64_t rows, int lstm_hh) {
    uint32_t want = wanted_type(P, name);
    if (want == WGML_F32 || rows < 2 || strstr(name, "conv_post") || strstr(name, "l_linear")) return WGML_F32;
    if (lstm_hh) return WGML_F16;
    const wgml_dtype_traits *d = wgml_dtype_get(want);
    return d && cols % d->block_size == 0 ? want : WGML_F32;
}

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

/* The shape and type of Conv1d weight o, [Co][K][Ci] laid out [Co][K][Ct]:
 * Ct = Ci, or, where rows of K*Ci are not whole blocks of the type, the least
 * Ct > Ci that makes them whole (each tap's Ci columns then Ct - Ci zeros, read
 * against zero channels: kokoro.c's conv), when the padded matrix is stored in
 * the type and that is smaller than F32 unpadded. So the decoder's convolutions
 * of a concatenation (encode and decode: 2 + hidden and 2 + asr_res + decoder
 * channels, 514 and 1090 in v1.0) and the noise convolutions (n_fft + 2) take
 * Q8_0 too. */
static void conv_shape(const plan *P, out_tensor *o, const char *name, int64_t Co, int64_t K, int64_t Ci) {
    const uint32_t want = wanted_type(P, name);
    const wgml_dtype_traits *d = wgml_dtype_get(want);
    int64_t Ct = Ci;
    if (d && d->block_size > 1 && (K * Ci) % d->block_size) {
        const int64_t step = d->block_size / gcd(K, d->block_size), pad = (Ci + step - 1) / step * step;
        if (matrix_type(P, name, K * pad, Co, 0) == want && wgml_row_size(want, K * pad) < (size_t)(K * Ci) * 4)
            Ct = pad;
    }
    o->ne[0] = K * Ct, o->ne[1] = Co;
    o->type = matrix_type(P, name, o->ne[0], o->ne[1], 0);
}

static wgml_status bad(plan *P, const pth_tensor *t, const char *what) {
    return wgml_fail(P->err, WGML_ERR_FORMAT, "%s: tensor '%s' %s", src_name(P), t ? t->name : "?", what);
}

/* One checkpoint tensor's output(s); the LSTM's and weight norm's partner tensors are taken with it. */
static wgml_status plan_tensor(plan *P, const pth_tensor *t) {
    const char *full = t->name;
    const char *slash = strchr(full, '/');
    if (!slash) return WGML_OK; /* not a component's parameter */
    char comp[32], key[PTH_MAX_NAME], name[PTH_MAX_NAME + 40];
    size_t cl = (size_t)(slash - full);
    if (cl >= sizeof comp) return WGML_OK;
    memcpy(comp, full, cl);
    comp[cl] = 0;
    const char *k = slash + 1;
    if (!strncmp(k, "module.", 7)) k += 7;
    snprintf(key, sizeof key, "%s", k);
    if (strstr(key, "pooler.") || strstr(key, "position_ids") || ends_with(key, ".weight_g") ||
        strstr(key, "_hh_l0") || strstr(key, "bias_ih_l0") || strstr(key, "_reverse"))
        return WGML_OK; /* unused, or planned with their partner */
    if (t->dtype != WGML_F32 && t->dtype != WGML_F16 && t->dtype != WGML_BF16 && t->dtype != WGML_F64)
        return bad(P, t, "is not a floating-point tensor");
    out_tensor *o;
    /* LSTM: weight_ih_l0 brings its direction's and the reverse's tensors */
    if (ends_with(key, ".weight_ih_l0")) {
        char pre[PTH_MAX_NAME];
        snprintf(pre, sizeof pre, "%.*s", (int)(strlen(full) - strlen(".weight_ih_l0")), full);
        const pth_tensor *ih_r = find(P, pre, ".weight_ih_l0_reverse"),
                         *hh = find(P, pre, ".weight_hh_l0"), *hh_r = find(P, pre, ".weight_hh_l0_reverse"),
                         *bi = find(P, pre, ".bias_ih_l0"), *bh = find(P, pre, ".bias_hh_l0"),
                         *bi_r = find(P, pre, ".bias_ih_l0_reverse"),
                         *bh_r = find(P, pre, ".bias_hh_l0_reverse");
        if (!ih_r || !hh || !hh_r || !bi || !bh || !bi_r || !bh_r) return bad(P, t, "is an LSTM without its partners");
        if (t->ndim != 2 || hh->ndim != 2 || t->size[0] % 4 || hh->size[0] != t->size[0] ||
            hh->size[1] * 4 != t->size[0] || ih_r->ndim != 2 || ih_r->size[0] != t->size[0] ||
            ih_r->size[1] != t->size[1] || hh_r->numel != hh->numel || bi->numel != t->size[0] ||
            bh->numel != t->size[0] || bi_r->numel != t->size[0] || bh_r->numel != t->size[0])
            return bad(P, t, "is an LSTM of inconsistent shapes");
        const int64_t G = t->size[0], H = G / 4, in = t->size[1];
        snprintf(name, sizeof name, "%s.%.*s", comp, (int)(strlen(key) - strlen("_l0")), key);
        /* the predictor's LSTMs read cat(x, style): x's columns and the style's apart */
        const int64_t S = P->cfg->hp.style, split = !strcmp(comp, "predictor") && in > S ? in - S : in;
        if (!(o = add(P, name, R_LSTM_IH, t))) goto oom;
        o->src2[0] = ih_r, o->c0 = 0, o->n = split, o->ne[0] = split, o->ne[1] = 2 * G;
        o->type = matrix_type(P, name, split, 2 * G, 0);
        if (split != in) {
            char sname[PTH_MAX_NAME + 40];
            join(sname, sizeof sname, name, "_s");
            if (!(o = add(P, sname, R_LSTM_IH, t))) goto oom;
            o->src2[0] = ih_r, o->c0 = split, o->n = in - split, o->ne[0] = in - split, o->ne[1] = 2 * G;
            o->type = matrix_type(P, sname, in - split, 2 * G, 0);
        }
        snprintf(name, sizeof name, "%s.%.*s", comp, (int)(strlen(key) - strlen(".weight_ih_l0")), key);
        char nm2[PTH_MAX_NAME + 40];
        join(nm2, sizeof nm2, name, ".weight_hh");
        if (!(o = add(P, nm2, R_LSTM_HH, hh))) goto oom;
        o->src2[0] = hh_r, o->ne[0] = H, o->ne[1] = 2 * G, o->type = matrix_type(P, nm2, H, 2 * G, 1);
        join(nm2, sizeof nm2, name, ".bias");
        if (!(o = add(P, nm2, R_LSTM_BIAS, bi))) goto oom;
        o->src2[0] = bh, o->src2[1] = bi_r, o->src2[2] = bh_r, o->ne[0] = 2 * G, o->ne[1] = 1, o->n_dims = 1;
        return WGML_OK;
    }
    /* weight norm: weight_v with its weight_g */
    if (ends_with(key, ".weight_v")) {
        const size_t kl = strlen(key) - strlen("_v");
        snprintf(name, sizeof name, "%s.%.*s", comp, (int)kl, key);
        char gname[PTH_MAX_NAME];
        snprintf(gname, sizeof gname, "%.*s_g", (int)(strlen(full) - strlen("_v")), full);
        const pth_tensor *g = src_find(P, gname);
        if (!g || t->ndim != 3 || g->numel != t->size[0]) return bad(P, t, "has no matching weight_g");
        const int64_t a = t->size[0], b = t->size[1], K = t->size[2];
        recipe r = strstr(key, ".ups.") ? R_CONVT : strstr(key, ".pool.") ? R_DWCONVT : R_CONV;
        if (!(o = add(P, name, r, t))) goto oom;
        o->g = g;
        if (r == R_CONV) { /* [Co=a][K][Ci=b] */
            conv_shape(P, o, name, a, K, b);
            return WGML_OK;
        }
        if (r == R_CONVT) o->ne[0] = a, o->ne[1] = K * b; /* [K][Co=b][Ci=a] */
        if (r == R_DWCONVT) {
            if (b != 1) return bad(P, t, "is a grouped transposed convolution that is not depthwise");
            o->ne[0] = K * a, o->ne[1] = 1;
        }
        o->type = matrix_type(P, name, o->ne[0], o->ne[1], 0);
        return WGML_OK;
    }
    snprintf(name, sizeof name, "%s.%s", comp, key);
    if (t->ndim == 3 && ends_with(key, ".weight")) { /* a plain Conv1d */
        if (!(o = add(P, name, R_CONV, t))) goto oom;
        conv_shape(P, o, name, t->size[0], t->size[2], t->size[1]);
        return WGML_OK;
    }
    if (!(o = add(P, name, ends_with(key, ".fc.bias") ? R_FC_BIAS : R_COPY, t))) goto oom;
    if (t->ndim <= 1 || strstr(key, "alpha")) { /* vectors (Snake's alpha [1][C][1] too) */
        o->ne[0] = t->numel, o->ne[1] = 1, o->n_dims = 1;
        return WGML_OK;
    }
    if (t->ndim != 2) return bad(P, t, "has an unexpected number of dimensions");
    o->ne[0] = t->size[1], o->ne[1] = t->size[0];
    o->type = matrix_type(P, name, o->ne[0], o->ne[1], 0);
    return WGML_OK;
oom: /* or a name too long for the table */
    return wgml_fail(P->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory, or tensor '%s' has too long a name",
                     src_name(P), full);
}

/* splitmix64: the synthetic values' generator. */
static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A synthetic tensor's values, from the seed and its name: matrices and
 * convolutions N(0, 1/fan_in) (weight norm's g is 1: unit-norm filters),
 * AdaIN's fc a fifth of that, norms' scales and Snake's alpha 1, biases
 * N(0, 0.02); the duration projection's bias -2.7 (about 3 frames per
 * phoneme, as the real model speaks), F0's projection bias 150 (a voiced
 * source everywhere: the generator's full work). */
static void synth_values(const plan *P, const pth_tensor *t, float *v) {
    uint64_t s = P->seed;
    for (const char *c = t->name; *c; c++) s = (s ^ (uint8_t)*c) * 0x100000001b3ull;
    const char *n = t->name;
    double std = 0.02, mean = 0;
    int64_t fan_in = t->ndim >= 2 ? t->numel / t->size[0] : 1;
    if (ends_with(n, "weight_g") || strstr(n, "alpha") || ends_with(n, "LayerNorm.weight") ||
        ends_with(n, "layer_norm.weight") || ends_with(n, ".gamma"))
        mean = 1, std = 0;
    else if (ends_with(n, "duration_proj.linear_layer.bias"))
        mean = -2.7, std = 0;
    else if (ends_with(n, "F0_proj.bias"))
        mean = 150, std = 0;
    else if (t->ndim >= 2)
        std = (strstr(n, ".fc.") ? 0.2 : 1.0) / sqrt((double)fan_in);
    for (int64_t i = 0; i < t->numel; i++) {
        double u = 0; /* a normal: 12 uniforms minus 6 */
        for (int k = 0; k < 12; k++) u += (double)(mix(&s) >> 11) * 0x1.0p-53;
        v[i] = (float)(mean + std * (u - 6));
    }
}

/* The floats of a checkpoint tensor (numel of them, malloc'd). */
static float *read_all(plan *P, const pth_tensor *t, wgml_status *st) {
    float *v = wgml_malloc((size_t)t->numel * sizeof *v + 4);
    if (!v) {
        *st = wgml_fail(P->err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    if (!P->p) {
        synth_values(P, t, v);
    } else if ((*st = pth_tensor_read_f32(P->p, t, v, (size_t)t->numel, P->err))) {
        wgml_free(v);
        return NULL;
    }
    return v;
}

/* The f32 values of output o, in its layout. */
static wgml_status compute(plan *P, const out_tensor *o, float *out) {
    wgml_status st = WGML_OK;
    const int64_t n = o->ne[0] * o->ne[1];
    float *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    switch (o->r) {
    case R_COPY:
    case R_FC_BIAS:
        if (!(a = read_all(P, o->src, &st))) return st;
        memcpy(out, a, (size_t)n * sizeof *out);
        if (o->r == R_FC_BIAS)
            for (int64_t i = 0; i < n / 2; i++) out[i] += 1.0f;
        break;
    case R_CONV:
    case R_CONVT:
    case R_DWCONVT: {
        if (!(a = read_all(P, o->src, &st))) return st;
        const int64_t A = o->src->size[0], B = o->src->size[1], K = o->src->size[2];
        if (o->g) { /* w = g v / ||v||, the norm over every dim but 0, in double */
            if (!(b = read_all(P, o->g, &st))) break;
            for (int64_t i = 0; i < A; i++) {
                double ss = 0;
                for (int64_t j = 0; j < B * K; j++) ss += (double)a[i * B * K + j] * a[i * B * K + j];
                const double s = ss > 0 ? b[i] / sqrt(ss) : 0;
                for (int64_t j = 0; j < B * K; j++) a[i * B * K + j] = (float)(a[i * B * K + j] * s);
            }
        }
        const int64_t Ct = o->r == R_CONV ? o->ne[0] / K : B; /* a Conv1d's tap: Ci columns, then zeros */
        if (Ct != B) memset(out, 0, (size_t)n * sizeof *out);
        for (int64_t i = 0; i < A; i++)
            for (int64_t j = 0; j < B; j++)
                for (int64_t k = 0; k < K; k++) {
                    const float v = a[(i * B + j) * K + k];
                    if (o->r == R_CONV) out[(i * K + k) * Ct + j] = v;      /* [Co][K][Ct] */
                    else if (o->r == R_CONVT) out[(k * B + j) * A + i] = v; /* [K][Co][Ci] */
                    else out[k * A + i] = v;                                /* [K][C] */
                }
        break;
    }
    case R_LSTM_IH:
    case R_LSTM_HH: {
        if (!(a = read_all(P, o->src, &st)) || !(b = read_all(P, o->src2[0], &st))) break;
        const int64_t G = o->src->size[0], cols = o->src->size[1], c0 = o->r == R_LSTM_IH ? o->c0 : 0;
        const int64_t w = o->ne[0];
        for (int dir = 0; dir < 2; dir++)
            for (int64_t r = 0; r < G; r++)
                memcpy(out + (dir * G + r) * w, (dir ? b : a) + r * cols + c0, (size_t)w * sizeof *out);
        break;
    }
    case R_LSTM_BIAS: {
        const int64_t G = o->src->numel;
        if (!(a = read_all(P, o->src, &st)) || !(b = read_all(P, o->src2[0], &st)) ||
            !(c = read_all(P, o->src2[1], &st)) || !(d = read_all(P, o->src2[2], &st)))
            break;
        for (int64_t i = 0; i < G; i++) {
            out[i] = a[i] + b[i];
            out[G + i] = c[i] + d[i];
        }
        break;
    }
    case R_VOICE: {
        if (!o->voice_path) { /* synthetic: N(0, 0.3), the spread of the real voices' values */
            pth_tensor t = {.name = o->name, .ndim = 2, .size = {KOKORO_VOICE_ROWS, KOKORO_VOICE_DIM},
                            .numel = (int64_t)KOKORO_VOICE_ROWS * KOKORO_VOICE_DIM};
            synth_values(P, &t, out);
            for (int64_t i = 0; i < t.numel; i++) out[i] *= 15; /* 0.02 -> 0.3 */
            break;
        }
        kokoro_voice *v = wgml_malloc(sizeof *v);
        if (!v) return wgml_fail(P->err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        st = kokoro_voice_load(o->voice_path, v, P->err);
        if (!st) memcpy(out, v->rows, sizeof v->rows);
        wgml_free(v);
        break;
    }
    }
    wgml_free(a), wgml_free(b), wgml_free(c), wgml_free(d);
    return st;
}

/* The voice's name: its file name without folders and extension. */
static void voice_name(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strcspn(base, ".");
    if (len >= n) len = n - 1;
    memcpy(out, base, len);
    out[len] = 0;
}

static wgml_status write_meta(gguf_writer *w, const kokoro_config *cfg, const plan *P, wgml_error *err) {
    const kokoro_hparams *hp = &cfg->hp;
    wgml_status st;
#define U32(key, v) if ((st = gguf_writer_set_u32(w, "kokoro." key, (uint32_t)(v), err))) return st
    if ((st = gguf_writer_set_str(w, "general.architecture", "kokoro", err)) ||
        (st = gguf_writer_set_str(w, "general.name", "Kokoro", err)))
        return st;
    U32("n_token", hp->n_token);
    U32("hidden_dim", hp->hidden);
    U32("style_dim", hp->style);
    U32("n_layer", hp->n_layer);
    U32("max_dur", hp->max_dur);
    U32("text_encoder_kernel_size", hp->text_kernel);
    U32("plbert.embedding_size", hp->bert_embd);
    U32("plbert.hidden_size", hp->bert_hidden);
    U32("plbert.num_attention_heads", hp->bert_heads);
    U32("plbert.intermediate_size", hp->bert_ff);
    U32("plbert.num_hidden_layers", hp->bert_layers);
    U32("plbert.max_position_embeddings", hp->bert_ctx);
    U32("istftnet.decoder_dim", hp->dec_dim);
    U32("istftnet.asr_res_dim", hp->asr_res_dim);
    U32("istftnet.upsample_initial_channel", hp->up_initial);
    U32("istftnet.gen_istft_n_fft", hp->n_fft);
    U32("istftnet.gen_istft_hop_size", hp->hop);
    U32("sample_rate", hp->sample_rate);
    U32("n_harmonics", hp->n_harmonics);
#undef U32
    int32_t dil[KOKORO_MAX_RB * 3];
    for (int i = 0; i < hp->n_rb; i++)
        for (int j = 0; j < 3; j++) dil[i * 3 + j] = hp->rb_dil[i][j];
    if ((st = gguf_writer_set_arr(w, "kokoro.istftnet.upsample_rates", GGUF_TYPE_INT32, hp->up_rates,
                                  (uint64_t)hp->n_ups, err)) ||
        (st = gguf_writer_set_arr(w, "kokoro.istftnet.upsample_kernel_sizes", GGUF_TYPE_INT32, hp->up_kernels,
                                  (uint64_t)hp->n_ups, err)) ||
        (st = gguf_writer_set_arr(w, "kokoro.istftnet.resblock_kernel_sizes", GGUF_TYPE_INT32, hp->rb_kernels,
                                  (uint64_t)hp->n_rb, err)) ||
        (st = gguf_writer_set_arr(w, "kokoro.istftnet.resblock_dilation_sizes", GGUF_TYPE_INT32, dil,
                                  (uint64_t)hp->n_rb * 3, err)))
        return st;
    const char *syms[KOKORO_N_VOCAB_MAX];
    for (int i = 0; i < hp->n_token; i++) syms[i] = cfg->vocab[i];
    if ((st = gguf_writer_set_arr_str(w, "kokoro.vocab", syms, NULL, (uint64_t)hp->n_token, err))) return st;
    const char *names[64];
    char buf[64][64];
    int nv = 0;
    for (int i = 0; i < P->n && nv < 64; i++)
        if (P->t[i].r == R_VOICE) {
            snprintf(buf[nv], sizeof buf[nv], "%s", P->t[i].name + strlen("voice."));
            names[nv] = buf[nv];
            nv++;
        }
    return gguf_writer_set_arr_str(w, "kokoro.voices", names, NULL, (uint64_t)nv, err);
}

/* The widths the official code hard-codes, from the checkpoint's shapes. */
static wgml_status shapes_config(plan *P, kokoro_config *cfg) {
    const pth_tensor *enc = pth_find(P->p, "decoder/module.encode.conv1.weight_v"),
                     *res = pth_find(P->p, "decoder/module.asr_res.0.weight_v"),
                     *emb = pth_find(P->p, "bert/module.embeddings.word_embeddings.weight"),
                     *up = pth_find(P->p, "decoder/module.generator.ups.0.weight_v"),
                     *hid = pth_find(P->p, "bert_encoder/module.weight"),
                     *amap = pth_find(P->p, "bert/module.encoder.embedding_hidden_mapping_in.weight");
    if (!enc || !res || !emb || !up || !hid || !amap || enc->ndim != 3 || res->ndim != 3 || emb->ndim != 2 ||
        up->ndim != 3 || hid->ndim != 2 || amap->ndim != 2)
        return wgml_fail(P->err, WGML_ERR_FORMAT,
                         "%s: not a Kokoro checkpoint (its bert, bert_encoder and decoder tensors are missing)",
                         src_name(P));
    kokoro_hparams *hp = &cfg->hp;
    hp->dec_dim = (int)enc->size[0];
    hp->asr_res_dim = (int)res->size[0];
    hp->bert_embd = (int)emb->size[1];
    if (emb->size[0] != hp->n_token || up->size[0] != hp->up_initial || hid->size[0] != hp->hidden ||
        hid->size[1] != hp->bert_hidden || amap->size[0] != hp->bert_hidden)
        return wgml_fail(P->err, WGML_ERR_FORMAT,
                         "%s: the checkpoint's shapes do not match the config (n_token %d, hidden_dim %d, plbert "
                         "hidden_size %d, upsample_initial_channel %d): give its config.json",
                         src_name(P), hp->n_token, hp->hidden, hp->bert_hidden, hp->up_initial);
    return WGML_OK;
}

/* The conversion of a checkpoint (pth_path), or of synthetic tensors (syn). */
static wgml_status convert(const char *pth_path, const pth_tensor *syn, int64_t n_syn, uint64_t seed,
                           const kokoro_convert_options *opt, const char *path, void **mem, size_t *mem_size,
                           wgml_error *err) {
    if (opt->type != WGML_F32 && opt->type != WGML_F16 && opt->type != WGML_BF16 && opt->type != WGML_Q8_0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "convert kokoro: --type must be F32, F16, BF16 or Q8_0");
    const uint32_t pt = opt->prosody_type;
    if (pt && pt != WGML_F32 && pt != WGML_F16 && pt != WGML_BF16 && pt != WGML_Q8_0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "convert kokoro: --prosody-type must be F32, F16, BF16 or Q8_0");
    kokoro_config cfg;
    if (opt->config) cfg = *opt->config;
    else kokoro_config_default(&cfg);
    pth_file *p = NULL;
    wgml_status st = syn ? WGML_OK : pth_open(pth_path, &p, err);
    if (st) return st;
    plan P = {.p = p, .syn = syn, .n_syn = n_syn, .seed = seed, .opt = opt, .cfg = &cfg, .err = err};
    gguf_writer *w = NULL;
    float *buf = NULL;
    void *qbuf = NULL;
    if (p && (st = shapes_config(&P, &cfg))) goto done;
    for (int64_t i = 0; i < (p ? pth_n_tensors(p) : n_syn); i++)
        if ((st = plan_tensor(&P, p ? pth_tensor_at(p, i) : &syn[i]))) goto done;
    if (syn) {
        out_tensor *o = add(&P, "voice.synth", R_VOICE, NULL);
        if (!o) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        o->ne[0] = KOKORO_VOICE_DIM, o->ne[1] = KOKORO_VOICE_ROWS;
    }
    for (int i = 0; i < opt->n_voices; i++) {
        char vn[64], tn[96];
        voice_name(opt->voices[i], vn, sizeof vn);
        snprintf(tn, sizeof tn, "voice.%s", vn);
        for (int j = 0; j < P.n; j++)
            if (!strcmp(P.t[j].name, tn)) {
                st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "convert kokoro: two voices are named '%s'", vn);
                goto done;
            }
        out_tensor *o = add(&P, tn, R_VOICE, NULL);
        if (!o) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        o->voice_path = opt->voices[i], o->ne[0] = KOKORO_VOICE_DIM, o->ne[1] = KOKORO_VOICE_ROWS;
    }
    if (!(w = gguf_writer_create())) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((st = write_meta(w, &cfg, &P, err))) goto done;
    uint64_t total = 0, done_bytes = 0;
    int64_t max_n = 1;
    for (int i = 0; i < P.n; i++) {
        const out_tensor *o = &P.t[i];
        if ((st = gguf_writer_add_tensor(w, o->name, o->type, o->n_dims, o->ne, err))) goto done;
        int64_t n = o->ne[0] * o->ne[1];
        if (n > max_n) max_n = n;
        total += (uint64_t)n * 4;
    }
    if ((st = path ? gguf_writer_begin(w, path, err) : gguf_writer_begin_memory(w, err))) goto done;
    buf = wgml_malloc((size_t)max_n * sizeof *buf + 4);
    qbuf = wgml_malloc((size_t)max_n * sizeof *buf + 64);
    if (!buf || !qbuf) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < P.n; i++) {
        const out_tensor *o = &P.t[i];
        if ((st = compute(&P, o, buf))) {
            wgml_error_prefix(err, "converting '%s'", o->name);
            goto done;
        }
        const size_t row = wgml_row_size(o->type, o->ne[0]);
        if (o->type == WGML_F32) {
            st = gguf_writer_write_tensor(w, buf, row * (size_t)o->ne[1], err);
        } else {
            for (int64_t r = 0; r < o->ne[1]; r++)
                wgml_quantize_row(o->type, buf + r * o->ne[0], (uint8_t *)qbuf + (size_t)r * row, o->ne[0]);
            st = gguf_writer_write_tensor(w, qbuf, row * (size_t)o->ne[1], err);
        }
        if (st) goto done;
        done_bytes += (uint64_t)(o->ne[0] * o->ne[1]) * 4;
        if (opt->progress && opt->progress(opt->user, done_bytes, total)) {
            st = wgml_fail(err, WGML_ERR_IO, "convert kokoro: cancelled");
            goto done;
        }
    }
    if ((st = gguf_writer_finish(w, err))) goto done;
    if (!path) st = gguf_writer_take_memory(w, mem, mem_size, err);
done:
    gguf_writer_free(w);
    wgml_free(buf);
    wgml_free(qbuf);
    wgml_free(P.t);
    pth_close(p);
    return st;
}

wgml_status kokoro_convert(const char *pth_path, const kokoro_convert_options *opt, const char *path, void **mem,
                           size_t *mem_size, wgml_error *err) {
    return convert(pth_path, NULL, 0, 0, opt, path, mem, mem_size, err);
}

wgml_status kokoro_synth(const kokoro_config *cfg, const kokoro_convert_options *opt, uint64_t seed, const char *path,
                         void **mem, size_t *mem_size, wgml_error *err) {
    int n = kokoro_official_keys(&cfg->hp, NULL, 0);
    kokoro_key *k = wgml_malloc((size_t)n * sizeof *k);
    pth_tensor *t = wgml_calloc((size_t)n, sizeof *t);
    wgml_status st;
    if (!k || !t) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    } else {
        kokoro_official_keys(&cfg->hp, k, n);
        for (int i = 0; i < n; i++) {
            t[i] = (pth_tensor){.name = k[i].name, .dtype = WGML_F32, .elem_size = 4, .ndim = k[i].ndim,
                                .numel = 1, .contiguous = 1};
            for (int d = 0; d < k[i].ndim; d++) t[i].size[d] = k[i].size[d], t[i].numel *= k[i].size[d];
        }
        kokoro_convert_options o = *opt;
        o.config = cfg, o.voices = NULL, o.n_voices = 0;
        st = convert(NULL, t, n, seed, &o, path, mem, mem_size, err);
    }
    wgml_free(k);
    wgml_free(t);
    return st;
}
