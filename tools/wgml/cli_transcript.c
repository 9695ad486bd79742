/*
 * cli_transcript.c - transcripts as `wgml transcribe` and the server's
 * /v1/audio/transcriptions write them (cli.h): the segments wgml_transcribe
 * hands out, copied, then Whisper's own files through the official writers
 * (model/whisper/whisper_decode.h: txt, srt, vtt, tsv; never a second copy
 * of them) or OpenAI's response bodies (json, verbose_json, text).
 */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "tools_internal.h"

/* openai/whisper's LANGUAGES (whisper/tokenizer.py), code and name, in its order */
static const char *const languages[][2] = {
    {"en", "english"},    {"zh", "chinese"},     {"de", "german"},        {"es", "spanish"},    {"ru", "russian"},
    {"ko", "korean"},     {"fr", "french"},      {"ja", "japanese"},      {"pt", "portuguese"}, {"tr", "turkish"},
    {"pl", "polish"},     {"ca", "catalan"},     {"nl", "dutch"},         {"ar", "arabic"},     {"sv", "swedish"},
    {"it", "italian"},    {"id", "indonesian"},  {"hi", "hindi"},         {"fi", "finnish"},    {"vi", "vietnamese"},
    {"he", "hebrew"},     {"uk", "ukrainian"},   {"el", "greek"},         {"ms", "malay"},      {"cs", "czech"},
    {"ro", "romanian"},   {"da", "danish"},      {"hu", "hungarian"},     {"ta", "tamil"},      {"no", "norwegian"},
    {"th", "thai"},       {"ur", "urdu"},        {"hr", "croatian"},      {"bg", "bulgarian"},  {"lt", "lithuanian"},
    {"la", "latin"},      {"mi", "maori"},       {"ml", "malayalam"},     {"cy", "welsh"},      {"sk", "slovak"},
    {"te", "telugu"},     {"fa", "persian"},     {"lv", "latvian"},       {"bn", "bengali"},    {"sr", "serbian"},
    {"az", "azerbaijani"}, {"sl", "slovenian"},  {"kn", "kannada"},       {"et", "estonian"},   {"mk", "macedonian"},
    {"br", "breton"},     {"eu", "basque"},      {"is", "icelandic"},     {"hy", "armenian"},   {"ne", "nepali"},
    {"mn", "mongolian"},  {"bs", "bosnian"},     {"kk", "kazakh"},        {"sq", "albanian"},   {"sw", "swahili"},
    {"gl", "galician"},   {"mr", "marathi"},     {"pa", "punjabi"},       {"si", "sinhala"},    {"km", "khmer"},
    {"sn", "shona"},      {"yo", "yoruba"},      {"so", "somali"},        {"af", "afrikaans"},  {"oc", "occitan"},
    {"ka", "georgian"},   {"be", "belarusian"},  {"tg", "tajik"},         {"sd", "sindhi"},     {"gu", "gujarati"},
    {"am", "amharic"},    {"yi", "yiddish"},     {"lo", "lao"},           {"uz", "uzbek"},      {"fo", "faroese"},
    {"ht", "haitian creole"}, {"ps", "pashto"},  {"tk", "turkmen"},       {"nn", "nynorsk"},    {"mt", "maltese"},
    {"sa", "sanskrit"},   {"lb", "luxembourgish"}, {"my", "myanmar"},     {"bo", "tibetan"},    {"tl", "tagalog"},
    {"mg", "malagasy"},   {"as", "assamese"},    {"tt", "tatar"},         {"haw", "hawaiian"},  {"ln", "lingala"},
    {"ha", "hausa"},      {"ba", "bashkir"},     {"jw", "javanese"},      {"su", "sundanese"},  {"yue", "cantonese"},
};
#define N_LANGUAGES ((int)(sizeof languages / sizeof languages[0]))

const char *cli_language_name(const char *code) {
    for (int i = 0; code && i < N_LANGUAGES; i++)
        if (!strcmp(languages[i][0], code)) return languages[i][1];
    return NULL;
}

const char *cli_language_code(const char *s) {
    for (int i = 0; s && i < N_LANGUAGES; i++)
        if (!strcasecmp(languages[i][0], s) || !strcasecmp(languages[i][1], s)) return languages[i][0];
    return NULL;
}

