/*
 * sampler.c - see sampler.h.
 *
 * Candidates far below the best logit are dropped before sorting: a token
 * whose scaled logit is more than 30 below the maximum has relative
 * probability e^-30 (~1e-13), so even a 150k vocabulary loses less than 1e-8
 * of probability mass, and a full sort of the vocabulary is avoided per token.
 */
#include "text/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

#define PREFILTER_GAP 30.0f

/* one remembered state: its hash, a copy of it, and the tokens it allows */
typedef struct {
    uint64_t hash, used; /* used: the clock when last hit (0: the entry is free) */
    grammar_state *key;
    uint8_t *mask;
    int count;
} gcache_entry;

#define GCACHE_N 16 /* states remembered */
#define GREEDY_TRIES 8 /* best tokens tried alone before the vocabulary is walked */

typedef struct {
    float logit;
    float p;
    int32_t id;
} candidate;

struct wgml_sampler {
    wgml_sampler_params p;
    int n_vocab;
    candidate *cand;
    float *work; /* logits after penalties */
    uint64_t rng[4];
    /* a grammar (wgml_sampler_set_grammar): its state, the vocabulary's strings, the end tokens */
    grammar_state *gs;
    const grammar_vocab *gv;
    const int32_t *eog;
    int n_eog;
    wgml_error *gerr;
    gcache_entry cache[GCACHE_N]; /* the allowed tokens of recent states */
    grammar_memo *memo;           /* states and transitions met (NULL: none could be made) */
    int32_t *bias_tok;            /* logit biases (wgml_sampler_set_bias) */
    float *bias;
    int n_bias;
    uint64_t cache_clock;
};

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** seeded through splitmix64 */
static uint64_t next_u64(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static void seed_rng(uint64_t s[4], uint64_t seed) {
    for (int i = 0; i < 4; i++) {
        seed += 0x9e3779b97f4a7c15ull;
        uint64_t z = seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        s[i] = z ^ (z >> 31);
    }
}

wgml_status wgml_sampler_check(const wgml_sampler_params *p, wgml_error *err) {
    if (!(p->temperature >= 0 && p->temperature <= 100))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "temperature %g is out of range [0, 100]", p->temperature);
    if (p->top_k < 0) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "top-k %d must be >= 0", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "top-p %g is out of range (0, 1]", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "min-p %g is out of range [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0 && p->repeat_penalty <= 100))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "repeat penalty %g is out of range (0, 100]",
                         p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "repeat-last-n %d must be >= 0", p->repeat_last_n);
    return WGML_OK;
}

int wgml_sampler_is_greedy(const wgml_sampler_params *p) {
    return p->temperature <= 0 && (p->repeat_penalty == 1.0f || p->repeat_last_n == 0);
}

wgml_status wgml_sampler_create(const wgml_sampler_params *p, int n_vocab, wgml_sampler **out, wgml_error *err) {
    *out = NULL;
    wgml_status st = wgml_sampler_check(p, err);
    if (st) return st;
    if (n_vocab < 1) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "empty vocabulary");
    wgml_sampler *s = wgml_calloc(1, sizeof *s);
    if (s) {
        s->cand = wgml_calloc((size_t)n_vocab, sizeof *s->cand);
        s->work = wgml_calloc((size_t)n_vocab, sizeof *s->work);
    }
    if (!s || !s->cand || !s->work) {
        wgml_sampler_free(s);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating the sampler");
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    seed_rng(s->rng, p->seed);
    *out = s;
    return WGML_OK;
}

int wgml_sampler_set_bias(wgml_sampler *s, const int32_t *tokens, const float *bias, int n) {
    wgml_free(s->bias_tok), wgml_free(s->bias);
    s->bias_tok = NULL, s->bias = NULL, s->n_bias = 0;
    if (n <= 0) return 0;
    s->bias_tok = wgml_malloc((size_t)n * sizeof *s->bias_tok);
    s->bias = wgml_malloc((size_t)n * sizeof *s->bias);
    if (!s->bias_tok || !s->bias) return -1;
    memcpy(s->bias_tok, tokens, (size_t)n * sizeof *tokens);
    memcpy(s->bias, bias, (size_t)n * sizeof *bias);
    s->n_bias = n;
    return 0;
}

static void apply_bias(wgml_sampler *s, float *l) {
    for (int i = 0; i < s->n_bias; i++) {
        const int32_t t = s->bias_tok[i];
        if (t < 0 || t >= s->n_vocab) continue;
        l[t] = s->bias[i] <= -100.0f ? -INFINITY : l[t] + s->bias[i];
    }
}

