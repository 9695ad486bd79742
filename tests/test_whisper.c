/*
 * test_whisper.c - Whisper's forward pass against the official code's
 * tensors (../shared/whisper/reference/whisper-micro-random, README
 * "Numerics"), on one backend (the argument: cpu (default), swiftshader or
 * lavapipe; a missing adapter skips, or fails where WGML_REQUIRE_ADAPTERS
 * names it), every case and window of whisper-micro-random.bin:
 *   - the encoder from the reference log-mel: within 5e-4 of encoder_out;
 *   - the decoder on the SOT sequence from the reference encoder output:
 *     the first step's logits within 5e-4;
 *   - greedy decoding without filters (`plain`) teacher-forced along the
 *     reference path: the top logit of every step within 5e-4 of the
 *     recorded one, and our argmax equal to the recorded id except at a
 *     near-tie (gap under 2e-3) where it is the recorded runner-up;
 *   - several sequences in one step (the general attention path) and the
 *     beam reorder: the same logits as one sequence alone.
 */
#include <json-c/json.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/model_file.h"
#include "model/whisper/whisper.h"
#include "model/whisper/whisper_run.h"
#include "npy.h"
#include "testutil.h"
#include "wgml.h"

static const char *backend_name = "cpu";
static int win_lo = 0, win_hi = 1000; /* the windows run, numbered over every case: argument 3 "lo-hi" */
static wgml_backend *be;
static gguf_file *gf;
static whisper_model *model;
static whisper_state *st1; /* one sequence */
static json_object *manifest;
static int have_backend;

#define REF "whisper/reference/whisper-micro-random/"

static wgml_status create_backend(wgml_error *err) {
    if (!strcmp(backend_name, "cpu")) return wgml_backend_cpu_create(2, &be, err);
    const char *adapter = !strcmp(backend_name, "swiftshader") ? "swiftshader"
                          : !strcmp(backend_name, "lavapipe")  ? "llvmpipe"
                                                               : NULL;
    if (!adapter) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown backend '%s'", backend_name);
    if (!tu_adapter_present(adapter)) {
        const char *req = getenv("WGML_REQUIRE_ADAPTERS");
        if (req && strstr(req, adapter))
            return wgml_fail(err, WGML_ERR_NO_ADAPTER, "adapter '%s' is required but not found", adapter);
        fprintf(stderr, "skipping %s: adapter not found\n", backend_name);
        return WGML_OK;
    }
    wgml_webgpu_options o = {.adapter = adapter, .allow_software = 1};
    return wgml_backend_webgpu_create(&o, &be, err);
}

static int setup(void **state) {
    (void)state;
    if (!tu_shared_present()) return 0;
    wgml_error err;
    wgml_status st;
    if ((st = wgml_model_file_open(tu_shared("whisper/whisper-micro-random.bin"), &gf, &err)) ||
        (st = create_backend(&err)) || (be && (st = whisper_model_load(gf, be, NULL, &model, &err))) ||
        (be && (st = whisper_state_create(model, 1, 8, WGML_KV_F32, &st1, &err)))) {
        fprintf(stderr, "whisper: %s\n", err.message);
        return -1;
    }
    have_backend = be != NULL;
    manifest = json_object_from_file(tu_shared(REF "manifest.json"));
    return manifest ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    whisper_state_free(st1);
    whisper_model_free(model);
    if (be) be->free(be);
    if (gf) gguf_close(gf);
    if (manifest) json_object_put(manifest);
    return 0;
}

static json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(o, key, &v));
    return v;
}

/* Reads reference file <case>/w<k>_<what>.npy as floats (n elements expected, or any when n < 0). */
static float *ref_f32(const char *cname, int w, const char *what, int64_t n) {
    char rel[256];
    snprintf(rel, sizeof rel, REF "%s/w%d_%s.npy", cname, w, what);
    npy_array a;
    assert_int_equal(npy_read(tu_shared(rel), &a), 0);
    if (n >= 0) assert_int_equal(a.n, n);
    float *f = malloc((size_t)a.n * sizeof *f);
    for (int64_t i = 0; i < a.n; i++) f[i] = (float)a.v[i];
    npy_free(&a);
    return f;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN too */
    }
    return m;
}

