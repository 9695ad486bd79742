/*
 * whisper.c - Whisper's forward pass, written once against backend ops
 * (the math: ../shared/whisper/README.md, "The model, for an implementer").
 *
 * Encoder step (one per 30 s window; rows are time, channels are columns):
 *   c = gelu(conv1(mel))                 [3000][S]  kernel 3, padding 1
 *   x = gelu(conv2(c)) + positions       [1500][S]  kernel 3, stride 2, padding 1
 *   each block (pre-norm, model/blocks.h):
 *     x = x + Wo attention(Wq n + bq, Wk n, Wv n + bv) + bo,  n = LN(x)
 *     x = x + W2 gelu(W1 LN(x) + b1) + b2
 *   xa = LN(x)                           ln_post
 *   per decoder layer: K = Wk' xa, V = Wv' xa + bv'   (cross-attention, once)
 * Decoder step (runs of tokens of the state's sequences):
 *   x = token_embedding[id] + positional_embedding[pos]
 *   each block: x = x + self-attention(LN(x))    causal, over the sequence's cache
 *               x = x + cross-attention(LN(x))   over the window's K, V
 *               x = x + mlp(LN(x))
 *   logits = LN(x) . token_embedding^T   for the rows asked for
 * GELU is the exact erf form; attention scales by 1/sqrt(head size); the
 * key projections have no bias.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/blocks.h"
#include "model/whisper/whisper.h"

#define WHISPER_MAX_SEQ 64
#define WHISPER_MAX_BUFS 48

struct whisper_state {
    whisper_model *m;
    int n_seq, n_batch;
    int have_audio; /* the window's cross keys and values are set */
    int x_rows;     /* rows of the last decoder step (x holds their final activations) */
    wgml_buffer *bufs[WHISPER_MAX_BUFS];
    int n_bufs;
    /* encoder: the window's log-mel time-major, conv1's output, a block's activations */
    wgml_tensor mel, c1, ex, eq, ek, ev, eatt, eh;
    /* decoder step: its rows (n_batch at most: positions x sequences) */
    /* per decoder layer: cross keys and values [n_audio_ctx][S]; the self
     * caches, f32 [n_text_ctx * n_seq][S], position-major (position p of
     * sequence q at row p n_seq + q: sequences step together, so a step's
     * keys are contiguous rows), in bank `bank` (a beam reorder gathers
     * into the other bank) */
    wgml_tensor *ck, *cv, *kc[2], *vc[2];
    int bank;
    /* cross keys and values in f16 (kv type, whisper_state_create): half the
     * bytes every decoder step reads; made by the matmul into the encoder's
     * scratch (ek, ev) and a copy that rounds */
    int cross_f16;
    wgml_kv_type kv; /* as asked (cross_f16: what it resolved to) */
    /* and the last position's rows: normalized, their logits and argmax */
    wgml_tensor x, q, att, h, rows, logits, amax;
    /* alignment heads (word timestamps): a head's q and keys made contiguous, the weights */
    wgml_tensor qh, kh, aw;
    int aw_slot;
    /* every row's logits (word timestamps' token probabilities): WHISPER_ROW_LOGITS rows normalized, their
     * logits; made at the first whisper_row_logits */
    wgml_tensor lr_rows, lr_logits;
    wgml_tensor ids, pos, seq, kv_seq, range, gather; /* i32 tables */
    int32_t *host;        /* staging for the tables */
    int32_t *kv_seq_host; /* the cache rows' sequences: row r is sequence r % n_seq */
    float *mel_host; /* staging for the transposed log-mel */
};

int whisper_state_n_seq(const whisper_state *s) { return s->n_seq; }

wgml_kv_type whisper_state_kv(const whisper_state *s) { return s->kv; }

static void state_release(whisper_state *s) {
    for (int i = 0; i < s->n_bufs; i++)
        if (s->bufs[i]) s->m->be->buffer_free(s->m->be, s->bufs[i]);
    s->n_bufs = 0;
}

void whisper_state_free(whisper_state *s) {
    if (!s) return;
    state_release(s);
    wgml_free(s->ck);
    wgml_free(s->host);
    wgml_free(s->kv_seq_host);
    wgml_free(s->mel_host);
    wgml_free(s);
}

/* One buffer holding `n` tensors [ne1][ne0] of `type` one after another (a
 * table per layer), 256-byte aligned. */
