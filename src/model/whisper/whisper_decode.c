/*
 * whisper_decode.c - Whisper's logit filters, token choice, beam search and
 * ranking (see whisper_decode.h), written from the rules of the official
 * decoding.py (openai/whisper v20250625) and ../shared/whisper/README.md.
 */
#include "model/whisper/whisper_decode.h"

#include "core/alloc.h"
#include "core/error.h"
#include "text/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- logit filters ---- */

wgml_status whisper_filters_check(const whisper_filter_params *p, wgml_error *err) {
    if (!p || !p->sp || p->sp->n_vocab <= 0 || p->sp->ts_begin <= 0 || p->sp->ts_begin >= p->sp->n_vocab)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper filters: no special tokens");
    if (p->sample_begin < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper filters: sample_begin %d < 1", p->sample_begin);
    if (p->n_suppress < 0 || (p->n_suppress > 0 && !p->suppress))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper filters: bad suppress list");
    for (int i = 0; i < p->n_suppress; i++)
        if (p->suppress[i] < 0 || p->suppress[i] >= p->sp->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper filters: suppressed id %d is outside the %d ids",
                             (int)p->suppress[i], p->sp->n_vocab);
    return WGML_OK;
}

static void mask(float *x, int from, int to) {
    for (int i = from < 0 ? 0 : from; i < to; i++)
        x[i] = -INFINITY;
}

/* The largest value of x[from, to), -inf for none (NaN never wins). */
static float max_of(const float *x, int from, int to) {
    float m = -INFINITY;
    for (int i = from; i < to; i++)
        if (x[i] > m) m = x[i];
    return m;
}

/* log(sum exp(x - mx)) over x[0, n) as a float32 (the sum in double). */
static float log_sum_exp_shifted(const float *x, int n, float mx) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp((double)(x[i] - mx));
    return (float)log(s);
}

/* ApplyTimestampRules' last rule: with lp = log_softmax(logits) (float32),
 * when logsumexp(lp[tb:]) > max(lp[:tb]), every text token is masked. */
static void timestamp_mass_rule(float *x, int n, int tb) {
    float mx = max_of(x, 0, n);
    if (!(mx > -INFINITY)) return; /* all masked: torch gets NaN, which compares false */
    float logz = log_sum_exp_shifted(x, n, mx);
    /* log_softmax is monotonic per element, so the largest lp of a range is the lp of its largest logit */
    float text_max = max_of(x, 0, tb), ts_max = max_of(x, tb, n);
    float lp_text = (text_max - mx) - logz;
    if (!(ts_max > -INFINITY)) return; /* logsumexp of -inf only is -inf */
    float m2 = (ts_max - mx) - logz;   /* torch: amax of lp[tb:] */
    double s = 0;
    for (int i = tb; i < n; i++) {
        float lp = (x[i] - mx) - logz;
        s += exp((double)(lp - m2));
    }
    float ts_lse = (float)log(s) + m2;
    if (ts_lse > lp_text) mask(x, 0, tb);
}

