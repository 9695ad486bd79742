/*
 * test_kokoro.c - Kokoro against the official code's tensors
 * (../shared/kokoro/reference/kokoro-tiny, README "Numerics"): the tiny
 * checkpoint converted in memory from its .pth with its config.json, run on
 * one backend (the argument: cpu (default), swiftshader, lavapipe or
 * lavapipe-f32; a missing adapter skips, or fails where
 * WGML_REQUIRE_ADAPTERS names it), every reference case:
 *   - text and prosody tensors within 1e-4 of max|ref|, pred_dur exact;
 *   - the decoder and generator fed the reference asr, F0_pred, N_pred and
 *     style with the case's kit noise: dec_* within 1e-4, the harmonic
 *     source within 1e-5, audio_kit within 1e-4 of its peak;
 *   - end to end (our own F0): audio near audio_kit (SNR > 15 dB: the README
 *     explains why no closer);
 *   - the checkpoint converted to Q8_0, whose decoder convolutions of a
 *     concatenation (66 and 114 channels) have their taps padded with zeros
 *     to whole blocks: the decoder's activations near the reference on each
 *     part's first case.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "format/gguf.h"
#include "model/kokoro/kokoro_model.h"
#include "model/kokoro/voice.h"
#include "wgml.h"
#include "npy.h"
#include "testutil.h"
#include "text/g2p.h"

static const char *cases[] = {"hello_af_heart_s1.0", "hello_am_adam_s1.0",  "punct_af_heart_s1.0",
                              "punct_am_adam_s1.0",  "sentence20_af_heart_s1.0", "sentence20_af_heart_s1.3",
                              "sentence20_am_adam_s1.0", "word_af_heart_s1.0", "word_am_adam_s1.0"};

static wgml_backend *be, *cpu_be;
static kokoro_model *model, *cpu_model; /* cpu_*: the CPU's, beside a GPU backend's */
static kokoro_model *q8_model;          /* the Q8_0 conversion's, on the backend */
static kokoro_state *ks, *cpu_ks, *q8_ks; /* a request's state on each */
static void *gguf_mem, *q8_mem;
static gguf_file *gf, *q8_gf;
static kokoro_config tiny_cfg; /* config-kokoro-tiny.json, read by setup */
static const char *backend_name = "cpu";
static size_t case_lo = 0, case_hi = 100; /* the cases run: [lo, hi] of the list (argument 3: "lo-hi") */
static int have_backend; /* 0: the adapter is missing, every test skips */

/* The backend the argument names (NULL with a note when its adapter is missing). */
static wgml_status create_backend(wgml_error *err) {
    if (!strcmp(backend_name, "cpu")) return wgml_backend_cpu_create(2, &be, err);
    const int f32 = !strcmp(backend_name, "lavapipe-f32");
    const char *adapter = !strcmp(backend_name, "swiftshader") ? "swiftshader"
                          : (f32 || !strcmp(backend_name, "lavapipe")) ? "llvmpipe"
                                                                       : NULL;
    if (!adapter) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown backend '%s'", backend_name);
    if (!tu_adapter_present(adapter)) {
        const char *req = getenv("WGML_REQUIRE_ADAPTERS");
        if (req && strstr(req, adapter))
            return wgml_fail(err, WGML_ERR_NO_ADAPTER, "adapter '%s' is required but not found", adapter);
        fprintf(stderr, "skipping %s: adapter not found\n", backend_name);
        return WGML_OK;
    }
    wgml_webgpu_options o = {.adapter = adapter, .allow_software = 1, .force_f32 = f32, .no_subgroups = f32};
    return wgml_backend_webgpu_create(&o, &be, err);
}

static int setup(void **state) {
    (void)state;
    if (!tu_shared_present()) return 0;
    wgml_error err;
    char *json = NULL;
    size_t len = 0;
    FILE *fp = fopen(tu_shared("kokoro/config-kokoro-tiny.json"), "rb");
    if (!fp) return -1;
    json = malloc(1 << 16);
    len = fread(json, 1, (1 << 16) - 1, fp);
    fclose(fp);
    wgml_status st = kokoro_config_parse(json, len, &tiny_cfg, &err);
    free(json);
    if (st) {
        fprintf(stderr, "config: %s\n", err.message);
        return -1;
    }
    char pth[4096];
    snprintf(pth, sizeof pth, "%s", tu_shared("kokoro/kokoro-tiny.pth"));
    kokoro_convert_options opt = {.config = &tiny_cfg, .type = WGML_F32}, opt_q8 = opt;
    opt_q8.type = WGML_Q8_0;
    size_t size = 0, q8_size = 0;
    if ((st = kokoro_convert(pth, &opt, NULL, &gguf_mem, &size, &err)) ||
        (st = gguf_open_memory(gguf_mem, size, "kokoro-tiny.gguf", &gf, &err)) ||
        (st = kokoro_convert(pth, &opt_q8, NULL, &q8_mem, &q8_size, &err)) ||
        (st = gguf_open_memory(q8_mem, q8_size, "kokoro-tiny-q8_0.gguf", &q8_gf, &err)) ||
        (st = create_backend(&err)) || (be && (st = kokoro_model_load(gf, be, NULL, &model, &err))) ||
        (be && (st = kokoro_model_load(q8_gf, be, NULL, &q8_model, &err))) ||
        (be && (st = kokoro_state_create(model, &ks, &err))) ||
        (be && (st = kokoro_state_create(q8_model, &q8_ks, &err)))) {
        fprintf(stderr, "kokoro: %s\n", err.message);
        return -1;
    }
    have_backend = be != NULL;
    if (be && strcmp(be->name, "cpu") &&
        ((st = wgml_backend_cpu_create(2, &cpu_be, &err)) || (st = kokoro_model_load(gf, cpu_be, NULL, &cpu_model, &err)) ||
         (st = kokoro_state_create(cpu_model, &cpu_ks, &err)))) {
        fprintf(stderr, "kokoro on the CPU: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kokoro_state_free(ks);
    kokoro_state_free(cpu_ks);
    kokoro_state_free(q8_ks);
    kokoro_model_free(model);
    kokoro_model_free(cpu_model);
    kokoro_model_free(q8_model);
    if (be) be->free(be);
    if (cpu_be) cpu_be->free(cpu_be);
    gguf_close(gf);
    gguf_close(q8_gf);
    free(gguf_mem);
    free(q8_mem);
    return 0;
}

static npy_array ref(const char *c, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "kokoro/reference/kokoro-tiny/%s/%s.npy", c, name);
    npy_array a;
    if (npy_read(tu_shared(rel), &a)) fail_msg("cannot read %s", rel);
    return a;
}

static int has_ref(const char *c, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "kokoro/reference/kokoro-tiny/%s/%s.npy", c, name);
    FILE *fp = fopen(tu_shared(rel), "rb");
    if (fp) fclose(fp);
    return fp != NULL;
}

