/*
 * serve_sched.c - the server's slots and its one scheduler thread.
 *
 * A request becomes a job in a FIFO queue. The scheduler moves queued jobs
 * into free slots (preferring the slot whose cached tokens share the longest
 * prefix with the job's prompt: a follow-up turn reuses its conversation's
 * KV cache), then runs steps until no slot is busy:
 *
 *   one wgml_batch_step = every decoding slot's pending token
 *                       + the next chunk of one slot's prompt (the oldest)
 *
 * so a new prompt is evaluated chunk by chunk while the running streams keep
 * getting a token per step. After the step each sampled token becomes text
 * (wgml_token_to_text), is appended to the job's held-back text, and what
 * can no longer be the start of a stop string or part of a split UTF-8
 * character is released to the job (its HTTP thread streams it). A job
 * ends at EOS/end of turn, a stop string, max_tokens or a full context; a
 * cancelled job (its client went away) leaves its slot before the next step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

const double serve_hist_bounds[SERVE_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                      0.5,   1,    2.5,   5,    10,  30};

void serve_hist_add(serve_hist *h, double v) {
    int b = 0;
    while (b < SERVE_HIST_BUCKETS && v > serve_hist_bounds[b]) b++;
    h->count[b]++;
    h->sum += v;
    h->n++;
}

serve_job *serve_job_new(void) {
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    if (pthread_cond_init(&j->cv, NULL)) {
        free(j);
        return NULL;
    }
    j->refs = 1;
    j->prev = -1;
    j->max_tokens = -1;
    return j;
}

void serve_job_unref(serve_server *s, serve_job *j) {
    (void)s;
    if (!j || --j->refs > 0) return;
    pthread_cond_destroy(&j->cv);
    free(j->prompt);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    wgml_grammar_free(j->grammar);
    wgml_tools_free(j->tools);
    free(j->bias_tok);
    free(j->bias);
    free(j->calls);
    free(j->text);
    free(j);
}

wgml_status serve_init(serve_server *s, wgml_model *m, int n_slots, int n_ctx, int chunk, wgml_kv_type kv,
                       wgml_error *err) {
    s->model = m;
    wgml_model_get_info(m, &s->info);
    s->n_slots = n_slots;
    s->chunk = chunk;
    s->kv = kv;
    wgml_batch_params bp = wgml_batch_default_params();
    bp.n_seq = n_slots;
    bp.n_ctx = n_ctx;
    bp.n_batch = n_slots + chunk;
    bp.kv_type = kv;
    if (s->info.tasks & WGML_TASK_GENERATE) {
        wgml_status st = wgml_batch_create(m, &bp, &s->batch, err);
        if (st) return st;
        s->n_ctx = wgml_batch_n_ctx(s->batch);
    } else {
        s->n_ctx = n_ctx > 0 && n_ctx < s->info.n_ctx_train ? n_ctx : s->info.n_ctx_train;
    }
    s->slots = calloc((size_t)n_slots, sizeof *s->slots);
    s->queue = calloc((size_t)s->max_queue + (size_t)n_slots, sizeof *s->queue);
    s->items = calloc((size_t)n_slots, sizeof *s->items);
    s->slot_of = calloc((size_t)n_slots, sizeof *s->slot_of);
    if (!s->slots || !s->queue || !s->items || !s->slot_of || pthread_mutex_init(&s->mu, NULL) ||
        pthread_mutex_init(&s->embed_mu, NULL) ||
        pthread_mutex_init(&s->speech_mu, NULL) ||
        pthread_mutex_init(&s->transcribe_mu, NULL) ||
        pthread_cond_init(&s->wake, NULL)) {
        wgml_batch_free(s->batch);
        s->batch = NULL;
        free(s->slots);
        free(s->queue);
        free(s->items);
        free(s->slot_of);
        s->slots = NULL;
        s->queue = NULL;
        if (err) snprintf(err->message, sizeof err->message, "out of memory starting the server");
        return WGML_ERR_OUT_OF_MEMORY;
    }
    s->last_busy_t = cli_now_ms();
    return WGML_OK;
}

const serve_model *serve_model_for(serve_server *s, uint32_t task, serve_model *out) {
    if (s->info.tasks & task) {
        *out = (serve_model){s->model, s->info, s->model_id};
        return out;
    }
    for (int i = 0; i < s->n_extra; i++)
        if (s->extra[i].info.tasks & task) return &s->extra[i];
    return NULL;
}

void serve_free(serve_server *s) {
    if (!s->slots) return;
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->embed_mu);
    pthread_mutex_destroy(&s->speech_mu);
    pthread_mutex_destroy(&s->transcribe_mu);
    pthread_cond_destroy(&s->wake);
    wgml_batch_free(s->batch);
    free(s->slots);
    free(s->queue);
    free(s->items);
    free(s->slot_of);
    free(s->template_owned);
    s->template_owned = NULL;
    s->slots = NULL;
}

void serve_load(const serve_server *s, int *busy, int *queued) {
    *busy = s->busy;
    *queued = s->q_len;
}

int serve_submit(serve_server *s, serve_job *j) {
    /* waiting room: the queue limit beyond the slots that are free now (the scheduler fills them soon) */
    if (s->q_len >= s->max_queue + (s->n_slots - s->busy) || s->stopping || s->draining) return -1;
    j->refs++;
    j->t_queued = cli_now_ms();
    s->queue[s->q_len++] = j;
    pthread_cond_signal(&s->wake);
    return 0;
}

