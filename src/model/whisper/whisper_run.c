/*
 * whisper_run.c - the official transcribe() on the model: the family's
 * transcriber (model/family.h). Per request (a whisper_run state):
 *
 *   log-mel of the clip with 30 s of zero padding (audio/mel.h), its
 *   maximum over every frame first, then each window computed again;
 *   language: given, or detected on the first 30 s (detect_language: the
 *     language tokens' logits after <|startoftranscript|>);
 *   each window (whisper_next_window): encoded once, then decoded at the
 *     fallback temperatures (0, 0.2, ... 1.0, or the one asked for) until
 *     the result passes the checks (whisper_needs_fallback): greedy, beam
 *     search at temperature 0 with beam_size > 1, a draw at T > 0; a
 *     silent window (whisper_should_skip) is skipped; the result is split
 *     into segments on its timestamps (whisper_segments), each handed to
 *     the caller, and the window moves on by what the timestamps say;
 *   the previous windows' text is the next one's prompt
 *     (condition_on_previous_text), reset after a hot fallback.
 * The rules themselves (filters, picks, beams, windows, segments) are in
 * whisper_decode.h; this file runs them on whisper.c's forward pass.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "audio/mel.h"
#include "core/alloc.h"
#include "core/error.h"
#include "model/whisper/whisper.h"
#include "model/whisper/whisper_decode.h"
#include "model/whisper/whisper_run.h"
#include "model/whisper/whisper_timing.h"

#define WHISPER_MAX_ALIGN_HEADS 512

struct whisper_run {
    whisper_model *m;
    whisper_state *st;   /* the state in use: st1 or stb */
    whisper_state *st1, *stb; /* one sequence; beam_size sequences (made for a beam search) */
    int win_id, enc1, encb; /* the window's number; the one each state has encoded (-1: none) */
    wgml_kv_type kv;        /* how the states keep cross keys and values (whisper_kv_f16) */
    int next_id;            /* numbers windows (detection's too) for as long as the state lives */
    float *win;          /* a window's log-mel [n_mels][3000] */
    float *logits, *lp;  /* [n_seq][n_vocab]: the model's, their log-softmax */
    size_t cap_logits;
    int32_t *all;        /* every token of the transcript so far (the prompt of later windows) */
    int n_all, cap_all;
    /* word timestamps: the alignment heads, the words of the window, the end of the last word so far */
    int (*heads)[2];
    int n_heads;
    whisper_words words;
    double last_speech;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void whisper_run_free(whisper_run *r) {
    if (!r) return;
    whisper_state_free(r->st1);
    whisper_state_free(r->stb);
    wgml_free(r->win);
    wgml_free(r->logits);
    wgml_free(r->lp);
    wgml_free(r->all);
    wgml_free(r->heads);
    whisper_words_free(&r->words);
    wgml_free(r);
}

/* Makes r->st the state of n_seq sequences (1, or a beam's: made again when
 * the beam size changes, between windows) with the current window encoded. */
static wgml_status use_state(whisper_run *r, int n_seq, wgml_error *err) {
    whisper_model *m = r->m;
    const size_t V = (size_t)m->hp.n_vocab;
    whisper_state **sp = n_seq == 1 ? &r->st1 : &r->stb;
    int *enc = n_seq == 1 ? &r->enc1 : &r->encb;
    wgml_status st;
    if (!*sp || whisper_state_n_seq(*sp) != n_seq || whisper_state_kv(*sp) != r->kv) {
        whisper_state_free(*sp);
        *sp = NULL;
        *enc = -1;
        /* a step holds the initial tokens of every sequence: at most n_text_ctx / 2 + 4 each; one
         * sequence's steps hold the whole context (word timestamps' alignment pass) */
        const int rows = n_seq == 1 ? m->hp.n_text_ctx
                                    : n_seq * (m->hp.n_text_ctx / 2 + 4 < m->hp.n_text_ctx ? m->hp.n_text_ctx / 2 + 4
                                                                                          : m->hp.n_text_ctx);
        if ((st = whisper_state_create(m, n_seq, rows, r->kv, sp, err))) return st;
    }
    if ((size_t)n_seq * V > r->cap_logits) {
        wgml_free(r->logits);
        wgml_free(r->lp);
        r->logits = wgml_malloc((size_t)n_seq * V * sizeof(float));
        r->lp = wgml_malloc((size_t)n_seq * V * sizeof(float));
        r->cap_logits = r->logits && r->lp ? (size_t)n_seq * V : 0;
        if (!r->cap_logits) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the decoder's logits");
    }
    r->st = *sp;
    if (*enc != r->win_id && r->win_id >= 0) {
        if ((st = whisper_encode(m, r->st, r->win, WHISPER_N_FRAMES, NULL, err))) return st;
        *enc = r->win_id;
    }
    return WGML_OK;
}