static wgml_status new_tensors(whisper_state *s, wgml_tensor *t, int n, const char *name, uint32_t type, int64_t ne0,
                               int64_t ne1, wgml_buffer_usage usage, wgml_error *err) {
    wgml_backend *be = s->m->be;
    const size_t one = (wgml_row_size(type, ne0) * (size_t)ne1 + 255) & ~(size_t)255;
    if (s->n_bufs == WHISPER_MAX_BUFS) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: too many state buffers");
    wgml_buffer *b;
    wgml_status st = be->buffer_create(be, one * (size_t)n, usage, &b, err);
    if (st) {
        wgml_error_prefix(err, "allocating '%s' (%zu bytes)", name, one * (size_t)n);
        return st;
    }
    s->bufs[s->n_bufs++] = b;
    for (int i = 0; i < n; i++)
        t[i] = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = b, .offset = one * (size_t)i, .name = name};
    return WGML_OK;
}

/* Whether the backend keeps cross keys and values in f16: rounds f32 rows
 * into f16 by a copy and attends over f16 k and v without a cache. */
static int cross_f16_supported(whisper_model *m) {
    wgml_backend *be = m->be;
    wgml_tensor f32 = {.type = WGML_F32}, f16 = {.type = WGML_F16};
    const wgml_copy_args c = {.out = &f16, .x = &f32};
    const wgml_attention_args a = {.q = &f32, .k = &f16, .v = &f16, .out = &f32, .n_head = m->hp.n_text_head,
                                   .n_head_kv = m->hp.n_text_head, .head_dim = m->hp.head_dim, .scale = 1,
                                   .bidirectional = 1};
    return be->supports(be, WGML_OP_COPY, &c) && be->supports(be, WGML_OP_ATTENTION, &a);
}

wgml_status whisper_kv_f16(whisper_model *m, wgml_kv_type kv, int *f16, wgml_error *err) {
    *f16 = 0;
    const int can = cross_f16_supported(m);
    switch (kv) {
    case WGML_KV_DEFAULT: *f16 = can; return WGML_OK;
    case WGML_KV_F32: *f16 = 0; return WGML_OK;
    case WGML_KV_F16:
        if (!can)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                             "whisper: f16 cross-attention keys and values are not supported on the %s backend "
                             "(use the kv type auto or f32)",
                             m->be->name);
        *f16 = 1;
        return WGML_OK;
    }
    return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: kv type %d (auto, f16 or f32)", (int)kv);
}

