/*
 * audio_file.c - audio files for `wgml transcribe` and the server's
 * /v1/audio/transcriptions: a path or bytes in memory, decoded by
 * libsndfile (LGPL-2.1; linked by the CLI only, never by libwgml) into mono
 * float32 at the file's own rate (the library resamples).
 *
 * What libsndfile reads is what is taken: WAV (PCM, float, A-law, mu-law,
 * IMA/MS ADPCM, WAVEX, RF64), AIFF, AU, CAF, FLAC, OGG (Vorbis, Opus) and,
 * from libsndfile 1.1 on, MP3. Channels are averaged. A file is refused with
 * a message naming it when it cannot be opened, is not a regular file, is in
 * no format libsndfile knows, ends before the length its WAV header gives
 * (a streamed WAV's "unknown" sizes, 0 or 0xFFFFFFFF, are taken as they
 * are), has no frames, more than CLI_AUDIO_MAX_CHANNELS channels, a rate
 * outside 1 .. CLI_AUDIO_MAX_RATE Hz, a sample that is not a finite number,
 * or more than max_seconds of audio (checked as it is decoded: no memory is
 * taken for what lies beyond).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sndfile.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static int fail(char *msg, size_t msg_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t msg_size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (msg && msg_size) vsnprintf(msg, msg_size, fmt, ap);
    va_end(ap);
    return -1;
}

/* libsndfile's message for a failed open, without its trailing period and "System error : " prefix. */
static void open_error(char *out, size_t size) {
    const char *e = sf_strerror(NULL);
    if (!strncmp(e, "System error : ", 15)) e += 15;
    snprintf(out, size, "%s", e);
    size_t n = strlen(out);
    while (n && (out[n - 1] == '.' || out[n - 1] == ' ' || out[n - 1] == '\n')) out[--n] = 0;
}

/* A WAV whose data ends before the size its header gives: libsndfile then reads what there is and
 * logs "data : N (should be M)". N of 0 or 0xFFFFFFFF is a stream's unknown length, not a promise. */
static int truncated(SNDFILE *f, unsigned long long *declared, unsigned long long *present) {
    char log[4096];
    log[0] = 0;
    sf_command(f, SFC_GET_LOG_INFO, log, sizeof log);
    log[sizeof log - 1] = 0;
    for (const char *p = log; (p = strstr(p, "data : ")); p += 7) {
        if (p != log && p[-1] != '\n') continue;
        unsigned long long n, m;
        if (sscanf(p, "data : %llu (should be %llu)", &n, &m) == 2 && n > m && n != 0xFFFFFFFFull) {
            *declared = n, *present = m;
            return 1;
        }
    }
    return 0;
}

/* The major format's name ("WAV (Microsoft)", "FLAC (Free Lossless Audio Codec)", ...). */
static void format_name(int format, char *out, size_t size) {
    SF_FORMAT_INFO fi;
    memset(&fi, 0, sizeof fi);
    fi.format = format & SF_FORMAT_TYPEMASK;
    if (sf_command(NULL, SFC_GET_FORMAT_INFO, &fi, sizeof fi) == 0 && fi.name) snprintf(out, size, "%s", fi.name);
    else snprintf(out, size, "format 0x%x", format);
}