wgml_status whisper_run_create(whisper_model *m, wgml_kv_type kv, whisper_run **out, wgml_error *err) {
    *out = NULL;
    whisper_run *r = wgml_calloc(1, sizeof *r);
    if (!r) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the transcriber");
    r->m = m;
    r->kv = kv;
    r->win_id = r->enc1 = r->encb = -1;
    r->win = wgml_malloc((size_t)m->hp.n_mels * WHISPER_N_FRAMES * sizeof(float));
    wgml_status st = r->win ? use_state(r, 1, err)
                            : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the transcriber");
    if (st) {
        whisper_run_free(r);
        return st;
    }
    *out = r;
    return WGML_OK;
}

static wgml_status push_tokens(whisper_run *r, const int32_t *t, int n, wgml_error *err) {
    if (r->n_all + n > r->cap_all) {
        int cap = r->cap_all ? r->cap_all : 256;
        while (cap < r->n_all + n) cap *= 2;
        int32_t *a = wgml_realloc(r->all, (size_t)cap * sizeof *a);
        if (!a) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the transcript's tokens");
        r->all = a;
        r->cap_all = cap;
    }
    memcpy(r->all + r->n_all, t, (size_t)n * sizeof *t);
    r->n_all += n;
    return WGML_OK;
}

/* The first forward pass of every sequence on the initial tokens: two steps
 * (up to and including SOT, then the rest) so that the logits at SOT give
 * no_speech_prob (DecodingTask: logits[:, sot_index]); r->logits then holds
 * the last position's row of each sequence. */
static wgml_status first_pass(whisper_run *r, const int32_t *init, int n_init, int sot_index, double *no_speech,
                              wgml_error *err) {
    whisper_model *m = r->m;
    const int N = whisper_state_n_seq(r->st);
    int32_t *rep = wgml_malloc((size_t)n_init * N * sizeof *rep);
    if (!rep) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the initial tokens");
    for (int i = 0; i < n_init; i++)
        for (int q = 0; q < N; q++) rep[i * N + q] = init[i];
    const int a = sot_index + 1;
    wgml_status st = whisper_decode(m, r->st, rep, 0, a, r->logits, NULL, err);
    if (!st) *no_speech = whisper_softmax_at(r->logits, m->hp.n_vocab, m->sp.no_speech);
    if (!st && n_init > a) st = whisper_decode(m, r->st, rep + (size_t)a * N, a, n_init - a, r->logits, NULL, err);
    wgml_free(rep);
    return st;
}

typedef struct decode_opts {
    const whisper_filter_params *fp;
    const int32_t *init;
    int n_init, sot_index, sample_len, beam_size;
    float patience, temperature;
    uint64_t seed;
} decode_opts;

/* Greedy (T = 0) or sampled decoding of one sequence. */
static wgml_status decode_one(whisper_run *r, const decode_opts *o, whisper_window_result *res, wgml_error *err) {
    whisper_model *m = r->m;
    const int V = m->hp.n_vocab, C = m->hp.n_text_ctx, eot = m->sp.eot;
    wgml_status st = use_state(r, 1, err);
    if (st || (st = first_pass(r, o->init, o->n_init, o->sot_index, &res->no_speech_prob, err))) return st;
    whisper_picker *pk = NULL;
    if ((st = whisper_picker_create(o->temperature, o->seed, V, &pk, err))) return st;
    int32_t seq[WHISPER_MAX_TEXT_CTX + 2];
    memcpy(seq, o->init, (size_t)o->n_init * sizeof *seq);
    int n = o->n_init;
    res->sum_logprob = 0;
    for (int i = 0; i < o->sample_len; i++) {
        whisper_filters_apply(o->fp, seq, n, r->logits);
        int32_t next = whisper_picker_next(pk, r->logits, seq[n - 1], eot, &res->sum_logprob);
        seq[n++] = next;
        if (next == eot || n > C) break;
        if ((st = whisper_decode(m, r->st, &next, n - 1, 1, r->logits, NULL, err))) break;
    }
    whisper_picker_free(pk);
    if (st) return st;
    res->n_tokens = 0;
    for (int i = o->n_init; i < n && seq[i] != eot; i++) res->tokens[res->n_tokens++] = seq[i];
    return WGML_OK;
}