/* max |ours - ref| / max |ref| (infinite where ours is not finite: fmax
 * passes over NaN), ours (model km's) [rows][cols] (time-major), the reference
 * [1][rows][>= cols] (its first cols columns) or [1][cols][rows] (channels first). */
static double compare_act_of(const kokoro_state *km, const char *c, const char *name, const char *act) {
    const wgml_tensor *t = kokoro_act(km, act ? act : name);
    if (!t) fail_msg("no activation %s", act ? act : name);
    const int64_t cols = t->ne[0], rows = t->ne[1];
    float *v = malloc((size_t)(cols * rows) * 4);
    wgml_error err;
    assert_int_equal(be->buffer_read(be, t->buf, t->offset, v, (size_t)(cols * rows) * 4, &err), WGML_OK);
    npy_array a = ref(c, name);
    const int64_t d1 = a.shape[a.ndim - 2 >= 0 ? a.ndim - 2 : 0], d2 = a.shape[a.ndim - 1];
    int transposed = 0; /* the reference channels first; it may hold more channels (d: x then style) */
    int64_t stride = cols;
    if (a.ndim >= 2 && d1 == rows && d2 >= cols) stride = d2;
    else if (a.ndim >= 2 && d2 == rows && d1 >= cols) transposed = 1;
    else if (a.n != rows * cols) fail_msg("%s %s: shape mismatch (ours %lld x %lld)", c, name, (long long)rows, (long long)cols);
    double mx = 0, e = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++) {
            double rv = transposed ? a.v[k * rows + r] : a.v[r * stride + k];
            mx = fmax(mx, fabs(rv));
            e = isfinite(v[r * cols + k]) ? fmax(e, fabs(v[r * cols + k] - rv)) : INFINITY;
        }
    npy_free(&a);
    free(v);
    return e / (mx > 0 ? mx : 1);
}

static double compare_act(const char *c, const char *name, const char *act) {
    return compare_act_of(ks, c, name, act);
}

static void expect(const char *c, const char *name, const char *act, double tol) {
    double e = compare_act(c, name, act);
    if (e > tol) fprintf(stderr, "%s: %s off by %.3g of its peak (tolerance %g)\n", c, name, e, tol);
    assert_true(e <= tol);
}

static uint64_t kit_seed(const char *c) {
    char rel[256];
    snprintf(rel, sizeof rel, "kokoro/reference/kokoro-tiny/manifest.json");
    FILE *fp = fopen(tu_shared(rel), "rb");
    assert_non_null(fp);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    char key[128];
    snprintf(key, sizeof key, "\"%s\"", c);
    const char *p = strstr(buf, "\"cases\"");
    assert_non_null(p);
    p = strstr(p, key);
    assert_non_null(p);
    p = strstr(p, "\"kit_noise_seed\"");
    assert_non_null(p);
    return strtoull(strchr(p, ':') + 1, NULL, 10);
}

/* One utterance of case c on state st, at speed 1 with seed 1: its text
 * step, then its audio (into *audio, malloc'ed) or, audio NULL, the prosody
 * alone; returns its frames. */
static int64_t utter(kokoro_state *st, const char *c, float **audio) {
    npy_array ids = ref(c, "input_ids"), rs = ref(c, "ref_s");
    const int T = (int)ids.n;
    int32_t id[KOKORO_MAX_PHONEMES + 2], dur[KOKORO_MAX_PHONEMES + 2];
    float style[256];
    assert_true(T <= KOKORO_MAX_PHONEMES + 2);
    for (int i = 0; i < T; i++) id[i] = (int32_t)ids.v[i];
    for (int i = 0; i < 256; i++) style[i] = (float)rs.v[i];
    wgml_error err;
    if (kokoro_text(st, id, T, style, 1.0f, dur, &err)) fail_msg("%s: %s", c, err.message);
    int64_t F = 0;
    for (int i = 0; i < T; i++) F += dur[i];
    if (audio) *audio = malloc((size_t)kokoro_audio_len(kokoro_state_model(st), F) * 4);
    if (kokoro_audio(st, dur, T, 1, audio ? *audio : NULL, &err)) fail_msg("%s: %s", c, err.message);
    npy_free(&ids), npy_free(&rs);
    return F;
}

/* A state's activations live in one arena, grown only between steps
 * (kokoro.c): after a first utterance, the same utterance again, a shorter
 * one and the prosody alone make no buffer, and the same utterance gives the
 * same audio (nothing of a step depends on what the arena held before). */
