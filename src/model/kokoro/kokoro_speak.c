/*
 * kokoro_speak.c - from a phoneme string to streamed audio (kokoro_model.h):
 * the string cut into pieces the model takes (sentences, and no piece over
 * 510 phonemes), each piece's ids and voice row, the two forward steps, and
 * the timing of each word from the predicted durations (a word of the text
 * when the phonemes came from text: where it is in them comes from the
 * G2P, wgml_g2p_phonemize_words; else a phoneme word).
 *
 * Pieces (WGML_SPLIT_SENTENCES, the default): the string is cut after each
 * run of sentence punctuation (. ! ? …) followed by a space, and at line
 * ends; WGML_SPLIT_NONE keeps it whole up to 510 phonemes, as the official
 * KPipeline speaks such input. Either way a piece longer than 510
 * phonemes is cut at its last clause punctuation (, ; : —) followed by a
 * space that keeps the piece within the limit, else at its last space, else
 * at the limit. Phonemes are counted as the model sees them (symbols of its
 * vocabulary; others are dropped, as the official code drops them); a
 * piece with no symbol of the vocabulary but spaces is left out.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/kokoro/kokoro_model.h"
#include "model/kokoro/voice.h"

/* The length in bytes of the UTF-8 sequence at s (1 for a stray byte). */
static int cp_len(const char *s) {
    unsigned char c = (unsigned char)*s;
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    for (int i = 1; i < n; i++)
        if (((unsigned char)s[i] >> 6) != 2) return 1;
    return n;
}

/* The id of the symbol at s (its cp_len bytes), -1 when outside the vocabulary. */
static int symbol_id(const kokoro_model *m, const char *s, int len) {
    const int n = kokoro_model_hparams(m)->n_token;
    for (int id = 1; id < n; id++) {
        const char *v = kokoro_model_symbol(m, id);
        if ((int)strlen(v) == len && !memcmp(v, s, (size_t)len)) return id;
    }
    return -1;
}

int kokoro_encode(const kokoro_model *m, const char *ph, size_t len, int32_t *ids, int cap) {
    int n = 0;
    for (size_t i = 0; i < len;) {
        int l = cp_len(ph + i);
        if (i + (size_t)l > len) break;
        int id = symbol_id(m, ph + i, l);
        if (id > 0) {
            if (n < cap) ids[n] = id;
            n++;
        }
        i += (size_t)l;
    }
    return n;
}

static int is_one_of(const char *s, int l, const char *const *set) {
    for (; *set; set++)
        if ((int)strlen(*set) == l && !memcmp(*set, s, (size_t)l)) return 1;
    return 0;
}

static const char *const sentence_end[] = {".", "!", "?", "\xe2\x80\xa6", NULL}; /* … */
static const char *const clause_end[] = {",", ";", ":", "\xe2\x80\x94", NULL};   /* — */
static const char *const punct[] = {";", ":", ",", ".", "!", "?", "\xc2\xa1", "\xc2\xbf", "\xe2\x80\x94",
                                    "\xe2\x80\xa6", "\"", "\xc2\xab", "\xc2\xbb", "\xe2\x80\x9c", "\xe2\x80\x9d",
                                    "(", ")", "{", "}", "[", "]", NULL};