/* Beam search of beam_size hypotheses (T = 0). */
static wgml_status decode_beam(whisper_run *r, const decode_opts *o, whisper_window_result *res, wgml_error *err) {
    whisper_model *m = r->m;
    const int V = m->hp.n_vocab, C = m->hp.n_text_ctx, N = o->beam_size;
    wgml_status st = use_state(r, N, err);
    if (st || (st = first_pass(r, o->init, o->n_init, o->sot_index, &res->no_speech_prob, err))) return st;
    whisper_beam *b = NULL;
    if ((st = whisper_beam_create(N, o->patience, m->sp.eot, C + 2, &b, err)) ||
        (st = whisper_beam_start(b, o->init, o->n_init, err))) {
        whisper_beam_free(b);
        return st;
    }
    int src[WHISPER_MAX_BEAM];
    int32_t tok[WHISPER_MAX_BEAM];
    for (int i = 0; i < o->sample_len; i++) {
        for (int j = 0; j < N; j++) {
            int nt;
            const int32_t *t = whisper_beam_tokens(b, j, &nt);
            float *row = r->logits + (size_t)j * V;
            whisper_filters_apply(o->fp, t, nt, row);
            whisper_log_softmax(row, V, r->lp + (size_t)j * V);
        }
        int completed = 0;
        if ((st = whisper_beam_step(b, r->lp, V, src, tok, &completed, err))) break;
        const int len = o->n_init + i; /* positions in the caches before the new tokens */
        if (completed || len + 1 > C) break;
        if ((st = whisper_reorder(m, r->st, src, len, err)) ||
            (st = whisper_decode(m, r->st, tok, len, 1, r->logits, NULL, err)))
            break;
    }
    if (!st) st = whisper_beam_finish(b, err);
    if (!st) {
        int n;
        const int32_t *t = whisper_beam_candidate(b, whisper_beam_best(b, -1.0), &n, &res->sum_logprob);
        res->n_tokens = n;
        memcpy(res->tokens, t, (size_t)n * sizeof *t);
    }
    whisper_beam_free(b);
    return st;
}

/* The detected language: the language tokens' logits after SOT on the
 * first 30 s of the log-mel (its padding frames included, as
 * detect_language gets pad_or_trim of the whole mel). */
static wgml_status detect_language(whisper_run *r, const float *pcm, size_t n, float mel_max, int *lang_token,
                                   struct wgml_threadpool *pool, wgml_error *err) {
    whisper_model *m = r->m;
    const int M = m->hp.n_mels;
    size_t frames = wgml_log_mel_frames(n, WGML_MEL_PAD_SAMPLES), f1 = frames < WHISPER_N_FRAMES ? frames : WHISPER_N_FRAMES;
    float unused;
    memset(r->win, 0, (size_t)M * WHISPER_N_FRAMES * sizeof(float));
    wgml_status st = wgml_log_mel_raw(pcm, n, WGML_MEL_PAD_SAMPLES, whisper_mel_filters(m), M, 0, f1, pool, r->win,
                                      WHISPER_N_FRAMES, &unused, err);
    if (st) return st;
    wgml_log_mel_normalize(r->win, M, f1, WHISPER_N_FRAMES, mel_max);
    r->win_id = r->next_id++; /* a window of its own */
    if ((st = use_state(r, 1, err))) return st;
    const int32_t sot = m->sp.sot;
    if ((st = whisper_decode(m, r->st, &sot, 0, 1, r->logits, NULL, err))) return st;
    int best = m->sp.lang0;
    for (int i = 0; i < m->sp.n_lang; i++)
        if (r->logits[m->sp.lang0 + i] > r->logits[best]) best = m->sp.lang0 + i;
    *lang_token = best;
    return WGML_OK;
}