static void check_arena(void) {
    kokoro_state *st;
    wgml_error err;
    assert_int_equal(kokoro_state_create(model, &st, &err), WGML_OK);
    wgml_backend_stats s0, s1, s2;
    be->get_stats(be, &s0);
    float *a1, *a2, *a3;
    const int64_t F1 = utter(st, "hello_af_heart_s1.0", &a1);
    be->get_stats(be, &s1);
    const int64_t F2 = utter(st, "hello_af_heart_s1.0", &a2);
    const int64_t F3 = utter(st, "word_af_heart_s1.0", &a3);
    utter(st, "hello_af_heart_s1.0", NULL);
    be->get_stats(be, &s2);
    fprintf(stderr, "arena: the first utterance (%lld frames) made %llu buffers (%.2f MiB), then %llu more for "
                    "%lld, %lld frames and the prosody alone\n",
            (long long)F1, (unsigned long long)(s1.buffers_created - s0.buffers_created),
            (double)(s1.device_memory_bytes - s0.device_memory_bytes) / (1 << 20),
            (unsigned long long)(s2.buffers_created - s1.buffers_created), (long long)F2, (long long)F3);
    assert_true(F2 == F1 && F3 < F1);
    assert_int_equal(s2.buffers_created, s1.buffers_created);
    assert_true(s1.buffers_created - s0.buffers_created <= 16); /* a few chunks, not one per activation */
    assert_memory_equal(a1, a2, (size_t)kokoro_audio_len(model, F1) * 4);
    free(a1), free(a2), free(a3);
    kokoro_state_free(st);
}

/* Text and prosody: step 1 and step 2 against the float32 official tensors. */
static void test_text_and_prosody(void **state) {
    (void)state;
    if (!tu_shared_present() || !have_backend) skip();
    for (size_t ci = case_lo; ci < sizeof cases / sizeof cases[0] && ci <= case_hi; ci++) {
        const char *c = cases[ci];
        npy_array ids = ref(c, "input_ids"), rs = ref(c, "ref_s"), pd = ref(c, "pred_dur");
        const int T = (int)ids.n;
        int32_t *id = malloc((size_t)T * 4), *dur = malloc((size_t)T * 4);
        float style[256];
        for (int i = 0; i < T; i++) id[i] = (int32_t)ids.v[i];
        for (int i = 0; i < 256; i++) style[i] = (float)rs.v[i];
        const double speed = strstr(c, "s1.3") ? 1.3 : 1.0;
        wgml_error err;
        wgml_backend_stats s0, s1;
        be->get_stats(be, &s0);
        wgml_status st = kokoro_text(ks, id, T, style, (float)speed, dur, &err);
        if (st) fail_msg("%s: %s", c, err.message);
        /* each step is one step of the backend that reads back only the duration logits, then the audio */
        be->get_stats(be, &s1);
        const kokoro_hparams *hp = kokoro_model_hparams(model);
        assert_int_equal(s1.steps - s0.steps, 1);
        assert_int_equal(s1.readback_bytes - s0.readback_bytes, (uint64_t)T * hp->max_dur * 4);
        if (strcmp(be->name, "cpu")) assert_true(s1.submits - s0.submits <= 2);
        for (int i = 0; i < T; i++) {
            if (dur[i] != (int32_t)pd.v[i]) fprintf(stderr, "%s: token %d: %d frames, reference %d\n", c, i, dur[i], (int)pd.v[i]);
            assert_int_equal(dur[i], (int32_t)pd.v[i]);
        }
        expect(c, "bert_dur", NULL, 1e-4);
        expect(c, "d_en", NULL, 1e-4);
        expect(c, "dur_lstm", NULL, 1e-4);
        expect(c, "dur_logits", NULL, 1e-4);
        expect(c, "d", "dur_enc_adanorm_2", 1e-4);
        expect(c, "t_en", NULL, 1e-4);
        if (has_ref(c, "te_cnn_0")) {
            expect(c, "dur_enc_lstm_0", NULL, 1e-4);
            expect(c, "dur_enc_adanorm_0", NULL, 1e-4);
            expect(c, "te_cnn_0", NULL, 1e-4);
        }
        int64_t F = 0;
        for (int i = 0; i < T; i++) F += dur[i];
        /* the audio end to end on the CPU in every case, on a GPU in one (the
         * decoder test runs the generator on every case); else the prosody alone */
        const int whole = !strcmp(be->name, "cpu") || ci == 0;
        float *audio = whole ? malloc((size_t)kokoro_audio_len(model, F) * 4) : NULL;
        be->get_stats(be, &s0);
        st = kokoro_audio(ks, dur, T, kit_seed(c), audio, &err);
        if (st) fail_msg("%s: %s", c, err.message);
        be->get_stats(be, &s1);
        assert_int_equal(s1.steps - s0.steps, 1);
        assert_int_equal(s1.readback_bytes - s0.readback_bytes, whole ? (uint64_t)kokoro_audio_len(model, F) * 4 : 0);
        if (strcmp(be->name, "cpu")) assert_true(s1.submits - s0.submits <= 2);
        expect(c, "en", NULL, 1e-4);
        expect(c, "asr", NULL, 1e-4);
        expect(c, "F0_pred", NULL, 1e-4);
        expect(c, "N_pred", NULL, 1e-4);
        if (has_ref(c, "F0_block_0")) {
            expect(c, "shared_lstm", NULL, 1e-4);
            expect(c, "F0_block_0", NULL, 1e-4);
            expect(c, "F0_block_1", NULL, 1e-4);
            expect(c, "N_block_2", NULL, 1e-4);
        }
        if (!audio) {
            free(id), free(dur);
            npy_free(&ids), npy_free(&rs), npy_free(&pd);
            continue;
        }
        /* end to end: our own F0 (README: branch-cut flips keep this near 24-33 dB) */
        npy_array ak = ref(c, "audio_kit");
        double num = 0, den = 0;
        for (int64_t i = 0; i < ak.n; i++) {
            num += ak.v[i] * ak.v[i];
            den += (audio[i] - ak.v[i]) * (audio[i] - ak.v[i]);
        }
        double snr = 10 * log10(num / (den > 0 ? den : 1e-30));
        fprintf(stderr, "%s: end to end %.1f dB SNR against audio_kit\n", c, snr);
        assert_true(snr > 15);
        npy_free(&ak);
        free(audio), free(id), free(dur);
        npy_free(&ids), npy_free(&rs), npy_free(&pd);
    }
    check_arena();
}

