/*
 * test_whisper_decode.c - Whisper's decoding rules without a model
 * (src/model/whisper/whisper_decode.h): each logit filter on hand-made rows;
 * the filters against every step the official code recorded in the
 * reference manifests (../shared/whisper/reference/: the number of ids
 * left, and the first step on the reference logits); greedy and sampled
 * picks with their sums of log-probabilities; beam search on a toy model
 * against a brute-force search over every continuation; the ranking;
 * segments, seeking and windows; the fallback rules; the SRT, WebVTT, text
 * and TSV writers byte for byte (expected texts from the official
 * format_timestamp and writers, utils.py).
 */
#include "core/alloc.h"
#include "model/whisper/whisper_decode.h"
#include "model/whisper/whisper_vocab.h"
#include "npy.h"
#include "testutil.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NV 51865 /* multilingual: EOT 50257, timestamps from 50364 */

static whisper_specials specials(int n_vocab) {
    whisper_specials sp;
    wgml_error err = {0};
    assert_int_equal(whisper_specials_init(&sp, n_vocab, &err), WGML_OK);
    return sp;
}

static int count_finite(const float *x, int n) {
    int k = 0;
    for (int i = 0; i < n; i++)
        k += x[i] > -INFINITY;
    return k;
}

static int count_finite_range(const float *x, int from, int to) { return count_finite(x + from, to - from); }

static void fill(float *x, int n, float v) {
    for (int i = 0; i < n; i++)
        x[i] = v;
}

/* A row with text ids at `text` and the rest (EOT, specials, timestamps) at `rest`. */
static void fill_split(float *x, const whisper_specials *sp, float text, float ts) {
    for (int i = 0; i < sp->n_vocab; i++)
        x[i] = i < sp->ts_begin ? text : ts;
}

static whisper_filter_params default_params(const whisper_specials *sp, int sample_begin) {
    return (whisper_filter_params){.sp = sp,
                                   .sample_begin = sample_begin,
                                   .suppress_blank = 1,
                                   .suppress = NULL,
                                   .n_suppress = 0,
                                   .without_timestamps = 0,
                                   .max_initial_timestamp_index = WHISPER_MAX_INITIAL_TIMESTAMP_INDEX};
}

/* ---- the filters, rule by rule ---- */

static void test_suppress_blank(void **state) {
    (void)state;
    whisper_specials sp = specials(NV);
    static float x[NV];
    int32_t toks[8] = {sp.sot, sp.lang0, sp.transcribe, sp.no_timestamps, 1000};
    whisper_filter_params p = default_params(&sp, 4);
    p.without_timestamps = 1;
    fill(x, NV, 0);
    whisper_filters_apply(&p, toks, 4, x); /* first step: " " and EOT */
    assert_true(x[220] == -INFINITY && x[sp.eot] == -INFINITY);
    assert_int_equal(count_finite(x, NV), NV - 2);
    fill(x, NV, 0);
    whisper_filters_apply(&p, toks, 5, x); /* later: nothing */
    assert_int_equal(count_finite(x, NV), NV);
    p.suppress_blank = 0;
    fill(x, NV, 0);
    whisper_filters_apply(&p, toks, 4, x);
    assert_int_equal(count_finite(x, NV), NV);
}

static void test_suppress_list(void **state) {
    (void)state;
    whisper_specials sp = specials(NV);
    static float x[NV];
    const int32_t list[] = {1, 2, 7, 50254, sp.sot};
    int32_t toks[8] = {sp.sot, sp.lang0, sp.transcribe, sp.no_timestamps, 1000, 1001};
    whisper_filter_params p = default_params(&sp, 4);
    p.without_timestamps = 1;
    p.suppress = list;
    p.n_suppress = 5;
    wgml_error err = {0};
    assert_int_equal(whisper_filters_check(&p, &err), WGML_OK);
    for (int step = 4; step <= 6; step++) {
        fill(x, NV, 1);
        whisper_filters_apply(&p, toks, step, x);
        for (int i = 0; i < 5; i++)
            assert_true(x[list[i]] == -INFINITY);
        assert_int_equal(count_finite(x, NV), NV - 5 - (step == 4 ? 2 : 0));
    }
    const int32_t bad[] = {3, NV};
    p.suppress = bad;
    p.n_suppress = 2;
    assert_int_equal(whisper_filters_check(&p, &err), WGML_ERR_INVALID_ARGUMENT);

    /* the default list of every layout from its non-speech ids (../shared/whisper/tokens.json) */
    json_object *root = json_object_from_file(tu_shared("whisper/tokens.json")), *layouts;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "layouts", &layouts));
    int n_layouts = 0;
    json_object_object_foreach(layouts, name, lay) {
        (void)name;
        json_object *nv, *ns, *def;
        assert_true(json_object_object_get_ex(lay, "n_vocab", &nv));
        assert_true(json_object_object_get_ex(lay, "non_speech_tokens", &ns));
        assert_true(json_object_object_get_ex(lay, "suppress_tokens_default", &def));
        whisper_specials s = specials(json_object_get_int(nv));
        int n_ns = (int)json_object_array_length(ns), n_def = (int)json_object_array_length(def);
        int32_t nsv[128], out[128];
        for (int i = 0; i < n_ns; i++)
            nsv[i] = json_object_get_int(json_object_array_get_idx(ns, i));
        int32_t extra[] = {-1, 7}; /* "-1,7": 7 is a non-speech id already */
        int n = whisper_suppress_tokens(&s, extra, 2, nsv, n_ns, out, 128);
        assert_int_equal(n, n_def);
        for (int i = 0; i < n; i++)
            assert_int_equal(out[i], json_object_get_int(json_object_array_get_idx(def, i)));
        assert_int_equal(whisper_suppress_tokens(&s, NULL, 0, nsv, n_ns, out, 3),
                         n_def); /* a short buffer: the count */
        n_layouts++;
    }
    assert_int_equal(n_layouts, 3);
    json_object_put(root);
}