void whisper_filters_apply(const whisper_filter_params *p, const int32_t *tokens, int n_tokens, float *logits) {
    const whisper_specials *sp = p->sp;
    const int n = sp->n_vocab, tb = sp->ts_begin;
    const int first = n_tokens <= p->sample_begin;

    /* 1. SuppressBlank: the first sampled token is neither " " nor EOT */
    if (p->suppress_blank && first) {
        if (WHISPER_TOKEN_BLANK < n) logits[WHISPER_TOKEN_BLANK] = -INFINITY;
        logits[sp->eot] = -INFINITY;
    }
    /* 2. SuppressTokens */
    for (int i = 0; i < p->n_suppress; i++)
        if (p->suppress[i] >= 0 && p->suppress[i] < n) logits[p->suppress[i]] = -INFINITY;
    if (p->without_timestamps) return;

    /* 3. ApplyTimestampRules */
    logits[sp->no_timestamps] = -INFINITY;
    const int32_t *seq = tokens + p->sample_begin;
    const int ns = first ? 0 : n_tokens - p->sample_begin;
    const int last_ts = ns >= 1 && seq[ns - 1] >= tb;
    const int penult_ts = ns < 2 || seq[ns - 2] >= tb;
    /* timestamps come in pairs, except a single one right before EOT */
    if (last_ts) {
        if (penult_ts)
            mask(logits, tb, n); /* after a pair (or a first timestamp): text */
        else
            mask(logits, 0, sp->eot); /* after text + timestamp: a timestamp or EOT */
    }
    /* timestamps never decrease, and a segment (text, timestamp) is never empty */
    int t = -1;
    for (int i = ns - 1; i >= 0; i--)
        if (seq[i] >= tb) {
            t = seq[i];
            break;
        }
    if (t >= 0) {
        int t_last = last_ts && !penult_ts ? t : t + 1;
        mask(logits, tb, t_last < n ? t_last : n);
    }
    if (first) {
        mask(logits, 0, tb); /* the first token is a timestamp */
        if (p->max_initial_timestamp_index >= 0) {
            long long last_allowed = (long long)tb + p->max_initial_timestamp_index;
            if (last_allowed + 1 < n) mask(logits, (int)(last_allowed + 1), n);
        }
    }
    timestamp_mass_rule(logits, n, tb);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int whisper_suppress_tokens(const whisper_specials *sp, const int32_t *extra, int n_extra, const int32_t *non_speech,
                            int n_non_speech, int32_t *out, int cap) {
    int total = (extra ? n_extra : 0) + (non_speech ? n_non_speech : 0) + 6;
    int32_t *v = wgml_malloc((size_t)total * sizeof *v);
    if (!v) return -1;
    int k = 0;
    for (int i = 0; extra && i < n_extra; i++)
        if (extra[i] >= 0) v[k++] = extra[i]; /* "-1" stands for the non-speech list */
    for (int i = 0; non_speech && i < n_non_speech; i++)
        v[k++] = non_speech[i];
    v[k++] = sp->transcribe;
    v[k++] = sp->translate;
    v[k++] = sp->sot;
    v[k++] = sp->sot_prev;
    v[k++] = sp->sot_lm;
    v[k++] = sp->no_speech;
    qsort(v, (size_t)k, sizeof *v, cmp_i32);
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (i > 0 && v[i] == v[i - 1]) continue;
        if (m < cap) out[m] = v[i];
        m++;
    }
    wgml_free(v);
    return m;
}

int whisper_max_initial_timestamp_index(double seconds) {
    if (!(seconds > 0)) return -1;
    double r = nearbyint(seconds / WHISPER_TIME_PRECISION); /* Python's round: half to even */
    return r > 1e9 ? 1000000000 : (int)r;
}

/* ---- initial tokens ---- */

int whisper_sot_sequence(const whisper_specials *sp, int lang_token, int translate, int without_timestamps,
                         int32_t out[4]) {
    int n = 0;
    out[n++] = sp->sot;
    if (sp->multilingual) {
        out[n++] = lang_token;
        out[n++] = translate ? sp->translate : sp->transcribe;
    }
    if (without_timestamps) out[n++] = sp->no_timestamps;
    return n;
}

/* Python's list[-m:] as a start index into a list of n: m 0 keeps everything
 * ([-0:] is [0:]), a negative m drops the first -m. */
static int slice_from_end(int n, int m) {
    if (m == 0) return 0;
    if (m > 0) return m >= n ? 0 : n - m;
    return -m >= n ? n : -m;
}

int whisper_initial_tokens(const whisper_specials *sp, const int32_t *sot, int n_sot, const int32_t *prompt,
                           int n_prompt, const int32_t *prefix, int n_prefix, int n_ctx, int sample_len, int32_t *out,
                           int cap) {
    int k = 0;
    if (!prefix) n_prefix = 0;
    if (!prompt) n_prompt = 0;
    int prefix_from = slice_from_end(n_prefix, n_ctx / 2 - sample_len);
    int prompt_from = slice_from_end(n_prompt, n_ctx / 2 - 1);
    int total = n_sot + (n_prefix - prefix_from) + (n_prompt > 0 ? 1 + n_prompt - prompt_from : 0);
    if (total > cap) return -1;
    if (n_prompt > 0) {
        out[k++] = sp->sot_prev;
        for (int i = prompt_from; i < n_prompt; i++)
            out[k++] = prompt[i];
    }
    for (int i = 0; i < n_sot; i++)
        out[k++] = sot[i];
    for (int i = prefix_from; i < n_prefix; i++)
        out[k++] = prefix[i];
    return k;
}

/* ---- token selection ---- */

void whisper_log_softmax(const float *x, int n, float *out) {
    float mx = max_of(x, 0, n);
    float logz = log_sum_exp_shifted(x, n, mx);
    for (int i = 0; i < n; i++)
        out[i] = (x[i] - mx) - logz;
}

float whisper_logprob_of(const float *x, int n, int id) {
    float mx = max_of(x, 0, n);
    return (x[id] - mx) - log_sum_exp_shifted(x, n, mx);
}