wgml_status whisper_state_create(whisper_model *m, int n_seq, int n_batch, wgml_kv_type kv, whisper_state **out,
                                 wgml_error *err) {
    *out = NULL;
    const whisper_hparams *hp = &m->hp;
    if (n_seq < 1 || n_seq > WHISPER_MAX_SEQ || n_batch < n_seq || n_batch > n_seq * hp->n_text_ctx)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: a state of %d sequences and %d rows per step",
                         n_seq, n_batch);
    int cross_f16 = 0;
    wgml_status kst = whisper_kv_f16(m, kv, &cross_f16, err);
    if (kst) return kst;
    whisper_state *s = wgml_calloc(1, sizeof *s);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the transcriber's state");
    s->m = m;
    s->n_seq = n_seq;
    s->n_batch = n_batch;
    s->cross_f16 = cross_f16;
    s->kv = kv;
    const uint32_t XT = cross_f16 ? WGML_F16 : WGML_F32;
    const int L = hp->n_text_layer, S = hp->n_audio_state, A = hp->n_audio_ctx, C = hp->n_text_ctx;
    const int F = WHISPER_WINDOW_FRAMES, R = n_batch;
    wgml_status st = WGML_OK;
    s->ck = wgml_calloc((size_t)L * 6, sizeof *s->ck);
    const size_t cache_rows = (size_t)n_seq * C;
    s->host = wgml_malloc(((size_t)R * 4 + cache_rows) * sizeof(int32_t));
    s->kv_seq_host = wgml_malloc(cache_rows * sizeof(int32_t));
    s->mel_host = wgml_malloc((size_t)F * (size_t)hp->n_mels * sizeof(float));
    if (!s->ck || !s->host || !s->kv_seq_host || !s->mel_host) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the transcriber's state");
        goto fail;
    }
    for (size_t r = 0; r < cache_rows; r++) s->kv_seq_host[r] = (int32_t)(r % (size_t)n_seq);
    s->cv = s->ck + L;
    s->kc[0] = s->cv + L;
    s->vc[0] = s->kc[0] + L;
    s->kc[1] = s->vc[0] + L;
    s->vc[1] = s->kc[1] + L;
    const wgml_buffer_usage ACT = WGML_BUFFER_ACTIVATIONS;
    if ((st = new_tensors(s, &s->mel, 1, "mel", WGML_F32, hp->n_mels, F, ACT, err)) ||
        (st = new_tensors(s, &s->c1, 1, "conv1", WGML_F32, S, F, ACT, err)) ||
        (st = new_tensors(s, &s->ex, 1, "enc.x", WGML_F32, S, A, ACT, err)) ||
        (st = new_tensors(s, &s->eq, 1, "enc.q", WGML_F32, S, A, ACT, err)) ||
        (st = new_tensors(s, &s->ek, 1, "enc.k", WGML_F32, S, A, ACT, err)) ||
        (st = new_tensors(s, &s->ev, 1, "enc.v", WGML_F32, S, A, ACT, err)) ||
        (st = new_tensors(s, &s->eatt, 1, "enc.att", WGML_F32, S, A, ACT, err)) ||
        (st = new_tensors(s, &s->eh, 1, "enc.h", WGML_F32, 4 * S, A, ACT, err)) ||
        (st = new_tensors(s, s->ck, L, "cross_k", XT, S, A, WGML_BUFFER_KV, err)) ||
        (st = new_tensors(s, s->cv, L, "cross_v", XT, S, A, WGML_BUFFER_KV, err)) ||
        (st = new_tensors(s, s->kc[0], L, "k_cache", WGML_F32, S, (int64_t)cache_rows, WGML_BUFFER_KV, err)) ||
        (st = new_tensors(s, s->vc[0], L, "v_cache", WGML_F32, S, (int64_t)cache_rows, WGML_BUFFER_KV, err)) ||
        (st = new_tensors(s, &s->x, 1, "x", WGML_F32, S, R, ACT, err)) ||
        (st = new_tensors(s, &s->q, 1, "q", WGML_F32, S, R, ACT, err)) ||
        (st = new_tensors(s, &s->att, 1, "att", WGML_F32, S, R, ACT, err)) ||
        (st = new_tensors(s, &s->h, 1, "h", WGML_F32, 4 * S, R, ACT, err)) ||
        (st = new_tensors(s, &s->rows, 1, "rows", WGML_F32, S, n_seq, ACT, err)) ||
        (st = new_tensors(s, &s->logits, 1, "logits", WGML_F32, hp->n_vocab, n_seq, ACT, err)) ||
        (st = new_tensors(s, &s->amax, 1, "argmax", WGML_I32, n_seq, 1, ACT, err)) ||
        (st = new_tensors(s, &s->ids, 1, "ids", WGML_I32, R, 1, ACT, err)) ||
        (st = new_tensors(s, &s->pos, 1, "pos", WGML_I32, R, 1, ACT, err)) ||
        (st = new_tensors(s, &s->qh, 1, "align_q", WGML_F32, hp->head_dim, R, ACT, err)) ||
        (st = new_tensors(s, &s->kh, 1, "align_k", WGML_F32, hp->head_dim, A, ACT, err)) ||
        (st = new_tensors(s, &s->seq, 1, "seq", WGML_I32, R, 1, ACT, err)) ||
        (st = new_tensors(s, &s->kv_seq, 1, "kv_seq", WGML_I32, (int64_t)cache_rows, 1, ACT, err)) ||
        (st = new_tensors(s, &s->range, 1, "range", WGML_I32, 2, R, ACT, err)) ||
        (st = new_tensors(s, &s->gather, 1, "gather", WGML_I32, (int64_t)cache_rows, 1, ACT, err)))
        goto fail;
    *out = s;
    return WGML_OK;
fail:
    whisper_state_free(s);
    return st;
}

/* A step on the model's backend: steps of all states take turns. */
static void step_begin(whisper_model *m, int n) {
    wgml_mutex_lock(&m->step_mu);
    m->be->begin(m->be, &(wgml_step){.pos = 0, .n_tokens = n});
}