static void test_timestamp_pairing(void **state) {
    (void)state;
    whisper_specials sp = specials(NV);
    const int tb = sp.ts_begin, n_ts = NV - tb;
    static float x[NV];
    whisper_filter_params p = default_params(&sp, 3);
    /* text, timestamp: the next is a timestamp (>= that one) or EOT, never text */
    int32_t a[] = {sp.sot, sp.lang0, sp.transcribe, tb + 10, 500, tb + 40};
    fill_split(x, &sp, 0, -100); /* low timestamps: the last rule stays out of it */
    whisper_filters_apply(&p, a, 6, x);
    assert_int_equal(count_finite_range(x, 0, sp.eot), 0);
    assert_true(x[sp.eot] > -INFINITY);
    assert_true(x[tb + 39] == -INFINITY && x[tb + 40] > -INFINITY); /* t_last = the last timestamp itself */
    assert_int_equal(count_finite_range(x, tb, NV), n_ts - 40);
    /* specials other than EOT: only those of the suppress list (none here) and <|notimestamps|> go */
    assert_true(x[sp.lang0] > -INFINITY && x[sp.no_timestamps] == -INFINITY);
    /* timestamp, timestamp: text (or EOT), no timestamp */
    int32_t b[] = {sp.sot, sp.lang0, sp.transcribe, tb + 10, 500, tb + 40, tb + 40};
    fill_split(x, &sp, 0, 0);
    whisper_filters_apply(&p, b, 7, x);
    assert_int_equal(count_finite_range(x, tb, NV), 0);
    assert_int_equal(count_finite_range(x, 0, sp.eot), sp.eot);
    /* a timestamp alone as the first sampled token counts as a pair: text next */
    int32_t c[] = {sp.sot, sp.lang0, sp.transcribe, tb + 3};
    fill_split(x, &sp, 0, 0);
    whisper_filters_apply(&p, c, 4, x);
    assert_int_equal(count_finite_range(x, tb, NV), 0);
    assert_int_equal(count_finite_range(x, 0, sp.eot), sp.eot);
}

static void test_timestamp_monotonic(void **state) {
    (void)state;
    whisper_specials sp = specials(NV);
    const int tb = sp.ts_begin, n_ts = NV - tb;
    static float x[NV];
    whisper_filter_params p = default_params(&sp, 3);
    /* after a pair and text: timestamps strictly above the last one (t_last = last + 1) */
    int32_t a[] = {sp.sot, sp.lang0, sp.transcribe, tb, 400, tb + 25, tb + 25, 401};
    fill_split(x, &sp, 0, -100);
    whisper_filters_apply(&p, a, 8, x);
    assert_true(x[tb + 25] == -INFINITY && x[tb + 26] > -INFINITY);
    assert_int_equal(count_finite_range(x, tb, NV), n_ts - 26);
    assert_int_equal(count_finite_range(x, 0, sp.eot), sp.eot); /* text allowed */
    /* text, timestamp: the same timestamp again closes the segment (t_last = last) */
    int32_t b[] = {sp.sot, sp.lang0, sp.transcribe, tb, 400, tb + 25};
    fill_split(x, &sp, 0, -100);
    whisper_filters_apply(&p, b, 6, x);
    assert_true(x[tb + 24] == -INFINITY && x[tb + 25] > -INFINITY);
    /* the last timestamp sits anywhere back in the list */
    int32_t c[] = {sp.sot, sp.lang0, sp.transcribe, tb + 7, 400, 401, 402};
    fill_split(x, &sp, 0, -100);
    whisper_filters_apply(&p, c, 7, x);
    assert_true(x[tb + 7] == -INFINITY && x[tb + 8] > -INFINITY);
    /* the end of the timestamps: <|30.00|> then text leaves no timestamp */
    int32_t d[] = {sp.sot, sp.lang0, sp.transcribe, tb + 1500, 400};
    fill_split(x, &sp, 0, -100);
    whisper_filters_apply(&p, d, 5, x);
    assert_int_equal(count_finite_range(x, tb, NV), 0);
    /* the rules count from sample_begin: a timestamp in the initial tokens (a prompt) is not seen */
    int32_t e[] = {sp.sot_prev, tb + 300, sp.sot, sp.lang0, sp.transcribe, 400};
    whisper_filter_params pe = default_params(&sp, 5);
    fill_split(x, &sp, 0, -100);
    whisper_filters_apply(&pe, e, 6, x);
    assert_int_equal(count_finite_range(x, tb, NV), n_ts);
}

static void test_initial_timestamp(void **state) {
    (void)state;
    whisper_specials sp = specials(NV);
    const int tb = sp.ts_begin, n_ts = NV - tb;
    static float x[NV];
    int32_t sot[] = {sp.sot, sp.lang0, sp.transcribe};
    assert_int_equal(whisper_max_initial_timestamp_index(1.0), 50);
    assert_int_equal(whisper_max_initial_timestamp_index(0.0), -1); /* 0.0 is falsy: no limit */
    assert_int_equal(whisper_max_initial_timestamp_index(0.03), 2); /* round(1.5) */
    assert_int_equal(whisper_max_initial_timestamp_index(0.05), 2); /* round(2.5): half to even */
    whisper_filter_params p = default_params(&sp, 3);
    fill(x, NV, 0);
    whisper_filters_apply(&p, sot, 3, x); /* the first step: <|0.00|> .. <|1.00|> */
    assert_int_equal(count_finite(x, NV), 51);
    assert_true(x[tb] > -INFINITY && x[tb + 50] > -INFINITY && x[tb + 51] == -INFINITY);
    p.max_initial_timestamp_index = -1;
    fill(x, NV, 0);
    whisper_filters_apply(&p, sot, 3, x);
    assert_int_equal(count_finite(x, NV), n_ts);
    p.max_initial_timestamp_index = 5000; /* past the end: nothing more */
    fill(x, NV, 0);
    whisper_filters_apply(&p, sot, 3, x);
    assert_int_equal(count_finite(x, NV), n_ts);
    /* without timestamps: the rules are off, timestamps can be sampled */
    int32_t sot_nt[] = {sp.sot, sp.lang0, sp.transcribe, sp.no_timestamps};
    p = default_params(&sp, 4);
    p.without_timestamps = 1;
    fill(x, NV, 0);
    whisper_filters_apply(&p, sot_nt, 4, x);
    assert_int_equal(count_finite(x, NV), NV - 2);
}