/* The compression ratio of a result's text (DecodingResult: the decoded
 * text of its tokens, timestamps dropped). */
static double window_ratio(const whisper_run *r, const whisper_window_result *res) {
    int len = whisper_text_decode(r->m->tok, res->tokens, res->n_tokens, NULL, 0);
    if (len <= 0) return len == 0 ? 0.0 : NAN;
    char *text = wgml_malloc((size_t)len + 1);
    if (!text) return NAN;
    whisper_text_decode(r->m->tok, res->tokens, res->n_tokens, text, len + 1);
    text[len] = 0;
    size_t b, e; /* DecodingResult.text is stripped */
    whisper_strip(text, &b, &e);
    double ratio = whisper_compression_ratio(text + b, e - b);
    wgml_free(text);
    return ratio;
}

/* What every window of a request decodes with: the SOT sequence, the
 * filters, the temperatures and the checks. */
typedef struct run_plan {
    int32_t sot[4];
    int n_sot, sample_len, beam;
    int lang, translate; /* the language's token (-1: English-only), 1: translating */
    whisper_filter_params fp;
    float temps[WHISPER_N_TEMPERATURES + 8];
    int n_temps;
    whisper_fallback_params fb;
} run_plan;

static void make_plan(const whisper_run *r, const wgml_transcribe_params *p, int lang, run_plan *pl) {
    const whisper_model *m = r->m;
    memset(pl, 0, sizeof *pl);
    pl->n_sot = whisper_sot_sequence(&m->sp, lang, p->translate, p->without_timestamps, pl->sot);
    pl->lang = lang;
    pl->translate = p->translate;
    const int32_t *suppress;
    const int n_suppress = whisper_suppress_tokens_default(m->tok, &suppress);
    pl->fp = (whisper_filter_params){.sp = &m->sp,
                                     .suppress_blank = 1,
                                     .suppress = suppress,
                                     .n_suppress = n_suppress,
                                     .without_timestamps = p->without_timestamps,
                                     .max_initial_timestamp_index = WHISPER_MAX_INITIAL_TIMESTAMP_INDEX};
    if (p->no_fallback || p->temperature_increment <= 0) pl->temps[pl->n_temps++] = p->temperature;
    else /* np.arange(temperature, 1.0 + 1e-6, increment) */
        for (int i = 0; p->temperature + i * (double)p->temperature_increment <= 1.0 + 1e-6 &&
                        pl->n_temps < (int)(sizeof pl->temps / sizeof *pl->temps);
             i++)
            pl->temps[pl->n_temps++] = (float)(p->temperature + i * (double)p->temperature_increment);
    pl->fb = (whisper_fallback_params){
        .compression_ratio_threshold = p->compression_ratio_threshold > 0 ? p->compression_ratio_threshold : NAN,
        .logprob_threshold = p->logprob_threshold != 0 ? p->logprob_threshold : NAN,
        .no_speech_threshold = p->no_speech_threshold > 0 ? p->no_speech_threshold : NAN};
    pl->sample_len = p->max_tokens > 0 ? p->max_tokens : m->hp.n_text_ctx / 2;
    pl->beam = p->beam_size > 1 ? p->beam_size : 1;
}

/* Word timestamps of one window's segments (add_word_timestamps): the
 * alignment pass (the SOT sequence, <|notimestamps|>, the text tokens, EOT)
 * on the one-sequence state gives the alignment heads' cross-attention and
 * each text token's probability; whisper_timing turns them into words, and
 * ws[i] (tokens and times in) gets segment i's words and adjusted times.
 * r->words holds the words. */