/* Decodes an open file into a (mono float32), closing it. what names the input in messages. */
static int decode(SNDFILE *f, const SF_INFO *info, const char *what, double max_seconds, cli_audio *a, char *msg,
                  size_t msg_size) {
    int rc = -1;
    float *pcm = NULL, *buf = NULL;
    if (info->channels < 1 || info->channels > CLI_AUDIO_MAX_CHANNELS) {
        fail(msg, msg_size, "%s has %d channels; at most %d are read", what, info->channels, CLI_AUDIO_MAX_CHANNELS);
        goto done;
    }
    if (info->samplerate < 1 || info->samplerate > CLI_AUDIO_MAX_RATE) {
        fail(msg, msg_size, "%s has a sample rate of %d Hz, outside 1 .. %d", what, info->samplerate,
             CLI_AUDIO_MAX_RATE);
        goto done;
    }
    const int ch = info->channels;
    const double limit = floor(max_seconds * info->samplerate); /* the most frames taken */
    if (info->frames > 0 && info->frames != SF_COUNT_MAX && (double)info->frames > limit) {
        fail(msg, msg_size, "%s is %.0f s long; the limit is %.0f s", what, (double)info->frames / info->samplerate,
             max_seconds);
        goto done;
    }
    enum { CHUNK = 16384 }; /* frames per read */
    if (!(buf = malloc((size_t)CHUNK * (size_t)ch * sizeof *buf))) {
        fail(msg, msg_size, "out of memory reading %s", what);
        goto done;
    }
    /* the header's frame count sizes the first allocation (a guess for some formats, and a hostile
     * file's may lie: at most 4M frames at first, grown as the frames come) */
    size_t n = 0, cap = info->frames > 0 && info->frames < (1 << 22) ? (size_t)info->frames : (1 << 22);
    if (!(pcm = malloc((cap ? cap : 1) * sizeof *pcm))) {
        fail(msg, msg_size, "out of memory for %s (%zu frames)", what, cap);
        goto done;
    }
    for (;;) {
        sf_count_t r = sf_readf_float(f, buf, CHUNK);
        if (r <= 0) break;
        if ((double)n + (double)r > limit) {
            fail(msg, msg_size, "%s is longer than the limit of %.0f s", what, max_seconds);
            goto done;
        }
        if (n + (size_t)r > cap) {
            size_t nc = cap * 2 > n + (size_t)r ? cap * 2 : n + (size_t)r;
            float *g = realloc(pcm, nc * sizeof *pcm);
            if (!g) {
                fail(msg, msg_size, "out of memory for %s (%zu frames)", what, nc);
                goto done;
            }
            pcm = g, cap = nc;
        }
        for (sf_count_t i = 0; i < r; i++) {
            const float *x = buf + (size_t)i * (size_t)ch;
            double sum = 0;
            for (int c = 0; c < ch; c++) sum += x[c];
            if (!isfinite(sum)) {
                fail(msg, msg_size, "%s: sample %zu is not a finite number", what, n + (size_t)i);
                goto done;
            }
            pcm[n + (size_t)i] = (float)(sum / ch);
        }
        n += (size_t)r;
    }
    if (sf_error(f) != SF_ERR_NO_ERROR) {
        fail(msg, msg_size, "%s: decoding failed after %zu frames: %s", what, n, sf_strerror(f));
        goto done;
    }
    unsigned long long declared, present;
    if (truncated(f, &declared, &present)) {
        fail(msg, msg_size, "%s is truncated: its header gives %llu bytes of audio, the file holds %llu", what,
             declared, present);
        goto done;
    }
    if (n == 0) {
        fail(msg, msg_size, "%s holds no audio (0 frames)", what);
        goto done;
    }
    a->pcm = pcm;
    a->n = n;
    a->sample_rate = info->samplerate;
    a->channels = ch;
    format_name(info->format, a->format, sizeof a->format);
    pcm = NULL;
    rc = 0;
done:
    free(buf);
    free(pcm);
    sf_close(f);
    return rc;
}

int cli_audio_read_file(const char *path, double max_seconds, cli_audio *a, char *msg, size_t msg_size) {
    memset(a, 0, sizeof *a);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(msg, msg_size, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(msg, msg_size, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return fail(msg, msg_size, "'%s' is empty", path);
    }
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *f = sf_open_fd(fd, SFM_READ, &info, 1); /* closes fd, also on failure */
    if (!f) {
        char e[256];
        open_error(e, sizeof e);
        return fail(msg, msg_size, "'%s' is not audio that can be read (%s)", path, e);
    }
    char what[4200];
    snprintf(what, sizeof what, "'%s'", path);
    return decode(f, &info, what, max_seconds, a, msg, msg_size);
}

/* libsndfile's virtual I/O over bytes in memory */
typedef struct {
    const unsigned char *data;
    sf_count_t size, pos;
} mem_io;

static sf_count_t mem_len(void *u) { return ((mem_io *)u)->size; }
static sf_count_t mem_seek(sf_count_t off, int whence, void *u) {
    mem_io *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->size;
    if ((off < 0 && -off > base) || (off > 0 && off > m->size - base)) return -1; /* outside the bytes */
    m->pos = base + off;
    return m->pos;
}
static sf_count_t mem_read(void *ptr, sf_count_t count, void *u) {
    mem_io *m = u;
    if (count <= 0 || m->pos >= m->size) return 0;
    if (count > m->size - m->pos) count = m->size - m->pos;
    memcpy(ptr, m->data + m->pos, (size_t)count);
    m->pos += count;
    return count;
}
static sf_count_t mem_write(const void *ptr, sf_count_t count, void *u) {
    (void)ptr, (void)count, (void)u;
    return 0;
}
static sf_count_t mem_tell(void *u) { return ((mem_io *)u)->pos; }

int cli_audio_read_memory(const void *data, size_t size, const char *name, double max_seconds, cli_audio *a, char *msg,
                          size_t msg_size) {
    memset(a, 0, sizeof *a);
    char what[300];
    snprintf(what, sizeof what, "%s%.200s%s", name ? "'" : "", name ? name : "the audio", name ? "'" : "");
    if (!size) return fail(msg, msg_size, "%s is empty", what);
    if (size > (size_t)INT64_MAX / 2) return fail(msg, msg_size, "%s is too large", what);
    mem_io m = {data, (sf_count_t)size, 0};
    SF_VIRTUAL_IO io = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *f = sf_open_virtual(&io, SFM_READ, &info, &m);
    if (!f) {
        char e[256];
        open_error(e, sizeof e);
        return fail(msg, msg_size, "%s is not audio that can be read (%s)", what, e);
    }
    return decode(f, &info, what, max_seconds, a, msg, msg_size);
}

void cli_audio_free(cli_audio *a) {
    if (!a) return;
    free(a->pcm);
    memset(a, 0, sizeof *a);
}