static void test_timestamp_mass(void **state) {
    (void)state;
    whisper_specials sp = specials(NV);
    const int tb = sp.ts_begin;
    static float x[NV];
    whisper_filter_params p = default_params(&sp, 3);
    /* after <|0.00|> text: timestamps from <|0.02|>, 1500 of them at 0; log(1500) = 7.313 */
    int32_t toks[] = {sp.sot, sp.lang0, sp.transcribe, tb, 400};
    for (int k = 0; k < 2; k++) {
        float text_best = k ? 7.2f : 7.4f; /* below 7.313 the timestamps' mass wins */
        fill_split(x, &sp, -50, 0);
        x[1234] = text_best;
        whisper_filters_apply(&p, toks, 5, x);
        assert_int_equal(count_finite_range(x, tb, NV), 1500);
        if (k) {
            assert_int_equal(count_finite_range(x, 0, tb), 0);
        } else {
            assert_int_equal(count_finite_range(x, 0, tb), tb - 1); /* all but <|notimestamps|> */
        }
    }
    /* the same with every text id finite but far below: the single best text id decides */
    fill_split(x, &sp, -1000, 0);
    x[77] = 8.0f;
    whisper_filters_apply(&p, toks, 5, x);
    assert_true(x[77] == 8.0f);
    fill_split(x, &sp, -1000, 0);
    x[77] = 7.0f;
    whisper_filters_apply(&p, toks, 5, x);
    assert_true(x[77] == -INFINITY);
    /* every id masked: nothing changes, nothing breaks */
    fill(x, NV, -INFINITY);
    whisper_filters_apply(&p, toks, 5, x);
    assert_int_equal(count_finite(x, NV), 0);
}

/* ---- the filters against the official steps (reference manifests) ---- */

static int json_int_at(json_object *a, int i) { return json_object_get_int(json_object_array_get_idx(a, i)); }

static json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(o, key, &v));
    return v;
}

/* Every step of the lists `rules` and `rules_nots`: with the tokens before
 * step i, the number of ids the filters leave must be the recorded one.
 * The count does not depend on the logit values except through the last
 * timestamp rule, which masks every text id when the timestamps' total
 * probability beats the best text id; that can only happen where both text
 * and timestamps are left. So:
 *  - where no text or no timestamp id is left (and for rules_nots, which
 *    has no timestamp rules), the count on a row of zeros is exact;
 *  - at step 0 of `rules` (only timestamps are left, so exact anyway) the
 *    filters also run on the reference logits wK_logits_first.npy (the
 *    decoder on the 3-token SOT sequence, so not rules_nots' first step),
 *    and the pick (argmax) must be the recorded id, as for `plain`;
 *  - at later steps with both left, the count is n_pre where a text id was
 *    picked (the rule cannot have fired), and n_pre (it did not fire) or
 *    n_pre - n_text (it fired) where a timestamp was picked: n_pre and
 *    n_text measured on a row whose timestamps are far below its text (the
 *    rule cannot fire there).
 * And the recorded id is always one the filters leave. */
static void check_manifest(const char *variant, int *n_exact, int n_bracket[2]) {
    char rel[256];
    snprintf(rel, sizeof rel, "whisper/reference/%s/manifest.json", variant);
    json_object *root = json_object_from_file(tu_shared(rel));
    assert_non_null(root);
    json_object *tok = get(root, "tokenizer"), *def = get(tok, "suppress_tokens_default");
    whisper_specials sp = specials(json_object_get_int(get(tok, "n_vocab")));
    assert_int_equal(sp.ts_begin, json_object_get_int(get(tok, "timestamp_begin")));
    assert_int_equal(sp.eot, json_object_get_int(get(tok, "eot")));
    const int n = sp.n_vocab, tb = sp.ts_begin;
    int32_t suppress[128];
    int n_sup = (int)json_object_array_length(def);
    for (int i = 0; i < n_sup; i++)
        suppress[i] = json_int_at(def, i);
    float *z = malloc((size_t)n * sizeof *z), *a = malloc((size_t)n * sizeof *a), *r = malloc((size_t)n * sizeof *r);
    json_object *cases = get(root, "cases");
    for (size_t c = 0; c < json_object_array_length(cases); c++) {
        json_object *cs = json_object_array_get_idx(cases, c), *wins = get(cs, "windows");
        const char *cname = json_object_get_string(get(cs, "name"));
        /* the windows as transcribe() walks them */
        int content = json_object_get_int(get(cs, "content_frames")), clips[2], ci = 0, seek;
        assert_int_equal(whisper_seek_clips(NULL, 0, content, clips, 1), 1);
        seek = clips[0];
        for (size_t w = 0; w < json_object_array_length(wins); w++) {
            json_object *win = json_object_array_get_idx(wins, w);
            whisper_window ww;
            assert_int_equal(whisper_next_window(clips, 1, &ci, &seek, content, &ww), 1);
            assert_int_equal(ww.seek, json_object_get_int(get(win, "seek")));
            assert_int_equal(ww.segment_size, json_object_get_int(get(win, "segment_size")));
            seek += ww.segment_size; /* the kit moves by whole windows */
            snprintf(rel, sizeof rel, "whisper/reference/%s/%s/w%d_logits_first.npy", variant, cname, (int)w);
            npy_array first;
            assert_int_equal(npy_read(tu_shared(rel), &first), 0);
            assert_int_equal((int)first.n, n);
            static const char *lists[] = {"plain", "rules", "rules_nots"};
            for (int l = 0; l < 3; l++) {
                json_object *li = get(win, lists[l]), *sot = get(li, "sot_sequence"), *toks = get(li, "tokens"),
                            *steps = get(li, "steps");
                int n_sot = (int)json_object_array_length(sot), n_tok = (int)json_object_array_length(toks);
                assert_int_equal((int)json_object_array_length(steps), n_tok);
                int32_t seq[64];
                assert_true(n_sot + n_tok <= 64);
                for (int i = 0; i < n_sot; i++)
                    seq[i] = json_int_at(sot, i);
                for (int i = 0; i < n_tok; i++)
                    seq[n_sot + i] = json_int_at(toks, i);
                whisper_filter_params p = {.sp = &sp,
                                           .sample_begin = n_sot,
                                           .suppress_blank = 1,
                                           .suppress = suppress,
                                           .n_suppress = n_sup,
                                           .without_timestamps = l == 2,
                                           .max_initial_timestamp_index = 50};
                for (int i = 0; i < n_tok; i++) {
                    json_object *st = json_object_array_get_idx(steps, i);
                    int rec = json_object_get_int(get(st, "n_allowed")), id = json_object_get_int(get(st, "id"));
                    assert_int_equal(id, seq[n_sot + i]);
                    if (l == 0) { /* no filter */
                        assert_int_equal(rec, n);
                        if (i == 0) {
                            for (int k = 0; k < n; k++)
                                r[k] = (float)first.v[k];
                            assert_int_equal(whisper_argmax(r, n), id);
                        }
                        continue;
                    }
                    fill(z, n, 0);
                    whisper_filters_apply(&p, seq, n_sot + i, z);
                    fill_split(a, &sp, 0, -100);
                    whisper_filters_apply(&p, seq, n_sot + i, a);
                    int n_pre = count_finite(a, n), n_text = count_finite_range(a, 0, tb);
                    int n_ts = count_finite_range(a, tb, n);
                    assert_true(a[id] > -INFINITY); /* the recorded pick is allowed */
                    if (i == 0 && l == 1) {         /* the reference logits of this step (the 3-token SOT sequence) */
                        for (int k = 0; k < n; k++)
                            r[k] = (float)first.v[k];
                        whisper_filters_apply(&p, seq, n_sot, r);
                        assert_int_equal(count_finite(r, n), rec);
                        assert_int_equal(whisper_argmax(r, n), id);
                        (*n_exact)++;
                    } else if (l == 2 || n_text == 0 || n_ts == 0) {
                        assert_int_equal(count_finite(z, n), rec);
                        assert_int_equal(n_pre, rec);
                        (*n_exact)++;
                    } else {
                        if (id < tb) { /* a text pick: the rule did not fire */
                            assert_int_equal(rec, n_pre);
                            (*n_exact)++;
                        } else {
                            assert_true(rec == n_pre || rec == n_pre - n_text);
                            n_bracket[rec != n_pre]++;
                        }
                    }
                }
            }
            npy_free(&first);
        }
        assert_int_equal(whisper_next_window(clips, 1, &ci, &seek, content, &(whisper_window){0}), 0);
    }
    free(z), free(a), free(r);
    json_object_put(root);
}

