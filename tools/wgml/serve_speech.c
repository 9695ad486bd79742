/*
 * serve_speech.c - POST /v1/audio/speech on the server's speech model.
 */
#include <civetweb.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

/* POST /v1/audio/speech: input (text, at most 4096 bytes, through the G2P; or the model's
 * phoneme symbols with the extension "phonemes": true), voice (a voice of the model or a
 * blend, "af_heart:0.6,am_adam:0.4"), response_format "wav" (16-bit PCM; the default) or
 * "pcm" (raw 16-bit little-endian samples at 24 kHz), both streamed sentence by sentence as
 * they are made. A streamed WAV's header cannot know the length, so its RIFF and data sizes
 * are 0xFFFFFFFF, as OpenAI's own streamed WAVs and `wgml speak -o -` have them; speed
 * (0.25-4); extensions seed and lang ("en-us", "en-gb"). OpenAI's compressed formats (mp3,
 * opus, aac, flac) are refused: wgml has no encoder.
 *
 * One request at a time on the model (speech_mu), but the lock is never held while the
 * client is written to: a thread of the request's own synthesizes under the lock, piece
 * by piece into memory, while this HTTP thread writes the pieces out as they come. So a
 * slow reader slows only its own stream (its audio waits in memory: at most a few minutes
 * of it for the 4096 bytes of input), and a client gone stops the synthesis at its next
 * piece. */
typedef struct speech_piece {
    struct speech_piece *next;
    size_t n;
    unsigned char b[];
} speech_piece;

typedef struct {
    /* the request (read-only) */
    serve_server *s;
    wgml_model *model;
    const char *input, *voice;
    wgml_speak_params p;
    int wav; /* the first piece carries a WAV header of unknown length */
    /* the synthesis thread's result */
    wgml_status st;
    wgml_error err;
    int rate, made; /* made: a piece was made */
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    speech_piece *head, *tail;
    int done, failed, gone; /* failed: out of memory or a change of rate; gone: the client left */
} speech_job;

/* The synthesis thread's callback: one piece of audio into the queue; 1 stops the synthesis. */
static int speech_chunk(void *user, const wgml_audio_chunk *ch) {
    speech_job *k = user;
    int stop = 0;
    if (k->rate && ch->sample_rate != k->rate) stop = 1;
    k->rate = ch->sample_rate;
    unsigned char h[64];
    size_t hl = k->wav && !k->made ? cli_wav_header(h, -1, k->rate, 0) : 0;
    size_t bytes = hl + (size_t)ch->n_samples * 2;
    speech_piece *piece = stop ? NULL : malloc(sizeof *piece + (bytes ? bytes : 1));
    if (piece) {
        piece->next = NULL;
        piece->n = bytes;
        memcpy(piece->b, h, hl);
        cli_audio_bytes(ch->samples, ch->n_samples, 0, piece->b + hl);
        k->made = 1;
    }
    pthread_mutex_lock(&k->mu);
    if (!piece) k->failed = 1;
    else if (k->gone) free(piece);
    else {
        if (k->tail) k->tail->next = piece;
        else k->head = piece;
        k->tail = piece;
        pthread_cond_signal(&k->cv);
    }
    stop = k->failed || k->gone;
    pthread_mutex_unlock(&k->mu);
    return stop;
}

static void *speech_thread(void *arg) {
    speech_job *k = arg;
    pthread_mutex_lock(&k->s->speech_mu);
    k->st = wgml_speak(k->model, k->input, k->voice, &k->p, speech_chunk, k, NULL, &k->err);
    pthread_mutex_unlock(&k->s->speech_mu);
    pthread_mutex_lock(&k->mu);
    k->done = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* Runs the synthesis in its own thread and streams its pieces to c as they come. Returns
 * 1 when a stream was started (headers sent), 0 when no piece was made, -1 when the
 * thread could not start. */
static int speak_streamed(struct mg_connection *c, speech_job *k) {
    if (pthread_mutex_init(&k->mu, NULL)) return -1;
    if (pthread_cond_init(&k->cv, NULL)) {
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, speech_thread, k)) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    int sent = 0;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->head && !k->done) pthread_cond_wait(&k->cv, &k->mu);
        speech_piece *list = k->head;
        k->head = k->tail = NULL;
        int done = k->done;
        pthread_mutex_unlock(&k->mu);
        int gone = 0;
        while (list) {
            speech_piece *next = list->next;
            if (!gone) {
                if (!sent) serve_stream_start(c, k->wav ? "audio/wav" : "audio/pcm");
                sent = 1;
                gone = serve_stream_write(c, list->b, list->n) != 0;
            }
            free(list);
            list = next;
        }
        pthread_mutex_lock(&k->mu);
        if (gone) k->gone = 1; /* the synthesis stops at its next piece */
        if (done && !k->head) break;
    }
    pthread_mutex_unlock(&k->mu);
    pthread_join(t, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    return sent;
}

/* Whether every voice a voice string names ("a", or "a:0.6,b:0.4") is one of the
 * model's: the library would also take a voice file's path, which a client must not. */