static wgml_status window_words(whisper_run *r, const run_plan *pl, const whisper_window *w, whisper_word_segment *ws,
                                int n, wgml_error *err) {
    whisper_model *m = r->m;
    const whisper_specials *sp = &m->sp;
    const int V = m->hp.n_vocab, A = m->hp.n_audio_ctx;
    whisper_words_free(&r->words);
    if (!r->heads) {
        int tmp[1][2];
        const int nh = whisper_alignment_heads(m->hp.n_mels, V, m->hp.n_audio_layer, m->hp.n_text_layer,
                                               m->hp.n_text_state, m->hp.n_text_head, tmp, 0, NULL);
        if (nh < 1 || nh > WHISPER_MAX_ALIGN_HEADS)
            return wgml_fail(err, WGML_ERR_FORMAT, "whisper: %d alignment heads for word timestamps", nh);
        if (!(r->heads = wgml_malloc((size_t)nh * sizeof *r->heads)))
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the alignment heads");
        r->n_heads = whisper_alignment_heads(m->hp.n_mels, V, m->hp.n_audio_layer, m->hp.n_text_layer,
                                             m->hp.n_text_state, m->hp.n_text_head, r->heads, nh, NULL);
    }
    /* the text tokens of every segment, in order */
    int32_t text[WHISPER_MAX_TEXT_CTX], toks[WHISPER_MAX_TEXT_CTX + 8], sot[4];
    int n_text = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < ws[i].n_tokens; k++)
            if (ws[i].tokens[k] < sp->eot && n_text < WHISPER_MAX_TEXT_CTX) text[n_text++] = ws[i].tokens[k];
    if (n_text == 0) return WGML_OK; /* find_alignment: no words; the segments keep their times */
    const int n_sot = whisper_sot_sequence(sp, pl->lang, pl->translate, 0, sot);
    const int n_tok = whisper_alignment_tokens(sp, sot, n_sot, text, n_text, toks, WHISPER_MAX_TEXT_CTX + 8);
    if (n_tok > m->hp.n_text_ctx)
        return wgml_fail(err, WGML_ERR_CONTEXT_FULL, "whisper: %d tokens to align, the decoder holds %d", n_tok,
                         m->hp.n_text_ctx);
    wgml_status st = use_state(r, 1, err);
    if (st) return st;
    float *weights = wgml_malloc((size_t)r->n_heads * n_tok * A * sizeof(float));
    float *probs = wgml_malloc((size_t)n_text * sizeof(float));
    const int chunk = 64;
    float *rows = wgml_malloc((size_t)chunk * V * sizeof(float));
    if (!weights || !probs || !rows) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for word timestamps");
    if (!st) st = whisper_cross_weights(m, r->st, toks, n_tok, (const int (*)[2])r->heads, r->n_heads, weights, err);
    /* the row of <|notimestamps|> predicts the first text token, ... */
    for (int a = 0; !st && a < n_text; a += chunk) {
        const int k = n_text - a < chunk ? n_text - a : chunk;
        st = whisper_row_logits(m, r->st, n_sot + a, k, rows, err);
        for (int i = 0; !st && i < k; i++) probs[a + i] = whisper_text_token_prob(rows + (size_t)i * V, sp->eot, text[a + i]);
    }
    wgml_free(rows);
    if (!st) {
        const whisper_alignment al = {.tok = m->tok,
                                      .language = pl->lang >= 0 ? whisper_lang_code(pl->lang - sp->lang0) : NULL,
                                      .n_sot = n_sot,
                                      .text_tokens = text,
                                      .n_text = n_text,
                                      .text_token_probs = probs,
                                      .weights = weights,
                                      .n_heads = r->n_heads,
                                      .n_rows = n_tok,
                                      .n_frames = w->segment_size / 2,
                                      .row_stride = A,
                                      .probabilities = 1};
        st = whisper_add_word_timestamps(&al, ws, n, w->time_offset, r->last_speech, &r->words, err);
    }
    wgml_free(weights);
    wgml_free(probs);
    return st;
}

/* get_end: the end of the last word of the segments, else of the last segment. */
static double segments_end(const whisper_run *r, const whisper_word_segment *ws, int n) {
    for (int i = n - 1; i >= 0; i--)
        if (ws[i].n_words > 0) return r->words.w[ws[i].word_begin + ws[i].n_words - 1].end;
    return ws[n - 1].end;
}

/* Emits the segments of one window's result; appends their tokens to the
 * transcript. *advance: in, the frames whisper_segments moves the window by;
 * out, as the last word says (word timestamps). */
