/*
 * kokoro.c - Kokoro's forward pass, written once against backend ops
 * (../shared/kokoro/README.md, "Forward"; kokoro_model.h). Signals are
 * activations [time][channels]; a convolution is a matmul over the unfolded signal (matmul's conv), a
 * transposed one matmul + col2im, a concatenation along channels im2col's
 * channel slots, the predictor's cat(x, style) a bias (the style's columns of
 * each weight times the style, computed once per utterance).
 *
 *   text:   ALBERT -> d_en -> DurationEncoder (3 x BiLSTM + AdaLayerNorm) -> d
 *           -> LSTM -> duration logits (read back: durations)
 *           TextEncoder (3 x conv + LayerNorm + LeakyReLU, BiLSTM) -> t_en
 *   audio:  en = d[frame's token], asr = t_en[frame's token]
 *           shared BiLSTM -> F0 and N branches (AdainResBlk1d x 3, proj) -> F0_pred, N_pred
 *           decoder: encode, 4 decode blocks (AdainResBlk1d) -> generator:
 *           NSF source -> STFT -> 2 x (ups + noise branch + 3 AdaINResBlock1)
 *           -> conv_post -> exp / sin -> iSTFT -> audio
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/lock.h"
#include "model/blocks.h"
#include "model/kokoro/kokoro_model.h"
#include "model/kokoro/kokoro_weights.h"

#define MAX_ACTS 512

typedef struct {
    const char *name; /* the GGUF tensor's (points into the file) */
    wgml_tensor t;
} named_weight;

typedef struct {
    char name[48];
    wgml_tensor t;
} act;

/* ---- the arena ----
 * A state's activations live in one arena: chunks of device memory, each at
 * most what one buffer of the backend may be (be->max_buffer_size: WebGPU's
 * storage binding limit), grown only between steps by appending chunks, so
 * that what step 1 leaves for step 2 (d, t_en, the style) never moves.
 * Before each step the step is built once against a measuring backend that
 * runs nothing (measure_run): it learns each region's size and which regions
 * an op writes while reading others. Then the plan: every named activation
 * is a region of its own; every temporary of one role ("~dec.cat", "~rb.t")
 * in a step shares its role's region (each is used up before the next of its
 * role is made: ops run in order on every backend), sized to the largest.
 * Regions an op writes and reads are put in different banks (a greedy
 * colouring of those conflicts: WebGPU binds no written buffer twice), each
 * bank a list of its own chunks filled from its cursor forward (first fit,
 * 256-byte offsets), new chunks made where none has room. The step is then
 * built for real, each region taken from the plan in the order measured. */
#define MAX_NODES MAX_ACTS /* regions: each is some activation's */
#define MAX_CHUNKS 64
#define MAX_BANKS 32
#define ARENA_ALIGN 256

typedef struct {
    wgml_buffer *buf; /* NULL while only planned */
    size_t size, used; /* used: what the plan put in a planned one */
    int bank;
} chunk;

/* A region of the arena: a named activation, or a role's temporaries in one step. */
typedef struct {
    char role[24]; /* the role's name ("~rb.t"); "" for a named activation */
    size_t size;
    int bank, chunk; /* where the plan put it */
    size_t offset;
} node;

/* The backend a step is measured on: records nothing but conflicts. */
typedef struct {
    wgml_backend base;
    kokoro_state *s;
} measure_backend;

/* The model: read-only once loaded, shared by every state. */
struct kokoro_model {
    kokoro_hparams hp;
    const gguf_file *f; /* the file (voices are read from it on the host) */
    char vocab[KOKORO_N_VOCAB_MAX][8]; /* each id's symbol ("" unused) */
    wgml_backend *be;
    wgml_weights w;
    named_weight *weights; /* sorted by name */
    int n_weights;
    kokoro_weights kw;  /* the weights by their place (kokoro_weights.h), resolved at load */
    wgml_tensor window; /* the periodic Hann window of the STFT */
    wgml_buffer *window_buf;
    wgml_mutex step_mu; /* one step at a time on the backend (any state's) */
};

/* One request's state: the activations of its last step (overwritten by its
 * next), what step 1 leaves for step 2, the arena they live in, and the
 * step's error. */
struct kokoro_state {
    kokoro_model *m;
    wgml_backend *be; /* what the step is built on: m->be, or &mbe while measuring */
    measure_backend mbe;
    int measuring;
    act acts[MAX_ACTS];
    int n_acts;
    node nodes[MAX_NODES];
    int n_nodes;
    int step_node0;  /* the first region of the step being built */
    int node_cursor; /* the next region the step takes */
    chunk chunks[MAX_CHUNKS];
    int n_chunks;
    int (*edges)[2]; /* conflicts measured: regions (hi, lo) an op writes and reads */
    int n_edges, cap_edges;
    char tags[MAX_NODES]; /* while measuring, region i's tensors point at tags + i */
    int text_acts;  /* acts of kokoro_text, kept for kokoro_audio */
    int text_nodes; /* their regions */
    int T;          /* tokens of the last kokoro_text */
    int d_act, t_en_act; /* its prosody and text features (indices in acts) */
    int in_step;
    int bf16_decoder; /* kokoro_set_bf16: the decoder's products may round to bf16 */
    int one_pass;     /* kokoro_set_split_sentences(0): pieces cut only at the phoneme limit */
    int bf16;         /* set while the decoder is built when bf16_decoder: bf16_act on its matmuls */
    wgml_sticky sk;   /* the first error of the step being built */
};

static void measure_run(wgml_backend *be, wgml_op op, const void *args);
static void measure_begin(wgml_backend *be, const wgml_step *step) { (void)be, (void)step; }
static wgml_status measure_end(wgml_backend *be, wgml_error *err) { return (void)be, (void)err, WGML_OK; }
static void measure_copy(wgml_backend *be, const wgml_tensor *t, const void *src, size_t size) {
    (void)be, (void)t, (void)src, (void)size;
}
static void measure_download(wgml_backend *be, const wgml_tensor *t, void *dst, size_t size) {
    (void)be, (void)t, (void)dst, (void)size;
}

wgml_status kokoro_state_create(kokoro_model *m, kokoro_state **out, wgml_error *err) {
    kokoro_state *s = *out = wgml_calloc(1, sizeof **out);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a Kokoro state");
    s->m = m;
    s->be = m->be;
    s->mbe.s = s;
    wgml_backend *mb = &s->mbe.base;
    mb->name = "kokoro-measure";
    mb->device_name = m->be->device_name;
    mb->max_buffer_size = m->be->max_buffer_size;
    mb->begin = measure_begin;
    mb->end = measure_end;
    mb->upload = measure_copy;
    mb->download = measure_download;
    mb->run = measure_run;
    return WGML_OK;
}

void kokoro_state_free(kokoro_state *s) {
    if (!s) return;
    wgml_backend *be = s->m->be;
    wgml_mutex_lock(&s->m->step_mu);
    for (int i = 0; i < s->n_chunks; i++)
        if (s->chunks[i].buf) be->buffer_free(be, s->chunks[i].buf);
    wgml_mutex_unlock(&s->m->step_mu);
    wgml_free(s->edges);
    wgml_free(s);
}

kokoro_model *kokoro_state_model(const kokoro_state *s) { return s->m; }

void kokoro_set_bf16(kokoro_state *s, int on) { s->bf16_decoder = on != 0; }
void kokoro_set_split_sentences(kokoro_state *s, int on) { s->one_pass = !on; }
int kokoro_split_sentences(const kokoro_state *s) { return !s->one_pass; }

/* ---- weights ---- */

static int cmp_weight(const void *a, const void *b) {
    return strcmp(((const named_weight *)a)->name, ((const named_weight *)b)->name);
}

/* The weight `name` (kokoro_find_fn for kokoro_weights_resolve); NULL when the file has none. */
static const wgml_tensor *find_weight(void *ctx, const char *name) {
    const kokoro_model *m = ctx;
    named_weight key = {.name = name};
    const named_weight *w = bsearch(&key, m->weights, (size_t)m->n_weights, sizeof key, cmp_weight);
    return w ? &w->t : NULL;
}

static int get_u32(const gguf_file *f, const char *key, int lo, int hi, int *out, wgml_error *err) {
    return wgml_hparam_int(f, "kokoro", key, lo, hi, out, 1, err) == WGML_OK;
}