static void cache_clear(wgml_sampler *s) {
    for (int i = 0; i < GCACHE_N; i++) {
        grammar_state_free(s->cache[i].key);
        wgml_free(s->cache[i].mask);
        s->cache[i] = (gcache_entry){0};
    }
}

void wgml_sampler_set_grammar(wgml_sampler *s, grammar_state *state, const grammar_vocab *vocab, const int32_t *eog,
                              int n_eog, wgml_error *err) {
    cache_clear(s);
    grammar_memo_free(s->memo);
    s->memo = NULL;
    if (state) grammar_memo_create(grammar_state_grammar(state), &s->memo, NULL); /* none: walks without it */
    s->gs = state, s->gv = vocab, s->eog = eog, s->n_eog = eog ? n_eog : 0, s->gerr = err;
}

void wgml_sampler_free(wgml_sampler *s) {
    if (!s) return;
    cache_clear(s);
    grammar_memo_free(s->memo);
    wgml_free(s->bias_tok);
    wgml_free(s->bias);
    wgml_free(s->cand);
    wgml_free(s->work);
    wgml_free(s);
}

static int by_logit_desc(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id; /* stable order on ties */
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int32_t pick(wgml_sampler *s, const int32_t *history, int n_history, int penalize);

static int is_eog(const wgml_sampler *s, int32_t t) {
    for (int i = 0; i < s->n_eog; i++)
        if (s->eog[i] == t) return 1;
    return 0;
}

/* The tokens the grammar lets follow in its current state (end tokens aside),
 * from the cache or by walking the vocabulary; NULL on an error. */
static const uint8_t *allowed_mask(wgml_sampler *s, wgml_error *err) {
    const uint64_t h = grammar_state_hash(s->gs);
    gcache_entry *victim = &s->cache[0];
    for (int i = 0; i < GCACHE_N; i++) {
        gcache_entry *c = &s->cache[i];
        if (c->used && c->hash == h && grammar_state_equal(c->key, s->gs)) {
            c->used = ++s->cache_clock;
            return c->mask;
        }
        if (c->used < victim->used) victim = c;
    }
    const int nv = grammar_vocab_size(s->gv);
    if (!victim->mask && !(victim->mask = wgml_malloc(nv ? (size_t)nv : 1))) {
        wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the grammar's token mask");
        return NULL;
    }
    grammar_state_free(victim->key);
    victim->key = NULL, victim->used = 0;
    if (grammar_state_clone(s->gs, &victim->key, err)) return NULL;
    victim->count = s->memo ? grammar_allowed_memo(s->memo, s->gs, s->gv, victim->mask, err)
                            : grammar_allowed(s->gs, s->gv, victim->mask, err);
    if (victim->count < 0) return NULL;
    victim->hash = h, victim->used = ++s->cache_clock;
    return victim->mask;
}

/* Whether token t may come next (1; then the state takes it), 0 if not, -1 on an error. */
static int try_token(wgml_sampler *s, int32_t t, wgml_error *err) {
    if (is_eog(s, t)) return grammar_accepting(s->gs);
    if (t >= grammar_vocab_size(s->gv) || !grammar_vocab_len(s->gv, t)) return 0;
    grammar_state *c;
    if (grammar_state_clone(s->gs, &c, err)) return -1;
    const int r = grammar_accept(c, grammar_vocab_bytes(s->gv, t), grammar_vocab_len(s->gv, t), err);
    grammar_state_free(c);
    if (r != 1) return r;
    return grammar_accept(s->gs, grammar_vocab_bytes(s->gv, t), grammar_vocab_len(s->gv, t), err);
}

static void penalize(wgml_sampler *s, const int32_t *history, int n_history) {
    const wgml_sampler_params *p = &s->p;
    const int n = s->n_vocab;
    float *l = s->work;
    if (p->repeat_penalty == 1.0f || p->repeat_last_n <= 0 || !history) return;
    /* each distinct recent token once */
    int from = n_history > p->repeat_last_n ? n_history - p->repeat_last_n : 0;
    for (int i = from; i < n_history; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= n) continue;
        int seen = 0;
        for (int j = from; j < i; j++) seen |= history[j] == t;
        if (seen) continue;
        l[t] = l[t] > 0 ? l[t] / p->repeat_penalty : l[t] * p->repeat_penalty;
    }
}