static wgml_status emit_segments(whisper_run *r, const run_plan *pl, const wgml_transcribe_params *p,
                                 const whisper_window_result *res, const whisper_window *w, int *index, int *advance,
                                 wgml_segment_fn on_segment, void *user, int *stopped, wgml_error *err) {
    whisper_model *m = r->m;
    whisper_segment segs[WHISPER_MAX_TEXT_CTX];
    whisper_word_segment ws[WHISPER_MAX_TEXT_CTX];
    int n = whisper_segments(&m->sp, res->tokens, res->n_tokens, w, segs, WHISPER_MAX_TEXT_CTX, advance);
    if (n > WHISPER_MAX_TEXT_CTX) n = WHISPER_MAX_TEXT_CTX;
    for (int i = 0; i < n; i++)
        ws[i] = (whisper_word_segment){.tokens = res->tokens + segs[i].begin,
                                       .n_tokens = segs[i].end - segs[i].begin,
                                       .start = segs[i].start,
                                       .end = segs[i].end_time};
    wgml_status st = WGML_OK;
    wgml_transcript_word *words = NULL;
    if (p->word_timestamps && n > 0) {
        if ((st = window_words(r, pl, w, ws, n, err))) return st;
        const int nt = res->n_tokens, tsb = m->sp.ts_begin;
        const int single_ending = nt >= 2 && res->tokens[nt - 2] < tsb && res->tokens[nt - 1] >= tsb;
        const double last_end = segments_end(r, ws, n);
        if (!single_ending && last_end > w->time_offset) *advance = (int)nearbyint(last_end * 100.0) - w->seek;
        r->last_speech = last_end;
        if (r->words.n > 0 && !(words = wgml_malloc((size_t)r->words.n * sizeof *words)))
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a segment's words");
        for (int i = 0; i < r->words.n; i++)
            words[i] = (wgml_transcript_word){.text = r->words.w[i].text,
                                              .start = r->words.w[i].start,
                                              .end = r->words.w[i].end,
                                              .probability = (float)r->words.w[i].probability};
    }
    for (int i = 0; i < n && !st && !*stopped; i++) {
        const int32_t *t = ws[i].tokens;
        int nt = ws[i].n_tokens;
        int len = whisper_text_decode(m->tok, t, nt, NULL, 0);
        if (len < 0) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "whisper: a segment's text could not be decoded");
            break;
        }
        char *text = wgml_malloc((size_t)len + 1);
        if (!text) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a segment's text");
            break;
        }
        whisper_text_decode(m->tok, t, nt, text, len + 1);
        text[len] = 0;
        /* an instantaneous segment, or one without text, is emptied (transcribe(), after the words) */
        size_t b, e;
        whisper_strip(text, &b, &e);
        int n_words = p->word_timestamps ? ws[i].n_words : 0;
        if (ws[i].start == ws[i].end || b == e) {
            text[0] = 0;
            nt = 0;
            n_words = 0;
        }
        st = push_tokens(r, t, nt, err);
        wgml_transcript_segment s = {.index = (*index)++,
                                     .start = ws[i].start,
                                     .end = ws[i].end,
                                     .text = text,
                                     .tokens = t,
                                     .n_tokens = nt,
                                     .temperature = res->temperature,
                                     .avg_logprob = (float)res->avg_logprob,
                                     .compression_ratio = isnan(res->compression_ratio) ? 0.0f
                                                                                         : (float)res->compression_ratio,
                                     .no_speech_prob = (float)res->no_speech_prob,
                                     .words = n_words ? words + ws[i].word_begin : NULL,
                                     .n_words = n_words,
                                     .seek = w->seek};
        if (!st && on_segment && on_segment(user, &s)) *stopped = 1;
        wgml_free(text);
    }
    wgml_free(words);
    return st;
}

/* Decodes the window in r->win (encoded on first use) with the fallback
 * ladder (decode_with_fallback). */