/* The Q8_0 conversion on case c's decoder inputs: the decoder's convolutions
 * of a concatenation stored in Q8_0 with their taps padded to whole blocks,
 * and the decoder's activations near the reference (Q8_0's rounding). */
static void check_q8(const char *c, const float *asr, const float *f0, const float *n, int F, const float *style) {
    const kokoro_hparams *hp = kokoro_model_hparams(q8_model);
    const int64_t enc = hp->hidden + 2, dec = hp->dec_dim + hp->asr_res_dim + 2;
    const struct {
        const char *name;
        int64_t K, C;
    } padded[] = {{"decoder.encode.conv1.weight", 3, enc},
                  {"decoder.encode.conv1x1.weight", 1, enc},
                  {"decoder.decode.0.conv1.weight", 3, dec},
                  {"decoder.decode.3.conv1x1.weight", 1, dec}};
    for (size_t i = 0; i < sizeof padded / sizeof padded[0]; i++) {
        const gguf_tensor *t = gguf_find_tensor(q8_gf, padded[i].name);
        assert_non_null(t);
        assert_int_equal(t->type, WGML_Q8_0);
        assert_true(padded[i].C % 32 != 0); /* kokoro-tiny's widths need the padding */
        assert_int_equal(t->ne[0], padded[i].K * ((padded[i].C + 31) / 32 * 32));
    }
    float *audio = malloc((size_t)kokoro_audio_len(q8_model, F) * 4);
    wgml_error err;
    if (kokoro_decode(q8_ks, asr, f0, n, F, style, kit_seed(c), audio, &err)) fail_msg("%s: %s", c, err.message);
    /* again, over unfoldings ("~col": one scratch buffer) left NaN: the padding's channels are written zeros */
    for (int i = 0; i < kokoro_act_count(q8_ks); i++) {
        const wgml_tensor *t = kokoro_act_at(q8_ks, i);
        if (strcmp(t->name, "~col")) continue;
        const size_t nb = wgml_tensor_nbytes(t);
        float *nan = malloc(nb);
        for (size_t j = 0; j < nb / 4; j++) nan[j] = NAN;
        assert_int_equal(be->buffer_write(be, t->buf, t->offset, nan, nb, &err), WGML_OK);
        free(nan);
    }
    if (kokoro_decode(q8_ks, asr, f0, n, F, style, kit_seed(c), audio, &err)) fail_msg("%s: %s", c, err.message);
    static const char *acts[] = {"dec_encode", "dec_decode_0", "dec_decode_1", "dec_decode_2", "dec_decode_3"};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        /* the weights rounded to 8 bits; the activations f32 on every backend (f32_act) */
        const double e = compare_act_of(q8_ks, c, acts[i], NULL), tol = 1e-2;
        fprintf(stderr, "%s: Q8_0 %s within %.3g of its peak\n", c, acts[i], e);
        assert_true(e <= tol);
    }
    free(audio);
}