static wgml_status get_list(const gguf_file *f, const char *key, int max, int *out, int *n, wgml_error *err) {
    const gguf_value *a;
    char full[96];
    snprintf(full, sizeof full, "kokoro.%s", key);
    int r = gguf_get_arr(f, full, GGUF_TYPE_INT32, &a, err);
    if (r < 0) return err->code;
    if (r == 0 || a->v.arr.n < 1 || a->v.arr.n > (uint64_t)max)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %s must be a list of 1..%d int32", gguf_name(f), full, max);
    for (uint64_t i = 0; i < a->v.arr.n; i++) {
        out[i] = gguf_arr_i32(a, i);
        if (out[i] < 1 || out[i] > 4096)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: %s holds %d", gguf_name(f), full, out[i]);
    }
    *n = (int)a->v.arr.n;
    return WGML_OK;
}

wgml_status kokoro_read_hparams(const gguf_file *f, kokoro_hparams *hp, wgml_error *err) {
    memset(hp, 0, sizeof *hp);
    if (!get_u32(f, "n_token", 2, KOKORO_N_VOCAB_MAX, &hp->n_token, err) ||
        !get_u32(f, "hidden_dim", 2, 1 << 14, &hp->hidden, err) ||
        !get_u32(f, "style_dim", 1, 1 << 14, &hp->style, err) || !get_u32(f, "n_layer", 1, 64, &hp->n_layer, err) ||
        !get_u32(f, "max_dur", 1, 4096, &hp->max_dur, err) ||
        !get_u32(f, "text_encoder_kernel_size", 1, 63, &hp->text_kernel, err) ||
        !get_u32(f, "plbert.embedding_size", 1, 1 << 14, &hp->bert_embd, err) ||
        !get_u32(f, "plbert.hidden_size", 1, 1 << 14, &hp->bert_hidden, err) ||
        !get_u32(f, "plbert.num_attention_heads", 1, 256, &hp->bert_heads, err) ||
        !get_u32(f, "plbert.intermediate_size", 1, 1 << 16, &hp->bert_ff, err) ||
        !get_u32(f, "plbert.num_hidden_layers", 1, 256, &hp->bert_layers, err) ||
        !get_u32(f, "plbert.max_position_embeddings", 2, 1 << 16, &hp->bert_ctx, err) ||
        !get_u32(f, "istftnet.decoder_dim", 1, 1 << 14, &hp->dec_dim, err) ||
        !get_u32(f, "istftnet.asr_res_dim", 1, 1 << 14, &hp->asr_res_dim, err) ||
        !get_u32(f, "istftnet.upsample_initial_channel", 1, 1 << 14, &hp->up_initial, err) ||
        !get_u32(f, "istftnet.gen_istft_n_fft", 2, 4096, &hp->n_fft, err) ||
        !get_u32(f, "istftnet.gen_istft_hop_size", 1, 4096, &hp->hop, err) ||
        !get_u32(f, "sample_rate", 1, (1 << 24) - 1, &hp->sample_rate, err) ||
        !get_u32(f, "n_harmonics", 1, 64, &hp->n_harmonics, err))
        return err->code;
    int n_k = 0, n_d = 0, dil[KOKORO_MAX_RB * 3];
    wgml_status st;
    if ((st = get_list(f, "istftnet.upsample_rates", KOKORO_MAX_UPS, hp->up_rates, &hp->n_ups, err)) ||
        (st = get_list(f, "istftnet.upsample_kernel_sizes", KOKORO_MAX_UPS, hp->up_kernels, &n_k, err)) ||
        (st = get_list(f, "istftnet.resblock_kernel_sizes", KOKORO_MAX_RB, hp->rb_kernels, &hp->n_rb, err)) ||
        (st = get_list(f, "istftnet.resblock_dilation_sizes", KOKORO_MAX_RB * 3, dil, &n_d, err)))
        return st;
    if (n_k != hp->n_ups || n_d != 3 * hp->n_rb || hp->n_fft % 2 || hp->hidden % 2 ||
        hp->bert_hidden % hp->bert_heads || hp->up_initial % (1 << hp->n_ups))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: inconsistent kokoro hyper-parameters", gguf_name(f));
    for (int i = 0; i < hp->n_rb; i++)
        for (int j = 0; j < 3; j++) hp->rb_dil[i][j] = dil[3 * i + j];
    return WGML_OK;
}

wgml_status kokoro_read_vocab(const gguf_file *f, int n_token, char vocab[][8], wgml_error *err) {
    const gguf_value *a;
    int r = gguf_get_arr(f, "kokoro.vocab", GGUF_TYPE_STRING, &a, err);
    if (r < 0) return err->code;
    if (r == 0 || a->v.arr.n != (uint64_t)n_token)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: kokoro.vocab must be a list of %d strings", gguf_name(f), n_token);
    for (int i = 0; i < n_token; i++) {
        const gguf_str *s = &a->v.arr.items[i].v.str;
        if (s->len > 7 || memchr(s->ptr, 0, (size_t)s->len))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: kokoro.vocab[%d] is not a phoneme symbol", gguf_name(f), i);
        memcpy(vocab[i], s->ptr, (size_t)s->len);
        vocab[i][s->len] = '\0';
    }
    return WGML_OK;
}

void kokoro_model_free(kokoro_model *m) {
    if (!m) return;
    wgml_mutex_destroy(&m->step_mu);
    if (m->window_buf) m->be->buffer_free(m->be, m->window_buf);
    wgml_weights_free(&m->w);
    wgml_free(m->weights);
    wgml_free(m);
}