static wgml_status run_window(whisper_run *r, const run_plan *pl, const wgml_transcribe_params *p,
                              const int32_t *prompt, int n_prompt, uint64_t seed, whisper_window_result *res,
                              wgml_error *err) {
    const whisper_model *m = r->m;
    int32_t init[WHISPER_MAX_TEXT_CTX];
    const int n_init = whisper_initial_tokens(&m->sp, pl->sot, pl->n_sot, prompt, n_prompt, NULL, 0,
                                              m->hp.n_text_ctx, pl->sample_len, init, WHISPER_MAX_TEXT_CTX);
    if (n_init < 0) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: the initial tokens do not fit");
    whisper_filter_params fp = pl->fp;
    fp.sample_begin = n_init;
    const int sot_index = n_init - pl->n_sot; /* after <|startofprev|> and the prompt, if any */
    wgml_status st = WGML_OK;
    for (int ti = 0; ti < pl->n_temps; ti++) {
        const float T = pl->temps[ti];
        decode_opts o = {.fp = &fp, .init = init, .n_init = n_init, .sot_index = sot_index,
                         .sample_len = pl->sample_len, .beam_size = T == 0 ? pl->beam : 1, .patience = p->patience,
                         .temperature = T, .seed = seed + (uint64_t)ti};
        res->temperature = T;
        st = o.beam_size > 1 ? decode_beam(r, &o, res, err) : decode_one(r, &o, res, err);
        if (st) break;
        res->avg_logprob = whisper_avg_logprob(res->sum_logprob, res->n_tokens);
        res->compression_ratio = window_ratio(r, res);
        if (!whisper_needs_fallback(&pl->fb, res->compression_ratio, res->avg_logprob, res->no_speech_prob)) break;
    }
    return st;
}