/* The decoder and generator on the reference inputs. */
static void test_decoder(void **state) {
    (void)state;
    int q8_checked = 0;
    if (!tu_shared_present() || !have_backend) skip();
    for (size_t ci = case_lo; ci < sizeof cases / sizeof cases[0] && ci <= case_hi; ci++) {
        const char *c = cases[ci];
        npy_array asr = ref(c, "asr"), f0 = ref(c, "F0_pred"), nn = ref(c, "N_pred"), rs = ref(c, "ref_s");
        const int D = (int)asr.shape[1], F = (int)asr.shape[2];
        float *a = malloc((size_t)D * F * 4), *fv = malloc((size_t)F * 8), *nv = malloc((size_t)F * 8), style[128];
        for (int t = 0; t < F; t++)
            for (int k = 0; k < D; k++) a[t * D + k] = (float)asr.v[k * F + t]; /* to time-major */
        for (int i = 0; i < 2 * F; i++) fv[i] = (float)f0.v[i], nv[i] = (float)nn.v[i];
        for (int i = 0; i < 128; i++) style[i] = (float)rs.v[i];
        float *audio = malloc((size_t)kokoro_audio_len(model, F) * 4);
        wgml_error err;
        wgml_status st = kokoro_decode(ks, a, fv, nv, F, style, kit_seed(c), audio, &err);
        if (st) fail_msg("%s: %s", c, err.message);
        if (has_ref(c, "dec_encode")) {
            expect(c, "dec_F0_conv", NULL, 1e-4);
            expect(c, "dec_encode", NULL, 1e-4);
            expect(c, "dec_asr_res", NULL, 1e-4);
            expect(c, "dec_decode_0", NULL, 1e-4);
            expect(c, "dec_decode_3", NULL, 1e-4);
            expect(c, "gen_har_source_kit", "gen_har_source", 1e-5);
            if (!q8_checked) check_q8(c, a, fv, nv, F, style); /* once: the first case of those with dec_* */
            q8_checked = 1;
        }
        npy_array ak = ref(c, "audio_kit");
        double mx = 0, e = 0, num = 0, den = 0;
        for (int64_t i = 0; i < ak.n; i++) {
            mx = fmax(mx, fabs(ak.v[i]));
            e = fmax(e, fabs(audio[i] - ak.v[i]));
            num += ak.v[i] * ak.v[i];
            den += (audio[i] - ak.v[i]) * (audio[i] - ak.v[i]);
        }
        fprintf(stderr, "%s: decoder audio within %.3g of the peak\n", c, e / mx);
        if (e > 1e-4 * mx && cpu_model) {
            /* The generator feeds STFT phases to convolutions: a bin whose
             * imaginary part is below float32's rounding of its sum (|im| ~
             * 1e-7) has a phase of +pi or -pi by chance, and a flip changes the
             * audio around it (README "Numerics"). The CPU (double sums) lands
             * on the reference's side; the GPU (float32 sums) may not. Allowed
             * only where every phase that differs from the CPU's by more than
             * pi is such a bin, the rest of the spectrum agrees, and the audio
             * stays near the reference as end to end. */
            float *a2 = malloc((size_t)kokoro_audio_len(model, F) * 4);
            assert_int_equal(kokoro_decode(cpu_ks, a, fv, nv, F, style, kit_seed(c), a2, &err), WGML_OK);
            const wgml_tensor *hg = kokoro_act(ks, "gen_har"), *hc = kokoro_act(cpu_ks, "gen_har");
            const int64_t n = hg->ne[0] * hg->ne[1], B = hg->ne[0] / 2;
            float *g = malloc((size_t)n * 4), *h = malloc((size_t)n * 4);
            assert_int_equal(be->buffer_read(be, hg->buf, hg->offset, g, (size_t)n * 4, &err), WGML_OK);
            assert_int_equal(cpu_be->buffer_read(cpu_be, hc->buf, hc->offset, h, (size_t)n * 4, &err), WGML_OK);
            int flips = 0;
            double worst_im = 0, other = 0;
            for (int64_t i = 0; i < n; i++) {
                const int64_t k = i % (2 * B);
                if (k < B) continue;
                const double d = fabs(g[i] - h[i]), im = fabs(h[i - B] * sin(h[i]));
                if (d > M_PI) flips++, worst_im = fmax(worst_im, im);
                else if (h[i - B] > 1e-3) other = fmax(other, d);
            }
            const double snr = 10 * log10(num / (den > 0 ? den : 1e-30));
            fprintf(stderr, "%s: %d STFT phases flipped across the branch cut (|im| <= %.3g), others within %.3g rad; "
                            "%.1f dB SNR against audio_kit\n", c, flips, worst_im, other, snr);
            assert_true(flips > 0 && worst_im < 2e-6 && other < 1e-3 && snr > 15);
            free(a2), free(g), free(h);
        } else {
            assert_true(e <= 1e-4 * mx);
        }
        npy_free(&ak);
        free(a), free(fv), free(nv), free(audio);
        npy_free(&asr), npy_free(&f0), npy_free(&nn), npy_free(&rs);
    }
}

/* The manifest's string `key` of case c (a JSON string without escapes but \" and \\). */
static char *manifest_str(const char *c, const char *key) {
    FILE *fp = fopen(tu_shared("kokoro/reference/kokoro-tiny/manifest.json"), "rb");
    assert_non_null(fp);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    char k[128];
    snprintf(k, sizeof k, "\"%s\"", c);
    const char *p = strstr(strstr(buf, "\"cases\""), k);
    assert_non_null(p);
    snprintf(k, sizeof k, "\"%s\": \"", key);
    p = strstr(p, k);
    assert_non_null(p);
    p += strlen(k);
    char *out = malloc(4096), *o = out;
    while (*p && *p != '"') {
        if (*p == '\\') p++;
        *o++ = *p++;
    }
    *o = 0;
    return out;
}

typedef struct {
    float *audio;
    int64_t n;
    int chunks, words;
    double last_end;
    char list[1024]; /* "word@offset|" for each word */
} speech;

static int collect(void *user, const wgml_audio_chunk *c) {
    speech *s = user;
    s->audio = realloc(s->audio, (size_t)(s->n + c->n_samples) * 4);
    memcpy(s->audio + s->n, c->samples, (size_t)c->n_samples * 4);
    assert_true(fabs(c->start - (double)s->n / c->sample_rate) < 1e-9);
    s->n += c->n_samples;
    for (int i = 0; i < c->n_words; i++) { /* in order, inside the chunk */
        assert_true(c->words[i].start >= s->last_end - 1e-9 && c->words[i].end > c->words[i].start);
        assert_true(c->words[i].end <= (double)s->n / c->sample_rate + 1e-9);
        assert_true(c->words[i].start >= c->start - 1e-9); /* a chunk's own words */
        assert_true(c->words[i].length == (int64_t)strlen(c->words[i].word) && c->words[i].phonemes[0]);
        s->last_end = c->words[i].end;
        size_t at = strlen(s->list);
        snprintf(s->list + at, sizeof s->list - at, "%s@%lld|", c->words[i].word, (long long)c->words[i].offset);
    }
    s->words += c->n_words;
    s->chunks++;
    return 0;
}

/* The public API on the GGUF with its voices (wgml_speak): the voice row the
 * official pipeline takes, one chunk for one sentence with the case's audio,
 * word times, pieces cut at sentences and within 510 phonemes. */