/* A call that must succeed: its message on failure. */
#define OK(call)                                                              \
    do {                                                                      \
        wgml_status st_ = (call);                                             \
        if (st_) fprintf(stderr, "%s: %s\n", #call, err.message);             \
        assert_int_equal(st_, WGML_OK);                                       \
    } while (0)

#define FOR_WINDOWS(...)                                                                   \
    do {                                                                                   \
        json_object *cases = get(manifest, "cases");                                       \
        int gw_ = -1;                                                                      \
        for (size_t ci = 0; ci < json_object_array_length(cases); ci++) {                  \
            json_object *c = json_object_array_get_idx(cases, ci);                         \
            const char *cname = json_object_get_string(get(c, "name"));                    \
            json_object *wins = get(c, "windows");                                         \
            for (int wi = 0; wi < (int)json_object_array_length(wins); wi++) {             \
                json_object *win = json_object_array_get_idx(wins, wi);                    \
                if (++gw_ < win_lo || gw_ > win_hi) continue;                              \
                __VA_ARGS__                                                                \
            }                                                                              \
        }                                                                                  \
    } while (0)

static void test_encoder(void **state) {
    (void)state;
    if (!have_backend) skip();
    const whisper_hparams *hp = &model->hp;
    const size_t nx = (size_t)hp->n_audio_ctx * hp->n_audio_state;
    float *xa = malloc(nx * sizeof *xa);
    FOR_WINDOWS({
        (void)win;
        float *mel = ref_f32(cname, wi, "mel", (int64_t)hp->n_mels * WHISPER_WINDOW_FRAMES);
        float *ref = ref_f32(cname, wi, "encoder_out", (int64_t)nx);
        wgml_error err;
        OK(whisper_encode(model, st1, mel, WHISPER_WINDOW_FRAMES, xa, &err));
        double d = max_abs_diff(xa, ref, nx);
        fprintf(stderr, "%s w%d: encoder_out max |diff| %.3g\n", cname, wi, d);
        assert_true(d < 5e-4);
        free(mel);
        free(ref);
    });
    free(xa);
}

/* The decoder on state `s` from the reference encoder output: the first step's
 * logits within tol, then the plain greedy path teacher-forced, step by step:
 * the top logit within tol, our argmax the reference's or, at a near-tie (gap
 * under `gap`), its runner-up. *worst_out: the largest logit error seen. */
static void decode_along_reference(whisper_state *s, double tol, double gap, double *worst_out) {
    const whisper_hparams *hp = &model->hp;
    const size_t nx = (size_t)hp->n_audio_ctx * hp->n_audio_state, V = (size_t)hp->n_vocab;
    float *logits = malloc(V * sizeof *logits);
    double worst_all = 0;
    FOR_WINDOWS({
        float *xa = ref_f32(cname, wi, "encoder_out", (int64_t)nx);
        float *ref = ref_f32(cname, wi, "logits_first", (int64_t)V);
        wgml_error err;
        OK(whisper_set_audio_features(model, s, xa, &err));
        json_object *plain = get(win, "plain"), *sot = get(plain, "sot_sequence"), *steps = get(plain, "steps");
        int32_t toks[8];
        const int n_sot = (int)json_object_array_length(sot);
        for (int i = 0; i < n_sot; i++) toks[i] = json_object_get_int(json_object_array_get_idx(sot, i));
        int32_t am = -1;
        OK(whisper_decode(model, s, toks, 0, n_sot, logits, &am, &err));
        double d = max_abs_diff(logits, ref, V);
        fprintf(stderr, "%s w%d: logits_first max |diff| %.3g\n", cname, wi, d);
        assert_true(d < tol);
        if (d > worst_all) worst_all = d;
        /* along the reference path: each step's top logit and id */
        double worst = 0;
        int pos = n_sot;
        for (int i = 0; i < (int)json_object_array_length(steps); i++) {
            json_object *st = json_object_array_get_idx(steps, i);
            const int id = json_object_get_int(get(st, "id")), second = json_object_get_int(get(st, "second"));
            const double top = json_object_get_double(get(st, "logit")), g = json_object_get_double(get(st, "gap"));
            if (i > 0) OK(whisper_decode(model, s, &toks[0], pos++, 1, logits, &am, &err));
            double e = fabs((double)logits[id] - top);
            if (e > worst) worst = e;
            assert_true(e < tol);
            assert_true(am == id || (g < gap && am == second));
            assert_int_equal(logits[am] >= logits[id], 1);
            toks[0] = id; /* teacher forcing: the reference id is the next input */
        }
        fprintf(stderr, "%s w%d: %d plain steps, top logit max |diff| %.3g\n", cname, wi,
                (int)json_object_array_length(steps), worst);
        if (worst > worst_all) worst_all = worst;
        free(xa);
        free(ref);
    });
    free(logits);
    if (worst_out) *worst_out = worst_all;
}

/* The decoder from the reference encoder output, f32 cross keys: the README's 5e-4. */
static void test_decoder(void **state) {
    (void)state;
    if (!have_backend) skip();
    decode_along_reference(st1, 5e-4, 2e-3, NULL);
}

/* Cross keys and values in f16 (the CPU's default kv type): the README's
 * "rounds its key/value cache to float16" case, at 3e-3 (measured: 1.8e-3
 * at worst on the micro model, 0.6e-3 against the f32 keys) with a runner-up allowed at gaps under it; the
 * logits are not the f32 state's (the f16 path is taken). Backends that keep
 * f32 keys (WebGPU) resolve auto to f32 and refuse f16. */
static void test_kv_f16(void **state) {
    (void)state;
    if (!have_backend) skip();
    wgml_error err;
    int f16 = -1;
    OK(whisper_kv_f16(model, WGML_KV_DEFAULT, &f16, &err));
    whisper_state *s16 = NULL;
    if (strcmp(backend_name, "cpu")) {
        assert_int_equal(f16, 0);
        assert_int_equal(whisper_kv_f16(model, WGML_KV_F16, &f16, &err), WGML_ERR_UNSUPPORTED);
        assert_int_equal(whisper_state_create(model, 1, 8, WGML_KV_F16, &s16, &err), WGML_ERR_UNSUPPORTED);
        assert_null(s16);
        assert_non_null(strstr(err.message, "f16"));
        return;
    }
    assert_int_equal(f16, 1);
    OK(whisper_state_create(model, 1, 8, WGML_KV_DEFAULT, &s16, &err));
    assert_int_equal(whisper_state_kv(s16), WGML_KV_DEFAULT);
    double worst = 0;
    decode_along_reference(s16, 3e-3, 3e-3, &worst);
    fprintf(stderr, "f16 cross keys and values: worst logit error %.3g\n", worst);
    /* the same step on the f32 state differs: the keys were rounded */
    const size_t nx = (size_t)model->hp.n_audio_ctx * model->hp.n_audio_state, V = (size_t)model->hp.n_vocab;
    float *xa = ref_f32("jfk", 0, "encoder_out", (int64_t)nx);
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    const int32_t toks[3] = {50258, 50259, 50359};
    OK(whisper_set_audio_features(model, s16, xa, &err));
    OK(whisper_set_audio_features(model, st1, xa, &err));
    OK(whisper_decode(model, s16, toks, 0, 3, a, NULL, &err));
    OK(whisper_decode(model, st1, toks, 0, 3, b, NULL, &err));
    const double d = max_abs_diff(a, b, V);
    fprintf(stderr, "f16 against f32 cross keys: max |diff| %.3g\n", d);
    assert_true(d > 1e-6 && d < 3e-3);
    free(a), free(b), free(xa);
    whisper_state_free(s16);
}

/* Three sequences stepped together (the sequence ids and windows of the
 * attention) give each the logits it gets alone; a reorder moves caches. */
static void test_sequences(void **state) {
    (void)state;
    if (!have_backend) skip();
    const whisper_hparams *hp = &model->hp;
    const size_t nx = (size_t)hp->n_audio_ctx * hp->n_audio_state, V = (size_t)hp->n_vocab;
    float *xa = ref_f32("sentence", 0, "encoder_out", (int64_t)nx);
    wgml_error err;
    whisper_state *s3 = NULL;
    OK(whisper_state_create(model, 3, 16, WGML_KV_F32, &s3, &err));
    OK(whisper_set_audio_features(model, s3, xa, &err));
    OK(whisper_set_audio_features(model, st1, xa, &err));
    const int32_t seqs[3][6] = {{50258, 50259, 50359, 1000, 2000, 3000},
                                {50258, 50259, 50359, 50363, 400, 401},
                                {50258, 50259, 50358, 77, 50364, 5}};
    /* alone: the logits after 4, 5 and 6 tokens of each */
    float *alone = malloc(3 * 3 * V * sizeof *alone), *got = malloc(3 * V * sizeof *got);
    for (int q = 0; q < 3; q++) {
        OK(whisper_decode(model, st1, seqs[q], 0, 4, alone + (size_t)(3 * q) * V, NULL, &err));
        OK(whisper_decode(model, st1, seqs[q] + 4, 4, 1, alone + (size_t)(3 * q + 1) * V, NULL, &err));
        OK(whisper_decode(model, st1, seqs[q] + 5, 5, 1, alone + (size_t)(3 * q + 2) * V, NULL, &err));
    }
    /* together: 4 positions of 3 sequences, position-major */
    int32_t toks[12], am[3];
    for (int i = 0; i < 4; i++)
        for (int q = 0; q < 3; q++) toks[i * 3 + q] = seqs[q][i];
    OK(whisper_decode(model, s3, toks, 0, 4, got, am, &err));
    for (int q = 0; q < 3; q++) {
        double d = max_abs_diff(got + (size_t)q * V, alone + (size_t)(3 * q) * V, V);
        fprintf(stderr, "sequence %d of 3: max |diff| %.3g\n", q, d);
        assert_true(d < 1e-4);
    }
    for (int q = 0; q < 3; q++) toks[q] = seqs[q][4];
    OK(whisper_decode(model, s3, toks, 4, 1, got, NULL, &err));
    for (int q = 0; q < 3; q++) assert_true(max_abs_diff(got + (size_t)q * V, alone + (size_t)(3 * q + 1) * V, V) < 1e-4);
    /* reorder: sequences become (2, 2, 0), then each gets its source's sixth token */
    const int src[3] = {2, 2, 0};
    OK(whisper_reorder(model, s3, src, 5, &err));
    for (int q = 0; q < 3; q++) toks[q] = seqs[src[q]][5];
    OK(whisper_decode(model, s3, toks, 5, 1, got, am, &err));
    for (int q = 0; q < 3; q++) {
        assert_true(max_abs_diff(got + (size_t)q * V, alone + (size_t)(3 * src[q] + 2) * V, V) < 1e-4);
        int best = 0;
        for (size_t i = 1; i < V; i++)
            if (got[(size_t)q * V + i] > got[(size_t)q * V + best]) best = (int)i;
        assert_int_equal(am[q], best);
    }
    /* bad steps are errors */
    assert_int_equal(whisper_decode(model, s3, toks, hp->n_text_ctx, 1, NULL, NULL, &err), WGML_ERR_CONTEXT_FULL);
    assert_int_equal(whisper_decode(model, s3, toks, 0, 6, NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    toks[0] = hp->n_vocab;
    assert_int_equal(whisper_decode(model, s3, toks, 0, 1, NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    whisper_state_free(s3);
    free(alone);
    free(got);
    free(xa);
}

/* One window decoded with the official rules (transcribe()'s defaults at
 * temperature 0, language en, no prompt, 48 ids at most), from the
 * reference log-mel: the `rules` and `rules_nots` lists exactly (a first
 * difference only at a near-tie, to the recorded runner-up), and their
 * avg_logprob and no_speech_prob. */
static void check_rules(whisper_run *r, json_object *win, const char *cname, int wi, const float *mel, int nots) {
    json_object *list = get(win, nots ? "rules_nots" : "rules"), *ref = get(list, "tokens"), *steps = get(list, "steps");
    wgml_transcribe_params p = wgml_transcribe_default_params();
    p.no_fallback = 1;
    p.max_tokens = 48;
    p.without_timestamps = nots;
    whisper_window_result *res = malloc(sizeof *res);
    wgml_error err;
    OK(whisper_run_window(r, nots ? NULL : mel, &p, whisper_lang_token(&model->sp, "en"), NULL, 0, res, &err));
    int n_ref = (int)json_object_array_length(ref);
    const int eot = json_object_get_boolean(get(list, "ended_with_eot"));
    int same = 1, i;
    for (i = 0; i < n_ref - eot && i < res->n_tokens; i++) {
        const int want = json_object_get_int(json_object_array_get_idx(ref, i));
        if (res->tokens[i] == want) continue;
        json_object *st = json_object_array_get_idx(steps, i);
        fprintf(stderr, "%s w%d %s: step %d: %d, the reference %d (gap %g, runner-up %d)\n", cname, wi,
                nots ? "rules_nots" : "rules", i, res->tokens[i], want, json_object_get_double(get(st, "gap")),
                json_object_get_int(get(st, "second")));
        assert_true(json_object_get_double(get(st, "gap")) < 2e-3);
        assert_int_equal(res->tokens[i], json_object_get_int(get(st, "second")));
        same = 0;
        break;
    }
    if (same) {
        assert_int_equal(res->n_tokens, n_ref - eot);
        const double alp = json_object_get_double(get(list, "avg_logprob"));
        const double nsp = json_object_get_double(get(list, "no_speech_prob"));
        assert_true(fabs(res->avg_logprob - alp) < 1e-3);
        assert_true(fabs(res->no_speech_prob - nsp) < 1e-4 + 1e-3 * nsp);
    }
    free(res);
}

static void test_rules(void **state) {
    (void)state;
    if (!have_backend) skip();
    const whisper_hparams *hp = &model->hp;
    whisper_run *r = NULL;
    wgml_error err;
    OK(whisper_run_create(model, WGML_KV_F32, &r, &err));
    int lists = 0;
    FOR_WINDOWS({
        float *mel = ref_f32(cname, wi, "mel", (int64_t)hp->n_mels * WHISPER_WINDOW_FRAMES);
        check_rules(r, win, cname, wi, mel, 0);
        check_rules(r, win, cname, wi, mel, 1);
        lists += 2;
        free(mel);
    });
    fprintf(stderr, "%d token lists decoded with the official rules\n", lists);
    whisper_run_free(r);
}

/* The alignment heads' cross-attention weights: each row a distribution
 * over the audio positions; on a GPU, the CPU's within 1e-5. */
static void test_cross_weights(void **state) {
    (void)state;
    if (!have_backend) skip();
    const whisper_hparams *hp = &model->hp;
    const size_t nx = (size_t)hp->n_audio_ctx * hp->n_audio_state, A = (size_t)hp->n_audio_ctx;
    float *xa = ref_f32("jfk", 0, "encoder_out", (int64_t)nx);
    const int32_t toks[6] = {50258, 50259, 50359, 50363, 400, 50257};
    const int heads[3][2] = {{1, 0}, {2, 1}, {2, 0}};
    float *w = malloc(3 * 6 * A * sizeof *w);
    wgml_error err;
    OK(whisper_set_audio_features(model, st1, xa, &err));
    OK(whisper_cross_weights(model, st1, toks, 6, heads, 3, w, &err));
    for (int r = 0; r < 18; r++) {
        double sum = 0;
        for (size_t j = 0; j < A; j++) {
            assert_true(w[r * A + j] >= 0);
            sum += w[r * A + j];
        }
        assert_true(fabs(sum - 1) < 1e-4);
    }
    /* every row's logits after that pass (word timestamps' token probabilities): each row's as a step that
     * ends there gives it */
    const size_t V = (size_t)hp->n_vocab;
    float *rl = malloc(6 * V * sizeof *rl), *one = malloc(V * sizeof *one);
    OK(whisper_row_logits(model, st1, 0, 6, rl, &err));
    assert_int_equal(whisper_row_logits(model, st1, 2, 5, rl, &err), WGML_ERR_INVALID_ARGUMENT);
    double dl = 0;
    for (int i = 0; i < 6; i++) {
        OK(whisper_decode(model, st1, toks, 0, i + 1, one, NULL, &err));
        const double d = max_abs_diff(rl + (size_t)i * V, one, V);
        dl = d > dl ? d : dl;
    }
    fprintf(stderr, "row logits: max |row - last row of a step| %.3g\n", dl);
    assert_true(dl < 2e-4);
    free(rl);
    free(one);
    if (strcmp(backend_name, "cpu")) {
        wgml_backend *cpu = NULL;
        whisper_model *cm = NULL;
        whisper_state *cs = NULL;
        float *cw = malloc(3 * 6 * A * sizeof *cw);
        OK(wgml_backend_cpu_create(2, &cpu, &err));
        OK(whisper_model_load(gf, cpu, NULL, &cm, &err));
        OK(whisper_state_create(cm, 1, 8, WGML_KV_F32, &cs, &err));
        OK(whisper_set_audio_features(cm, cs, xa, &err));
        OK(whisper_cross_weights(cm, cs, toks, 6, heads, 3, cw, &err));
        double d = max_abs_diff(w, cw, 18 * A);
        fprintf(stderr, "cross-attention weights: max |%s - cpu| %.3g\n", backend_name, d);
        assert_true(d < 1e-5);
        whisper_state_free(cs);
        whisper_model_free(cm);
        cpu->free(cpu);
        free(cw);
    }
    const int bad[1][2] = {{hp->n_text_layer, 0}};
    assert_int_equal(whisper_cross_weights(model, st1, toks, 6, bad, 1, w, &err), WGML_ERR_INVALID_ARGUMENT);
    free(w);
    free(xa);
}

/* ---- the public API: wgml_transcribe on the .bin (CPU) ---- */

typedef struct {
    int n, tokens_ok, stop_after;
    double last_end;
    int32_t toks[512];
    int n_toks;
    char text[4096];
} seg_sink;

static int on_seg(void *user, const wgml_transcript_segment *s) {
    seg_sink *k = user;
    if (s->index != k->n || s->start > s->end || s->start < k->last_end - 1e-9) k->tokens_ok = 0;
    k->last_end = s->end;
    for (int i = 0; i < s->n_tokens && k->n_toks < 512; i++) k->toks[k->n_toks++] = s->tokens[i];
    strncat(k->text, s->text, sizeof k->text - strlen(k->text) - 1);
    k->n++;
    return k->stop_after && k->n >= k->stop_after;
}

static float *jfk_audio(size_t *n) {
    npy_array a;
    assert_int_equal(npy_read(tu_shared(REF "jfk/audio.npy"), &a), 0);
    float *f = malloc((size_t)a.n * sizeof *f);
    for (int64_t i = 0; i < a.n; i++) f[i] = (float)a.v[i];
    *n = (size_t)a.n;
    npy_free(&a);
    return f;
}

typedef struct {
    wgml_model *m;
    const float *pcm;
    size_t n;
    seg_sink sink;
    wgml_status st;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    wgml_transcribe_params p = wgml_transcribe_default_params();
    p.language = "en";
    p.no_fallback = 1;
    p.condition_on_previous_text = 0;
    p.max_tokens = 48;
    wgml_error err;
    j->sink.tokens_ok = 1;
    j->st = wgml_transcribe(j->m, j->pcm, j->n, 16000, &p, on_seg, &j->sink, NULL, &err);
    return NULL;
}

static void test_api(void **state) {
    (void)state;
    if (strcmp(backend_name, "cpu")) skip(); /* the API over the model tests above: once */
    wgml_model_params mp = wgml_model_default_params();
    mp.n_threads = 2;
    wgml_model *m = NULL;
    wgml_error err;
    OK(wgml_model_load(tu_shared("whisper/whisper-micro-random.bin"), &mp, &m, &err));
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    assert_string_equal(info.family, "whisper");
    assert_true(info.tasks & WGML_TASK_TRANSCRIBE);
    assert_int_equal(info.sample_rate, 16000);
    size_t n;
    float *pcm = jfk_audio(&n);
    /* one window (11 s): its segments hold the rules list's tokens in order, the
     * timestamps included (a segment emptied by transcribe() holds none) */
    job j = {.m = m, .pcm = pcm, .n = n};
    run_job(&j);
    OK(j.st);
    assert_true(j.sink.n >= 1 && j.sink.tokens_ok);
    json_object *cases = get(manifest, "cases"), *jfk = NULL;
    for (size_t i = 0; i < json_object_array_length(cases); i++)
        if (!strcmp(json_object_get_string(get(json_object_array_get_idx(cases, i), "name")), "jfk"))
            jfk = json_object_array_get_idx(cases, i);
    assert_non_null(jfk);
    json_object *ref = get(get(json_object_array_get_idx(get(jfk, "windows"), 0), "rules"), "tokens");
    int k = 0;
    for (int i = 0; i < (int)json_object_array_length(ref) && k < j.sink.n_toks; i++)
        if (json_object_get_int(json_object_array_get_idx(ref, i)) == j.sink.toks[k]) k++;
    assert_int_equal(k, j.sink.n_toks);
    assert_true(j.sink.n_toks > 0);
    /* two requests on one model from two threads: the same segments */
    job a = {.m = m, .pcm = pcm, .n = n}, b = a;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_job, &a);
    pthread_create(&tb, NULL, run_job, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    OK(a.st);
    OK(b.st);
    assert_int_equal(a.sink.n_toks, j.sink.n_toks);
    assert_memory_equal(a.sink.toks, j.sink.toks, (size_t)j.sink.n_toks * sizeof(int32_t));
    assert_memory_equal(b.sink.toks, j.sink.toks, (size_t)j.sink.n_toks * sizeof(int32_t));
    assert_string_equal(a.sink.text, j.sink.text);
    /* the language detected: one the model knows */
    wgml_transcribe_params p = wgml_transcribe_default_params();
    p.no_fallback = 1;
    p.max_tokens = 8;
    wgml_transcribe_result res;
    seg_sink sink = {.tokens_ok = 1, .stop_after = 1};
    OK(wgml_transcribe(m, pcm, n, 16000, &p, on_seg, &sink, &res, &err));
    assert_true(whisper_lang_token(&model->sp, res.language) >= 0);
    assert_int_equal(sink.n, 1); /* stopped after the first segment */
    /* other rates are resampled; nothing is an empty transcript */
    OK(wgml_transcribe(m, pcm, n / 2, 8000, &p, NULL, NULL, &res, &err));
    assert_true(fabs(res.duration - (double)(n / 2) / 8000) < 1e-9);
    OK(wgml_transcribe(m, pcm, 0, 16000, &p, NULL, NULL, &res, &err));
    assert_int_equal(res.n_segments, 0);
    /* bad input: clear errors */
    assert_int_equal(wgml_transcribe(m, pcm, n, 0, &p, NULL, NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    float bad[4] = {0, NAN, 0, 0};
    assert_int_equal(wgml_transcribe(m, bad, 4, 16000, &p, NULL, NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "not a finite"));
    p.language = "xx";
    assert_int_equal(wgml_transcribe(m, pcm, n, 16000, &p, NULL, NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    p.language = "en";
    p.beam_size = 99;
    assert_int_equal(wgml_transcribe(m, pcm, n, 16000, &p, NULL, NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    /* the fallback's compression ratio: zlib's, as Python's zlib.compress gives it */
    const char *plain_text = "And so, my fellow Americans, ask not what your country can do for you.";
    const char *loop = " Shar Shar Shar Shar Shar Shar Shar Shar Shar Shar Shar Shar Shar Shar";
    assert_true(fabs(whisper_compression_ratio(plain_text, strlen(plain_text)) - 70.0 / 71.0) < 1e-12);
    assert_true(fabs(whisper_compression_ratio(loop, strlen(loop)) - 70.0 / 16.0) < 1e-12);
    assert_true(whisper_compression_ratio("", 0) == 0.0);
    /* beam search runs (5 hypotheses) and its best list is a finished transcript */
    p.beam_size = 5;
    p.max_tokens = 24;
    seg_sink bs = {.tokens_ok = 1};
    OK(wgml_transcribe(m, pcm, n, 16000, &p, on_seg, &bs, &res, &err));
    assert_true(bs.tokens_ok);
    free(pcm);
    wgml_model_free(m);
}

/* ---- word timestamps through the public API (CPU) ---- */

typedef struct {
    seg_sink s;
    int n_words, ok, whole; /* whole: segments whose words joined are their text */
    int seek;               /* the last segment's window */
    double last_start;
    char words[4096];
} word_sink;

static int centi(double t) { return fabs(t * 100 - nearbyint(t * 100)) < 1e-6; } /* round(t, 2) */

static int on_word_seg(void *user, const wgml_transcript_segment *s) {
    word_sink *k = user;
    on_seg(&k->s, s);
    if (s->seek < k->seek || s->seek < 0) k->ok = 0;
    k->seek = s->seek;
    if ((s->n_words > 0) != (s->words != NULL)) k->ok = 0;
    for (int i = 0; i < s->n_words; i++) {
        const wgml_transcript_word *w = &s->words[i];
        if (!w->text || w->start > w->end || w->start < k->last_start || !centi(w->start) || !centi(w->end) ||
            !(w->probability > 0 && w->probability <= 1))
            k->ok = 0;
        k->last_start = w->start;
        strncat(k->words, w->text, sizeof k->words - strlen(k->words) - 1);
        k->n_words++;
    }
    char joined[4096] = "";
    for (int i = 0; i < s->n_words; i++) strncat(joined, s->words[i].text, sizeof joined - strlen(joined) - 1);
    k->whole += s->n_words > 0 && !strcmp(joined, s->text);
    return 0;
}

static float *case_audio(const char *name, size_t *n) {
    char path[256];
    snprintf(path, sizeof path, REF "%s/audio.npy", name);
    npy_array a;
    assert_int_equal(npy_read(tu_shared(path), &a), 0);
    float *f = malloc((size_t)a.n * sizeof *f);
    for (int64_t i = 0; i < a.n; i++) f[i] = (float)a.v[i];
    *n = (size_t)a.n;
    npy_free(&a);
    return f;
}

/* Words come in order, at the official precision, and their texts are their
 * segments' (but where a word runs into the next segment: random weights
 * make such words; a segment then takes words by their count of tokens, as
 * the official code does); they do not change what a window decodes (jfk:
 * one window), and long audio seeks by them (long). */
static void test_words(void **state) {
    (void)state;
    if (!have_backend || strcmp(backend_name, "cpu")) skip();
    wgml_model *m = NULL;
    wgml_error err;
    wgml_model_params mp = wgml_model_default_params();
    mp.n_threads = 2;
    OK(wgml_model_load(tu_shared("whisper/whisper-micro-random.bin"), &mp, &m, &err));
    wgml_transcribe_params p = wgml_transcribe_default_params();
    p.language = "en";
    p.no_fallback = 1;
    p.max_tokens = 32;
    const char *cases[] = {"jfk", "long"};
    for (int c = 0; c < 2; c++) {
        size_t n;
        float *pcm = case_audio(cases[c], &n);
        word_sink plain = {.s = {.tokens_ok = 1}, .ok = 1}, words = plain;
        p.word_timestamps = 0;
        OK(wgml_transcribe(m, pcm, n, 16000, &p, on_word_seg, &plain, NULL, &err));
        p.word_timestamps = 1;
        OK(wgml_transcribe(m, pcm, n, 16000, &p, on_word_seg, &words, NULL, &err));
        fprintf(stderr, "%s: %d segments, %d words: %.60s\n", cases[c], words.s.n, words.n_words, words.words);
        assert_int_equal(plain.n_words, 0);
        assert_true(words.ok && words.n_words > 0 && words.whole > 0);
        assert_true(plain.ok && (c == 0 || (words.seek > 0 && plain.seek > 0))); /* long: 3327 frames, 2 windows at least */
        if (c == 0) { /* one window: the same tokens and text */
            assert_int_equal(words.s.n_toks, plain.s.n_toks);
            assert_memory_equal(words.s.toks, plain.s.toks, (size_t)plain.s.n_toks * sizeof(int32_t));
            assert_string_equal(words.s.text, plain.s.text);
        }
        free(pcm);
    }
    wgml_model_free(m);
}

int main(int argc, char **argv) {
    if (argc > 1) backend_name = argv[1];
    if (argc > 3 && sscanf(argv[3], "%d-%d", &win_lo, &win_hi) != 2) {
        fprintf(stderr, "usage: test_whisper [cpu|swiftshader|lavapipe [TEST[,TEST...] [LO-HI]]]\n");
        return 2;
    }
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_encoder),       cmocka_unit_test(test_decoder), cmocka_unit_test(test_sequences),
        cmocka_unit_test(test_rules),         cmocka_unit_test(test_cross_weights), cmocka_unit_test(test_api),
        cmocka_unit_test(test_words),         cmocka_unit_test(test_kv_f16),
    };
    /* argument 2: the tests to run, by name, comma-separated ("": all): a ctest part each */
    struct CMUnitTest tests[sizeof all / sizeof *all];
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        const char *want = argc > 2 ? argv[2] : "", *name = all[i].name;
        int take = !*want;
        for (const char *p = want; *p && !take;) {
            size_t len = strcspn(p, ",");
            take = strlen(name) == len && !strncmp(p, name, len);
            p += len + (p[len] == ',');
        }
        if (take) tests[n++] = all[i];
    }
    if (!n) {
        fprintf(stderr, "test_whisper: no test named '%s'\n", argv[2]);
        return 2;
    }
    return _cmocka_run_group_tests("test_whisper", tests, n, setup, teardown);
}