wgml_status whisper_run_window(whisper_run *r, const float *mel, const wgml_transcribe_params *p, int lang_token,
                               const int32_t *prompt, int n_prompt, whisper_window_result *res, wgml_error *err) {
    const whisper_model *m = r->m;
    if (mel) { /* a new window (NULL: the last one again, encoded already) */
        memcpy(r->win, mel, (size_t)m->hp.n_mels * WHISPER_N_FRAMES * sizeof(float));
        r->win_id = r->next_id++;
    } else if (r->win_id < 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: no window to decode again");
    run_plan pl;
    make_plan(r, p, lang_token, &pl);
    return run_window(r, &pl, p, prompt, n_prompt, p->seed, res, err);
}

wgml_status whisper_run_transcribe(whisper_run *r, const float *pcm, size_t n, const wgml_transcribe_params *p,
                                   wgml_segment_fn on_segment, void *user, wgml_transcribe_result *result,
                                   wgml_error *err) {
    whisper_model *m = r->m;
    const whisper_specials *sp = &m->sp;
    const int M = m->hp.n_mels;
    const float *filters = whisper_mel_filters(m);
    if (!filters) return wgml_fail(err, WGML_ERR_FORMAT, "whisper: the model's mel filters are not loaded");
    r->n_all = 0;
    r->last_speech = 0;
    wgml_status st;
    int f16;
    if ((st = whisper_kv_f16(m, p->kv_type, &f16, err))) return st; /* the states follow r->kv (use_state) */
    r->kv = p->kv_type;
    /* the maximum of the whole log-mel (its padding included), window by window */
    const size_t frames = wgml_log_mel_frames(n, WGML_MEL_PAD_SAMPLES), content = wgml_log_mel_content_frames(n);
    if (!frames) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: %zu samples are too many", n);
    if (content > (size_t)INT32_MAX / 2)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: %zu frames of audio are too many", content);
    float mel_max = -INFINITY;
    double t_enc = 0, t_dec = 0, t0 = now_ms();
    for (size_t f0 = 0; f0 < frames; f0 += WHISPER_N_FRAMES) {
        size_t f1 = f0 + WHISPER_N_FRAMES < frames ? f0 + WHISPER_N_FRAMES : frames;
        float mx;
        if ((st = wgml_log_mel_raw(pcm, n, WGML_MEL_PAD_SAMPLES, filters, M, f0, f1, NULL, r->win, WHISPER_N_FRAMES,
                                   &mx, err)))
            return st;
        if (mx > mel_max) mel_max = mx;
    }
    /* the language */
    int lang = sp->multilingual ? whisper_lang_token(sp, "en") : -1;
    if (sp->multilingual && p->language && *p->language && strcmp(p->language, "auto")) {
        if ((lang = whisper_lang_token(sp, p->language)) < 0)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "language '%s' is not one this model knows", p->language);
    } else if (sp->multilingual) {
        if ((st = detect_language(r, pcm, n, mel_max, &lang, NULL, err))) return st;
    }
    if (result)
        snprintf(result->language, sizeof result->language, "%s", lang >= 0 ? whisper_lang_code(lang - sp->lang0) : "en");
    t_enc += now_ms() - t0;
    run_plan pl;
    make_plan(r, p, lang, &pl);
    /* the initial prompt: " " + its text stripped */
    int prompt_reset_since = 0;
    if (p->prompt && *p->prompt) {
        const char *a = p->prompt, *b = p->prompt + strlen(p->prompt);
        while (a < b && (*a == ' ' || (*a >= '\t' && *a <= '\r'))) a++;
        while (b > a && (b[-1] == ' ' || (b[-1] >= '\t' && b[-1] <= '\r'))) b--;
        const size_t len = (size_t)(b - a) + 1;
        char *text = wgml_malloc(len + 1);
        const int cap = (int)(len < (size_t)INT32_MAX / 2 ? len : (size_t)INT32_MAX / 2) + 8;
        int32_t *ids = wgml_malloc((size_t)cap * sizeof *ids);
        if (!text || !ids) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the prompt");
        if (!st) {
            text[0] = ' ';
            memcpy(text + 1, a, len - 1);
            const int k = whisper_text_encode(m->tok, text, len, ids, cap, err);
            st = k < 0 ? WGML_ERR_TOKENIZER : push_tokens(r, ids, k, err);
        }
        wgml_free(text);
        wgml_free(ids);
        if (st) return st;
    }
    int clips[2];
    whisper_seek_clips(NULL, 0, (int)content, clips, 1);
    int clip_idx = 0, seek = clips[0], index = 0, stopped = 0, n_windows = 0, n_tokens = 0;
    whisper_window w;
    whisper_window_result *res = wgml_malloc(sizeof *res);
    if (!res) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a window's result");
    st = WGML_OK;
    while (!st && !stopped && whisper_next_window(clips, 1, &clip_idx, &seek, (int)content, &w)) {
        /* the window's log-mel: its frames with the clip's maximum, zero columns after */
        double ta = now_ms();
        float mx;
        memset(r->win, 0, (size_t)M * WHISPER_N_FRAMES * sizeof(float));
        if ((st = wgml_log_mel_raw(pcm, n, WGML_MEL_PAD_SAMPLES, filters, M, (size_t)w.seek,
                                   (size_t)w.seek + (size_t)w.segment_size, NULL, r->win, WHISPER_N_FRAMES, &mx, err)))
            break;
        wgml_log_mel_normalize(r->win, M, (size_t)w.segment_size, WHISPER_N_FRAMES, mel_max);
        r->win_id = r->next_id++;
        /* encoded now, in the state the first temperature decodes with (timed apart) */
        if ((st = use_state(r, pl.temps[0] == 0 ? pl.beam : 1, err))) break;
        double tb = now_ms();
        t_enc += tb - ta;
        /* the prompt: the transcript since the last reset */
        const int32_t *prompt = p->condition_on_previous_text ? r->all + prompt_reset_since : NULL;
        const int n_prompt = p->condition_on_previous_text ? r->n_all - prompt_reset_since : 0;
        st = run_window(r, &pl, p, prompt, n_prompt, p->seed + 1000003ull * (uint64_t)n_windows, res, err);
        t_dec += now_ms() - tb;
        if (st) break;
        n_windows++;
        n_tokens += res->n_tokens;
        if (whisper_should_skip(&pl.fb, res->avg_logprob, res->no_speech_prob)) {
            seek += w.segment_size;
            continue;
        }
        int advance = w.segment_size;
        st = emit_segments(r, &pl, p, res, &w, &index, &advance, on_segment, user, &stopped, err);
        if (whisper_prompt_reset(p->condition_on_previous_text, res->temperature)) prompt_reset_since = r->n_all;
        seek += advance;
    }
    wgml_free(res);
    if (result) {
        result->n_segments = index;
        result->n_windows = n_windows;
        result->n_tokens = n_tokens;
        result->encode_ms = t_enc;
        result->decode_ms = t_dec;
    }
    return st;
}