static void test_manifest_steps(void **state) {
    (void)state;
    int exact = 0, bracket[2] = {0, 0};
    check_manifest("whisper-micro-random", &exact, bracket);
    check_manifest("whisper-tiny-random", &exact, bracket);
    fprintf(stderr,
            "manifest steps: %d exact counts; timestamp picks with text left: %d where the mass rule "
            "did not fire, %d where it did\n",
            exact, bracket[0], bracket[1]);
    assert_true(exact > 700 && bracket[0] + bracket[1] > 20);
}

/* ---- token choice ---- */

static void test_greedy(void **state) {
    (void)state;
    whisper_picker *pk;
    wgml_error err = {0};
    assert_int_equal(whisper_picker_create(0, 1, 6, &pk, &err), WGML_OK);
    const int eot = 5;
    float row[6] = {1, 3, -INFINITY, 3, 2, 0};
    float sum = 0;
    int32_t t = whisper_picker_next(pk, row, 100, eot, &sum);
    assert_int_equal(t, 1); /* the lowest of equal maxima */
    float lse = (float)log(exp(1.0) + 2 * exp(3.0) + exp(2.0) + exp(0.0));
    assert_true(fabsf(sum - (3 - lse)) < 1e-6f);
    float lp[6];
    whisper_log_softmax(row, 6, lp);
    assert_true(lp[1] == whisper_logprob_of(row, 6, 1));
    assert_true(lp[2] == -INFINITY);
    float s2 = sum;
    t = whisper_picker_next(pk, row, eot, eot, &sum); /* ended: EOT again, sum unchanged */
    assert_int_equal(t, eot);
    assert_true(sum == s2);
    assert_true(fabs(whisper_avg_logprob(-3.0f, 2) - -1.0) < 1e-12);
    float ns[2] = {0, logf(3)};
    assert_true(fabsf(whisper_softmax_at(ns, 2, 1) - 0.75f) < 1e-6f);
    whisper_picker_free(pk);

    /* sampling: seeded, only allowed ids, frequencies of softmax(logits / T) */
    whisper_picker *s1, *s2p;
    assert_int_equal(whisper_picker_create(0.5f, 42, 6, &s1, &err), WGML_OK);
    assert_int_equal(whisper_picker_create(0.5f, 42, 6, &s2p, &err), WGML_OK);
    float srow[6] = {0, 0.5f * logf(3.0f), -INFINITY, -INFINITY, -INFINITY, -INFINITY}; /* p = 1/4, 3/4 */
    int hits = 0;
    for (int i = 0; i < 4000; i++) {
        float a = 0, b = 0;
        int32_t x = whisper_picker_next(s1, srow, 7, eot, &a), y = whisper_picker_next(s2p, srow, 7, eot, &b);
        assert_int_equal(x, y);
        assert_true(x == 0 || x == 1);
        assert_true(a == whisper_logprob_of(srow, 6, x)); /* the log-probability of the unscaled row */
        hits += x == 1;
    }
    assert_true(hits > 2850 && hits < 3150);
    whisper_picker_free(s1);
    whisper_picker_free(s2p);
    assert_int_equal(whisper_picker_create(-1, 0, 6, &s1, &err), WGML_ERR_INVALID_ARGUMENT);
}

static void test_rank(void **state) {
    (void)state;
    float lp[3] = {-6.0f, -4.0f, -9.0f};
    int len[3] = {6, 2, 12};
    /* length norm: -1, -2, -0.75 */
    assert_int_equal(whisper_rank(lp, len, 3, -1), 2);
    /* alpha 0: penalty 1, the plain sum */
    assert_int_equal(whisper_rank(lp, len, 3, 0), 1);
    /* alpha 1: (5 + L) / 6: -6 / (11/6) = -3.27, -4 / (7/6) = -3.43, -9 / (17/6) = -3.18 */
    assert_int_equal(whisper_rank(lp, len, 3, 1), 2);
    float eq[2] = {-2.0f, -2.0f};
    int eql[2] = {2, 2};
    assert_int_equal(whisper_rank(eq, eql, 2, -1), 0); /* the first of equals */
}

/* ---- beam search ---- */

#define TV   12 /* toy vocabulary; EOT = 11 */
#define TEOT 11
#define TMAX 32

