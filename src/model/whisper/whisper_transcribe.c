/*
 * whisper_transcribe.c - what transcribe() does around decode(): windows,
 * segments, fallback and skipping, and the output writers (see
 * whisper_decode.h), written from the rules of the official transcribe.py
 * and utils.py (openai/whisper v20250625).
 */
#include "core/alloc.h"
#include "core/error.h"
#include "model/whisper/whisper_decode.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- windows ---- */

/* Python's round(x) of a double, half to even, as an int (saturated). */
static int round_even(double x) {
    double r = nearbyint(x);
    if (r > 2e9) return 2000000000;
    if (r < -2e9) return -2000000000;
    return (int)r;
}

int whisper_seek_clips(const double *timestamps, int n, int content_frames, int *clips, int cap) {
    int n_points = n > 0 ? n : 1;
    int n_pairs = (n_points + 1) / 2;
    for (int i = 0; i < 2 * n_pairs; i++) {
        int v = i < n ? round_even(timestamps[i] * WHISPER_FRAMES_PER_SECOND) : i == 0 && n == 0 ? 0 : content_frames;
        if (i / 2 < cap) clips[i] = v;
    }
    return n_pairs;
}

int whisper_next_window(const int *clips, int n_clips, int *clip_idx, int *seek, int content_frames,
                        whisper_window *w) {
    while (*clip_idx < n_clips) {
        int start = clips[2 * *clip_idx], end = clips[2 * *clip_idx + 1];
        if (*seek < start) *seek = start;
        if (*seek >= end) {
            ++*clip_idx;
            if (*clip_idx < n_clips) *seek = clips[2 * *clip_idx];
            continue;
        }
        int size = WHISPER_N_FRAMES;
        if (content_frames - *seek < size) size = content_frames - *seek;
        if (end - *seek < size) size = end - *seek;
        w->seek = *seek;
        w->segment_size = size;
        w->time_offset = (double)*seek * WHISPER_HOP_LENGTH / WHISPER_SAMPLE_RATE;
        w->window_end_time = (double)(*seek + WHISPER_N_FRAMES) * WHISPER_HOP_LENGTH / WHISPER_SAMPLE_RATE;
        w->segment_duration = (double)size * WHISPER_HOP_LENGTH / WHISPER_SAMPLE_RATE;
        return 1;
    }
    return 0;
}

/* ---- segments ---- */

int whisper_segments(const whisper_specials *sp, const int32_t *tokens, int n, const whisper_window *w,
                     whisper_segment *out, int cap, int *seek_advance) {
    const int tb = sp->ts_begin;
    const double prec = (double)(WHISPER_INPUT_STRIDE * WHISPER_HOP_LENGTH) / WHISPER_SAMPLE_RATE; /* 0.02 */
#define IS_TS(i) (tokens[i] >= tb)
    const int single_ending = n >= 2 && !IS_TS(n - 2) && IS_TS(n - 1);
    int any_pair = 0;
    for (int i = 1; i < n && !any_pair; i++)
        any_pair = IS_TS(i - 1) && IS_TS(i);
    int k = 0;
    if (any_pair) {
        int last = 0;
        for (int i = 1; i <= n; i++) {
            int cut = i < n ? IS_TS(i - 1) && IS_TS(i) : single_ending;
            if (!cut) continue;
            if (k < cap) {
                whisper_segment *s = &out[k];
                s->begin = last;
                s->end = i;
                s->start = w->time_offset + (double)(tokens[last] - tb) * prec;
                s->end_time = w->time_offset + (double)(tokens[i - 1] - tb) * prec;
            }
            k++;
            last = i;
        }
        /* a single timestamp at the end: no speech after it, go to the next window;
         * else drop the unfinished segment and start at the last pair's timestamp */
        *seek_advance = single_ending ? w->segment_size : (tokens[last - 1] - tb) * WHISPER_INPUT_STRIDE;
    } else {
        double duration = w->segment_duration;
        int last_ts = -1;
        for (int i = n - 1; i >= 0; i--)
            if (IS_TS(i)) {
                last_ts = tokens[i];
                break;
            }
        if (last_ts >= 0 && last_ts != tb) duration = (double)(last_ts - tb) * prec;
        if (cap > 0)
            out[0] =
                (whisper_segment){.begin = 0, .end = n, .start = w->time_offset, .end_time = w->time_offset + duration};
        k = 1;
        *seek_advance = w->segment_size;
    }
#undef IS_TS
    return k;
}

/* ---- fallback ---- */

const whisper_fallback_params whisper_fallback_defaults = {2.4, -1.0, 0.6};
const float whisper_temperatures[WHISPER_N_TEMPERATURES] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};

int whisper_needs_fallback(const whisper_fallback_params *p, double compression_ratio, double avg_logprob,
                           double no_speech_prob) {
    int needs = 0;
    if (!isnan(p->compression_ratio_threshold) && compression_ratio > p->compression_ratio_threshold)
        needs = 1;                                                                     /* too repetitive */
    if (!isnan(p->logprob_threshold) && avg_logprob < p->logprob_threshold) needs = 1; /* too improbable */
    if (!isnan(p->no_speech_threshold) && no_speech_prob > p->no_speech_threshold && !isnan(p->logprob_threshold) &&
        avg_logprob < p->logprob_threshold)
        needs = 0; /* silence */
    return needs;
}

int whisper_should_skip(const whisper_fallback_params *p, double avg_logprob, double no_speech_prob) {
    if (isnan(p->no_speech_threshold)) return 0;
    int skip = no_speech_prob > p->no_speech_threshold;
    if (!isnan(p->logprob_threshold) && avg_logprob > p->logprob_threshold) skip = 0;
    return skip;
}