wgml_status kokoro_model_load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p,
                              kokoro_model **out, wgml_error *err) {
    kokoro_model *m = wgml_calloc(1, sizeof *m);
    if (!m) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    m->be = be;
    m->f = f;
    wgml_mutex_init(&m->step_mu);
    wgml_status st = kokoro_read_hparams(f, &m->hp, err);
    if (!st) st = kokoro_read_vocab(f, m->hp.n_token, m->vocab, err);
    const int64_t n = gguf_n_tensors(f);
    if (!st && !(m->weights = wgml_calloc((size_t)n + 1, sizeof *m->weights)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) {
        /* every tensor as a weight of its own shape (the forward pass looks them up by name) */
        wgml_weights_loader L;
        wgml_weights_begin(&L, f, be, &m->w, p ? p->fault : NULL, p ? p->progress : NULL, p ? p->user : NULL, err);
        for (int64_t i = 0; i < n && !st; i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            if (!strncmp(t->name, "voice.", 6)) continue; /* voices are read on the host */
            named_weight *w = &m->weights[m->n_weights++];
            w->name = t->name;
            st = wgml_weights_load(&L, &w->t, t->name, t->ne[0], t->n_elements / t->ne[0], 1);
        }
        if (!st) st = wgml_weights_end(&L);
        qsort(m->weights, (size_t)m->n_weights, sizeof *m->weights, cmp_weight);
    }
    if (!st) st = kokoro_weights_resolve(&m->hp, find_weight, m, &m->kw, err);
    if (!st) {
        const int N = m->hp.n_fft;
        float *w = wgml_malloc((size_t)N * sizeof *w);
        if (!w) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        for (int i = 0; w && i < N; i++) w[i] = (float)(0.5 - 0.5 * cos(2 * M_PI * i / N));
        if (!st) st = be->buffer_create(be, (size_t)N * 4, WGML_BUFFER_WEIGHTS, &m->window_buf, err);
        if (!st) st = be->buffer_write(be, m->window_buf, 0, w, (size_t)N * 4, err);
        wgml_free(w);
        m->window = (wgml_tensor){.type = WGML_F32, .ne = {N, 1, 1, 1}, .buf = m->window_buf, .name = "window"};
    }
    if (st) {
        kokoro_model_free(m);
        return st;
    }
    *out = m;
    return WGML_OK;
}

const kokoro_hparams *kokoro_model_hparams(const kokoro_model *m) { return &m->hp; }
const char *kokoro_model_symbol(const kokoro_model *m, int id) {
    return id >= 0 && id < m->hp.n_token ? m->vocab[id] : "";
}
const gguf_file *kokoro_model_file(const kokoro_model *m) { return m->f; }
wgml_weights *kokoro_model_weights(kokoro_model *m) { return &m->w; }

/* ---- activations ---- */

/* The region of a new activation named `name` of size bytes (a temporary's
 * role region when the name starts with '~'): made while measuring, taken in
 * the same order from the plan when built for real; -1 with the error kept. */
static int node_get(kokoro_state *s, const char *name, size_t size) {
    const int role = name[0] == '~';
    if (role)
        for (int i = s->step_node0; i < s->node_cursor; i++) {
            node *n = &s->nodes[i];
            if (strcmp(n->role, name)) continue;
            if (s->measuring) n->size = size > n->size ? size : n->size;
            else if (size > n->size) break;
            return i;
        }
    if (s->measuring) {
        if (s->n_nodes == MAX_NODES) {
            wgml_sticky_fail(&s->sk, WGML_ERR_OUT_OF_MEMORY, "kokoro: too many activations in a step");
            return -1;
        }
        node *n = &s->nodes[s->n_nodes];
        memset(n, 0, sizeof *n);
        if (role) snprintf(n->role, sizeof n->role, "%s", name);
        n->size = size;
        s->node_cursor = ++s->n_nodes;
        return s->n_nodes - 1;
    }
    const int i = s->node_cursor++;
    if (i < s->n_nodes && !strcmp(s->nodes[i].role, role ? name : "") && size <= s->nodes[i].size) return i;
    wgml_sticky_fail(&s->sk, WGML_ERR_UNSUPPORTED, "kokoro: the step asks for '%s' (%zu bytes), which its measure did not",
                     name, size);
    return -1;
}

/* A new activation [rows][cols] named `name`: a region of the arena of its
 * own, or of its role ('~'), which the temporaries of the role share. */
static wgml_tensor *A(kokoro_state *s, const char *name, int64_t cols, int64_t rows) {
    static wgml_tensor none;
    if (s->sk.status) return &none;
    if (s->n_acts == MAX_ACTS) {
        wgml_sticky_fail(&s->sk, WGML_ERR_OUT_OF_MEMORY, "kokoro: too many activations");
        return &none;
    }
    act *a = &s->acts[s->n_acts];
    snprintf(a->name, sizeof a->name, "%s", name);
    const size_t size = (size_t)(cols * rows) * 4;
    const int i = node_get(s, name, size ? size : 4);
    if (i < 0) return &none;
    a->t = (wgml_tensor){.type = WGML_F32, .ne = {cols, rows, 1, 1}, .name = a->name};
    if (s->measuring) {
        a->t.buf = (wgml_buffer *)(void *)(s->tags + i); /* never read: the measure runs nothing */
    } else {
        a->t.buf = s->chunks[s->nodes[i].chunk].buf;
        a->t.offset = s->nodes[i].offset;
    }
    s->n_acts++;
    return &a->t;
}

const wgml_tensor *kokoro_act(const kokoro_state *s, const char *name) {
    for (int i = s->n_acts - 1; i >= 0; i--)
        if (!strcmp(s->acts[i].name, name)) return &s->acts[i].t;
    return NULL;
}

int kokoro_act_count(const kokoro_state *s) { return s->n_acts; }
const wgml_tensor *kokoro_act_at(const kokoro_state *s, int i) {
    return i >= 0 && i < s->n_acts ? &s->acts[i].t : NULL;
}

/* ---- measuring and planning a step ---- */

/* The region a tensor of the step being measured views: one made in this
 * step (its tag), one an earlier step placed, or -1 (a weight, the window). */
static int node_of(const kokoro_state *s, const wgml_tensor *t) {
    if (!t || !t->buf) return -1;
    const uintptr_t p = (uintptr_t)(const void *)t->buf, tags = (uintptr_t)(const void *)s->tags;
    if (p >= tags && p < tags + MAX_NODES) return (int)(p - tags);
    int c = 0;
    while (c < s->n_chunks && s->chunks[c].buf != t->buf) c++;
    if (c == s->n_chunks) return -1;
    for (int i = 0; i < s->step_node0; i++) {
        const node *n = &s->nodes[i];
        if (n->chunk == c && t->offset >= n->offset && t->offset < n->offset + n->size) return i;
    }
    return -1;
}

static void add_edge(kokoro_state *s, int a, int b) {
    if (a < 0 || b < 0 || a == b) return;
    if (s->n_edges == s->cap_edges) {
        int cap = s->cap_edges ? 2 * s->cap_edges : 1024;
        int (*e)[2] = wgml_realloc(s->edges, (size_t)cap * sizeof *e);
        if (!e) {
            wgml_sticky_fail(&s->sk, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            return;
        }
        s->edges = e, s->cap_edges = cap;
    }
    s->edges[s->n_edges][0] = a > b ? a : b;
    s->edges[s->n_edges][1] = a > b ? b : a;
    s->n_edges++;
}

/* The measuring backend's run: op writes the regions of its outputs while
 * reading those of its inputs, so each output is a conflict of every other
 * region the op names (its own, in place, is not). Every op of ops.h is
 * listed: what a backend may refuse to share a buffer, this never shares. */
static void measure_run(wgml_backend *be, wgml_op op, const void *args) {
    kokoro_state *s = ((measure_backend *)(void *)be)->s;
    const wgml_tensor *w[8] = {0}, *r[16] = {0};
    int nw = 0, nr = 0;
#define W(t) (w[nw++] = (t))
#define R(t) (r[nr++] = (t))
    switch (op) {
    case WGML_OP_MATMUL: {
        const wgml_matmul_args *a = args;
        R(a->x), R(a->norm);
        for (int k = 0; k < a->n_w && k < WGML_MATMUL_MAX; k++) R(a->w[k]), R(a->bias[k]), W(a->out[k]);
        break;
    }
    case WGML_OP_GET_ROWS: {
        const wgml_get_rows_args *a = args;
        W(a->out), R(a->table), R(a->ids);
        break;
    }
    case WGML_OP_ATTENTION: {
        const wgml_attention_args *a = args;
        W(a->out), W(a->k_cache), W(a->v_cache);
        if (a->rope) W(a->q), W(a->k), R(a->rope->freq_factors); /* rotated in place */
        else R(a->q), R(a->k);
        R(a->v), R(a->seq), R(a->kv_seq), R(a->pos), R(a->mask), R(a->kv_range);
        break;
    }
    case WGML_OP_RMS_NORM: {
        const wgml_rms_norm_args *a = args;
        W(a->out), R(a->x), R(a->w);
        break;
    }
    case WGML_OP_SOFTMAX: W(((const wgml_softmax_args *)args)->out), R(((const wgml_softmax_args *)args)->x); break;
    case WGML_OP_ADD: {
        const wgml_add_args *a = args;
        W(a->out), R(a->a), R(a->b);
        break;
    }
    case WGML_OP_SWIGLU: {
        const wgml_swiglu_args *a = args;
        W(a->out), R(a->gate), R(a->up);
        break;
    }
    case WGML_OP_ARGMAX: W(((const wgml_argmax_args *)args)->out), R(((const wgml_argmax_args *)args)->x); break;
    case WGML_OP_ROPE: {
        const wgml_rope_args *a = args;
        W(a->x);
        if (a->rope) R(a->rope->freq_factors);
        break;
    }
    case WGML_OP_LAYER_NORM: {
        const wgml_layer_norm_args *a = args;
        W(a->out), R(a->x), R(a->w), R(a->b);
        break;
    }
    case WGML_OP_L2_NORM: W(((const wgml_l2_norm_args *)args)->out), R(((const wgml_l2_norm_args *)args)->x); break;
    case WGML_OP_UNARY: {
        const wgml_unary_args *a = args;
        W(a->out), R(a->x), R(a->v);
        break;
    }
    case WGML_OP_MUL: {
        const wgml_mul_args *a = args;
        W(a->out), R(a->a), R(a->b);
        break;
    }
    case WGML_OP_POOL: {
        const wgml_pool_args *a = args;
        W(a->out), R(a->x), R(a->seq);
        break;
    }
    case WGML_OP_COPY: W(((const wgml_copy_args *)args)->out), R(((const wgml_copy_args *)args)->x); break;
    case WGML_OP_IM2COL: W(((const wgml_im2col_args *)args)->out), R(((const wgml_im2col_args *)args)->x); break;
    case WGML_OP_COL2IM: {
        const wgml_col2im_args *a = args;
        W(a->out), R(a->y), R(a->bias);
        break;
    }
    case WGML_OP_INSTANCE_NORM: {
        const wgml_instance_norm_args *a = args;
        W(a->out), R(a->x), R(a->w), R(a->b);
        break;
    }
    case WGML_OP_LSTM: {
        const wgml_lstm_args *a = args;
        W(a->out), R(a->gx), R(a->w_hh);
        break;
    }
    case WGML_OP_STFT: {
        const wgml_stft_args *a = args;
        W(a->out), R(a->x), R(a->window);
        break;
    }
    case WGML_OP_ISTFT: {
        const wgml_istft_args *a = args;
        W(a->out), R(a->mag), R(a->phase), R(a->window);
        break;
    }
    case WGML_OP_NSF_SOURCE: {
        const wgml_nsf_source_args *a = args;
        W(a->out), R(a->f0), R(a->w), R(a->b);
        break;
    }
    default:
        wgml_sticky_fail(&s->sk, WGML_ERR_UNSUPPORTED, "kokoro: the arena's measure does not know op %d", (int)op);
        return;
    }
#undef W
#undef R
    for (int i = 0; i < nw; i++) {
        const int o = node_of(s, w[i]);
        for (int j = i + 1; j < nw; j++) add_edge(s, o, node_of(s, w[j]));
        for (int j = 0; j < nr; j++) add_edge(s, o, node_of(s, r[j]));
    }
}

static int cmp_edge(const void *a, const void *b) {
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

static size_t align_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

/* The chunk of bank b after chunk c (-1: its first); n_chunks when there is none. */
static int next_chunk(const kokoro_state *s, int b, int c) {
    for (c++; c < s->n_chunks && s->chunks[c].bank != b; c++) {}
    return c;
}

/* Places regions keep.. in their banks' chunks: each from its bank's cursor
 * (where the region before it in the bank ended, or where the step before
 * left it) forward, in the first chunk of the bank with room, appending
 * planned chunks (no buffer yet, at most cap bytes) where none has. */
static wgml_status place(kokoro_state *s, int keep, size_t cap, wgml_error *err) {
    int cur_c[MAX_BANKS];
    size_t cur_o[MAX_BANKS];
    for (int b = 0; b < MAX_BANKS; b++) cur_c[b] = -1, cur_o[b] = 0;
    for (int i = 0; i < keep; i++) {
        const node *n = &s->nodes[i];
        cur_c[n->bank] = n->chunk, cur_o[n->bank] = n->offset + n->size;
    }
    for (int i = keep; i < s->n_nodes; i++) {
        node *n = &s->nodes[i];
        const int b = n->bank;
        const size_t size = align_up(n->size);
        if (size > cap)
            return wgml_fail(err, WGML_ERR_CONTEXT_FULL,
                             "kokoro: an activation of %zu bytes is more than one buffer of %s may hold (%zu)",
                             n->size, s->m->be->device_name ? s->m->be->device_name : s->m->be->name, cap);
        int c = cur_c[b];
        size_t o = c < 0 ? 0 : align_up(cur_o[b]);
        if (c < 0) c = next_chunk(s, b, -1);
        for (;;) {
            if (c == s->n_chunks) {
                if (s->n_chunks == MAX_CHUNKS)
                    return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "kokoro: the activations need more than %d chunks",
                                     MAX_CHUNKS);
                s->chunks[s->n_chunks++] = (chunk){.size = cap, .bank = b};
                o = 0;
            }
            if (o <= s->chunks[c].size && size <= s->chunks[c].size - o) break;
            c = next_chunk(s, b, c), o = 0;
        }
        n->chunk = c, n->offset = o;
        cur_c[b] = c, cur_o[b] = o + size;
        if (o + size > s->chunks[c].used) s->chunks[c].used = o + size;
    }
    return WGML_OK;
}

/* Frees the chunks that no region before `keep` lies in (every chunk when
 * keep is 0), keeping the others in order. */
static void release_unused(kokoro_state *s, int keep) {
    wgml_backend *be = s->m->be;
    int live[MAX_CHUNKS] = {0}, map[MAX_CHUNKS], n = 0;
    for (int i = 0; i < keep; i++) live[s->nodes[i].chunk] = 1;
    for (int c = 0; c < s->n_chunks; c++) {
        if (!live[c]) {
            be->buffer_free(be, s->chunks[c].buf);
            continue;
        }
        map[c] = n;
        s->chunks[n++] = s->chunks[c];
    }
    s->n_chunks = n;
    for (int i = 0; i < keep; i++) s->nodes[i].chunk = map[s->nodes[i].chunk];
}

/* Plans the regions the step just measured (from `keep` on: those before
 * belong to the step before and stay where they are): a bank each, then a
 * place in the bank's chunks. Where the chunks have no room, the arena
 * grows: the chunks that hold nothing kept are let go and the regions
 * placed again, in new chunks of a quarter more than they need. Fails
 * without a chunk more when one cannot be made. */
static wgml_status plan(kokoro_state *s, int keep, wgml_error *err) {
    const uint64_t maxb = s->m->be->max_buffer_size;
    const size_t cap = maxb && maxb < SIZE_MAX ? (size_t)maxb & ~(size_t)(ARENA_ALIGN - 1) : SIZE_MAX;
    /* banks: a greedy colouring, in the order the step made its regions, of the conflicts */
    if (s->n_edges) qsort(s->edges, (size_t)s->n_edges, sizeof *s->edges, cmp_edge);
    for (int i = keep, e = 0; i < s->n_nodes; i++) {
        uint64_t used = 0;
        while (e < s->n_edges && s->edges[e][0] < i) e++;
        for (; e < s->n_edges && s->edges[e][0] == i; e++) used |= 1ull << s->nodes[s->edges[e][1]].bank;
        int b = 0;
        while (b < MAX_BANKS && (used >> b & 1)) b++;
        if (b == MAX_BANKS)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "kokoro: the step's activations need more than %d banks",
                             MAX_BANKS);
        s->nodes[i].bank = b;
    }
    int n_old = s->n_chunks;
    wgml_status st = place(s, keep, cap, err);
    if (st || s->n_chunks > n_old) { /* growth */
        s->n_chunks = n_old;
        release_unused(s, keep);
        n_old = s->n_chunks;
        st = place(s, keep, cap, err);
    }
    wgml_backend *be = s->m->be;
    for (int c = n_old; c < s->n_chunks && !st; c++) {
        chunk *k = &s->chunks[c];
        const size_t want = align_up(k->used + k->used / 4);
        k->size = want < cap ? want : cap;
        if ((st = be->buffer_create(be, k->size, WGML_BUFFER_ACTIVATIONS, &k->buf, err))) {
            k->buf = NULL;
            wgml_error_prefix(err, "kokoro: activations (%zu bytes)", k->size);
        }
    }
    if (st) /* nothing of this step's plan stays */
        for (int c = s->n_chunks - 1; c >= n_old; c--) {
            if (s->chunks[c].buf) be->buffer_free(be, s->chunks[c].buf);
            s->n_chunks = c;
        }
    return st;
}

/* Columns [c0, c0+n) of a one-row tensor: a contiguous piece of it. */
static wgml_tensor piece(const wgml_tensor *t, int64_t c0, int64_t n) {
    wgml_tensor v = *t;
    v.offset += (size_t)c0 * 4;
    v.ne[0] = n;
    return v;
}

/* ---- building blocks ---- */

/* y = conv1d(x) with weight `w` ([Co][K][Ct]) and optional bias, into a new
 * activation: a matmul over the signal's unfolding (matmul's conv). Ct, each
 * tap's columns, is x's channels C, or more in a quantized file whose
 * converter padded each tap with zero columns to whole blocks (kokoro.h):
 * the unfolding's columns there are zero. */
static wgml_tensor *conv(kokoro_state *s, const char *name, const wgml_tensor *x, const wgml_tensor *w,
                         const wgml_tensor *b, int K, int stride, int dil, int pad, wgml_epilogue epi,
                         wgml_tensor *into) {
    const int64_t C = x->ne[0], Ct = w->ne[0] / K;
    if (w->ne[0] % K || Ct < C)
        wgml_sticky_fail(&s->sk, WGML_ERR_FORMAT,
                         "kokoro: weight '%s' has rows of %lld, not a convolution's of %d taps x %lld channels",
                         w->name ? w->name : "?", (long long)w->ne[0], K, (long long)C);
    wgml_tensor *y = into ? into : A(s, name, w->ne[1], wgml_conv1d_len(x->ne[1], K, stride, dil, pad));
    wgml_block_conv1d(s->be, x, w, b, K, stride, dil, pad, epi, 1, s->bf16, y);
    return y;
}

/* The style's share of an AdaIN / AdaLayerNorm: fc(style) = [1 + gamma ; beta] (one row of 2C). */
static wgml_tensor *ada(kokoro_state *s, const kokoro_lin *fc, const wgml_tensor *style) {
    wgml_tensor *gb = A(s, "~ada", fc->w->ne[1], 1);
    wgml_op_matmul(s->be, &(wgml_matmul_args){.f32_act = 1, .bf16_act = s->bf16, .x = style, .n_w = 1,
                                                 .w = {fc->w}, .bias = {fc->b}, .out = {gb}});
    return gb;
}

/* AdaIN1d in place: instance norm, then (1 + gamma) x + beta. */
static void adain(kokoro_state *s, const kokoro_lin *fc, wgml_tensor *x, const wgml_tensor *style) {
    wgml_tensor *gb = ada(s, fc, style);
    const int64_t C = x->ne[0];
    wgml_tensor g = piece(gb, 0, C), b = piece(gb, C, C);
    wgml_op_instance_norm(s->be, &(wgml_instance_norm_args){.out = x, .x = x, .w = &g, .b = &b, .eps = 1e-5f});
}

static void leaky(kokoro_state *s, wgml_tensor *x, float slope) {
    wgml_op_unary(s->be, &(wgml_unary_args){.out = x, .x = x, .kind = WGML_UNARY_LEAKY_RELU, .a = slope});
}

static void snake(kokoro_state *s, wgml_tensor *x, const wgml_tensor *alpha) {
    wgml_op_unary(s->be, &(wgml_unary_args){.out = x, .x = x, .kind = WGML_UNARY_SNAKE, .v = alpha});
}

/* x repeated twice in time (nearest upsampling): a copy of a broadcast view. */
static wgml_tensor *upsample2(kokoro_state *s, const wgml_tensor *x) {
    const int64_t C = x->ne[0], T = x->ne[1];
    int64_t ne[4] = {C, 2, T, 1};
    size_t nb[4] = {4, 0, (size_t)C * 4, (size_t)(C * T) * 4};
    wgml_tensor v = wgml_tensor_view(x, ne, nb, 0);
    wgml_tensor *y = A(s, "~up2", C, 2 * T);
    wgml_op_copy(s->be, &(wgml_copy_args){.out = y, .x = &v});
    return y;
}

/* ConvTranspose1d of x by matmul (weight [K][Co][Ci]) and col2im. */
static wgml_tensor *conv_t(kokoro_state *s, const char *name, const wgml_tensor *x, const wgml_tensor *w,
                           const wgml_tensor *b, int K, int stride, int pad, int out_pad) {
    const int64_t T = x->ne[1], Co = w->ne[1] / K, T_out = (T - 1) * stride - 2 * pad + K + out_pad;
    wgml_tensor *y = A(s, "~convt.y", K * Co, T);
    wgml_op_matmul(s->be, &(wgml_matmul_args){.f32_act = 1, .bf16_act = s->bf16, .x = x, .n_w = 1, .w = {w}, .out = {y}});
    wgml_tensor *o = A(s, name, Co, T_out);
    wgml_op_col2im(s->be, &(wgml_col2im_args){.out = o, .y = y, .bias = b, .kernel = K, .stride = stride, .pad = pad});
    return o;
}

/* AdainResBlk1d(Ci -> Co, upsample) with weights wb (e.g. the decoder's
 * encode): (residual + shortcut) / sqrt(2). */
static wgml_tensor *adain_resblk(kokoro_state *s, const kokoro_resblk *wb, const char *name, const wgml_tensor *x,
                                 const wgml_tensor *style, int upsample) {
    wgml_backend *be = s->be;
    const int64_t Ci = x->ne[0], T = x->ne[1];
    /* residual: norm1 -> leaky 0.2 -> (pool) -> conv1 -> norm2 -> leaky 0.2 -> conv2 */
    wgml_tensor *t = A(s, "~res.t", Ci, T);
    wgml_op_copy(be, &(wgml_copy_args){.out = t, .x = x});
    adain(s, &wb->norm1, t, style);
    leaky(s, t, 0.2f);
    if (upsample) { /* depthwise ConvTranspose1d(k3, s2, p1, output_padding 1): repeat, scale, fold */
        int64_t ne[4] = {Ci, 3, T, 1};
        size_t nb[4] = {4, 0, (size_t)Ci * 4, (size_t)(Ci * T) * 4};
        wgml_tensor rep = wgml_tensor_view(t, ne, nb, 0);
        wgml_tensor *y = A(s, "~pool.y", 3 * Ci, T), flat = *y;
        flat.ne[0] = Ci, flat.ne[1] = 3 * T;
        wgml_op_copy(be, &(wgml_copy_args){.out = &flat, .x = &rep});
        wgml_op_mul(be, &(wgml_mul_args){.out = y, .a = y, .b = wb->pool.w});
        wgml_tensor *pooled = A(s, "~pool", Ci, 2 * T);
        wgml_op_col2im(be, &(wgml_col2im_args){.out = pooled, .y = y, .bias = wb->pool.b, .kernel = 3, .stride = 2,
                                               .pad = 1});
        t = pooled;
    }
    wgml_tensor *h = conv(s, "~res.h", t, wb->conv1.w, wb->conv1.b, 3, 1, 1, 1, WGML_EPI_STORE, NULL);
    adain(s, &wb->norm2, h, style);
    leaky(s, h, 0.2f);
    /* shortcut: (nearest x2) -> (conv1x1, no bias); the residual's conv2 is added onto it */
    const wgml_tensor *sc_in = upsample ? upsample2(s, x) : x;
    wgml_tensor *out = A(s, name, h->ne[0], h->ne[1]);
    if (Ci != h->ne[0] && !wb->conv1x1)
        wgml_sticky_fail(&s->sk, WGML_ERR_FORMAT, "kokoro: block '%s' changes %lld channels to %lld without a conv1x1",
                         name, (long long)Ci, (long long)h->ne[0]);
    else if (Ci != h->ne[0])
        conv(s, name, sc_in, wb->conv1x1, NULL, 1, 1, 1, 0, WGML_EPI_STORE, out);
    else
        wgml_op_copy(be, &(wgml_copy_args){.out = out, .x = sc_in});
    conv(s, name, h, wb->conv2.w, wb->conv2.b, 3, 1, 1, 1, WGML_EPI_ADD, out);
    wgml_op_unary(be, &(wgml_unary_args){.out = out, .x = out, .kind = WGML_UNARY_SCALE, .a = (float)M_SQRT1_2});
    return out;
}

/* AdaINResBlock1(C, k, dilations) with weights wb (generator resblocks, noise_res), x updated in place. */
static void adain_resblock1(kokoro_state *s, const kokoro_resblock1 *wb, wgml_tensor *x, const wgml_tensor *style,
                            int k, const int dil[3]) {
    const int64_t C = x->ne[0], T = x->ne[1];
    for (int j = 0; j < 3; j++) {
        wgml_tensor *t = A(s, "~rb.t", C, T);
        wgml_op_copy(s->be, &(wgml_copy_args){.out = t, .x = x});
        adain(s, &wb->adain1[j], t, style);
        snake(s, t, wb->alpha1[j]);
        wgml_tensor *u = conv(s, "~rb.u", t, wb->convs1[j].w, wb->convs1[j].b, k, 1, dil[j], dil[j] * (k - 1) / 2,
                              WGML_EPI_STORE, NULL);
        adain(s, &wb->adain2[j], u, style);
        snake(s, u, wb->alpha2[j]);
        conv(s, "rb", u, wb->convs2[j].w, wb->convs2[j].b, k, 1, 1, (k - 1) / 2, WGML_EPI_ADD, x);
    }
}

/* A bidirectional LSTM layer over x [T][in] (plus the style's columns as a
 * bias when `style` is given: the predictor's cat(x, s)). */
static wgml_tensor *bilstm(kokoro_state *s, const kokoro_lstm *wl, const char *name, const wgml_tensor *x,
                           const wgml_tensor *style) {
    wgml_backend *be = s->be;
    const int64_t G2 = wl->w_ih->ne[1], H = wl->w_hh->ne[0], T = x->ne[1];
    const wgml_tensor *b = wl->bias;
    if (style) { /* bias + W_s s: one row */
        wgml_tensor *bs = A(s, "~lstm.bs", G2, 1);
        wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = 1, .x = style, .n_w = 1, .w = {wl->w_ih_s},
                                               .bias = {wl->bias}, .out = {bs}});
        b = bs;
    }
    wgml_tensor *gx = A(s, "~lstm.gx", G2, T);
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = 1, .x = x, .n_w = 1, .w = {wl->w_ih}, .bias = {b}, .out = {gx}});
    wgml_tensor *out = A(s, name, 2 * H, T);
    wgml_op_lstm(be, &(wgml_lstm_args){.out = out, .gx = gx, .w_hh = wl->w_hh, .hidden = (int)H, .bidirectional = 1});
    return out;
}