int whisper_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best] || (isnan(x[best]) && !isnan(x[i]))) best = i;
    return best;
}

float whisper_softmax_at(const float *x, int n, int id) {
    float mx = max_of(x, 0, n);
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp((double)(x[i] - mx));
    return (float)(exp((double)(x[id] - mx)) / s);
}

struct whisper_picker {
    float temperature;
    int n_vocab;
    wgml_sampler *sampler; /* NULL at temperature 0 */
};

wgml_status whisper_picker_create(float temperature, uint64_t seed, int n_vocab, whisper_picker **out,
                                  wgml_error *err) {
    *out = NULL;
    if (!(temperature >= 0) || n_vocab < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper: temperature %g or vocabulary %d out of range",
                         temperature, n_vocab);
    whisper_picker *p = wgml_calloc(1, sizeof *p);
    if (!p) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating the token picker");
    p->temperature = temperature;
    p->n_vocab = n_vocab;
    if (temperature > 0) {
        wgml_sampler_params sp = {.temperature = temperature,
                                  .top_k = 0,
                                  .top_p = 1.0f,
                                  .min_p = 0.0f,
                                  .repeat_penalty = 1.0f,
                                  .repeat_last_n = 0,
                                  .seed = seed};
        wgml_status st = wgml_sampler_create(&sp, n_vocab, &p->sampler, err);
        if (st) {
            wgml_free(p);
            return st;
        }
    }
    *out = p;
    return WGML_OK;
}

void whisper_picker_free(whisper_picker *p) {
    if (!p) return;
    wgml_sampler_free(p->sampler);
    wgml_free(p);
}

int32_t whisper_picker_next(whisper_picker *p, const float *logits, int32_t last, int eot, float *sum_logprob) {
    if (last == eot) return eot; /* an ended sequence stays ended, its sum unchanged */
    int32_t t = p->sampler ? wgml_sampler_sample(p->sampler, logits, NULL, 0) : whisper_argmax(logits, p->n_vocab);
    if (sum_logprob) *sum_logprob = *sum_logprob + whisper_logprob_of(logits, p->n_vocab, t);
    return t;
}

double whisper_avg_logprob(float sum_logprob, int n_tokens) { return (double)sum_logprob / (n_tokens + 1); }

/* ---- ranking ---- */

static double rank_score(float sum_logprob, int length, double length_penalty) {
    double penalty = length_penalty < 0 ? (double)(length > 0 ? length : 1) : pow((5.0 + length) / 6.0, length_penalty);
    return (double)sum_logprob / penalty;
}

int whisper_rank(const float *sum_logprob, const int *length, int n, double length_penalty) {
    int best = 0;
    double best_s = 0;
    for (int i = 0; i < n; i++) {
        double s = rank_score(sum_logprob[i], length[i], length_penalty);
        if (i == 0 || s > best_s) best = i, best_s = s;
    }
    return best;
}

/* ---- beam search ---- */

typedef struct beam_cand {
    float score;
    int src;   /* the hypothesis it extends (the last of identical ones, as the official dict keeps) */
    int key;   /* the first hypothesis with the same tokens: (key, token) identifies the sequence */
    int order; /* insertion order, for ties */
    int32_t token;
} beam_cand;

struct whisper_beam {
    int beam_size, max_cand, eot, max_tokens;
    int n_initial, len, started, finished;
    int32_t *tok, *next_tok; /* beam_size rows of max_tokens */
    float *sum, *next_sum;
    int *key;
    beam_cand *cand;
    int n_fin, fin_cap; /* finished sequences, then the final candidates */
    int32_t *fin_tok;   /* fin_cap rows of max_tokens, without the EOT */
    int *fin_len;
    float *fin_sum;
};