/* the busy-slot integral up to now (under mu) */
static void account_busy(serve_server *s) {
    double t = cli_now_ms();
    s->metrics.busy_slot_seconds += s->busy * (t - s->last_busy_t) / 1e3;
    s->last_busy_t = t;
}

/* The length of the valid UTF-8 character at p (n bytes left), or 0 (overlong forms, surrogates
 * and values past U+10FFFF are not valid). */
static size_t utf8_char(const unsigned char *p, size_t n) {
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    const size_t l = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3 : (p[0] >> 3) == 30 ? 4 : 0;
    if (!l || l > n) return 0;
    uint32_t cp = l == 1 ? p[0] : p[0] & (0x7Fu >> l);
    for (size_t k = 1; k < l; k++) {
        if ((p[k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (p[k] & 0x3F);
    }
    return cp < least[l] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : l;
}

/* Appends text to a growing buffer, each byte that is not part of valid UTF-8 replaced by U+FFFD
 * (a random or badly tokenized reply must still be valid JSON text); 0, or -1 out of memory. */
static int append_clean(char **buf, size_t *len, size_t *cap, const char *p, size_t n) {
    if (*len + 3 * n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + 3 * n + 1) c *= 2;
        char *t = realloc(*buf, c);
        if (!t) return -1;
        *buf = t;
        *cap = c;
    }
    for (size_t i = 0; i < n;) {
        const size_t l = utf8_char((const unsigned char *)p + i, n - i);
        if (l) {
            memcpy(*buf + *len, p + i, l);
            *len += l, i += l;
        } else {
            memcpy(*buf + *len, "\xEF\xBF\xBD", 3);
            *len += 3, i++;
        }
    }
    (*buf)[*len] = 0;
    return 0;
}

/* Appends released text to the job (under mu); 0, or -1 out of memory. */
static int job_release(serve_job *j, const char *p, size_t n) {
    return n ? append_clean(&j->text, &j->len, &j->cap, p, n) : 0;
}

/* How many trailing bytes of s[0..n) may be an incomplete UTF-8 character. */
static size_t utf8_tail(const char *s, size_t n) {
    size_t back = 0;
    while (back < n && back < 3 && ((unsigned char)s[n - 1 - back] & 0xc0) == 0x80) back++;
    if (back == n) return back < 3 ? back : 0; /* only continuation bytes: hold them while short */
    unsigned char lead = (unsigned char)s[n - 1 - back];
    size_t want = lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : (lead & 0xf8) == 0xf0 ? 4 : 1;
    return want > back + 1 ? back + 1 : 0;
}

/* The longest suffix of h[0..n) that is a proper prefix of a stop string. */
static size_t stop_prefix_tail(const serve_job *j, const char *h, size_t n) {
    size_t best = 0;
    for (int i = 0; i < j->n_stop; i++) {
        size_t sl = strlen(j->stop[i]);
        for (size_t k = sl - 1 < n ? sl - 1 : n; k > best; k--)
            if (!memcmp(h + n - k, j->stop[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

/* Ends a job (under mu): releases what is held (cut at a stop string already), wakes its thread. */
static void job_finish(serve_server *s, serve_job *j, serve_finish f) {
    if (f != SERVE_FINISH_CANCELLED && f != SERVE_FINISH_ERROR) job_release(j, j->held, j->held_len);
    j->held_len = 0;
    j->finish = f;
    j->t_end = cli_now_ms();
    if (f == SERVE_FINISH_CANCELLED) s->metrics.cancelled++;
    if (j->t_start > 0) serve_hist_add(&s->metrics.duration, (j->t_end - j->t_queued) / 1e3);
    pthread_cond_broadcast(&j->cv);
}

/* Takes a generated token's text (under mu). Returns 1 when a stop string ended the job's text. */
/* appends to the job's call text; -1 out of memory */
static int calls_put(serve_job *j, const char *p, size_t n) {
    return append_clean(&j->calls, &j->calls_len, &j->calls_cap, p, n);
}

/* tool_choice auto: whether the calls begin in what is held (from byte `old` on); if so the text
 * from the trigger on moves to the call text, the rest is released, and the slot's grammar is due */
static void find_trigger(serve_job *j, size_t old) {
    const size_t tl = strlen(j->trigger);
    size_t at = (size_t)-1;
    if (j->trigger_at_start) { /* the reply's first character other than white space */
        for (size_t p = old; p < j->held_len && !j->seen_text && at == (size_t)-1; p++) {
            if (strchr(" \t\r\n", j->held[p])) continue;
            if (j->held_len - p >= tl && !memcmp(j->held + p, j->trigger, tl)) at = p;
            else j->seen_text = 1;
        }
    } else {
        for (size_t p = old + 1 > tl ? old + 1 - tl : 0; p + tl <= j->held_len && at == (size_t)-1; p++)
            if (!memcmp(j->held + p, j->trigger, tl)) at = p;
    }
    if (at == (size_t)-1) return;
    if (calls_put(j, j->held + at, j->held_len - at)) return; /* out of memory: it stays text */
    j->held_len = at;
    if (at) job_release(j, j->held, at);
    j->held_len = 0;
    j->tool_active = 1;
    j->tool_bind = 1;
}

static int job_take(serve_server *s, serve_job *j, const char *piece, size_t n) {
    (void)s;
    if (j->tool_active) { /* a tool call: kept whole, no stop strings inside it */
        calls_put(j, piece, n);
        return 0;
    }
    if (n > sizeof j->held - j->held_len) n = sizeof j->held - j->held_len; /* a piece is at most a few bytes */
    memcpy(j->held + j->held_len, piece, n);
    size_t old = j->held_len;
    j->held_len += n;
    if (j->tool_mode == 2 && j->trigger) {
        find_trigger(j, old);
        if (j->tool_active) {
            pthread_cond_broadcast(&j->cv);
            return 0;
        }
    }
    for (int i = 0; i < j->n_stop; i++) {
        size_t sl = strlen(j->stop[i]);
        /* only where the new bytes take part */
        size_t from = old + 1 > sl ? old + 1 - sl : 0;
        for (size_t p = from; p + sl <= j->held_len; p++)
            if (!memcmp(j->held + p, j->stop[i], sl)) {
                j->held_len = p;
                return 1;
            }
    }
    size_t keep = stop_prefix_tail(j, j->held, j->held_len);
    if (j->tool_mode == 2 && j->trigger && !j->trigger_at_start) { /* a trigger may be starting */
        const size_t tl = strlen(j->trigger);
        for (size_t k = tl - 1 < j->held_len ? tl - 1 : j->held_len; k > keep; k--)
            if (!memcmp(j->held + j->held_len - k, j->trigger, k)) {
                keep = k;
                break;
            }
    }
    if (j->tool_mode == 2 && j->trigger_at_start && !j->seen_text) keep = j->held_len; /* white space so far */
    size_t u = utf8_tail(j->held, j->held_len);
    if (u > keep) keep = u;
    size_t out = j->held_len - keep;
    if (out && job_release(j, j->held, out) == 0) {
        memmove(j->held, j->held + out, keep);
        j->held_len = keep;
        pthread_cond_broadcast(&j->cv);
    }
    return 0;
}

/* The longest common prefix of a slot's cached tokens and a prompt. */
static int common_prefix(serve_server *s, int slot, const int32_t *p, int n) {
    int held;
    const int32_t *t = wgml_batch_seq_tokens(s->batch, slot, &held);
    int k = 0;
    while (k < held && k < n && t[k] == p[k]) k++;
    return k;
}

/* Moves queued jobs into free slots (under mu). */
static void assign(serve_server *s) {
    while (s->q_len > 0 && s->busy < s->n_slots) {
        serve_job *j = s->queue[0];
        memmove(s->queue, s->queue + 1, (size_t)(s->q_len - 1) * sizeof *s->queue);
        s->q_len--;
        if (j->cancelled) { /* gone while it waited */
            job_finish(s, j, SERVE_FINISH_CANCELLED);
            serve_job_unref(s, j);
            continue;
        }
        int best = -1, best_k = -1;
        for (int i = 0; i < s->n_slots; i++) {
            if (s->slots[i].job) continue;
            int k = common_prefix(s, i, j->prompt, j->n_prompt);
            if (k > best_k) best = i, best_k = k;
        }
        /* at least the prompt's last token is evaluated: its logits pick the first token */
        int keep = best_k < j->n_prompt - 1 ? best_k : j->n_prompt - 1;
        wgml_error err;
        if (wgml_batch_seq_keep(s->batch, best, keep, &err) ||
            wgml_batch_seq_sampler(s->batch, best, &j->sampler, &err) ||
            (j->grammar && wgml_batch_seq_grammar(s->batch, best, j->grammar, NULL, 0, &err)) ||
            (j->tool_mode == 1 && wgml_batch_seq_grammar(s->batch, best, wgml_tools_grammar(j->tools), NULL, 0, &err)) ||
            wgml_batch_seq_logit_bias(s->batch, best, j->bias_tok, j->bias, j->n_bias, &err)) {
            snprintf(j->error, sizeof j->error, "%s", err.message);
            job_finish(s, j, SERVE_FINISH_ERROR);
            serve_job_unref(s, j);
            continue;
        }
        account_busy(s);
        s->slots[best] = (serve_slot){.job = j, .fed = keep};
        s->busy++;
        j->n_cached = keep;
        j->t_start = cli_now_ms();
        serve_hist_add(&s->metrics.queue_wait, (j->t_start - j->t_queued) / 1e3);
        s->metrics.prompt_tokens += (uint64_t)j->n_prompt;
        s->metrics.cached_tokens += (uint64_t)keep;
    }
}

static void release_slot(serve_server *s, int i) {
    account_busy(s);
    serve_job_unref(s, s->slots[i].job);
    s->slots[i].job = NULL;
    s->busy--;
}

/* After a step (under mu): the sampled token of slot i. */
static void take_token(serve_server *s, int i, int32_t tok) {
    serve_slot *sl = &s->slots[i];
    serve_job *j = sl->job;
    double now = cli_now_ms();
    if (tok < 0) { /* the grammar has no token to go on with */
        snprintf(j->error, sizeof j->error, "%s", wgml_batch_seq_error(s->batch, i));
        job_finish(s, j, SERVE_FINISH_ERROR);
        release_slot(s, i);
        return;
    }
    int eog = wgml_token_is_eog(s->model, tok);
    if (eog) {
        if (!j->n_gen) j->t_first = now;
        job_finish(s, j, SERVE_FINISH_STOP);
        release_slot(s, i);
        return;
    }
    if (!j->n_gen) {
        j->t_first = now;
        serve_hist_add(&s->metrics.ttft, (now - j->t_queued) / 1e3);
    } else {
        serve_hist_add(&s->metrics.per_token, (now - j->t_end) / 1e3);
    }
    j->t_end = now; /* the last token's time, until the end */
    j->n_gen++;
    s->metrics.generated_tokens++;
    char piece[256];
    int n = wgml_token_to_text(s->model, j->prev, tok, piece, (int)sizeof piece);
    if (n < 0) n = 0;
    if (n > (int)sizeof piece) n = (int)sizeof piece;
    j->prev = tok;
    int held;
    wgml_batch_seq_tokens(s->batch, i, &held);
    int stopped = job_take(s, j, piece, (size_t)n);
    if (j->tool_bind) { /* the calls began: from here the slot follows their grammar (if the text so far fits it) */
        j->tool_bind = 0;
        wgml_batch_seq_grammar(s->batch, i, wgml_tools_grammar(j->tools), j->calls, j->calls_len, NULL);
    }
    if (stopped) {
        job_finish(s, j, SERVE_FINISH_STOP);
        release_slot(s, i);
    } else if ((j->max_tokens >= 0 && j->n_gen >= j->max_tokens) || held >= s->n_ctx) {
        job_finish(s, j, SERVE_FINISH_LENGTH);
        release_slot(s, i);
    } else {
        sl->pending = tok;
        sl->has_pending = 1;
    }
}

static void *sched_main(void *arg) {
    serve_server *s = arg;
    wgml_batch_item *items = s->items;
    int *slot_of = s->slot_of;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        /* cancelled jobs leave first, then the queue fills free slots */
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].job && (s->slots[i].job->cancelled || s->stopping)) {
                job_finish(s, s->slots[i].job, SERVE_FINISH_CANCELLED);
                release_slot(s, i);
            }
        /* queued jobs whose client went away (a failed keep-alive write) leave the queue now,
         * not when a slot frees: /health's queue length and the 503 limit count only live ones */
        for (int q = 0; q < s->q_len;) {
            serve_job *j = s->queue[q];
            if (!j->cancelled) {
                q++;
                continue;
            }
            memmove(s->queue + q, s->queue + q + 1, (size_t)(s->q_len - q - 1) * sizeof *s->queue);
            s->q_len--;
            job_finish(s, j, SERVE_FINISH_CANCELLED);
            serve_job_unref(s, j);
        }
        if (s->stopping) {
            while (s->q_len > 0) {
                serve_job *j = s->queue[--s->q_len];
                job_finish(s, j, SERVE_FINISH_CANCELLED);
                serve_job_unref(s, j);
            }
            break;
        }
        assign(s);
        int n = 0, prefill = -1;
        for (int i = 0; i < s->n_slots; i++) {
            serve_slot *sl = &s->slots[i];
            if (!sl->job) continue;
            if (sl->fed < sl->job->n_prompt) {
                /* the prompt that has waited longest gets this step's chunk */
                if (prefill < 0 || sl->job->t_start < s->slots[prefill].job->t_start) prefill = i;
                continue;
            }
            items[n] = (wgml_batch_item){.seq = i, .tokens = &sl->pending, .n_tokens = 1, .sample = 1};
            slot_of[n++] = i;
        }
        if (prefill >= 0) {
            serve_slot *sl = &s->slots[prefill];
            int k = sl->job->n_prompt - sl->fed < s->chunk ? sl->job->n_prompt - sl->fed : s->chunk;
            items[n] = (wgml_batch_item){.seq = prefill, .tokens = sl->job->prompt + sl->fed, .n_tokens = k,
                                         .sample = sl->fed + k == sl->job->n_prompt};
            slot_of[n++] = prefill;
        }
        if (!n) {
            pthread_cond_wait(&s->wake, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        wgml_error err;
        wgml_status st = wgml_batch_step(s->batch, items, n, &err);
        pthread_mutex_lock(&s->mu);
        s->metrics.steps++;
        for (int k = 0; k < n; k++) s->metrics.step_rows += (uint64_t)items[k].n_tokens;
        for (int k = 0; k < n; k++) {
            int i = slot_of[k];
            serve_slot *sl = &s->slots[i];
            if (st) { /* the step failed: its jobs end with the error, their caches are dropped */
                snprintf(sl->job->error, sizeof sl->job->error, "%s", err.message);
                job_finish(s, sl->job, SERVE_FINISH_ERROR);
                wgml_batch_seq_keep(s->batch, i, 0, NULL);
                release_slot(s, i);
                continue;
            }
            if (sl->fed < sl->job->n_prompt) sl->fed += items[k].n_tokens;
            if (items[k].sample) take_token(s, i, items[k].next);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serve_start(serve_server *s) {
    if (pthread_create(&s->thread, NULL, sched_main, s)) return -1;
    s->thread_started = 1;
    return 0;
}

void serve_stop(serve_server *s) {
    if (!s->thread_started) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->thread_started = 0;
}