static int model_voices(const wgml_model *m, const char *voice) {
    for (const char *p = voice;;) {
        size_t n = strcspn(p, ":,");
        int found = 0;
        for (int i = 0; !found && wgml_speech_voice(m, i); i++) {
            const char *name = wgml_speech_voice(m, i);
            found = strlen(name) == n && !strncmp(name, p, n);
        }
        if (!found) return 0;
        p += n;
        if (*p == ':') p += strcspn(p, ","); /* the weight: the library checks it */
        if (!*p) return 1;
        p++; /* ',' */
    }
}

int serve_ep_speech(struct mg_connection *c, serve_server *s, json_object *req) {
    serve_model buf;
    const serve_model *sm = serve_model_for(s, WGML_TASK_SPEECH, &buf);
    if (!sm) return serve_no_task(c, s, "speak");
    json_object *v;
    wgml_speak_params p = wgml_speak_default_params();
    if (!json_object_object_get_ex(req, "input", &v) || !json_object_is_type(v, json_type_string) ||
        json_object_get_string_len(v) == 0 || json_object_get_string_len(v) > 4096)
        return serve_send_error(c, 400, "input", NULL, "'input' must be a string of 1 to 4096 bytes");
    if (serve_has_nul(v, 0)) return serve_send_error(c, 400, "input", NULL, "'input' cannot contain U+0000");
    const char *input = json_object_get_string(v);
    if (!json_object_object_get_ex(req, "voice", &v) || !json_object_is_type(v, json_type_string) ||
        json_object_get_string_len(v) == 0)
        return serve_send_error(c, 400, "voice", NULL, "'voice' must name a voice of the model (GET /v1/models lists them)");
    const char *voice = json_object_get_string(v);
    if (serve_has_nul(v, 0) || !model_voices(sm->model, voice))
        return serve_send_error(c, 400, "voice", NULL,
                          "'voice' %.64s is not a voice of the model or a blend of them (\"af_heart:0.6,am_adam:0.4\"): "
                          "GET /v1/models lists them", voice);
    int pcm = 0;
    if (json_object_object_get_ex(req, "response_format", &v) && !json_object_is_type(v, json_type_null)) {
        const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (!strcmp(f, "pcm")) pcm = 1;
        else if (strcmp(f, "wav"))
            return serve_send_error(c, 400, "response_format", NULL,
                              "'response_format' %.32s is not served: wgml has no audio encoder; ask for \"wav\" or "
                              "\"pcm\" (16-bit, 24 kHz)", f);
    }
    if (json_object_object_get_ex(req, "speed", &v) && !json_object_is_type(v, json_type_null)) {
        double sp = serve_is_number(v) ? json_object_get_double(v) : 0;
        if (!(sp >= 0.25 && sp <= 4)) return serve_send_error(c, 400, "speed", NULL, "'speed' must be a number from 0.25 to 4");
        p.speed = (float)sp;
    }
    if (json_object_object_get_ex(req, "seed", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
            return serve_send_error(c, 400, "seed", NULL, "'seed' must be a non-negative integer");
        p.seed = (uint64_t)json_object_get_int64(v);
    }
    if (json_object_object_get_ex(req, "lang", &v) && !json_object_is_type(v, json_type_null)) {
        const char *l = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (strcmp(l, "en-us") && strcmp(l, "en-gb"))
            return serve_send_error(c, 400, "lang", NULL, "'lang' must be \"en-us\" or \"en-gb\"");
        p.lang = l;
    }
    if (json_object_object_get_ex(req, "phonemes", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_boolean))
            return serve_send_error(c, 400, "phonemes", NULL, "'phonemes' must be true or false");
        p.phonemes = json_object_get_boolean(v);
    }
    speech_job k = {.s = s, .model = sm->model, .input = input, .voice = voice, .p = p, .wav = !pcm};
    int sent = speak_streamed(c, &k);
    wgml_status st = k.st;
    const wgml_error err = k.err;
    int status;
    if (sent < 0) {
        status = serve_send_error(c, 500, NULL, NULL, "cannot start a thread for the speech");
    } else if (sent) { /* a stream under way: end it (after a failure, cut short) */
        serve_stream_end(c);
        status = k.failed || k.gone ? 499 : 200;
    } else if (k.failed) {
        status = serve_send_error(c, 500, NULL, NULL, "out of memory making the audio");
    } else if (st == WGML_ERR_INVALID_ARGUMENT) {
        status = serve_send_error(c, 400, strstr(err.message, "voice") ? "voice" : "input", NULL, "%s", err.message);
    } else if (st == WGML_ERR_UNSUPPORTED || st == WGML_ERR_TOKENIZER) {
        status = serve_send_error(c, 400, "input", NULL, "%s", err.message);
    } else if (st) {
        status = serve_send_error(c, 500, NULL, NULL, "speech failed: %s", err.message);
    } else if (pcm) { /* nothing to say: an empty stream */
        status = serve_send_body(c, 200, "audio/pcm", "", 0, NULL, NULL);
    } else { /* nothing to say: a WAV of no samples, whose sizes are known */
        unsigned char h[64];
        size_t hl = cli_wav_header(h, 0, sm->info.sample_rate > 0 ? sm->info.sample_rate : 24000, 0);
        status = serve_send_body(c, 200, "audio/wav", (const char *)h, hl, NULL, NULL);
    }
    return status;
}