static wgml_status step_end(whisper_model *m, wgml_error *err) {
    wgml_status st = m->be->end(m->be, err);
    wgml_mutex_unlock(&m->step_mu);
    return st;
}

/* A view of the first n elements of a one-row i32 table. */
static wgml_tensor head(const wgml_tensor *t, int64_t n) {
    wgml_tensor v = *t;
    v.ne[0] = n;
    return v;
}

/* Records the cross-attention keys and values of every decoder layer from xa
 * (not the encoder's ek, ev: f16 ones go through them). */
static void cross_kv(whisper_model *m, whisper_state *s, const wgml_tensor *xa) {
    wgml_backend *be = m->be;
    for (int l = 0; l < m->hp.n_text_layer; l++) {
        const whisper_layer *w = &m->dec[l];
        if (!s->cross_f16) {
            wgml_op_matmul(be, &(wgml_matmul_args){.x = xa, .n_w = 2, .w = {&w->cwk, &w->cwv},
                                                   .bias = {NULL, &w->cbv}, .out = {&s->ck[l], &s->cv[l]}});
            continue;
        }
        wgml_op_matmul(be, &(wgml_matmul_args){.x = xa, .n_w = 2, .w = {&w->cwk, &w->cwv}, .bias = {NULL, &w->cbv},
                                               .out = {&s->ek, &s->ev}});
        wgml_op_copy(be, &(wgml_copy_args){.out = &s->ck[l], .x = &s->ek});
        wgml_op_copy(be, &(wgml_copy_args){.out = &s->cv[l], .x = &s->ev});
    }
}

wgml_status whisper_encode(whisper_model *m, whisper_state *s, const float *mel, int frames, float *xa_out,
                           wgml_error *err) {
    const whisper_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    if (s->m != m) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: the state belongs to another model");
    if (frames < 0 || frames > WHISPER_WINDOW_FRAMES)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: a window of %d frames (at most %d)", frames,
                         WHISPER_WINDOW_FRAMES);
    /* the window time-major, zero columns past `frames` */
    const int F = WHISPER_WINDOW_FRAMES, M = hp->n_mels;
    float *t = s->mel_host;
    for (int f = 0; f < F; f++)
        for (int b = 0; b < M; b++) t[(size_t)f * M + b] = f < frames ? mel[(size_t)b * frames + f] : 0.0f;
    s->have_audio = 0;
    /* a step per block (and one before and after): a software adapter or a
     * small GPU's watchdog never sees one long submit */
    step_begin(m, hp->n_audio_ctx);
    be->upload(be, &s->mel, t, (size_t)F * M * sizeof(float));
    wgml_block_conv1d(be, &s->mel, &m->conv1_w, &m->conv1_b, 3, 1, 1, 1, WGML_EPI_STORE, 0, 0, &s->c1);
    wgml_op_unary(be, &(wgml_unary_args){.out = &s->c1, .x = &s->c1, .kind = WGML_UNARY_GELU_ERF});
    wgml_block_conv1d(be, &s->c1, &m->conv2_w, &m->conv2_b, 3, 2, 1, 1, WGML_EPI_STORE, 0, 0, &s->ex);
    wgml_op_unary(be, &(wgml_unary_args){.out = &s->ex, .x = &s->ex, .kind = WGML_UNARY_GELU_ERF});
    wgml_op_add(be, &(wgml_add_args){.out = &s->ex, .a = &s->ex, .b = &m->enc_pos});
    wgml_status st = step_end(m, err);
    const wgml_encoder_layer_cfg cfg = {.n_head = hp->n_audio_head, .head_dim = hp->head_dim, .eps = 1e-5f,
                                        .pre_norm = 1, .act = WGML_UNARY_GELU_ERF};
    const wgml_encoder_acts acts = {&s->ex, &s->eq, &s->ek, &s->ev, &s->eatt, &s->eh};
    for (int l = 0; l < hp->n_audio_layer && !st; l++) {
        const whisper_layer *L = &m->enc[l];
        const wgml_encoder_layer w = {.wq = &L->wq, .bq = &L->bq, .wk = &L->wk, .wv = &L->wv, .bv = &L->bv,
                                      .wo = &L->wo, .bo = &L->bo, .attn_norm_w = &L->attn_ln_w,
                                      .attn_norm_b = &L->attn_ln_b, .up = &L->up, .b_up = &L->b_up,
                                      .down = &L->down, .b_down = &L->b_down, .ffn_norm_w = &L->mlp_ln_w,
                                      .ffn_norm_b = &L->mlp_ln_b};
        step_begin(m, hp->n_audio_ctx);
        wgml_block_encoder_layer(be, &w, &cfg, &acts);
        st = step_end(m, err);
    }
    if (st) return st;
    step_begin(m, hp->n_audio_ctx);
    wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &s->ex, .x = &s->ex, .w = &m->ln_post_w,
                                                   .b = &m->ln_post_b, .eps = 1e-5f});
    cross_kv(m, s, &s->ex);
    if (xa_out) be->download(be, &s->ex, xa_out, (size_t)hp->n_audio_ctx * hp->n_audio_state * sizeof(float));
    st = step_end(m, err);
    if (!st) s->have_audio = 1;
    return st;
}