int32_t wgml_sampler_sample(wgml_sampler *s, const float *logits, const int32_t *history, int n_history) {
    const int n = s->n_vocab;
    float *l = s->work;
    memcpy(l, logits, (size_t)n * sizeof *l);
    for (int i = 0; i < n; i++)
        if (isnan(l[i])) l[i] = -INFINITY; /* a NaN logit never wins */
    apply_bias(s, l);
    if (!s->gs) return pick(s, history, n_history, 1);

    wgml_error scratch, *err = s->gerr ? s->gerr : &scratch;
    penalize(s, history, n_history);
    const int can_end = grammar_accepting(s->gs);
    /* an end token keeps a finite logit where the grammar may end: it must be pickable */
    for (int i = 0; i < s->n_eog; i++) {
        const int32_t e = s->eog[i];
        if (e >= 0 && e < n && can_end && !isfinite(l[e])) l[e] = -1e30f;
    }
    if (s->p.temperature <= 0 && !grammar_finished(s->gs)) {
        /* greedy: the best token is usually allowed; try a few alone before walking the vocabulary */
        for (int tries = 0; tries < GREEDY_TRIES; tries++) {
            const int32_t t = argmax(l, n);
            if (!(l[t] > -INFINITY)) break;
            const int r = try_token(s, t, err);
            if (r < 0) return -1;
            if (r) return t;
            l[t] = -INFINITY;
        }
    }
    if (grammar_finished(s->gs)) { /* nothing may follow: only an end token */
        for (int i = 0; i < n; i++)
            if (!is_eog(s, i)) l[i] = -INFINITY;
    } else {
        const uint8_t *mask = allowed_mask(s, err);
        if (!mask) return -1;
        const int nv = grammar_vocab_size(s->gv);
        for (int i = 0; i < n; i++)
            if ((i >= nv || !mask[i]) && !(can_end && is_eog(s, i))) l[i] = -INFINITY;
    }
    int any = 0;
    for (int i = 0; i < n && !any; i++) any = l[i] > -INFINITY;
    if (!any) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "no token of the vocabulary can continue the grammar here");
        return -1;
    }
    const int32_t t = pick(s, history, n_history, 0);
    if (is_eog(s, t)) return t;
    const int r = grammar_accept(s->gs, grammar_vocab_bytes(s->gv, t), grammar_vocab_len(s->gv, t), err);
    if (r == 0) wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the grammar refused a token it allowed");
    return r == 1 ? t : -1;
}

/* the steps after the logits are in s->work (a grammar's mask applied, the penalty too unless penalize) */
static int32_t pick(wgml_sampler *s, const int32_t *history, int n_history, int penalize_) {
    const wgml_sampler_params *p = &s->p;
    int n = s->n_vocab;
    float *l = s->work;
    if (penalize_) penalize(s, history, n_history);
    if (p->temperature <= 0) return argmax(l, n);

    /* candidates within PREFILTER_GAP (in temperature-scaled units) of the best */
    float mx = l[argmax(l, n)];
    if (!isfinite(mx)) return argmax(l, n);
    float floor_ = mx - PREFILTER_GAP * p->temperature;
    int nc = 0;
    for (int i = 0; i < n; i++)
        if (l[i] >= floor_) s->cand[nc++] = (candidate){l[i], 0, i};
    qsort(s->cand, (size_t)nc, sizeof *s->cand, by_logit_desc);
    if (p->top_k > 0 && nc > p->top_k) nc = p->top_k;

    /* softmax with temperature */
    double sum = 0;
    for (int i = 0; i < nc; i++) {
        s->cand[i].p = expf((s->cand[i].logit - mx) / p->temperature);
        sum += s->cand[i].p;
    }
    for (int i = 0; i < nc; i++) s->cand[i].p = (float)(s->cand[i].p / sum);

    /* top-p: the smallest prefix whose mass reaches top_p */
    if (p->top_p < 1.0f) {
        double cum = 0;
        for (int i = 0; i < nc; i++) {
            cum += s->cand[i].p;
            if (cum >= p->top_p) {
                nc = i + 1;
                break;
            }
        }
    }
    /* min-p: drop tokens less likely than min_p times the best */
    if (p->min_p > 0) {
        float cut = p->min_p * s->cand[0].p;
        int keep = 1;
        while (keep < nc && s->cand[keep].p >= cut) keep++;
        nc = keep;
    }
    double total = 0;
    for (int i = 0; i < nc; i++) total += s->cand[i].p;
    double r = (double)(next_u64(s->rng) >> 11) * (1.0 / 9007199254740992.0) * total;
    double acc = 0;
    for (int i = 0; i < nc; i++) {
        acc += s->cand[i].p;
        if (r < acc) return s->cand[i].id;
    }
    return s->cand[nc - 1].id;
}