/* The toy model: log-probabilities of the next token after the sampled tokens s[0, n). */
static void toy_row(const int32_t *s, int n, uint64_t seed, float *out) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)s[i]) * 1099511628211ull;
    float logits[TV];
    for (int v = 0; v < TV; v++) {
        uint64_t z = h + (uint64_t)(v + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        logits[v] = (float)((double)(z >> 11) * (1.0 / 9007199254740992.0) * 6.0 - 3.0);
    }
    logits[TEOT] += 0.6f * (float)n - 2.0f; /* ending grows likelier */
    whisper_log_softmax(logits, TV, out);
}

typedef struct {
    int32_t t[TMAX];
    int n; /* sampled tokens (without the initial ones) */
    float score;
    int src, order;
} bseq;

static int bseq_cmp(const void *a, const void *b) {
    const bseq *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* The brute force: every continuation of every hypothesis (not the top
 * beam_size + 1 of each), identical sequences merged, all ranked; the same
 * rules for what finishes and what continues. Fills the steps' sources and
 * tokens, then the final candidates; returns the number of steps. */
static int brute_beam(int B, int max_cand, int max_steps, uint64_t seed, int src_out[][8], int tok_out[][8],
                      bseq *final, int *n_final) {
    bseq hyp[8], fin[64], all[8 * TV];
    int n_fin = 0, steps = 0;
    for (int j = 0; j < B; j++)
        hyp[j] = (bseq){.n = 0, .score = 0};
    for (int step = 0; step < max_steps; step++) {
        int na = 0;
        for (int j = 0; j < B; j++) {
            float row[TV];
            toy_row(hyp[j].t, hyp[j].n, seed, row);
            for (int v = 0; v < TV; v++) {
                bseq s = hyp[j];
                s.t[s.n++] = v;
                s.score = hyp[j].score + row[v];
                s.src = j;
                int k = 0;
                while (k < na && !(all[k].n == s.n && !memcmp(all[k].t, s.t, sizeof(int32_t) * (size_t)s.n)))
                    k++;
                if (k == na)
                    s.order = na++;
                else
                    s.order = all[k].order;
                all[k] = s;
            }
        }
        /* insertion order within a hypothesis is by value (its top-k), so rank order ties by (order) are moot
         * with random values; the stable sort by (score, order) is the official sorted(..., reverse=True) */
        qsort(all, (size_t)na, sizeof *all, bseq_cmp);
        int saved = 0;
        bseq next[8];
        for (int k = 0; k < na && saved < B; k++) {
            if (all[k].t[all[k].n - 1] == TEOT) {
                if (n_fin < max_cand) {
                    fin[n_fin] = all[k];
                    fin[n_fin].n--;
                    n_fin++;
                }
            } else {
                src_out[step][saved] = all[k].src;
                tok_out[step][saved] = all[k].t[all[k].n - 1];
                next[saved++] = all[k];
            }
        }
        assert_int_equal(saved, B);
        memcpy(hyp, next, sizeof(bseq) * (size_t)B);
        steps++;
        if (n_fin >= max_cand) break;
    }
    /* finalize: top up with the live ones, best first */
    for (int r = 0; n_fin < B && r < B; r++) {
        int best = -1;
        for (int j = 0; j < B; j++) {
            int used = 0;
            for (int k = 0; k < n_fin; k++)
                used |= fin[k].n == hyp[j].n && !memcmp(fin[k].t, hyp[j].t, sizeof(int32_t) * (size_t)hyp[j].n);
            if (!used && (best < 0 || hyp[j].score >= hyp[best].score)) best = j; /* equal: the later */
        }
        if (best < 0) break;
        fin[n_fin++] = hyp[best];
    }
    memcpy(final, fin, sizeof(bseq) * (size_t)n_fin);
    *n_final = n_fin;
    return steps;
}

static void run_beam_case(int B, double patience, int max_cand, int max_steps, uint64_t seed, double alpha) {
    int src_e[TMAX][8], tok_e[TMAX][8], n_final_e;
    bseq final_e[64];
    int steps_e = brute_beam(B, max_cand, max_steps, seed, src_e, tok_e, final_e, &n_final_e);

    whisper_beam *b;
    wgml_error err = {0};
    assert_int_equal(whisper_beam_create(B, patience, TEOT, 3 + TMAX, &b, &err), WGML_OK);
    const int32_t initial[3] = {100, 101, 102};
    assert_int_equal(whisper_beam_start(b, initial, 3, &err), WGML_OK);
    float rows[8 * TV];
    int steps = 0, completed = 0;
    for (int step = 0; step < max_steps && !completed; step++) {
        for (int j = 0; j < B; j++) {
            int nt;
            const int32_t *t = whisper_beam_tokens(b, j, &nt);
            assert_int_equal(nt, 3 + step);
            assert_memory_equal(t, initial, sizeof initial);
            toy_row(t + 3, nt - 3, seed, rows + j * TV);
        }
        int src[8];
        int32_t tok[8];
        assert_int_equal(whisper_beam_step(b, rows, TV, src, tok, &completed, &err), WGML_OK);
        for (int j = 0; j < B; j++) {
            assert_int_equal(src[j], src_e[step][j]);
            assert_int_equal(tok[j], tok_e[step][j]);
        }
        steps++;
    }
    assert_int_equal(steps, steps_e);
    assert_int_equal(whisper_beam_finish(b, &err), WGML_OK);
    assert_int_equal(whisper_beam_n_candidates(b), n_final_e);
    float sums[64];
    int lens[64];
    for (int i = 0; i < n_final_e; i++) {
        int nt;
        float s;
        const int32_t *t = whisper_beam_candidate(b, i, &nt, &s);
        assert_int_equal(nt, final_e[i].n);
        assert_memory_equal(t, final_e[i].t, sizeof(int32_t) * (size_t)nt);
        assert_true(s == final_e[i].score);
        sums[i] = s, lens[i] = nt;
    }
    assert_int_equal(whisper_beam_best(b, alpha), whisper_rank(sums, lens, n_final_e, alpha));
    whisper_beam_free(b);
}

static void test_beam_search(void **state) {
    (void)state;
    /* beam 1 with patience 1 is the greedy path up to its EOT */
    for (uint64_t seed = 1; seed <= 20; seed++) {
        int32_t path[TMAX];
        int n = 0;
        for (;;) {
            float row[TV];
            toy_row(path, n, seed, row);
            int t = whisper_argmax(row, TV);
            if (t == TEOT || n == 20) break;
            path[n++] = t;
        }
        if (n == 20) continue;
        whisper_beam *b;
        wgml_error err = {0};
        assert_int_equal(whisper_beam_create(1, 0, TEOT, 40, &b, &err), WGML_OK);
        int32_t init = 7;
        assert_int_equal(whisper_beam_start(b, &init, 1, &err), WGML_OK);
        int completed = 0;
        for (int s = 0; s < 30 && !completed; s++) {
            int nt, src;
            int32_t tok;
            const int32_t *t = whisper_beam_tokens(b, 0, &nt);
            float row[TV];
            toy_row(t + 1, nt - 1, seed, row);
            assert_int_equal(whisper_beam_step(b, row, TV, &src, &tok, &completed, &err), WGML_OK);
            assert_int_equal(src, 0);
        }
        assert_true(completed);
        assert_int_equal(whisper_beam_finish(b, &err), WGML_OK);
        assert_int_equal(whisper_beam_n_candidates(b), 1);
        int nt;
        const int32_t *t = whisper_beam_candidate(b, 0, &nt, NULL);
        assert_int_equal(nt, n);
        assert_memory_equal(t, path, sizeof(int32_t) * (size_t)n);
        whisper_beam_free(b);
    }
    /* against the brute force: beam sizes, patience (round half to even), short limits that leave
     * unfinished hypotheses to top up with, length penalties */
    for (uint64_t seed = 1; seed <= 25; seed++) {
        run_beam_case(5, 0, 5, 20, seed, -1);
        run_beam_case(5, 0, 5, 3, seed, -1);     /* stopped early: topped up from the live beams */
        run_beam_case(3, 2.0, 6, 20, seed, 0.6); /* patience 2: 6 finished */
        run_beam_case(5, 0.5, 2, 20, seed, 1.0); /* round(2.5) = 2 */
        run_beam_case(3, 0.5, 2, 20, seed, -1);  /* round(1.5) = 2 */
        run_beam_case(2, 0, 2, 1, seed, -1);
        run_beam_case(4, 1.0, 4, 0, seed, -1); /* no step: the initial tokens once */
    }
    wgml_error err = {0};
    whisper_beam *b = NULL;
    assert_int_equal(whisper_beam_create(0, 0, 1, 10, &b, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(whisper_beam_create(1, 0.4, 1, 10, &b, &err), WGML_ERR_INVALID_ARGUMENT); /* round(0.4) = 0 */
    assert_int_equal(whisper_beam_create(4, 0, TEOT, 4, &b, &err), WGML_OK);
    int32_t init[2] = {1, 2};
    int src[4], comp;
    int32_t tok[4];
    float rows[4 * TV] = {0};
    assert_int_equal(whisper_beam_step(b, rows, TV, src, tok, &comp, &err),
                     WGML_ERR_INVALID_ARGUMENT); /* not started */
    assert_int_equal(whisper_beam_start(b, init, 2, &err), WGML_OK);
    assert_int_equal(whisper_beam_step(b, rows, 4, src, tok, &comp, &err), WGML_ERR_INVALID_ARGUMENT); /* 4 < 5 ids */
    assert_int_equal(whisper_beam_step(b, rows, TV, src, tok, &comp, &err), WGML_OK);
    assert_int_equal(whisper_beam_step(b, rows, TV, src, tok, &comp, &err), WGML_OK);
    assert_int_equal(whisper_beam_step(b, rows, TV, src, tok, &comp, &err), WGML_ERR_INVALID_ARGUMENT); /* full */
    whisper_beam_free(b);
}

/* ---- initial tokens ---- */

static void test_initial_tokens(void **state) {
    (void)state;
    whisper_specials sp = specials(NV), en = specials(51864), v3 = specials(51866);
    int32_t s[4];
    assert_int_equal(whisper_sot_sequence(&sp, sp.lang0, 0, 0, s), 3);
    assert_true(s[0] == 50258 && s[1] == 50259 && s[2] == 50359);
    assert_int_equal(whisper_sot_sequence(&sp, sp.lang0, 1, 1, s), 4);
    assert_true(s[2] == 50358 && s[3] == 50363);
    assert_int_equal(whisper_sot_sequence(&v3, v3.lang0, 0, 0, s), 3);
    assert_true(s[2] == 50360);
    assert_int_equal(whisper_sot_sequence(&en, en.lang0, 0, 1, s), 2);
    assert_true(s[0] == 50257 && s[1] == 50362);

    int32_t sot[3] = {50258, 50259, 50359}, prompt[300], prefix[3] = {11, 12, 13}, out[600];
    for (int i = 0; i < 300; i++)
        prompt[i] = i;
    int n = whisper_initial_tokens(&sp, sot, 3, prompt, 300, NULL, 0, 448, 224, out, 600);
    assert_int_equal(n, 1 + 223 + 3);
    assert_int_equal(out[0], sp.sot_prev);
    assert_int_equal(out[1], 77);
    assert_int_equal(out[223], 299);
    assert_int_equal(out[224], 50258);
    /* the prefix: [-(224 - sample_len):] in Python's terms */
    const int cases[][3] = {{224, 3, 11}, {220, 3, 11}, {223, 1, 13}, {226, 1, 13}, {230, 0, 0}};
    for (int c = 0; c < 5; c++) {
        n = whisper_initial_tokens(&sp, sot, 3, NULL, 0, prefix, 3, 448, cases[c][0], out, 600);
        assert_int_equal(n, 3 + cases[c][1]);
        if (cases[c][1]) assert_int_equal(out[3], cases[c][2]);
    }
    n = whisper_initial_tokens(&sp, sot, 3, prompt, 2, prefix, 3, 448, 224, out, 600);
    assert_int_equal(n, 1 + 2 + 3 + 3);
    const int32_t want[] = {sp.sot_prev, 0, 1, 50258, 50259, 50359, 11, 12, 13};
    assert_memory_equal(out, want, sizeof want);
    assert_int_equal(whisper_initial_tokens(&sp, sot, 3, prompt, 2, prefix, 3, 448, 224, out, 8), -1);
}

/* ---- segments and windows ---- */

static void test_segments(void **state) {
    (void)state;
    whisper_specials sp = specials(NV);
    const int T = sp.ts_begin;
    int clips[2], ci = 0, seek;
    assert_int_equal(whisper_seek_clips(NULL, 0, 3327, clips, 1), 1);
    seek = clips[0];
    whisper_window w0, w;
    assert_int_equal(whisper_next_window(clips, 1, &ci, &seek, 3327, &w0), 1);
    assert_true(w0.seek == 0 && w0.segment_size == 3000 && w0.time_offset == 0 && w0.segment_duration == 30.0);
    seek += 3000;
    assert_int_equal(whisper_next_window(clips, 1, &ci, &seek, 3327, &w), 1);
    assert_true(w.seek == 3000 && w.segment_size == 327 && w.time_offset == 30.0 && w.window_end_time == 60.0);
    assert_true(w.segment_duration == 3.27);
    whisper_segment s[8];
    int adv;

    /* pairs, then an unfinished segment: it is dropped and the next window starts at the last pair */
    const int32_t a[] = {T, 10, 11, T + 50, T + 50, 12, T + 80, T + 80, 13};
    assert_int_equal(whisper_segments(&sp, a, 9, &w, s, 8, &adv), 2);
    assert_true(s[0].begin == 0 && s[0].end == 4 && s[1].begin == 4 && s[1].end == 7);
    assert_true(s[0].start == 30.0 && s[0].end_time == 30.0 + 50 * 0.02);
    assert_true(s[1].start == 30.0 + 50 * 0.02 && s[1].end_time == 30.0 + 80 * 0.02);
    assert_int_equal(adv, 160);
    /* ends with a single timestamp: the tail is a segment, and the window is done */
    const int32_t b[] = {T, 10, T + 50, T + 50, 11, T + 70};
    assert_int_equal(whisper_segments(&sp, b, 6, &w, s, 8, &adv), 2);
    assert_true(s[1].begin == 3 && s[1].end == 6 && s[1].end_time == 30.0 + 70 * 0.02);
    assert_int_equal(adv, 327);
    /* ends with a pair: the last segment ends at the pair's first timestamp */
    const int32_t c[] = {T, 10, T + 50, T + 50};
    assert_int_equal(whisper_segments(&sp, c, 4, &w, s, 8, &adv), 1);
    assert_true(s[0].begin == 0 && s[0].end == 3);
    assert_int_equal(adv, 100);
    /* no pair, a last timestamp: one segment that long */
    const int32_t d[] = {T + 10, 10, 11, T + 60};
    assert_int_equal(whisper_segments(&sp, d, 4, &w, s, 8, &adv), 1);
    assert_true(s[0].begin == 0 && s[0].end == 4 && s[0].start == 30.0 && s[0].end_time == 30.0 + 60 * 0.02);
    assert_int_equal(adv, 327);
    /* no timestamps, or only <|0.00|>: the window's audio */
    const int32_t e[] = {10, 11}, f[] = {T, 10};
    assert_int_equal(whisper_segments(&sp, e, 2, &w, s, 8, &adv), 1);
    assert_true(s[0].end_time == 30.0 + 3.27);
    assert_int_equal(whisper_segments(&sp, f, 2, &w, s, 8, &adv), 1);
    assert_true(s[0].end_time == 30.0 + 3.27);
    assert_int_equal(whisper_segments(&sp, NULL, 0, &w0, s, 8, &adv), 1);
    assert_true(s[0].begin == 0 && s[0].end == 0 && s[0].end_time == 30.0);
    assert_int_equal(adv, 3000);
    /* a short buffer: the count */
    assert_int_equal(whisper_segments(&sp, a, 9, &w, s, 1, &adv), 2);
    /* times as the official doubles: 30.0 + 77 * 0.02 = 31.54 */
    const int32_t g[] = {T + 77, 10, T + 78, T + 78};
    whisper_segments(&sp, g, 4, &w, s, 8, &adv);
    char buf[32];
    snprintf(buf, sizeof buf, "%.17g", s[0].start);
    assert_string_equal(buf, "31.539999999999999");

    /* clips: "0.5,2,5" -> (50, 200), (500, end) */
    const double ts[] = {0.5, 2.0, 5.0};
    int cl[4];
    assert_int_equal(whisper_seek_clips(ts, 3, 1000, cl, 2), 2);
    assert_true(cl[0] == 50 && cl[1] == 200 && cl[2] == 500 && cl[3] == 1000);
    ci = 0, seek = cl[0];
    assert_int_equal(whisper_next_window(cl, 2, &ci, &seek, 1000, &w), 1);
    assert_true(w.seek == 50 && w.segment_size == 150 && w.time_offset == 0.5);
    seek += 3000;
    assert_int_equal(whisper_next_window(cl, 2, &ci, &seek, 1000, &w), 1);
    assert_true(w.seek == 500 && w.segment_size == 500);
    seek += 500;
    assert_int_equal(whisper_next_window(cl, 2, &ci, &seek, 1000, &w), 0);
    const double half[] = {0.005, 0.015}; /* round(0.5) = 0, round(1.5) = 2 */
    assert_int_equal(whisper_seek_clips(half, 2, 9, cl, 2), 1);
    assert_true(cl[0] == 0 && cl[1] == 2);
}

/* ---- fallback ---- */

static void test_fallback(void **state) {
    (void)state;
    const whisper_fallback_params *d = &whisper_fallback_defaults;
    assert_true(d->compression_ratio_threshold == 2.4 && d->logprob_threshold == -1.0 && d->no_speech_threshold == 0.6);
    assert_true(whisper_temperatures[0] == 0.0f && whisper_temperatures[5] == 1.0f && whisper_temperatures[1] == 0.2f);
    assert_int_equal(whisper_needs_fallback(d, 2.5, -0.5, 0.1), 1); /* repetitive */
    assert_int_equal(whisper_needs_fallback(d, 2.0, -1.5, 0.1), 1); /* improbable */
    assert_int_equal(whisper_needs_fallback(d, 2.0, -1.5, 0.7), 0); /* silence */
    assert_int_equal(whisper_needs_fallback(d, 2.5, -1.5, 0.7), 0); /* silence wins over repetition too */
    assert_int_equal(whisper_needs_fallback(d, 2.4, -1.0, 0.1), 0); /* thresholds are strict */
    assert_int_equal(whisper_needs_fallback(d, NAN, -0.5, 0.1), 0); /* unknown ratio */
    whisper_fallback_params off = {NAN, NAN, NAN};
    assert_int_equal(whisper_needs_fallback(&off, 9, -9, 0.1), 0);
    whisper_fallback_params no_ns = {2.4, -1.0, NAN};
    assert_int_equal(whisper_needs_fallback(&no_ns, 2.0, -1.5, 0.9), 1);
    assert_int_equal(whisper_should_skip(d, -1.5, 0.7), 1);
    assert_int_equal(whisper_should_skip(d, -1.0, 0.7), 1); /* not above the threshold */
    assert_int_equal(whisper_should_skip(d, -0.5, 0.7), 0);
    assert_int_equal(whisper_should_skip(d, -1.5, 0.6), 0);
    assert_int_equal(whisper_should_skip(&no_ns, -1.5, 0.9), 0);
    whisper_fallback_params no_lp = {2.4, NAN, 0.6};
    assert_int_equal(whisper_should_skip(&no_lp, -0.1, 0.9), 1);
    assert_int_equal(whisper_prompt_reset(1, 0.4f), 0);
    assert_int_equal(whisper_prompt_reset(1, 0.6f), 1);
    assert_int_equal(whisper_prompt_reset(0, 0.0f), 1);
}

/* ---- writers ---- */

static void test_format_timestamp(void **state) {
    (void)state;
    /* seconds, SRT, VTT: from the official format_timestamp */
    static const struct {
        double t;
        const char *srt, *vtt;
    } cases[] = {
        {0, "00:00:00,000", "00:00.000"},
        {0.5, "00:00:00,500", "00:00.500"},
        {59.999, "00:00:59,999", "00:59.999"},
        {3600.5, "01:00:00,500", "01:00:00.500"},
        {0.0005, "00:00:00,000", "00:00.000"},
        {0.0015, "00:00:00,002", "00:00.002"},
        {0.0025, "00:00:00,002", "00:00.002"},
        {1.0005, "00:00:01,000", "00:01.000"},
        {2.0005, "00:00:02,001", "00:02.001"},
        {59.9995, "00:01:00,000", "01:00.000"},
        {3599.9996, "01:00:00,000", "01:00:00.000"},
        {12.34, "00:00:12,340", "00:12.340"},
        {360000.0, "100:00:00,000", "100:00:00.000"},
        {60.0, "00:01:00,000", "01:00.000"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(whisper_format_timestamp(cases[i].t, 1, ',', buf), (int)strlen(cases[i].srt));
        assert_string_equal(buf, cases[i].srt);
        whisper_format_timestamp(cases[i].t, 0, '.', buf);
        assert_string_equal(buf, cases[i].vtt);
    }
    assert_int_equal(whisper_format_timestamp(-0.1, 1, ',', buf), -1);
    assert_int_equal(whisper_format_timestamp(NAN, 1, ',', buf), -1);
}

static void test_writers(void **state) {
    (void)state;
    const whisper_caption c[] = {
        {0, 0.5, " Hello world. "},
        {59.999, 3600.5, " a --> b\t"},
        {3600.5, 3601.0, "\xe3\x80\x80x\xc2\xa0y\xc2\xa0"}, /* U+3000 x U+00A0 y U+00A0 */
        {3601.0, 3601.0, ""},
    };
    struct {
        whisper_format f;
        const char *want;
    } cases[] = {
        {WHISPER_FORMAT_SRT, "1\n00:00:00,000 --> 00:00:00,500\nHello world.\n\n"
                             "2\n00:00:59,999 --> 01:00:00,500\na -> b\n\n"
                             "3\n01:00:00,500 --> 01:00:01,000\nx\xc2\xa0y\n\n"
                             "4\n01:00:01,000 --> 01:00:01,000\n\n\n"},
        {WHISPER_FORMAT_VTT, "WEBVTT\n\n"
                             "00:00.000 --> 00:00.500\nHello world.\n\n"
                             "00:59.999 --> 01:00:00.500\na -> b\n\n"
                             "01:00:00.500 --> 01:00:01.000\nx\xc2\xa0y\n\n"
                             "01:00:01.000 --> 01:00:01.000\n\n\n"},
        {WHISPER_FORMAT_TXT, "Hello world.\na --> b\nx\xc2\xa0y\n\n"},
        {WHISPER_FORMAT_TSV, "start\tend\ttext\n0\t500\tHello world.\n59999\t3600500\ta --> b\n"
                             "3600500\t3601000\tx\xc2\xa0y\n3601000\t3601000\t\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        whisper_str s = {0};
        wgml_error err = {0};
        assert_int_equal(whisper_write_captions(&s, cases[i].f, c, 4, &err), WGML_OK);
        assert_string_equal(s.data, cases[i].want);
        assert_int_equal(s.len, strlen(cases[i].want));
        whisper_str_free(&s);
    }
    /* "--->" becomes "-->": the first match from the left, not overlapping; TSV rounds half to even */
    const whisper_caption d[] = {{0.0005, 2.0005, "--->x-->"}};
    whisper_str s = {0};
    wgml_error err = {0};
    assert_int_equal(whisper_write_captions(&s, WHISPER_FORMAT_VTT, d, 1, &err), WGML_OK);
    assert_string_equal(s.data, "WEBVTT\n\n00:00.000 --> 00:02.001\n-->x->\n\n");
    whisper_str_free(&s);
    assert_int_equal(whisper_write_captions(&s, WHISPER_FORMAT_TSV, d, 1, &err), WGML_OK);
    assert_string_equal(s.data, "start\tend\ttext\n0\t2001\t--->x-->\n");
    whisper_str_free(&s);
    const whisper_caption neg[] = {{-1, 2, "x"}};
    assert_int_equal(whisper_write_captions(&s, WHISPER_FORMAT_SRT, neg, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    whisper_str_free(&s);
    /* out of memory: reported, nothing leaks */
    long live = wgml_alloc_live();
    wgml_alloc_fail_after(0);
    assert_int_equal(whisper_write_captions(&s, WHISPER_FORMAT_SRT, c, 4, &err), WGML_ERR_OUT_OF_MEMORY);
    wgml_alloc_fail_after(-1);
    whisper_str_free(&s);
    assert_int_equal(wgml_alloc_live(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suppress_blank),
        cmocka_unit_test(test_suppress_list),
        cmocka_unit_test(test_timestamp_pairing),
        cmocka_unit_test(test_timestamp_monotonic),
        cmocka_unit_test(test_initial_timestamp),
        cmocka_unit_test(test_timestamp_mass),
        cmocka_unit_test(test_manifest_steps),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_beam_search),
        cmocka_unit_test(test_initial_tokens),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_format_timestamp),
        cmocka_unit_test(test_writers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