wgml_status whisper_beam_create(int beam_size, double patience, int eot, int max_tokens, whisper_beam **out,
                                wgml_error *err) {
    *out = NULL;
    if (beam_size < 1 || beam_size > 1024)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam size %d is out of range [1, 1024]", beam_size);
    if (!(patience <= 0) && !(patience > 0 && patience <= 1024))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam patience %g is out of range", patience);
    if (max_tokens < 2) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam: max_tokens %d < 2", max_tokens);
    double pat = patience > 0 ? patience : 1.0;
    int max_cand = (int)nearbyint(beam_size * pat); /* Python's round: half to even */
    if (max_cand < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam size %d with patience %g keeps no candidate", beam_size,
                         patience);
    whisper_beam *b = wgml_calloc(1, sizeof *b);
    if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a beam search");
    b->beam_size = beam_size;
    b->max_cand = max_cand;
    b->eot = eot;
    b->max_tokens = max_tokens;
    b->fin_cap = max_cand > beam_size ? max_cand : beam_size;
    size_t row = (size_t)max_tokens, nb = (size_t)beam_size;
    b->tok = wgml_calloc(nb * row, sizeof *b->tok);
    b->next_tok = wgml_calloc(nb * row, sizeof *b->next_tok);
    b->sum = wgml_calloc(nb, sizeof *b->sum);
    b->next_sum = wgml_calloc(nb, sizeof *b->next_sum);
    b->key = wgml_calloc(nb, sizeof *b->key);
    b->cand = wgml_calloc(nb * (nb + 1), sizeof *b->cand);
    b->fin_tok = wgml_calloc((size_t)b->fin_cap * row, sizeof *b->fin_tok);
    b->fin_len = wgml_calloc((size_t)b->fin_cap, sizeof *b->fin_len);
    b->fin_sum = wgml_calloc((size_t)b->fin_cap, sizeof *b->fin_sum);
    if (!b->tok || !b->next_tok || !b->sum || !b->next_sum || !b->key || !b->cand || !b->fin_tok || !b->fin_len ||
        !b->fin_sum) {
        whisper_beam_free(b);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a beam search");
    }
    *out = b;
    return WGML_OK;
}

void whisper_beam_free(whisper_beam *b) {
    if (!b) return;
    wgml_free(b->tok);
    wgml_free(b->next_tok);
    wgml_free(b->sum);
    wgml_free(b->next_sum);
    wgml_free(b->key);
    wgml_free(b->cand);
    wgml_free(b->fin_tok);
    wgml_free(b->fin_len);
    wgml_free(b->fin_sum);
    wgml_free(b);
}

wgml_status whisper_beam_start(whisper_beam *b, const int32_t *initial, int n_initial, wgml_error *err) {
    if (n_initial < 1 || n_initial >= b->max_tokens)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam: %d initial tokens for at most %d", n_initial,
                         b->max_tokens);
    for (int j = 0; j < b->beam_size; j++) {
        memcpy(b->tok + (size_t)j * b->max_tokens, initial, (size_t)n_initial * sizeof *initial);
        b->sum[j] = 0;
    }
    b->n_initial = b->len = n_initial;
    b->n_fin = 0;
    b->started = 1;
    b->finished = 0;
    return WGML_OK;
}

int whisper_beam_size(const whisper_beam *b) { return b->beam_size; }

const int32_t *whisper_beam_tokens(const whisper_beam *b, int j, int *n_tokens) {
    if (n_tokens) *n_tokens = b->len;
    return b->tok + (size_t)j * b->max_tokens;
}

float whisper_beam_sum_logprob(const whisper_beam *b, int j) { return b->sum[j]; }

/* The k largest of x[0, n) (ties: the lower index first) into val/idx, best first. */
static void top_k(const float *x, int n, int k, float *val, int *idx) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (m == k && !(v > val[k - 1])) continue;
        int pos = m < k ? m : k - 1;
        while (pos > 0 && v > val[pos - 1]) {
            val[pos] = val[pos - 1];
            idx[pos] = idx[pos - 1];
            pos--;
        }
        val[pos] = v;
        idx[pos] = i;
        if (m < k) m++;
    }
}