wgml_status kokoro_split(const kokoro_model *m, const char *ph, int max, int sentences, kokoro_piece **out,
                         int *n_out, wgml_error *err) {
    *out = NULL;
    *n_out = 0;
    const size_t len = strlen(ph);
    int cap = 8, n = 0;
    kokoro_piece *pc = wgml_malloc((size_t)cap * sizeof *pc);
    if (!pc) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    size_t i = 0;
    while (i < len) {
        while (i < len && (ph[i] == ' ' || ph[i] == '\n' || ph[i] == '\r' || ph[i] == '\t')) i++;
        /* one pass: a piece ends only at the limit, as one string of symbols (a line end is then
         * a symbol outside the vocabulary, which the model drops as the official code does) */
        if (i == len) break;
        /* scan one piece: stop at a sentence end, a line end or the limit */
        size_t j = i, cut_clause = 0, cut_space = 0, end = 0;
        int count = 0;
        while (j < len) {
            if (ph[j] == '\n' && sentences) {
                end = j;
                break;
            }
            int l = cp_len(ph + j);
            if (j + (size_t)l > len) l = (int)(len - j);
            int in_vocab = symbol_id(m, ph + j, l) > 0;
            if (in_vocab && count == max) { /* full: cut at the best place seen */
                end = cut_clause ? cut_clause : cut_space ? cut_space : j;
                break;
            }
            count += in_vocab;
            const size_t next = j + (size_t)l;
            if (sentences && is_one_of(ph + j, l, sentence_end) && (next == len || ph[next] == ' ')) {
                size_t k = next; /* the whole run of sentence punctuation: "?!" */
                while (k < len && is_one_of(ph + k, cp_len(ph + k), sentence_end)) k += (size_t)cp_len(ph + k);
                if (k == next || k == len || ph[k] == ' ') {
                    end = next;
                    break;
                }
            }
            if (next < len && ph[next] == ' ') {
                if (is_one_of(ph + j, l, clause_end)) cut_clause = next;
                cut_space = next;
            }
            j = next;
        }
        if (!end) end = j;
        size_t e = end; /* trim trailing spaces */
        while (e > i && (ph[e - 1] == ' ' || ph[e - 1] == '\r' || ph[e - 1] == '\t')) e--;
        int sounds = 0; /* a piece of spaces and unknown symbols says nothing */
        for (size_t k = i; k < e && !sounds; k += (size_t)cp_len(ph + k))
            sounds = ph[k] != ' ' && symbol_id(m, ph + k, cp_len(ph + k)) > 0;
        if (sounds) {
            if (n == cap) {
                kokoro_piece *g = wgml_realloc(pc, (size_t)cap * 2 * sizeof *pc);
                if (!g) {
                    wgml_free(pc);
                    return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
                }
                pc = g, cap *= 2;
            }
            pc[n++] = (kokoro_piece){i, e - i};
        }
        i = end;
    }
    *out = pc;
    *n_out = n;
    return WGML_OK;
}

int kokoro_voice_names(const gguf_file *f, char *buf, size_t cap) {
    const gguf_value *a;
    size_t k = 0;
    int n = 0;
    if (cap) buf[0] = '\0';
    if (gguf_get_arr(f, "kokoro.voices", GGUF_TYPE_STRING, &a, NULL) != 1) return 0;
    n = (int)a->v.arr.n;
    for (uint64_t i = 0; i < a->v.arr.n && k + 8 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%.*s", i ? ", " : "", (int)a->v.arr.items[i].v.str.len,
                              a->v.arr.items[i].v.str.ptr);
    if (k + 8 >= cap && cap >= 8) snprintf(buf + cap - 8, 8, ", ...");
    return n;
}

wgml_status kokoro_style(const kokoro_model *m, const char *spec, int n_phonemes, float *style, wgml_error *err) {
    kokoro_blend b;
    wgml_status st = kokoro_blend_parse(spec, &b, err);
    if (st) return st;
    const gguf_file *f = kokoro_model_file(m);
    const int row = n_phonemes < 1 ? 0 : n_phonemes > KOKORO_VOICE_ROWS ? KOKORO_VOICE_ROWS - 1 : n_phonemes - 1;
    double acc[KOKORO_VOICE_DIM] = {0};
    for (int v = 0; v < b.n; v++) {
        char tn[80];
        snprintf(tn, sizeof tn, "voice.%s", b.name[v]);
        const gguf_tensor *t = gguf_find_tensor(f, tn);
        const float *r = NULL;
        kokoro_voice *file = NULL;
        if (t) {
            if (t->type != WGML_F32 || t->ne[0] != KOKORO_VOICE_DIM || t->ne[1] != KOKORO_VOICE_ROWS)
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor %s is not f32 [510][256]", gguf_name(f), tn);
            /* in the file's bytes, or (a streamed model) the copy its load kept on the host */
            const float *data = wgml_weights_host_data(kokoro_model_weights((kokoro_model *)m), t);
            if (!data)
                return wgml_fail(err, WGML_ERR_FORMAT, "voice '%s': the model has no bytes of tensor %s", b.name[v],
                                 tn);
            r = data + (size_t)row * KOKORO_VOICE_DIM;
        } else {
            /* not in the model: a voice file (.bin or .pt) */
            FILE *fp = fopen(b.name[v], "rb");
            if (!fp) {
                char names[512];
                kokoro_voice_names(f, names, sizeof names);
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "voice '%s' is neither in the model (voices: %s) nor a voice file", b.name[v],
                                 names[0] ? names : "none");
            }
            fclose(fp);
            if (!(file = wgml_malloc(sizeof *file))) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            if ((st = kokoro_voice_load(b.name[v], file, err))) {
                wgml_free(file);
                return st;
            }
            r = file->rows[row];
        }
        for (int c = 0; c < KOKORO_VOICE_DIM; c++) acc[c] += (double)b.weight[v] * r[c];
        wgml_free(file);
    }
    for (int c = 0; c < KOKORO_VOICE_DIM; c++) style[c] = (float)acc[c];
    return WGML_OK;
}