static void test_speak(void **state) {
    (void)state;
    if (!tu_shared_present() || !have_backend || strcmp(be->name, "cpu")) skip();
    wgml_error err;
    char v1[4096], v2[4096], v3[4096];
    snprintf(v1, sizeof v1, "%s", tu_shared("kokoro/voices/af_heart.bin"));
    snprintf(v2, sizeof v2, "%s", tu_shared("kokoro/voices/am_adam.bin"));
    snprintf(v3, sizeof v3, "%s", tu_shared("kokoro/voices/bf_emma.bin"));
    const char *voices[3] = {v1, v2, v3};
    kokoro_convert_options opt = {.config = &tiny_cfg, .type = WGML_F32, .voices = voices, .n_voices = 3};
    void *mem;
    size_t size;
    char pth[4096];
    snprintf(pth, sizeof pth, "%s", tu_shared("kokoro/kokoro-tiny.pth"));
    assert_int_equal(kokoro_convert(pth, &opt, NULL, &mem, &size, &err), WGML_OK);
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.n_threads = 2;
    wgml_model *m;
    if (wgml_model_load_memory(mem, size, &mp, &m, &err)) fail_msg("%s", err.message);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    assert_string_equal(info.family, "kokoro");
    assert_int_equal(info.tasks, WGML_TASK_SPEECH);
    assert_int_equal(info.sample_rate, 24000);
    assert_int_equal(info.n_voices, 3);
    assert_string_equal(wgml_speech_voice(m, 1), "am_adam");
    assert_null(wgml_speech_voice(m, 3));
    int32_t tok[4];
    assert_true(wgml_tokenize(m, "a", 1, 0, tok, 4, &err) < 0); /* no text tokenizer */

    /* the voice row of each case, from the GGUF and from the file */
    const char *c = "sentence20_af_heart_s1.0";
    char *ph = manifest_str(c, "phonemes");
    npy_array rs = ref(c, "ref_s");
    kokoro_model *km;
    gguf_file *g;
    assert_int_equal(gguf_open_memory(mem, size, "k.gguf", &g, &err), WGML_OK);
    assert_int_equal(kokoro_model_load(g, be, NULL, &km, &err), WGML_OK);
    int cps = 0;
    for (const char *q = ph; *q; q++) cps += ((unsigned char)*q >> 6) != 2;
    float st_g[256], st_f[256], st_b[256];
    assert_int_equal(kokoro_style(km, "af_heart", cps, st_g, &err), WGML_OK);
    assert_int_equal(kokoro_style(km, v1, cps, st_f, &err), WGML_OK);
    for (int i = 0; i < 256; i++) {
        assert_true(st_g[i] == (float)rs.v[i]);
        assert_true(st_f[i] == st_g[i]);
    }
    assert_int_equal(kokoro_style(km, "af_heart:3,af_heart:1", cps, st_b, &err), WGML_OK);
    for (int i = 0; i < 256; i++) assert_true(fabs(st_b[i] - st_g[i]) <= 1e-6 * fabs(st_g[i]) + 1e-7);
    assert_int_equal(kokoro_style(km, "nobody", cps, st_b, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "af_heart, am_adam, bf_emma"));

    /* one sentence: one chunk, the case's audio from its seed */
    wgml_speak_params sp = wgml_speak_default_params();
    sp.phonemes = 1;
    sp.seed = kit_seed(c);
    speech s = {0};
    wgml_speak_result res;
    if (wgml_speak(m, ph, "af_heart", &sp, collect, &s, &res, &err)) fail_msg("%s", err.message);
    npy_array ak = ref(c, "audio_kit");
    assert_int_equal(s.chunks, 1);
    assert_int_equal(res.n_chunks, 1);
    assert_int_equal(s.n, ak.n);
    assert_int_equal(res.n_samples, ak.n);
    assert_true(res.first_audio_ms >= 0 && res.first_audio_ms <= res.total_ms);
    double num = 0, den = 0;
    for (int64_t i = 0; i < ak.n; i++) {
        num += ak.v[i] * ak.v[i];
        den += (s.audio[i] - ak.v[i]) * (s.audio[i] - ak.v[i]);
    }
    fprintf(stderr, "wgml_speak %s: %.1f dB SNR against audio_kit, %d words\n", c, 10 * log10(num / den), s.words);
    assert_true(10 * log10(num / den) > 15);
    int spaces = 0;
    for (const char *q = ph; *q; q++) spaces += *q == ' ';
    assert_int_equal(s.words, spaces + 1);
    assert_int_equal(strncmp(s.list, ph, strcspn(ph, " ")), 0); /* phoneme input: its phoneme words */
    assert_int_equal(strncmp(s.list + strcspn(ph, " "), "@0|", 3), 0);
    npy_free(&ak);
    free(s.audio);

    /* three sentences, and one of 700 phonemes: pieces within 510 */
    char *many = malloc(8192);
    snprintf(many, 8192, "%s %s\n%s", ph, ph, ph);
    kokoro_piece *pc;
    int n;
    assert_int_equal(kokoro_split(km, many, KOKORO_MAX_PHONEMES, 1, &pc, &n, &err), WGML_OK);
    assert_int_equal(n, 3);
    assert_int_equal(pc[1].off, strlen(ph) + 1);
    assert_int_equal(pc[1].len, strlen(ph));
    free(pc);
    /* one pass (WGML_SPLIT_NONE): the three sentences and the line end as one piece; past the
     * limit, cut only there */
    char *three = malloc(8192);
    snprintf(three, 8192, "%s %s\n%s", ph, ph, ph);
    assert_int_equal(kokoro_split(km, three, KOKORO_MAX_PHONEMES, 0, &pc, &n, &err), WGML_OK);
    assert_int_equal(n, 1);
    assert_int_equal(pc[0].off, 0);
    assert_int_equal(pc[0].len, strlen(three));
    free(pc);
    assert_int_equal(kokoro_split(km, three, 150, 0, &pc, &n, &err), WGML_OK);
    int sum = 0; /* 3 x 109 phonemes in pieces of at most 150, cut at clauses or spaces (which drop) */
    for (int i = 0; i < n; i++) {
        const int cnt = kokoro_encode(km, three + pc[i].off, pc[i].len, NULL, 0);
        assert_true(cnt <= 150 && cnt > 0);
        sum += cnt;
    }
    assert_true(n >= 3);
    assert_int_equal(sum + n - 1, kokoro_encode(km, three, strlen(three), NULL, 0));
    free(pc);
    free(three);
    size_t at = 0;
    for (int i = 0; i < 100; i++) at += (size_t)snprintf(many + at, 8192 - at, "%s", i % 10 == 9 ? "ab, " : "ab ");
    many[at - 1] = '.';
    assert_int_equal(kokoro_split(km, many, 100, 1, &pc, &n, &err), WGML_OK);
    int total = 0;
    for (int i = 0; i < n; i++) {
        int cnt = kokoro_encode(km, many + pc[i].off, pc[i].len, NULL, 0);
        assert_true(cnt <= 100);
        total += cnt;
        if (i + 1 < n) assert_true(many[pc[i].off + pc[i].len - 1] == ','); /* cut at clauses */
    }
    assert_int_equal(total + n - 1, kokoro_encode(km, many, strlen(many), NULL, 0)); /* the spaces at the cuts */
    free(pc);

    memset(&s, 0, sizeof s);
    if (wgml_speak(m, many, "am_adam:0.5,bf_emma:0.5", &sp, collect, &s, &res, &err)) fail_msg("%s", err.message);
    assert_true(s.chunks >= 1 && s.words == 100);
    free(s.audio);
    /* several sentences (the punct case) with WGML_SPLIT_NONE: one chunk, the official one-pass
     * audio; the default cuts them into sentences, which the official code does not */
    {
        const char *pc_case = "punct_af_heart_s1.0";
        char *pph = manifest_str(pc_case, "phonemes");
        npy_array pk = ref(pc_case, "audio_kit");
        wgml_speak_params one = sp;
        one.split = WGML_SPLIT_NONE;
        one.seed = kit_seed(pc_case);
        memset(&s, 0, sizeof s);
        if (wgml_speak(m, pph, "af_heart", &one, collect, &s, &res, &err)) fail_msg("%s", err.message);
        assert_int_equal(s.chunks, 1);
        assert_int_equal(s.n, pk.n);
        double pn = 0, pd = 0;
        for (int64_t i = 0; i < pk.n; i++) {
            pn += pk.v[i] * pk.v[i];
            pd += (s.audio[i] - pk.v[i]) * (s.audio[i] - pk.v[i]);
        }
        fprintf(stderr, "wgml_speak %s, split none: %.1f dB SNR against audio_kit\n", pc_case, 10 * log10(pn / pd));
        assert_true(10 * log10(pn / pd) > 15);
        free(s.audio);
        memset(&s, 0, sizeof s);
        one.split = WGML_SPLIT_SENTENCES;
        if (wgml_speak(m, pph, "af_heart", &one, collect, &s, &res, &err)) fail_msg("%s", err.message);
        fprintf(stderr, "split by sentences: %d chunks, %lld samples (one pass: %lld)\n", s.chunks, (long long)s.n,
                (long long)pk.n);
        assert_true(s.chunks > 1 && s.n != pk.n);
        free(s.audio);
        one.split = (wgml_speak_split)7;
        assert_int_equal(wgml_speak(m, pph, "af_heart", &one, collect, &s, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
        npy_free(&pk);
        free(pph);
    }
    /* text: the text's words, where the text has them, each in its sentence's chunk */
    wgml_g2p *probe = NULL;
    if (!wgml_g2p_open_espeak(NULL, &probe, &err)) {
        wgml_g2p_free(probe);
        memset(&s, 0, sizeof s);
        sp.phonemes = 0;
        if (wgml_speak(m, "Hello there, world. It costs $4.99!", "af_heart", &sp, collect, &s, &res, &err))
            fail_msg("%s", err.message);
        assert_int_equal(s.chunks, 2);
        assert_string_equal(s.list, "Hello@0|there@6|world@13|It@20|costs@23|$4.99@29|");
        free(s.audio);
        sp.phonemes = 1;
    } else if (getenv("WGML_REQUIRE_SHARED")) {
        fail_msg("espeak-ng is needed (WGML_REQUIRE_SHARED is set): %s", err.message);
    }
    /* errors: nothing to say, speed, a model that does not speak is tested by test_cli */
    assert_int_equal(wgml_speak(m, "123 \xe2\x80\x8b", "af_heart", &sp, collect, &s, NULL, &err),
                     WGML_ERR_INVALID_ARGUMENT);
    sp.speed = 0;
    assert_int_equal(wgml_speak(m, ph, "af_heart", &sp, collect, &s, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    free(many);
    free(ph);
    npy_free(&rs);
    kokoro_model_free(km);
    gguf_close(g);
    wgml_model_free(m);
    free(mem);
}

/* One utterance of the two-thread test: its text, voice and seed, and the audio it got. */
typedef struct {
    wgml_model *m;
    const char *phonemes, *voice;
    uint64_t seed;
    speech out;
    wgml_status st;
    wgml_error err;
} utterance;

static void *speak_one(void *arg) {
    utterance *u = arg;
    wgml_speak_params sp = wgml_speak_default_params();
    sp.phonemes = 1;
    sp.seed = u->seed;
    memset(&u->out, 0, sizeof u->out);
    u->st = wgml_speak(u->m, u->phonemes, u->voice, &sp, collect, &u->out, NULL, &u->err);
    return NULL;
}

/* Each request has a state of its own: two utterances on one model in two
 * threads at once give the same audio as one after the other (their steps
 * take turns on the backend; nothing of one request lives on the model). */
static void test_speak_two_threads(void **state) {
    (void)state;
    if (!tu_shared_present() || !have_backend || strcmp(be->name, "cpu")) skip();
    wgml_error err;
    char v1[4096], pth[4096];
    snprintf(v1, sizeof v1, "%s", tu_shared("kokoro/voices/am_adam.bin"));
    snprintf(pth, sizeof pth, "%s", tu_shared("kokoro/kokoro-tiny.pth"));
    const char *voices[1] = {v1};
    kokoro_convert_options opt = {.config = &tiny_cfg, .type = WGML_F32, .voices = voices, .n_voices = 1};
    void *mem;
    size_t size;
    assert_int_equal(kokoro_convert(pth, &opt, NULL, &mem, &size, &err), WGML_OK);
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.n_threads = 2;
    wgml_model *m;
    if (wgml_model_load_memory(mem, size, &mp, &m, &err)) fail_msg("%s", err.message);
    char *a = manifest_str("sentence20_af_heart_s1.0", "phonemes"), *b = manifest_str("word_am_adam_s1.0", "phonemes");
    /* a sentence and a word, several pieces each, so that the two requests' steps interleave */
    char ta[8192], tb[2048];
    snprintf(ta, sizeof ta, "%s. %s. %s", a, a, a);
    snprintf(tb, sizeof tb, "%s. %s. %s. %s", b, b, b, b);
    utterance alone[2] = {{m, ta, "am_adam", 7, {0}, 0, {0}}, {m, tb, v1, 11, {0}, 0, {0}}};
    utterance both[2] = {alone[0], alone[1]};
    for (int i = 0; i < 2; i++) {
        speak_one(&alone[i]);
        if (alone[i].st) fail_msg("%s", alone[i].err.message);
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, speak_one, &both[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        if (both[i].st) fail_msg("%s", both[i].err.message);
        assert_true(alone[i].out.chunks >= 3);
        assert_int_equal(both[i].out.chunks, alone[i].out.chunks);
        assert_int_equal(both[i].out.n, alone[i].out.n);
        assert_memory_equal(both[i].out.audio, alone[i].out.audio, (size_t)alone[i].out.n * 4);
        assert_string_equal(both[i].out.list, alone[i].out.list);
        free(alone[i].out.audio);
        free(both[i].out.audio);
    }
    free(a);
    free(b);
    wgml_model_free(m);
    free(mem);
}

/* The official checkpoint's tensors as kokoro_official_keys makes them for a
 * config: the key lists of the real v1.0 file and of kokoro-tiny.pth
 * (../shared/kokoro/keys-*.tsv: "component<TAB>module.name<TAB>[shape]"). */
static void check_keys(const char *tsv, const kokoro_config *cfg) {
    size_t n;
    unsigned char *text = tu_read_file(tu_shared(tsv), &n);
    assert_non_null(text);
    const int nk = kokoro_official_keys(&cfg->hp, NULL, 0);
    kokoro_key *k = malloc((size_t)nk * sizeof *k);
    assert_int_equal(kokoro_official_keys(&cfg->hp, k, nk), nk);
    int lines = 0;
    for (char *line = strtok((char *)text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || strstr(line, "position_ids")) continue;
        char comp[64], name[256], shape[64];
        assert_int_equal(sscanf(line, "%63[^\t]\t%255[^\t]\t%63[^\t]", comp, name, shape), 3);
        char full[400], want[64];
        snprintf(full, sizeof full, "%s/%s", comp, name);
        int found = 0;
        for (int i = 0; i < nk && !found; i++) {
            if (strcmp(k[i].name, full)) continue;
            found = 1;
            int w = snprintf(want, sizeof want, "[");
            for (int d = 0; d < k[i].ndim; d++)
                w += snprintf(want + w, sizeof want - (size_t)w, "%s%lld", d ? ", " : "", (long long)k[i].size[d]);
            snprintf(want + w, sizeof want - (size_t)w, "]");
            if (strcmp(want, shape)) fprintf(stderr, "%s: %s, the list says %s\n", full, want, shape);
            assert_string_equal(want, shape);
        }
        if (!found) fprintf(stderr, "%s: not made by kokoro_official_keys\n", full);
        assert_true(found);
        lines++;
    }
    assert_int_equal(lines, nk);
    free(k);
    free(text);
}

static void test_official_keys(void **state) {
    (void)state;
    if (!tu_shared_present() || strcmp(backend_name, "cpu")) skip();
    kokoro_config c;
    kokoro_config_default(&c);
    check_keys("kokoro/keys-kokoro-82m.tsv", &c);
    kokoro_config_tiny(&c);
    check_keys("kokoro/keys-kokoro-tiny.tsv", &c);
}

/* config.json sizes the model's shapes cannot divide are refused by name (fuzz_kokoro_config
 * found upsample_initial_channel 2 with two stages: a generator stage of 0 channels). */
static void test_config_inconsistent(void **state) {
    (void)state;
    if (strcmp(backend_name, "cpu")) skip();
    static const char *const bad[] = {
        "{\"istftnet\": {\"upsample_initial_channel\": 2, \"upsample_rates\": [10, 6], "
        "\"upsample_kernel_sizes\": [20, 12]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kokoro_config c;
        wgml_error err;
        assert_int_equal(kokoro_config_parse(bad[i], strlen(bad[i]), &c, &err), WGML_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, "inconsistent sizes"));
    }
    const char *ok = "{\"istftnet\": {\"upsample_initial_channel\": 4, \"upsample_rates\": [10, 6], "
                     "\"upsample_kernel_sizes\": [20, 12]}}";
    kokoro_config c;
    wgml_error err;
    assert_int_equal(kokoro_config_parse(ok, strlen(ok), &c, &err), WGML_OK);
    assert_int_equal(c.hp.up_initial, 4);
}

int main(int argc, char **argv) {
    if (argc > 1) backend_name = argv[1];
    if (argc > 2) cmocka_set_test_filter(argv[2]); /* one test: a part of its own under ctest */
    if (argc > 3 && sscanf(argv[3], "%zu-%zu", &case_lo, &case_hi) != 2) {
        fprintf(stderr, "usage: test_kokoro [cpu|swiftshader|lavapipe|lavapipe-f32 [TEST [LO-HI]]]\n");
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_and_prosody),
        cmocka_unit_test(test_decoder),
        cmocka_unit_test(test_speak),
        cmocka_unit_test(test_speak_two_threads),
        cmocka_unit_test(test_official_keys),
        cmocka_unit_test(test_config_inconsistent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