int cli_transcript_add(cli_transcript *t, const wgml_transcript_segment *s) {
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        cli_segment *g = realloc(t->seg, (size_t)cap * sizeof *g);
        if (!g) return -1;
        t->seg = g, t->cap = cap;
    }
    const char *text = s->text ? s->text : "";
    const size_t tl = strlen(text);
    const int nt = s->n_tokens > 0 && s->tokens ? s->n_tokens : 0;
    cli_segment c = {.start = s->start, .end = s->end, .n_tokens = nt, .temperature = s->temperature,
                     .avg_logprob = s->avg_logprob, .compression_ratio = s->compression_ratio,
                     .no_speech_prob = s->no_speech_prob, .seek = s->seek};
    c.text = malloc(tl + 1);
    c.tokens = malloc((size_t)(nt ? nt : 1) * sizeof *c.tokens);
    if (!c.text || !c.tokens) {
        free(c.text);
        free(c.tokens);
        return -1;
    }
    memcpy(c.text, text, tl + 1);
    if (nt) memcpy(c.tokens, s->tokens, (size_t)nt * sizeof *c.tokens);
    if (s->n_words > 0 && s->words) {
        if (!(c.words = calloc((size_t)s->n_words, sizeof *c.words))) goto oom;
        for (int i = 0; i < s->n_words; i++, c.n_words++) {
            const char *w = s->words[i].text ? s->words[i].text : "";
            if (!(c.words[i].word = strdup(w))) goto oom;
            c.words[i].start = s->words[i].start;
            c.words[i].end = s->words[i].end;
            c.words[i].probability = s->words[i].probability;
        }
    }
    t->seg[t->n++] = c;
    return 0;
oom:
    for (int i = 0; i < c.n_words; i++) free(c.words[i].word);
    free(c.words);
    free(c.text);
    free(c.tokens);
    return -1;
}

void cli_transcript_free(cli_transcript *t) {
    for (int i = 0; t && i < t->n; i++) {
        free(t->seg[i].text);
        free(t->seg[i].tokens);
        for (int k = 0; k < t->seg[i].n_words; k++) free(t->seg[i].words[k].word);
        free(t->seg[i].words);
    }
    if (t) {
        free(t->seg);
        memset(t, 0, sizeof *t);
    }
}

/* A whisper_str's bytes (the library's allocator) as a malloc'ed string; the whisper_str is freed. */
static char *take_str(whisper_str *s, size_t *len) {
    char *p = malloc(s->len + 1);
    if (p) {
        if (s->len) memcpy(p, s->data, s->len);
        p[s->len] = 0;
        *len = s->len;
    }
    whisper_str_free(s);
    return p;
}

static int space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

char *cli_transcript_text(const cli_transcript *t) {
    size_t n = 0;
    for (int i = 0; i < t->n; i++) n += strlen(t->seg[i].text);
    char *s = malloc(n + 1), *p = s;
    if (!s) return NULL;
    for (int i = 0; i < t->n; i++) {
        size_t k = strlen(t->seg[i].text);
        memcpy(p, t->seg[i].text, k);
        p += k;
    }
    *p = 0;
    size_t a = 0, b = n;
    while (a < b && space(s[a])) a++;
    while (b > a && space(s[b - 1])) b--;
    memmove(s, s + a, b - a);
    s[b - a] = 0;
    return s;
}

/* A number as JSON, the shortest text that reads back as the same double (as Python's repr, which
 * the official writer's json.dumps uses); a value that is not finite (JSON has none) is null. */
static json_object *num(double v) {
    if (!isfinite(v)) return NULL;
    char b[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(b, sizeof b, "%.*g", p, v);
        if (strtod(b, NULL) == v) break;
    }
    return json_object_new_double_s(v, b);
}

static json_object *usage(double duration) {
    json_object *u = json_object_new_object();
    json_object_object_add(u, "type", json_object_new_string("duration"));
    json_object_object_add(u, "seconds", json_object_new_int64((int64_t)ceil(duration > 0 ? duration : 0)));
    return u;
}

static int take_json(json_object *o, char **out, size_t *len, char *msg, size_t msg_size) {
    size_t n;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    char *s = t ? malloc(n + 2) : NULL;
    if (s) {
        memcpy(s, t, n);
        s[n] = '\n';
        s[n + 1] = 0;
        *out = s;
        *len = n + 1;
    }
    json_object_put(o);
    if (!s) snprintf(msg, msg_size, "out of memory writing the transcript");
    return s ? 0 : -1;
}