/* ---- a step: measured, planned, built ---- */

/* Starts the call's step. */
static void begin_step(kokoro_state *s, int n) {
    s->be->begin(s->be, &(wgml_step){.pos = 0, .n_tokens = n});
    s->in_step = 1;
}

/* Ends the call's step (if it began): the first error of the call to err. */
static wgml_status finish_step(kokoro_state *s, wgml_error *err) {
    if (s->in_step) {
        s->in_step = 0;
        wgml_error e;
        if (s->be->end(s->be, &e)) wgml_sticky_set(&s->sk, &e);
    }
    return wgml_sticky_report(&s->sk, err);
}

/* Builds (records, or runs on the CPU) a step's ops, from begin_step to its downloads. */
typedef void (*step_build_fn)(kokoro_state *s, const void *ctx);

/* Runs step `build` on the activations and regions from `keep` (those of the
 * step before, kept: kokoro_text's for kokoro_audio): measured on the
 * measuring backend, its regions planned (chunks appended to the arena where
 * it has no room: between steps, never during one), then built on the
 * model's backend over the arena. */
static wgml_status run_step(kokoro_state *s, int keep_acts, int keep_nodes, step_build_fn build, const void *ctx,
                            wgml_error *err) {
    s->n_acts = keep_acts, s->n_nodes = keep_nodes;
    s->step_node0 = s->node_cursor = keep_nodes;
    s->n_edges = 0;
    s->measuring = 1, s->be = &s->mbe.base;
    wgml_sticky_clear(&s->sk), s->bf16 = 0;
    build(s, ctx);
    wgml_status st = finish_step(s, err);
    s->measuring = 0, s->be = s->m->be;
    if (!st) st = plan(s, keep_nodes, err);
    s->n_acts = keep_acts, s->node_cursor = keep_nodes;
    if (st) {
        s->n_nodes = keep_nodes;
        return st;
    }
    wgml_sticky_clear(&s->sk), s->bf16 = 0;
    build(s, ctx);
    if (!s->sk.status && s->node_cursor != s->n_nodes)
        wgml_sticky_fail(&s->sk, WGML_ERR_UNSUPPORTED, "kokoro: the step took %d of the %d activations it measured",
                         s->node_cursor - keep_nodes, s->n_nodes - keep_nodes);
    return finish_step(s, err);
}

