/*
 * api_transcribe_bench.c - Whisper's forward passes one at a time, for
 * `wgml bench` on a transcription model (tools/wgml/cmd_bench_transcribe.c;
 * declared in tools_internal.h). NOT part of the public API.
 *
 * wgml_transcribe runs whole transcriptions; a benchmark also wants the two
 * steps underneath alone, as whisper.cpp's whisper-bench times them: the
 * encoder on one 30 s window (its cross-attention keys and values included)
 * and single-token decoder steps over that window. The family's transcriber
 * interface (model/family.h) has no such steps, so this file, and only it,
 * reaches into the family: it checks that the model is a Whisper model and
 * calls whisper_encode / whisper_decode (model/whisper/whisper.h) on a state
 * of its own. When the transcriber interface gets encode and decode steps,
 * this goes through them instead.
 */
#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"
#include "model/whisper/whisper.h"
#include "tools_internal.h"

#include <string.h>
#include <time.h>

struct wgml_whisper_bench {
    whisper_model *m;
    whisper_state *st;
    int n_seq, n_mels, n_vocab, n_text_ctx;
    float *mel;    /* [n_mels][3000]: a deterministic window */
    float *logits; /* [n_seq][n_vocab] */
    int32_t *tok;  /* [n_seq] */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void wgml_whisper_bench_free(wgml_whisper_bench *b) {
    if (!b) return;
    whisper_state_free(b->st);
    wgml_free(b->mel);
    wgml_free(b->logits);
    wgml_free(b->tok);
    wgml_free(b);
}

wgml_status wgml_whisper_kv_f16(wgml_model *model, wgml_kv_type kv, int *f16, wgml_error *err) {
    *f16 = 0;
    if (!model || model->fam != &wgml_family_whisper)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "not a Whisper model");
    return whisper_kv_f16(model->impl, kv, f16, err);
}

wgml_status wgml_whisper_bench_create(wgml_model *model, int n_seq, wgml_kv_type kv, wgml_whisper_bench **out,
                                      wgml_error *err) {
    *out = NULL;
    if (!model) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_whisper_bench_create: NULL model");
    if (model->fam != &wgml_family_whisper)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "a %s model is not a Whisper model", model->fam->name);
    if (n_seq < 1 || n_seq > 16)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d sequences (1 .. 16)", n_seq);
    whisper_model *m = model->impl;
    wgml_whisper_bench *b = wgml_calloc(1, sizeof *b);
    if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the benchmark");
    b->m = m;
    b->n_seq = n_seq;
    b->n_mels = m->hp.n_mels;
    b->n_vocab = m->hp.n_vocab;
    b->n_text_ctx = m->hp.n_text_ctx;
    const size_t cells = (size_t)b->n_mels * WHISPER_WINDOW_FRAMES;
    b->mel = wgml_malloc(cells * sizeof(float));
    b->logits = wgml_malloc((size_t)n_seq * (size_t)b->n_vocab * sizeof(float));
    b->tok = wgml_malloc((size_t)n_seq * sizeof(int32_t));
    if (!b->mel || !b->logits || !b->tok) {
        wgml_whisper_bench_free(b);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the benchmark");
    }
    /* a log-mel in the range a normalized one has ([-1.5, 1.5]); the time does not depend on it */
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < cells; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        b->mel[i] = (float)((x >> 8) * (1.0 / 16777216.0) * 3.0 - 1.5);
    }
    wgml_status st = whisper_state_create(m, n_seq, n_seq, kv, &b->st, err);
    if (st) {
        wgml_whisper_bench_free(b);
        return st;
    }
    *out = b;
    return WGML_OK;
}

wgml_status wgml_whisper_bench_encode(wgml_whisper_bench *b, double *ms, wgml_error *err) {
    const double t0 = now_ms();
    wgml_status st = whisper_encode(b->m, b->st, b->mel, WHISPER_WINDOW_FRAMES, NULL, err);
    if (ms) *ms = now_ms() - t0;
    return st;
}

int wgml_whisper_bench_max_steps(const wgml_whisper_bench *b) { return b->n_text_ctx; }

wgml_status wgml_whisper_bench_decode(wgml_whisper_bench *b, int n_steps, double *ms, wgml_error *err) {
    if (n_steps < 1 || n_steps > b->n_text_ctx)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d decoder steps (1 .. %d)", n_steps, b->n_text_ctx);
    const int N = b->n_seq, V = b->n_vocab;
    for (int q = 0; q < N; q++) b->tok[q] = b->m->sp.sot;
    for (int i = 0; i < n_steps; i++) {
        const double t0 = now_ms();
        wgml_status st = whisper_decode(b->m, b->st, b->tok, i, 1, b->logits, NULL, err);
        if (st) return st;
        /* greedy on the host, as a transcription picks from the logits it reads back */
        for (int q = 0; q < N; q++) {
            const float *row = b->logits + (size_t)q * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            b->tok[q] = best;
        }
        if (ms) ms[i] = now_ms() - t0;
    }
    return WGML_OK;
}

void wgml_whisper_bench_sizes(const wgml_whisper_bench *b, int *n_vocab, int *n_audio_ctx, int *n_audio_state,
                              int *n_layers, int *n_ff, int *sot) {
    const whisper_hparams *hp = &b->m->hp;
    *n_vocab = hp->n_vocab;
    *n_audio_ctx = hp->n_audio_ctx;
    *n_audio_state = hp->n_audio_state;
    *n_layers = hp->n_audio_layer + hp->n_text_layer;
    *n_ff = 4 * hp->n_audio_state;
    *sot = b->m->sp.sot;
}

wgml_status wgml_whisper_bench_encode_read(wgml_whisper_bench *b, float *xa, wgml_error *err) {
    return whisper_encode(b->m, b->st, b->mel, WHISPER_WINDOW_FRAMES, xa, err);
}

wgml_status wgml_whisper_bench_step(wgml_whisper_bench *b, int32_t token, int pos, float *logits, wgml_error *err) {
    if (b->n_seq != 1) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "a step of one sequence on a bench of %d", b->n_seq);
    return whisper_decode(b->m, b->st, &token, pos, 1, logits, NULL, err);
}