int whisper_prompt_reset(int condition_on_previous_text, float temperature) {
    return !condition_on_previous_text || temperature > 0.5f;
}

/* ---- strings ---- */

void whisper_str_free(whisper_str *s) {
    wgml_free(s->data);
    memset(s, 0, sizeof *s);
}

void whisper_str_put(whisper_str *s, const char *bytes, size_t n) {
    if (s->oom) return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 1) {
            if (cap > ((size_t)-1) / 2) {
                s->oom = 1;
                return;
            }
            cap *= 2;
        }
        char *d = wgml_realloc(s->data, cap);
        if (!d) {
            s->oom = 1;
            return;
        }
        s->data = d;
        s->cap = cap;
    }
    if (n) memcpy(s->data + s->len, bytes, n);
    s->len += n;
    s->data[s->len] = '\0';
}

static void put_str(whisper_str *s, const char *z) { whisper_str_put(s, z, strlen(z)); }

int whisper_format_timestamp(double seconds, int always_hours, char marker, char out[32]) {
    if (!(seconds >= 0) || !(seconds < 1e15)) {
        out[0] = '\0';
        return -1;
    }
    long long ms = (long long)nearbyint(seconds * 1000.0); /* Python's round: half to even */
    long long h = ms / 3600000;
    ms -= h * 3600000;
    long long m = ms / 60000;
    ms -= m * 60000;
    long long sec = ms / 1000;
    ms -= sec * 1000;
    if (always_hours || h > 0) return snprintf(out, 32, "%02lld:%02lld:%02lld%c%03lld", h, m, sec, marker, ms);
    return snprintf(out, 32, "%02lld:%02lld%c%03lld", m, sec, marker, ms);
}

/* The code point at s[0, n) and its length in *len; -1 for an invalid sequence. */
static long utf8_at(const unsigned char *s, size_t n, int *len) {
    unsigned c = s[0];
    int k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    *len = 1;
    if (!k || (size_t)k > n) return -1;
    long cp = k == 1 ? (long)c : k == 2 ? (long)(c & 0x1F) : k == 3 ? (long)(c & 0x0F) : (long)(c & 0x07);
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    *len = k;
    return cp;
}

/* Python's str.isspace() for one character. */
static int is_space(long c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

void whisper_strip(const char *s, size_t *b, size_t *e) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, j = strlen(s);
    while (i < j) {
        int len;
        long c = utf8_at(u + i, j - i, &len);
        if (c < 0 || !is_space(c)) break;
        i += (size_t)len;
    }
    while (j > i) {
        size_t k = j - 1;
        while (k > i && (u[k] & 0xC0) == 0x80 && j - k < 4)
            k--;
        int len;
        long c = utf8_at(u + k, j - k, &len);
        if (c < 0 || (size_t)len != j - k || !is_space(c)) break;
        j = k;
    }
    *b = i;
    *e = j;
}

/* s[b, e) with every `from` (left to right, not overlapping) written as `to`. */
static void put_replaced(whisper_str *o, const char *s, size_t b, size_t e, const char *from, const char *to) {
    size_t fl = strlen(from), run = b;
    for (size_t i = b; i + fl <= e;) {
        if (!memcmp(s + i, from, fl)) {
            whisper_str_put(o, s + run, i - run);
            put_str(o, to);
            i += fl;
            run = i;
        } else {
            i++;
        }
    }
    whisper_str_put(o, s + run, e - run);
}

wgml_status whisper_write_captions(whisper_str *out, whisper_format fmt, const whisper_caption *c, int n,
                                   wgml_error *err) {
    if (fmt == WHISPER_FORMAT_VTT) put_str(out, "WEBVTT\n\n");
    if (fmt == WHISPER_FORMAT_TSV) put_str(out, "start\tend\ttext\n");
    for (int i = 0; i < n; i++) {
        const char *text = c[i].text ? c[i].text : "";
        size_t b, e;
        whisper_strip(text, &b, &e);
        char t0[32], t1[32], num[48];
        switch (fmt) {
        case WHISPER_FORMAT_TXT:
            whisper_str_put(out, text + b, e - b);
            put_str(out, "\n");
            break;
        case WHISPER_FORMAT_SRT:
        case WHISPER_FORMAT_VTT: {
            int srt = fmt == WHISPER_FORMAT_SRT;
            if (whisper_format_timestamp(c[i].start, srt, srt ? ',' : '.', t0) < 0 ||
                whisper_format_timestamp(c[i].end, srt, srt ? ',' : '.', t1) < 0)
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "caption %d: times %g, %g are not both >= 0", i,
                                 c[i].start, c[i].end);
            if (srt) {
                snprintf(num, sizeof num, "%d\n", i + 1);
                put_str(out, num);
            }
            put_str(out, t0);
            put_str(out, " --> ");
            put_str(out, t1);
            put_str(out, "\n");
            put_replaced(out, text, b, e, "-->", "->");
            put_str(out, "\n\n");
            break;
        }
        case WHISPER_FORMAT_TSV:
            if (!(fabs(c[i].start) < 1e15 && fabs(c[i].end) < 1e15)) /* Python prints any time here */
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "caption %d: times %g, %g are not finite", i,
                                 c[i].start, c[i].end);
            snprintf(num, sizeof num, "%lld\t%lld\t", (long long)nearbyint(1000 * c[i].start),
                     (long long)nearbyint(1000 * c[i].end));
            put_str(out, num);
            put_replaced(out, text, b, e, "\t", " ");
            put_str(out, "\n");
            break;
        default: return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown caption format %d", (int)fmt);
        }
    }
    if (out->oom) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory writing captions");
    return WGML_OK;
}