/* ---- step 1: text -> durations ---- */

typedef struct {
    const int32_t *ids, *host; /* host: T positions 0..T-1, then T token types 0 */
    int T;
    const float *style;
    float *logits;
} text_ctx;

static void text_build(kokoro_state *s, const void *ctx) {
    const text_ctx *c = ctx;
    kokoro_model *m = s->m;
    const kokoro_hparams *hp = &m->hp;
    wgml_backend *be = s->be;
    const int T = c->T;
    const int64_t E = hp->bert_embd, H = hp->bert_hidden, D = hp->hidden, S = hp->style;
    wgml_tensor *tid = A(s, "ids", T, 1), *tpos = A(s, "pos", T, 1), *ttyp = A(s, "types", T, 1);
    wgml_tensor *sty = A(s, "style", 2 * S, 1);
    if (!s->sk.status) {
        tid->type = tpos->type = ttyp->type = WGML_I32;
        begin_step(s, T);
        be->upload(be, tid, c->ids, (size_t)T * 4);
        be->upload(be, tpos, c->host, (size_t)T * 4);
        be->upload(be, ttyp, c->host + T, (size_t)T * 4);
        be->upload(be, sty, c->style, (size_t)(2 * S) * 4);
    }
    wgml_tensor s_pred = piece(sty, S, S);
    /* ALBERT: embeddings, mapping in, one shared layer applied bert_layers times */
    wgml_tensor *e = A(s, "bert_embeddings", E, T), *tmp = A(s, "emb.tmp", E, T);
    const kokoro_weights *kw = &m->kw;
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = e, .table = kw->word, .ids = tid});
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = tmp, .table = kw->position, .ids = tpos});
    wgml_op_add(be, &(wgml_add_args){.out = e, .a = e, .b = tmp});
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = tmp, .table = kw->token_type, .ids = ttyp});
    wgml_op_add(be, &(wgml_add_args){.out = e, .a = e, .b = tmp});
    wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = e, .x = e, .w = kw->emb_norm.w, .b = kw->emb_norm.b,
                                                   .eps = 1e-12f});
    wgml_tensor *h = A(s, "bert_dur", H, T);
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = 1, .x = e, .n_w = 1, .w = {kw->map_in.w},
                                           .bias = {kw->map_in.b}, .out = {h}});
    /* the one layer ALBERT shares: BERT's post-norm encoder layer (model/blocks.h) */
    wgml_tensor *q = A(s, "q", H, T), *k = A(s, "k", H, T), *v = A(s, "v", H, T), *att = A(s, "att", H, T),
                *ff = A(s, "ffn", hp->bert_ff, T);
    const wgml_encoder_layer_cfg albert_cfg = {.n_head = hp->bert_heads, .head_dim = (int)(H / hp->bert_heads),
                                               .eps = 1e-12f, .act = WGML_UNARY_GELU, .f32_act = 1};
    const wgml_encoder_acts albert_acts = {h, q, k, v, att, ff};
    for (int l = 0; l < hp->bert_layers; l++) wgml_block_encoder_layer(be, &kw->albert, &albert_cfg, &albert_acts);
    wgml_tensor *d_en = A(s, "d_en", D, T);
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = 1, .x = h, .n_w = 1, .w = {kw->bert_encoder.w},
                                           .bias = {kw->bert_encoder.b}, .out = {d_en}});
    /* DurationEncoder: (BiLSTM of cat(x, s), AdaLayerNorm) x n_layer; d = x (its style columns are s) */
    wgml_tensor *x = d_en;
    for (int i = 0; i < hp->n_layer; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "dur_enc_lstm_%d", i);
        x = bilstm(s, &kw->dur_lstm[i], nm, x, &s_pred);
        wgml_tensor *gb = ada(s, &kw->dur_norm[i], &s_pred);
        wgml_tensor g = piece(gb, 0, D), b = piece(gb, D, D);
        snprintf(nm, sizeof nm, "dur_enc_adanorm_%d", i);
        wgml_tensor *y = A(s, nm, D, T);
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = y, .x = x, .w = &g, .b = &b, .eps = 1e-5f});
        x = y;
    }
    wgml_tensor *d = x; /* the prosody features d (x's columns; the style's are s_pred) */
    s->d_act = s->n_acts - 1;
    wgml_tensor *dl = bilstm(s, &kw->lstm, "dur_lstm", d, &s_pred);
    wgml_tensor *lg = A(s, "dur_logits", hp->max_dur, T);
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = 1, .x = dl, .n_w = 1, .w = {kw->dur_proj.w},
                                           .bias = {kw->dur_proj.b}, .out = {lg}});
    /* TextEncoder: embedding, (conv, LayerNorm, LeakyReLU 0.2) x n_layer, BiLSTM */
    wgml_tensor *te = A(s, "te_embedding", D, T);
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = te, .table = kw->te_embedding, .ids = tid});
    const int K = hp->text_kernel;
    for (int i = 0; i < hp->n_layer; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "te_cnn_%d", i);
        wgml_tensor *y = conv(s, nm, te, kw->te_cnn[i].w, kw->te_cnn[i].b, K, 1, 1, (K - 1) / 2, WGML_EPI_STORE, NULL);
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = y, .x = y, .w = kw->te_norm[i].w, .b = kw->te_norm[i].b,
                                                       .eps = 1e-5f});
        leaky(s, y, 0.2f);
        te = y;
    }
    bilstm(s, &kw->te_lstm, "t_en", te, NULL);
    s->t_en_act = s->n_acts - 1;
    if (!s->sk.status) be->download(be, lg, c->logits, (size_t)T * hp->max_dur * 4);
}