/* Score descending (NaN last), then insertion order. */
static int cand_cmp(const void *a, const void *b) {
    const beam_cand *x = a, *y = b;
    int xn = isnan(x->score), yn = isnan(y->score);
    if (xn != yn) return xn - yn;
    if (!xn && x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

wgml_status whisper_beam_step(whisper_beam *b, const float *logprobs, int n_vocab, int *source, int32_t *token,
                              int *completed, wgml_error *err) {
    const int B = b->beam_size, K = B + 1;
    if (!b->started || b->finished)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam: step outside a search (start it first)");
    if (n_vocab < K) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam: %d ids for %d proposals", n_vocab, K);
    if (b->len + 1 > b->max_tokens)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam: sequences reached max_tokens %d", b->max_tokens);
    const size_t row = (size_t)b->max_tokens;
    /* identical hypotheses (all of them before the first step) give identical sequences */
    for (int j = 0; j < B; j++) {
        b->key[j] = j;
        for (int i = 0; i < j; i++)
            if (b->key[i] == i && !memcmp(b->tok + j * row, b->tok + i * row, (size_t)b->len * sizeof *b->tok)) {
                b->key[j] = i;
                break;
            }
    }
    /* STEP 1: each hypothesis' K best continuations */
    float val[1025];
    int idx[1025];
    int nc = 0;
    for (int j = 0; j < B; j++) {
        top_k(logprobs + (size_t)j * n_vocab, n_vocab, K, val, idx);
        for (int r = 0; r < K; r++) {
            float score = b->sum[j] + val[r];
            int c = 0;
            while (c < nc && !(b->cand[c].key == b->key[j] && b->cand[c].token == idx[r]))
                c++;
            if (c == nc) b->cand[nc++] = (beam_cand){.key = b->key[j], .token = idx[r], .order = c};
            b->cand[c].score = score;
            b->cand[c].src = j;
        }
    }
    /* STEP 2: rank; EOT endings finish, the best B others continue */
    qsort(b->cand, (size_t)nc, sizeof *b->cand, cand_cmp);
    int saved = 0;
    for (int c = 0; c < nc && saved < B; c++) {
        const beam_cand *k = &b->cand[c];
        if (k->token == b->eot) {
            if (b->n_fin < b->max_cand) { /* already in score order: the official sort again is the same */
                memcpy(b->fin_tok + b->n_fin * row, b->tok + k->src * row, (size_t)b->len * sizeof *b->tok);
                b->fin_len[b->n_fin] = b->len;
                b->fin_sum[b->n_fin] = k->score;
                b->n_fin++;
            }
            continue;
        }
        int32_t *t = b->next_tok + saved * row;
        memcpy(t, b->tok + k->src * row, (size_t)b->len * sizeof *t);
        t[b->len] = k->token;
        b->next_sum[saved] = k->score;
        source[saved] = k->src;
        token[saved] = k->token;
        saved++;
    }
    if (saved < B) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam: only %d continuations", saved);
    int32_t *tt = b->tok;
    b->tok = b->next_tok;
    b->next_tok = tt;
    float *ts = b->sum;
    b->sum = b->next_sum;
    b->next_sum = ts;
    b->len++;
    if (completed) *completed = b->n_fin >= b->max_cand;
    return WGML_OK;
}

wgml_status whisper_beam_finish(whisper_beam *b, wgml_error *err) {
    if (!b->started) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "beam: finish without a search");
    if (b->finished) return WGML_OK;
    const size_t row = (size_t)b->max_tokens;
    if (b->n_fin < b->beam_size) {
        /* the live hypotheses by sum, best first (np.argsort reversed: equal sums, the later first) */
        int order[1024];
        for (int j = 0; j < b->beam_size; j++)
            order[j] = j;
        for (int i = 1; i < b->beam_size; i++) { /* stable insertion sort, ascending */
            int v = order[i], p = i;
            while (p > 0 && b->sum[order[p - 1]] > b->sum[v]) {
                order[p] = order[p - 1];
                p--;
            }
            order[p] = v;
        }
        for (int r = b->beam_size - 1; r >= 0 && b->n_fin < b->beam_size; r--) {
            int j = order[r];
            const int32_t *t = b->tok + j * row;
            int c = 0; /* the same sequence again (only before any step) replaces its value in place */
            while (c < b->n_fin &&
                   !(b->fin_len[c] == b->len && !memcmp(b->fin_tok + c * row, t, (size_t)b->len * sizeof *t)))
                c++;
            if (c == b->n_fin) {
                memcpy(b->fin_tok + c * row, t, (size_t)b->len * sizeof *t);
                b->fin_len[c] = b->len;
                b->n_fin++;
            }
            b->fin_sum[c] = b->sum[j];
        }
    }
    b->finished = 1;
    return WGML_OK;
}

int whisper_beam_n_candidates(const whisper_beam *b) { return b->finished ? b->n_fin : 0; }

const int32_t *whisper_beam_candidate(const whisper_beam *b, int i, int *n_tokens, float *sum_logprob) {
    if (n_tokens) *n_tokens = b->fin_len[i] - b->n_initial;
    if (sum_logprob) *sum_logprob = b->fin_sum[i];
    return b->fin_tok + (size_t)i * b->max_tokens + b->n_initial;
}

int whisper_beam_best(const whisper_beam *b, double length_penalty) {
    int best = 0;
    double best_s = 0;
    for (int i = 0; i < whisper_beam_n_candidates(b); i++) {
        double s = rank_score(b->fin_sum[i], b->fin_len[i] - b->n_initial, length_penalty);
        if (i == 0 || s > best_s) best = i, best_s = s;
    }
    return best;
}