/* Where a chunk's word times go: the entries and their strings. */
typedef struct word_out {
    wgml_word_time *words;
    int n, cap;
    char *buf; /* room for every string of a chunk */
    size_t at;
} word_out;

static const char *keep(word_out *o, const char *s, size_t len) {
    char *p = o->buf + o->at;
    memcpy(p, s, len);
    p[len] = '\0';
    o->at += len + 1;
    return p;
}

static void add_word(word_out *o, const char *word, size_t word_len, const char *ph, size_t ph_len, int64_t offset,
                     double start, double end) {
    if (o->n == o->cap) return;
    wgml_word_time *w = &o->words[o->n++];
    w->word = keep(o, word, word_len);
    w->phonemes = word == ph && word_len == ph_len ? w->word : keep(o, ph, ph_len);
    w->start = start;
    w->end = end;
    w->offset = offset;
    w->length = (int64_t)word_len;
}

/* The phoneme words of piece ph[0..len) (runs between spaces, stripped of
 * punctuation) with their times from the durations: token t of the piece
 * (1-based after the leading pad) starts at frame start[t]. base: the
 * piece's offset in the whole input. */
static void phoneme_word_times(const kokoro_model *m, const char *ph, size_t len, size_t base, const int64_t *start,
                               double sec_per_frame, double t0, word_out *o) {
    int tok = 0; /* tokens (in-vocabulary symbols) before position i */
    size_t i = 0;
    while (i < len) {
        while (i < len && ph[i] == ' ') i++;
        /* one run of non-spaces: [i, j); its word without punctuation [a, b) */
        size_t j = i, a = 0, b = 0;
        int first = -1, last = -1, t = tok;
        while (j < len && ph[j] != ' ') {
            int l = cp_len(ph + j);
            if (j + (size_t)l > len) l = (int)(len - j);
            const int id = symbol_id(m, ph + j, l);
            if (!is_one_of(ph + j, l, punct)) {
                if (first < 0 && id > 0) first = t;
                if (id > 0) last = t;
                if (!b) a = j;
                b = j + (size_t)l;
            }
            t += id > 0;
            j += (size_t)l;
        }
        if (first >= 0)
            add_word(o, ph + a, b - a, ph + a, b - a, (int64_t)(base + a), t0 + (double)start[first + 1] * sec_per_frame,
                     t0 + (double)start[last + 2] * sec_per_frame);
        tok = t;
        i = j;
    }
}

/* The text's words whose phonemes start in the piece phonemes[off, off +
 * len), from word *next on (advanced past them), with their times: from
 * the start of their first token in the piece to the end of their last. */
static void text_word_times(const kokoro_model *m, const char *phonemes, size_t off, size_t len,
                            const kokoro_words *tw, size_t *next, const int64_t *start, double sec_per_frame, double t0,
                            word_out *o) {
    const size_t end = off + len;
    size_t pos = off;
    int tok = 0; /* tokens before pos */
    for (size_t k = *next; k < tw->n && tw->words[k].ph_off < end; k++, *next = k) {
        const wgml_g2p_word *w = &tw->words[k];
        if (w->ph_off < off) continue; /* in a piece left out (no sound) */
        const size_t a = w->ph_off, b = w->ph_off + w->ph_len < end ? w->ph_off + w->ph_len : end;
        while (pos < a) {
            int l = cp_len(phonemes + pos);
            if (pos + (size_t)l > end) l = (int)(end - pos);
            tok += symbol_id(m, phonemes + pos, l) > 0;
            pos += (size_t)l;
        }
        int first = -1, last = -1;
        while (pos < b) {
            int l = cp_len(phonemes + pos);
            if (pos + (size_t)l > end) l = (int)(end - pos);
            if (symbol_id(m, phonemes + pos, l) > 0) {
                if (first < 0) first = tok;
                last = tok++;
            }
            pos += (size_t)l;
        }
        if (first < 0) continue; /* nothing the model says */
        add_word(o, tw->text + w->text_off, w->text_len, phonemes + a, b - a, (int64_t)w->text_off,
                 t0 + (double)start[first + 1] * sec_per_frame, t0 + (double)start[last + 2] * sec_per_frame);
    }
}