static wgml_status text_step(kokoro_state *s, const int32_t *ids, int T, const float *style, float speed, int32_t *dur,
                             wgml_error *err) {
    const kokoro_hparams *hp = &s->m->hp;
    if (T < 3 || T > hp->bert_ctx || T > KOKORO_MAX_PHONEMES + 2)
        return wgml_fail(err, T < 3 ? WGML_ERR_INVALID_ARGUMENT : WGML_ERR_CONTEXT_FULL,
                         "kokoro: %d tokens (3..%d with the two pads)", T,
                         hp->bert_ctx < KOKORO_MAX_PHONEMES + 2 ? hp->bert_ctx : KOKORO_MAX_PHONEMES + 2);
    if (!(speed > 0) || !isfinite(speed)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "kokoro: speed %g", speed);
    for (int i = 0; i < T; i++)
        if (ids[i] < 0 || ids[i] >= hp->n_token)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "kokoro: token id %d is outside 0..%d", ids[i],
                             hp->n_token - 1);
    s->text_acts = s->text_nodes = 0, s->T = T;
    int32_t *host = wgml_malloc((size_t)T * 2 * sizeof *host);
    float *logits = wgml_malloc((size_t)T * hp->max_dur * sizeof *logits);
    if (!host || !logits) {
        wgml_free(host), wgml_free(logits);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < T; i++) host[i] = i, host[T + i] = 0;
    const text_ctx c = {.ids = ids, .host = host, .T = T, .style = style, .logits = logits};
    wgml_status st = run_step(s, 0, 0, text_build, &c, err);
    if (!st) { /* duration = sum of sigmoid(logits) / speed, rounded half to even, at least 1 */
        for (int t = 0; t < T; t++) {
            double sum = 0;
            for (int j = 0; j < hp->max_dur; j++) sum += 1.0 / (1.0 + exp(-(double)logits[t * hp->max_dur + j]));
            double r = rint(sum / speed);
            dur[t] = r < 1 ? 1 : r > 1e6 ? 1000000 : (int32_t)r;
        }
        s->text_acts = s->n_acts, s->text_nodes = s->n_nodes;
    }
    wgml_free(host), wgml_free(logits);
    return st;
}