wgml_status whisper_set_audio_features(whisper_model *m, whisper_state *s, const float *xa, wgml_error *err) {
    const whisper_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    if (s->m != m) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: the state belongs to another model");
    s->have_audio = 0;
    step_begin(m, hp->n_audio_ctx);
    be->upload(be, &s->ex, xa, (size_t)hp->n_audio_ctx * hp->n_audio_state * sizeof(float));
    cross_kv(m, s, &s->ex);
    wgml_status st = step_end(m, err);
    if (!st) s->have_audio = 1;
    return st;
}

/* What a step records of the alignment heads' cross-attention: head i is
 * (layer heads[i][0], head heads[i][1]); its weights [n][n_audio_ctx] go to
 * out + i n n_audio_ctx (through the state's `aw`, sized by the caller). */
typedef struct cross_heads {
    const int (*heads)[2];
    int n_heads;
    float *out;
} cross_heads;

static wgml_status decode_step(whisper_model *m, whisper_state *s, const int32_t *tokens, int pos, int n,
                               float *logits, int32_t *argmax, const cross_heads *ch, wgml_error *err) {
    const whisper_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    const int N = s->n_seq, rows = n * N;
    if (s->m != m) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: the state belongs to another model");
    if (!s->have_audio)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: decoding before a window was encoded");
    if (n < 1 || pos < 0 || rows > s->n_batch)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: a step of %d tokens at position %d (%d rows at most)",
                         n, pos, s->n_batch);
    if (pos + n > hp->n_text_ctx)
        return wgml_fail(err, WGML_ERR_CONTEXT_FULL, "whisper: positions %d..%d are past the decoder's %d", pos,
                         pos + n - 1, hp->n_text_ctx);
    for (int i = 0; i < rows; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d", tokens[i],
                             hp->n_vocab);
    /* per row (position-major: row i N + q is sequence q at position pos + i):
     * its position, its sequence, and the cache rows it sees (every earlier
     * position's, its own sequence's by the sequence ids) */
    int32_t *tpos_h = s->host, *seq_h = tpos_h + rows, *range_h = seq_h + rows;
    const int keys = (pos + n) * N;
    for (int i = 0; i < n; i++)
        for (int q = 0; q < N; q++) {
            const int r = i * N + q;
            tpos_h[r] = pos + i;
            seq_h[r] = q;
            range_h[2 * r] = 0;
            range_h[2 * r + 1] = (pos + i + 1) * N;
        }
    wgml_tensor x = wgml_tensor_rows(&s->x, 0, rows), q = wgml_tensor_rows(&s->q, 0, rows);
    wgml_tensor att = wgml_tensor_rows(&s->att, 0, rows), h = wgml_tensor_rows(&s->h, 0, rows);
    wgml_tensor ids = head(&s->ids, rows), tpos = head(&s->pos, rows), tseq = head(&s->seq, rows);
    wgml_tensor kvseq = head(&s->kv_seq, keys), trange = wgml_tensor_rows(&s->range, 0, rows);
    const int masked = N > 1 || n > 1; /* one row of one sequence sees every cache row */
    wgml_mutex_lock(&m->step_mu);
    be->begin(be, &(wgml_step){.pos = pos, .n_tokens = rows});
    be->upload(be, &ids, tokens, (size_t)rows * sizeof(int32_t));
    be->upload(be, &tpos, tpos_h, (size_t)rows * sizeof(int32_t));
    if (N > 1) {
        be->upload(be, &tseq, seq_h, (size_t)rows * sizeof(int32_t));
        be->upload(be, &kvseq, s->kv_seq_host, (size_t)keys * sizeof(int32_t));
    }
    if (masked) be->upload(be, &trange, range_h, (size_t)rows * 2 * sizeof(int32_t));
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &x, .table = &m->tok_embd, .ids = &ids});
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &att, .table = &m->dec_pos, .ids = &tpos});
    wgml_op_add(be, &(wgml_add_args){.out = &x, .a = &x, .b = &att});
    const float scale = 1.0f / sqrtf((float)hp->head_dim);
    const int H = hp->n_text_head, D = hp->head_dim;
    for (int l = 0; l < hp->n_text_layer; l++) {
        const whisper_layer *w = &m->dec[l];
        /* self-attention: this step's keys and values go straight into the
         * cache rows (pos N ..), then every row attends to its sequence's
         * rows up to its own position */
        wgml_tensor kc = wgml_tensor_rows(&s->kc[s->bank][l], (int64_t)pos * N, rows);
        wgml_tensor vc = wgml_tensor_rows(&s->vc[s->bank][l], (int64_t)pos * N, rows);
        wgml_tensor kall = wgml_tensor_rows(&s->kc[s->bank][l], 0, keys);
        wgml_tensor vall = wgml_tensor_rows(&s->vc[s->bank][l], 0, keys);
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &att, .x = &x, .w = &w->attn_ln_w, .b = &w->attn_ln_b,
                                                       .eps = 1e-5f});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &att, .n_w = 3, .w = {&w->wq, &w->wk, &w->wv},
                                               .bias = {&w->bq, NULL, &w->bv}, .out = {&q, &kc, &vc}});
        wgml_op_attention(be, &(wgml_attention_args){.q = &q, .k = &kall, .v = &vall, .out = &att, .n_head = H,
                                                     .n_head_kv = H, .head_dim = D, .scale = scale,
                                                     .bidirectional = 1, .seq = N > 1 ? &tseq : NULL,
                                                     .kv_seq = N > 1 ? &kvseq : NULL,
                                                     .kv_range = masked ? &trange : NULL});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &att, .n_w = 1, .w = {&w->wo}, .bias = {&w->bo}, .out = {&x},
                                               .epilogue = WGML_EPI_ADD});
        /* cross-attention over the window */
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &att, .x = &x, .w = &w->cross_ln_w,
                                                       .b = &w->cross_ln_b, .eps = 1e-5f});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &att, .n_w = 1, .w = {&w->cwq}, .bias = {&w->cbq}, .out = {&q}});
        wgml_op_attention(be, &(wgml_attention_args){.q = &q, .k = &s->ck[l], .v = &s->cv[l], .out = &att,
                                                     .n_head = H, .n_head_kv = H, .head_dim = D, .scale = scale,
                                                     .bidirectional = 1});
        for (int i = 0; ch && i < ch->n_heads; i++) { /* softmax(q_h k_h^T / sqrt(dh)) of an alignment head */
            if (ch->heads[i][0] != l) continue;
            const int hd = ch->heads[i][1];
            wgml_tensor qv = wgml_tensor_cols(&q, (int64_t)hd * D, D), kv = wgml_tensor_cols(&s->ck[l], (int64_t)hd * D, D);
            wgml_tensor qh = s->qh, kh = s->kh, wh = wgml_tensor_rows(&s->aw, (int64_t)i * rows, rows);
            qh.ne[1] = rows;
            wgml_op_copy(be, &(wgml_copy_args){.out = &qh, .x = &qv});
            wgml_op_copy(be, &(wgml_copy_args){.out = &kh, .x = &kv});
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &qh, .n_w = 1, .w = {&kh}, .out = {&wh}, .f32_act = 1});
            wgml_op_softmax(be, &(wgml_softmax_args){.out = &wh, .x = &wh, .scale = scale});
        }
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &att, .n_w = 1, .w = {&w->cwo}, .bias = {&w->cbo}, .out = {&x},
                                               .epilogue = WGML_EPI_ADD});
        /* feed-forward */
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &att, .x = &x, .w = &w->mlp_ln_w, .b = &w->mlp_ln_b,
                                                       .eps = 1e-5f});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &att, .n_w = 1, .w = {&w->up}, .bias = {&w->b_up}, .out = {&h}});
        wgml_op_unary(be, &(wgml_unary_args){.out = &h, .x = &h, .kind = WGML_UNARY_GELU_ERF});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &h, .n_w = 1, .w = {&w->down}, .bias = {&w->b_down},
                                               .out = {&x}, .epilogue = WGML_EPI_ADD});
    }
    if (logits || argmax) { /* the last position's rows: one per sequence */
        wgml_tensor last = wgml_tensor_rows(&x, (int64_t)(n - 1) * N, N), lg = wgml_tensor_rows(&s->logits, 0, N);
        wgml_tensor rws = wgml_tensor_rows(&s->rows, 0, N), amax = head(&s->amax, N);
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &rws, .x = &last, .w = &m->ln_w, .b = &m->ln_b,
                                                       .eps = 1e-5f});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &rws, .n_w = 1, .w = {&m->tok_embd}, .out = {&lg}});
        if (argmax) {
            wgml_op_argmax(be, &(wgml_argmax_args){.out = &amax, .x = &lg});
            be->download(be, &amax, argmax, (size_t)N * sizeof(int32_t));
        }
        if (logits) be->download(be, &lg, logits, (size_t)N * hp->n_vocab * sizeof(float));
    }
    if (ch && ch->n_heads) {
        wgml_tensor all = wgml_tensor_rows(&s->aw, 0, (int64_t)ch->n_heads * rows);
        be->download(be, &all, ch->out, (size_t)ch->n_heads * rows * hp->n_audio_ctx * sizeof(float));
    }
    wgml_status st_end = step_end(m, err);
    s->x_rows = st_end ? 0 : rows;
    return st_end;
}