wgml_status kokoro_speak(kokoro_state *s, const char *phonemes, const kokoro_words *tw, const char *voice,
                         float speed, uint64_t seed, wgml_audio_fn on_audio, void *user, int64_t *n_samples,
                         int *n_chunks, wgml_error *err) {
    const kokoro_model *m = kokoro_state_model(s);
    kokoro_piece *pcs;
    int n_pcs;
    const kokoro_hparams *hp = kokoro_model_hparams(m);
    if (n_samples) *n_samples = 0;
    if (n_chunks) *n_chunks = 0;
    wgml_status st = kokoro_split(m, phonemes, KOKORO_MAX_PHONEMES, kokoro_split_sentences(s), &pcs, &n_pcs, err);
    if (st) return st;
    if (!n_pcs) {
        wgml_free(pcs);
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "nothing to say: no phoneme of the model's vocabulary");
    }
    const int64_t spf = kokoro_audio_len(m, 1);
    const double sec_per_frame = (double)spf / hp->sample_rate;
    int32_t ids[KOKORO_MAX_PHONEMES + 2], dur[KOKORO_MAX_PHONEMES + 2];
    int64_t start[KOKORO_MAX_PHONEMES + 3];
    float style[KOKORO_VOICE_DIM];
    const size_t total = strlen(phonemes) + 1;
    /* a chunk's words: at most one per token; their strings: each word's text and phonemes */
    word_out wo = {.cap = KOKORO_MAX_PHONEMES + 1};
    const size_t wbuf = (tw ? strlen(tw->text) : 0) + 2 * total + 2 * (size_t)(wo.cap + 1);
    char *text = wgml_malloc(total);
    wo.words = wgml_malloc((size_t)wo.cap * sizeof *wo.words);
    wo.buf = wgml_malloc(wbuf);
    float *audio = NULL;
    int64_t done = 0;
    size_t next_word = 0;
    if (!text || !wo.words || !wo.buf) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    for (int p = 0; p < n_pcs && !st; p++) {
        const char *ph = phonemes + pcs[p].off;
        const size_t len = pcs[p].len;
        const int n = kokoro_encode(m, ph, len, ids + 1, KOKORO_MAX_PHONEMES);
        ids[0] = ids[n + 1] = 0;
        int cps = 0; /* the voice row: code points of the piece, out-of-vocabulary ones included */
        for (size_t i = 0; i < len; i += (size_t)cp_len(ph + i)) cps++;
        if ((st = kokoro_style(m, voice, cps, style, err))) break;
        if ((st = kokoro_text(s, ids, n + 2, style, speed, dur, err))) break;
        start[0] = 0;
        for (int t = 0; t < n + 2; t++) start[t + 1] = start[t] + dur[t];
        const int64_t L = kokoro_audio_len(m, start[n + 2]);
        float *a = wgml_realloc(audio, (size_t)L * sizeof *a);
        if (!a) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for %lld samples", (long long)L);
            break;
        }
        audio = a;
        if ((st = kokoro_audio(s, dur, n + 2, seed + (uint64_t)p, audio, err))) break;
        const double t0 = (double)done / hp->sample_rate;
        memcpy(text, ph, len);
        text[len] = '\0';
        wo.n = 0, wo.at = 0;
        if (tw)
            text_word_times(m, phonemes, pcs[p].off, len, tw, &next_word, start, sec_per_frame, t0, &wo);
        else
            phoneme_word_times(m, ph, len, pcs[p].off, start, sec_per_frame, t0, &wo);
        wgml_audio_chunk c = {.samples = audio, .n_samples = L, .sample_rate = hp->sample_rate, .start = t0,
                              .phonemes = text, .index = p, .words = wo.words, .n_words = wo.n};
        done += L;
        if (n_samples) *n_samples = done;
        if (n_chunks) *n_chunks = p + 1;
        if (on_audio && on_audio(user, &c)) break;
    }
    wgml_free(audio);
    wgml_free(text);
    wgml_free(wo.words);
    wgml_free(wo.buf);
    wgml_free(pcs);
    return st;
}