/* ---- step 2: frames -> audio ---- */

int64_t kokoro_audio_len(const kokoro_model *m, int64_t frames) {
    int64_t up = 1;
    for (int i = 0; i < m->hp.n_ups; i++) up *= m->hp.up_rates[i];
    return 2 * frames * up * m->hp.hop;
}

/* The decoder and generator on asr [F][D], f0 and n (one row of 2F each), the decoder's style row. */
static void decoder(kokoro_state *s, const wgml_tensor *asr, const wgml_tensor *f0, const wgml_tensor *nn,
                    const wgml_tensor *style, uint64_t seed, wgml_tensor **audio) {
    kokoro_model *m = s->m;
    const kokoro_hparams *hp = &m->hp;
    wgml_backend *be = s->be;
    const int64_t F = asr->ne[1], D = asr->ne[0], R = hp->asr_res_dim, Dd = hp->dec_dim;
    /* bf16 products from here to conv_post (kokoro_set_bf16): the prosody (F0, N, the
     * durations) is already computed in f32, so no rounding here moves the source's phase */
    s->bf16 = s->bf16_decoder;
    /* F0_conv, N_conv: Conv1d(1, 1, k3, stride 2, pad 1): 2F -> F */
    wgml_tensor f0c = *f0, nc = *nn;
    f0c.ne[0] = 1, f0c.ne[1] = 2 * F, nc.ne[0] = 1, nc.ne[1] = 2 * F;
    const kokoro_weights *kw = &m->kw;
    wgml_tensor *F0 = conv(s, "dec_F0_conv", &f0c, kw->f0_conv.w, kw->f0_conv.b, 3, 2,
                           1, 1, WGML_EPI_STORE, NULL);
    wgml_tensor *N = conv(s, "dec_N_conv", &nc, kw->n_conv.w, kw->n_conv.b, 3, 2, 1, 1,
                          WGML_EPI_STORE, NULL);
    /* encode(cat(asr, F0, N)) */
    wgml_tensor *cat = A(s, "~dec.cat", D + 2, F);
    const wgml_tensor *parts[3] = {asr, F0, N};
    int c0 = 0;
    for (int i = 0; i < 3; i++) {
        wgml_op_im2col(be, &(wgml_im2col_args){.out = cat, .x = parts[i], .kernel = 1, .stride = 1, .dilation = 1,
                                               .c0 = c0});
        c0 += (int)parts[i]->ne[0];
    }
    wgml_tensor *x = adain_resblk(s, &kw->encode, "dec_encode", cat, style, 0);
    wgml_tensor *res = conv(s, "dec_asr_res", asr, kw->asr_res.w, kw->asr_res.b, 1,
                            1, 1, 0, WGML_EPI_STORE, NULL);
    for (int b = 0; b < 4; b++) {
        wgml_tensor *c = A(s, "~dec.cat", Dd + R + 2, F);
        const wgml_tensor *ps[4] = {x, res, F0, N};
        c0 = 0;
        for (int i = 0; i < 4; i++) {
            wgml_op_im2col(be, &(wgml_im2col_args){.out = c, .x = ps[i], .kernel = 1, .stride = 1, .dilation = 1,
                                                   .c0 = c0});
            c0 += (int)ps[i]->ne[0];
        }
        char nm[32];
        snprintf(nm, sizeof nm, "dec_decode_%d", b);
        x = adain_resblk(s, &kw->decode[b], nm, c, style, b == 3);
    }
    /* generator: the harmonic source and its spectrum */
    const int64_t L = kokoro_audio_len(s->m, F);
    wgml_tensor *src = A(s, "gen_har_source", L, 1);
    wgml_tensor f0row = *f0;
    f0row.ne[0] = 2 * F, f0row.ne[1] = 1;
    wgml_op_nsf_source(be, &(wgml_nsf_source_args){.out = src, .f0 = &f0row,
                                                   .w = kw->source.w, .b = kw->source.b,
                                                   .harmonics = hp->n_harmonics, .upp = (int)(L / (2 * F)),
                                                   .sample_rate = hp->sample_rate, .amp = 0.1f, .noise_std = 0.003f,
                                                   .voiced_threshold = 10, .seed = seed});
    const int B = hp->n_fft / 2 + 1;
    wgml_tensor *har = A(s, "gen_har", 2 * B, L / hp->hop + 1);
    wgml_op_stft(be, &(wgml_stft_args){.out = har, .x = src, .window = &m->window, .n_fft = hp->n_fft, .hop = hp->hop});
    /* upsampling stages */
    int64_t up_total = 1;
    for (int i = 0; i < hp->n_ups; i++) up_total *= hp->up_rates[i];
    int64_t up_done = 1;
    for (int i = 0; i < hp->n_ups; i++) {
        char nm[48];
        snprintf(nm, sizeof nm, "gen_ups_%d_in", i);
        wgml_tensor *xin = A(s, nm, x->ne[0], x->ne[1]);
        wgml_op_unary(be, &(wgml_unary_args){.out = xin, .x = x, .kind = WGML_UNARY_LEAKY_RELU, .a = 0.1f});
        x = xin;
        /* the noise branch: noise_convs[i](har) at this stage's rate, then noise_res[i] */
        up_done *= hp->up_rates[i];
        const int stride = (int)(up_total / up_done);
        snprintf(nm, sizeof nm, "gen_noise_conv_%d", i);
        const int nk = i + 1 < hp->n_ups ? 2 * stride : 1;
        wgml_tensor *xs = conv(s, nm, har, kw->noise_convs[i].w, kw->noise_convs[i].b, nk, stride, 1,
                               i + 1 < hp->n_ups ? (stride + 1) / 2 : 0, WGML_EPI_STORE, NULL);
        static const int noise_dil[3] = {1, 3, 5}; /* the official Generator's, as its kernels 7 and 11 */
        adain_resblock1(s, &kw->noise_res[i], xs, style, i + 1 < hp->n_ups ? 7 : 11, noise_dil);
        /* ups[i] */
        snprintf(nm, sizeof nm, "gen_ups_%d", i);
        const int K = hp->up_kernels[i], rate = hp->up_rates[i];
        wgml_tensor *u = conv_t(s, nm, x, kw->ups[i].w, kw->ups[i].b, K, rate, (K - rate) / 2, 0);
        if (i == hp->n_ups - 1) { /* ReflectionPad1d((1, 0)) */
            wgml_tensor *pad = A(s, "gen_pad", u->ne[0], u->ne[1] + 1);
            wgml_op_im2col(be, &(wgml_im2col_args){.out = pad, .x = u, .kernel = 1, .stride = 1, .dilation = 1,
                                                   .pad_l = 1, .reflect = 1});
            u = pad;
        }
        wgml_op_add(be, &(wgml_add_args){.out = u, .a = u, .b = xs});
        /* the mean of the stage's residual blocks */
        wgml_tensor *sum = NULL;
        for (int j = 0; j < hp->n_rb; j++) {
            wgml_tensor *r = A(s, j ? "~gen.rb" : "gen.sum", u->ne[0], u->ne[1]);
            wgml_op_copy(be, &(wgml_copy_args){.out = r, .x = u});
            adain_resblock1(s, &kw->resblocks[i * hp->n_rb + j], r, style, hp->rb_kernels[j], hp->rb_dil[j]);
            if (!sum) sum = r;
            else wgml_op_add(be, &(wgml_add_args){.out = sum, .a = sum, .b = r});
        }
        wgml_op_unary(be, &(wgml_unary_args){.out = sum, .x = sum, .kind = WGML_UNARY_SCALE, .a = 1.0f / hp->n_rb});
        x = sum;
    }
    /* conv_post -> exp (magnitude), sin (phase) -> iSTFT; conv_post in f32, as the file keeps it */
    s->bf16 = 0;
    leaky(s, x, 0.01f);
    const wgml_tensor *pw = kw->conv_post.w, *pb = kw->conv_post.b;
    const int kp = (int)(pw->ne[0] / x->ne[0]);
    const int64_t Tf = x->ne[1];
    wgml_tensor *mag = A(s, "gen_mag", B, Tf), *ph = A(s, "gen_phase", B, Tf);
    wgml_tensor w_mag = wgml_tensor_rows(pw, 0, B), w_ph = wgml_tensor_rows(pw, B, B);
    wgml_tensor b_mag = piece(pb, 0, B), b_ph = piece(pb, B, B);
    const wgml_conv1d cv = {.kernel = kp, .stride = 1, .dilation = 1, .pad_l = (kp - 1) / 2, .pad_r = (kp - 1) / 2};
    wgml_op_matmul(be, &(wgml_matmul_args){.f32_act = 1, .x = x, .n_w = 2, .w = {&w_mag, &w_ph},
                                           .bias = {&b_mag, &b_ph}, .out = {mag, ph}, .conv = cv});
    wgml_op_unary(be, &(wgml_unary_args){.out = mag, .x = mag, .kind = WGML_UNARY_EXP});
    wgml_op_unary(be, &(wgml_unary_args){.out = ph, .x = ph, .kind = WGML_UNARY_SIN});
    *audio = A(s, "audio", hp->hop * (Tf - 1), 1);
    wgml_op_istft(be, &(wgml_istft_args){.out = *audio, .mag = mag, .phase = ph, .window = &m->window,
                                         .n_fft = hp->n_fft, .hop = hp->hop});
}