wgml_status whisper_decode(whisper_model *m, whisper_state *s, const int32_t *tokens, int pos, int n,
                           float *logits, int32_t *argmax, wgml_error *err) {
    return decode_step(m, s, tokens, pos, n, logits, argmax, NULL, err);
}

wgml_status whisper_cross_weights(whisper_model *m, whisper_state *s, const int32_t *tokens, int n,
                                  const int (*heads)[2], int n_heads, float *out, wgml_error *err) {
    const whisper_hparams *hp = &m->hp;
    if (s->n_seq != 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: cross-attention weights need a one-sequence state");
    if (n_heads < 1 || n_heads > 4096)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: %d alignment heads", n_heads);
    for (int i = 0; i < n_heads; i++)
        if (heads[i][0] < 0 || heads[i][0] >= hp->n_text_layer || heads[i][1] < 0 || heads[i][1] >= hp->n_text_head)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: alignment head (%d, %d) is not in the model",
                             heads[i][0], heads[i][1]);
    if (n < 1 || n > s->n_batch)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: %d tokens to align (%d at most)", n, s->n_batch);
    /* the weights' buffer, grown between steps: heads x tokens rows of n_audio_ctx */
    const int64_t need = (int64_t)n_heads * n;
    if (!s->aw.buf || s->aw.ne[1] < need) {
        wgml_mutex_lock(&m->step_mu);
        if (s->aw.buf) {
            m->be->buffer_free(m->be, s->aw.buf);
            s->bufs[s->aw_slot] = NULL;
        }
        wgml_status st = new_tensors(s, &s->aw, 1, "align", WGML_F32, hp->n_audio_ctx, need, WGML_BUFFER_ACTIVATIONS, err);
        if (st) s->aw.buf = NULL;
        else if (s->aw_slot > 0) /* into the slot of the one it replaces */
            s->bufs[s->aw_slot] = s->bufs[--s->n_bufs];
        else
            s->aw_slot = s->n_bufs - 1;
        wgml_mutex_unlock(&m->step_mu);
        if (st) return st;
    }
    return decode_step(m, s, tokens, 0, n, NULL, NULL, &(cross_heads){heads, n_heads, out}, err);
}