int cli_transcript_render(const cli_transcript *t, cli_transcript_format fmt, const char *task, const char *language,
                          double duration, char **out, size_t *len, char *msg, size_t msg_size) {
    *out = NULL;
    *len = 0;
    if (fmt <= CLI_TRANSCRIPT_TSV) { /* Whisper's own writers */
        static const whisper_format wf[] = {WHISPER_FORMAT_TXT, WHISPER_FORMAT_SRT, WHISPER_FORMAT_VTT,
                                            WHISPER_FORMAT_TSV};
        whisper_caption *c = malloc((size_t)(t->n ? t->n : 1) * sizeof *c);
        if (!c) return snprintf(msg, msg_size, "out of memory writing the transcript"), -1;
        for (int i = 0; i < t->n; i++) c[i] = (whisper_caption){t->seg[i].start, t->seg[i].end, t->seg[i].text};
        whisper_str s = {0};
        wgml_error err;
        wgml_status st = whisper_write_captions(&s, wf[fmt], c, t->n, &err);
        free(c);
        if (st) {
            whisper_str_free(&s);
            snprintf(msg, msg_size, "%s", err.message);
            return -1;
        }
        if (!(*out = take_str(&s, len))) return snprintf(msg, msg_size, "out of memory writing the transcript"), -1;
        return 0;
    }
    char *text = cli_transcript_text(t);
    if (!text) return snprintf(msg, msg_size, "out of memory writing the transcript"), -1;
    if (fmt == CLI_TRANSCRIPT_TEXT) {
        size_t n = strlen(text);
        char *s = realloc(text, n + 2);
        if (!s) {
            free(text);
            return snprintf(msg, msg_size, "out of memory writing the transcript"), -1;
        }
        s[n] = '\n';
        s[n + 1] = 0;
        *out = s;
        *len = n + 1;
        return 0;
    }
    json_object *o = json_object_new_object();
    if (fmt == CLI_TRANSCRIPT_VERBOSE_JSON) {
        const char *name = cli_language_name(language);
        json_object_object_add(o, "task", json_object_new_string(task));
        json_object_object_add(o, "language", json_object_new_string(name ? name : language ? language : ""));
        json_object_object_add(o, "duration", num(duration));
        json_object_object_add(o, "text", json_object_new_string(text));
        json_object *segs = json_object_new_array_ext(t->n), *all = NULL;
        for (int i = 0; i < t->n; i++) {
            const cli_segment *g = &t->seg[i];
            json_object *e = json_object_new_object(), *tok = json_object_new_array_ext(g->n_tokens);
            json_object_object_add(e, "id", json_object_new_int(i));
            json_object_object_add(e, "seek", json_object_new_int(g->seek));
            json_object_object_add(e, "start", num(g->start));
            json_object_object_add(e, "end", num(g->end));
            json_object_object_add(e, "text", json_object_new_string(g->text));
            for (int k = 0; k < g->n_tokens; k++) json_object_array_add(tok, json_object_new_int(g->tokens[k]));
            json_object_object_add(e, "tokens", tok);
            json_object_object_add(e, "temperature", num(g->temperature));
            json_object_object_add(e, "avg_logprob", num(g->avg_logprob));
            json_object_object_add(e, "compression_ratio", num(g->compression_ratio));
            json_object_object_add(e, "no_speech_prob", num(g->no_speech_prob));
            if (g->n_words) {
                json_object *ws = json_object_new_array_ext(g->n_words);
                if (!all) all = json_object_new_array();
                for (int k = 0; k < g->n_words; k++) {
                    const cli_word *w = &g->words[k];
                    json_object *a = json_object_new_object(), *b = json_object_new_object();
                    json_object_object_add(a, "word", json_object_new_string(w->word));
                    json_object_object_add(a, "start", num(w->start));
                    json_object_object_add(a, "end", num(w->end));
                    json_object_object_add(a, "probability", num(w->probability));
                    json_object_array_add(ws, a);
                    json_object_object_add(b, "word", json_object_new_string(w->word));
                    json_object_object_add(b, "start", num(w->start));
                    json_object_object_add(b, "end", num(w->end));
                    json_object_array_add(all, b);
                }
                json_object_object_add(e, "words", ws);
            }
            json_object_array_add(segs, e);
        }
        if (t->no_segments) json_object_put(segs);
        else json_object_object_add(o, "segments", segs);
        if (!all && t->with_words) all = json_object_new_array();
        if (all) json_object_object_add(o, "words", all);
    } else {
        json_object_object_add(o, "text", json_object_new_string(text));
    }
    json_object_object_add(o, "usage", usage(duration));
    free(text);
    return take_json(o, out, len, msg, msg_size);
}

int cli_transcript_txt_line(const wgml_transcript_segment *s, char **out, size_t *len) {
    whisper_caption c = {s->start, s->end, s->text ? s->text : ""};
    whisper_str w = {0};
    wgml_error err;
    *out = NULL;
    *len = 0;
    if (whisper_write_captions(&w, WHISPER_FORMAT_TXT, &c, 1, &err) || !w.len) {
        whisper_str_free(&w);
        return -1;
    }
    return (*out = take_str(&w, len)) ? 0 : -1;
}