typedef struct {
    const int32_t *idx; /* each frame's token */
    int64_t F;
    uint64_t seed;
    float *audio; /* NULL: the prosody alone */
} audio_ctx;

static void audio_build(kokoro_state *s, const void *ctx) {
    const audio_ctx *c = ctx;
    kokoro_model *m = s->m;
    const kokoro_hparams *hp = &m->hp;
    wgml_backend *be = s->be;
    const int64_t F = c->F, D = hp->hidden, S = hp->style;
    wgml_tensor *tidx = A(s, "frame_token", F, 1);
    const wgml_tensor *sty = kokoro_act(s, "style");
    if (!s->sk.status) {
        tidx->type = WGML_I32;
        begin_step(s, (int)F);
        be->upload(be, tidx, c->idx, (size_t)F * 4);
    }
    wgml_tensor s_pred = piece(sty, S, S), s_dec = piece(sty, 0, S);
    /* the frames: each token's rows of d and t_en, repeated by its duration */
    wgml_tensor *en = A(s, "en", D, F), *asr = A(s, "asr", D, F);
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = en, .table = &s->acts[s->d_act].t, .ids = tidx});
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = asr, .table = &s->acts[s->t_en_act].t, .ids = tidx});
    /* F0 and N */
    const kokoro_weights *kw = &m->kw;
    wgml_tensor *sh = bilstm(s, &kw->shared, "shared_lstm", en, &s_pred);
    wgml_tensor *outs[2];
    for (int br = 0; br < 2; br++) {
        const char *B = br ? "N" : "F0";
        wgml_tensor *y = sh;
        for (int b = 0; b < 3; b++) {
            char nm[32];
            snprintf(nm, sizeof nm, "%s_block_%d", B, b);
            y = adain_resblk(s, br ? &kw->n[b] : &kw->f0[b], nm, y, &s_pred, b == 1);
        }
        const kokoro_lin *proj = br ? &kw->n_proj : &kw->f0_proj;
        outs[br] = conv(s, br ? "N_pred" : "F0_pred", y, proj->w, proj->b, 1, 1, 1, 0,
                        WGML_EPI_STORE, NULL);
    }
    if (!c->audio) return; /* the prosody alone */
    wgml_tensor *aud = NULL;
    decoder(s, asr, outs[0], outs[1], &s_dec, c->seed, &aud);
    const int64_t L = kokoro_audio_len(s->m, F);
    if (!s->sk.status && aud->ne[0] != L)
        wgml_sticky_fail(&s->sk, WGML_ERR_FORMAT, "kokoro: the generator made %lld samples, %lld expected",
                         (long long)aud->ne[0], (long long)L);
    if (!s->sk.status) be->download(be, aud, c->audio, (size_t)L * 4);
}

static wgml_status audio_step(kokoro_state *s, const int32_t *dur, int T, uint64_t seed, float *audio, wgml_error *err) {
    if (!s->text_acts || T != s->T)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "kokoro: kokoro_audio needs the kokoro_text of its %d tokens",
                         T);
    int64_t F = 0;
    for (int t = 0; t < T; t++) {
        if (dur[t] < 1 || dur[t] > 100000)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "kokoro: duration %d of token %d", dur[t], t);
        F += dur[t];
    }
    if (F > (1 << 20)) return wgml_fail(err, WGML_ERR_CONTEXT_FULL, "kokoro: %lld frames are too many", (long long)F);
    int32_t *idx = wgml_malloc((size_t)F * sizeof *idx);
    if (!idx) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    for (int t = 0, f = 0; t < T; t++)
        for (int j = 0; j < dur[t]; j++) idx[f++] = t;
    const audio_ctx c = {.idx = idx, .F = F, .seed = seed, .audio = audio};
    wgml_status st = run_step(s, s->text_acts, s->text_nodes, audio_build, &c, err);
    wgml_free(idx);
    return st;
}

typedef struct {
    const float *asr, *f0, *n, *style;
    int F;
    uint64_t seed;
    float *audio;
} decode_ctx;

static void decode_build(kokoro_state *s, const void *ctx) {
    const decode_ctx *c = ctx;
    const kokoro_hparams *hp = &s->m->hp;
    wgml_backend *be = s->be;
    const int F = c->F;
    wgml_tensor *ta = A(s, "asr", hp->hidden, F), *tf = A(s, "F0_pred", 2 * F, 1), *tn = A(s, "N_pred", 2 * F, 1),
                *ts = A(s, "style", hp->style, 1);
    if (!s->sk.status) {
        begin_step(s, F);
        be->upload(be, ta, c->asr, (size_t)F * hp->hidden * 4);
        be->upload(be, tf, c->f0, (size_t)F * 8);
        be->upload(be, tn, c->n, (size_t)F * 8);
        be->upload(be, ts, c->style, (size_t)hp->style * 4);
    }
    wgml_tensor *aud = NULL;
    decoder(s, ta, tf, tn, ts, c->seed, &aud);
    const int64_t L = kokoro_audio_len(s->m, F);
    if (!s->sk.status && aud->ne[0] != L)
        wgml_sticky_fail(&s->sk, WGML_ERR_FORMAT, "kokoro: the generator made %lld samples, %lld expected",
                         (long long)aud->ne[0], (long long)L);
    if (!s->sk.status) be->download(be, aud, c->audio, (size_t)L * 4);
}

static wgml_status decode_step(kokoro_state *s, const float *asr, const float *f0, const float *n, int F, const float *style,
                          uint64_t seed, float *audio, wgml_error *err) {
    if (F < 1 || F > (1 << 20)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "kokoro: %d frames", F);
    s->text_acts = s->text_nodes = 0;
    const decode_ctx c = {.asr = asr, .f0 = f0, .n = n, .style = style, .F = F, .seed = seed, .audio = audio};
    return run_step(s, 0, 0, decode_build, &c, err);
}

/* ---- the steps, one at a time per model (its backend records one step at a time) ---- */

wgml_status kokoro_text(kokoro_state *s, const int32_t *ids, int T, const float *style, float speed, int32_t *dur,
                        wgml_error *err) {
    wgml_mutex_lock(&s->m->step_mu);
    wgml_status st = text_step(s, ids, T, style, speed, dur, err);
    wgml_mutex_unlock(&s->m->step_mu);
    return st;
}

wgml_status kokoro_audio(kokoro_state *s, const int32_t *dur, int T, uint64_t seed, float *audio, wgml_error *err) {
    wgml_mutex_lock(&s->m->step_mu);
    wgml_status st = audio_step(s, dur, T, seed, audio, err);
    wgml_mutex_unlock(&s->m->step_mu);
    return st;
}

wgml_status kokoro_decode(kokoro_state *s, const float *asr, const float *f0, const float *n, int F, const float *style,
                          uint64_t seed, float *audio, wgml_error *err) {
    wgml_mutex_lock(&s->m->step_mu);
    wgml_status st = decode_step(s, asr, f0, n, F, style, seed, audio, err);
    wgml_mutex_unlock(&s->m->step_mu);
    return st;
}