wgml_status whisper_reorder(whisper_model *m, whisper_state *s, const int *src, int len, wgml_error *err) {
    const whisper_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    const int N = s->n_seq, S = hp->n_audio_state;
    if (len < 0 || len > hp->n_text_ctx)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: reorder of %d positions", len);
    int identity = 1;
    for (int i = 0; i < N; i++) {
        if (src[i] < 0 || src[i] >= N)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: reorder from sequence %d of %d", src[i], N);
        identity &= src[i] == i;
    }
    if (identity || len == 0) return WGML_OK;
    /* the new cache row p N + i is the old row p N + src[i]: a gather into the other bank */
    int32_t *ids_h = s->host;
    for (int p = 0; p < len; p++)
        for (int i = 0; i < N; i++) ids_h[p * N + i] = p * N + src[i];
    const int to = !s->bank, rows = len * N;
    wgml_status st = WGML_OK;
    wgml_mutex_lock(&m->step_mu); /* buffers are made while no other state steps */
    if (!s->kc[to][0].buf && /* the second bank, made at the first reorder (between steps) */
        ((st = new_tensors(s, s->kc[to], hp->n_text_layer, "k_cache", WGML_F32, S, (int64_t)N * hp->n_text_ctx,
                           WGML_BUFFER_KV, err)) ||
         (st = new_tensors(s, s->vc[to], hp->n_text_layer, "v_cache", WGML_F32, S, (int64_t)N * hp->n_text_ctx,
                           WGML_BUFFER_KV, err)))) {
        wgml_mutex_unlock(&m->step_mu);
        return st;
    }
    wgml_tensor ids = head(&s->gather, rows);
    be->begin(be, &(wgml_step){.pos = 0, .n_tokens = rows});
    be->upload(be, &ids, ids_h, (size_t)rows * sizeof(int32_t));
    for (int l = 0; l < hp->n_text_layer; l++) {
        wgml_tensor kf = wgml_tensor_rows(&s->kc[s->bank][l], 0, rows), kt = wgml_tensor_rows(&s->kc[to][l], 0, rows);
        wgml_tensor vf = wgml_tensor_rows(&s->vc[s->bank][l], 0, rows), vt = wgml_tensor_rows(&s->vc[to][l], 0, rows);
        wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &kt, .table = &kf, .ids = &ids});
        wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &vt, .table = &vf, .ids = &ids});
    }
    if ((st = step_end(m, err))) return st;
    s->bank = to;
    return WGML_OK;
}

/* Rows of logits per backend step in whisper_row_logits. */
#define WHISPER_ROW_LOGITS 64

wgml_status whisper_row_logits(whisper_model *m, whisper_state *s, int row0, int n, float *out, wgml_error *err) {
    const whisper_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    if (s->n_seq != 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: the logits of every row need a one-sequence state");
    if (row0 < 0 || n < 0 || row0 + n > s->x_rows)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: logits of rows %d..%d of a step of %d", row0,
                         row0 + n - 1, s->x_rows);
    const int K = WHISPER_ROW_LOGITS < s->n_batch ? WHISPER_ROW_LOGITS : s->n_batch;
    if (!s->lr_rows.buf && n > 0) { /* made between steps, while no other state steps */
        wgml_mutex_lock(&m->step_mu);
        wgml_status st = new_tensors(s, &s->lr_rows, 1, "row_norm", WGML_F32, hp->n_text_state, K,
                                     WGML_BUFFER_ACTIVATIONS, err);
        if (!st) st = new_tensors(s, &s->lr_logits, 1, "row_logits", WGML_F32, hp->n_vocab, K, WGML_BUFFER_ACTIVATIONS, err);
        wgml_mutex_unlock(&m->step_mu);
        if (st) {
            s->lr_rows.buf = NULL; /* freed with the state */
            return st;
        }
    }
    for (int a = 0; a < n; a += K) {
        const int k = n - a < K ? n - a : K;
        wgml_tensor x = wgml_tensor_rows(&s->x, row0 + a, k), nr = wgml_tensor_rows(&s->lr_rows, 0, k);
        wgml_tensor lg = wgml_tensor_rows(&s->lr_logits, 0, k);
        step_begin(m, k);
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &nr, .x = &x, .w = &m->ln_w, .b = &m->ln_b, .eps = 1e-5f});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &nr, .n_w = 1, .w = {&m->tok_embd}, .out = {&lg}});
        be->download(be, &lg, out + (size_t)a * hp->n_vocab, (size_t)k * hp->n_vocab * sizeof(float));
        wgml_status st = step_end(m, err);
        if (st) return st;
    }
    return WGML_OK;
}
