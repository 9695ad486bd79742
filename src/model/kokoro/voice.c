/*
 * voice.c - Kokoro voices: reading, row choice, blends (voice.h).
 */
#include "model/kokoro/voice.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/file_bytes.h"
#include "format/pth.h"

wgml_status kokoro_voice_from_bin(const void *data, size_t size, const char *what, kokoro_voice *out, wgml_error *err) {
    const size_t want = sizeof out->rows;
    if (!data || size != want)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: a voice is %zu bytes (510 x 256 float32), not %zu", what, want, size);
    const uint8_t *p = data;
    for (size_t i = 0; i < (size_t)KOKORO_VOICE_ROWS * KOKORO_VOICE_DIM; i++) {
        uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                     (uint32_t)p[4 * i + 3] << 24; /* little-endian on any host */
        float f;
        memcpy(&f, &u, 4);
        if (!isfinite(f))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: value %zu (row %zu) is not finite", what, i,
                             i / KOKORO_VOICE_DIM);
        out->rows[i / KOKORO_VOICE_DIM][i % KOKORO_VOICE_DIM] = f;
    }
    return WGML_OK;
}

const float *kokoro_voice_row(const kokoro_voice *v, int n_phonemes) {
    int r = n_phonemes < 1 ? 0 : n_phonemes > KOKORO_VOICE_ROWS ? KOKORO_VOICE_ROWS - 1 : n_phonemes - 1;
    return v->rows[r];
}

wgml_status kokoro_blend_parse(const char *spec, kokoro_blend *out, wgml_error *err) {
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "no voice given");
    double sum = 0;
    for (const char *p = spec; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t nlen = colon ? (size_t)(colon - p) : len;
        if (out->n == KOKORO_BLEND_MAX)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "voice '%s': more than %d voices in a blend", spec,
                             KOKORO_BLEND_MAX);
        if (nlen == 0 || nlen >= sizeof out->name[0])
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "voice '%s': an empty or too long name", spec);
        double w = 1;
        if (colon) {
            char num[32];
            size_t wl = len - nlen - 1;
            if (wl == 0 || wl >= sizeof num)
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "voice '%s': a missing or bad weight", spec);
            memcpy(num, colon + 1, wl);
            num[wl] = '\0';
            char *e;
            w = strtod(num, &e);
            if (*e || !(w > 0) || !isfinite(w))
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "voice '%s': weight '%s' is not a positive number",
                                 spec, num);
        }
        memcpy(out->name[out->n], p, nlen);
        out->weight[out->n++] = (float)w;
        sum += w;
        p += len;
        if (*p == ',') {
            p++;
            if (!*p) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "voice '%s': a trailing comma", spec);
        }
    }
    for (int i = 0; i < out->n; i++) out->weight[i] = (float)(out->weight[i] / sum);
    return WGML_OK;
}

void kokoro_voice_mix(const kokoro_blend *b, const kokoro_voice *const *voices, kokoro_voice *out) {
    for (int r = 0; r < KOKORO_VOICE_ROWS; r++)
        for (int c = 0; c < KOKORO_VOICE_DIM; c++) {
            double s = 0;
            for (int i = 0; i < b->n; i++) s += (double)b->weight[i] * voices[i]->rows[r][c];
            out->rows[r][c] = (float)s;
        }
}

wgml_status kokoro_voice_load(const char *path, kokoro_voice *out, wgml_error *err) {
    const uint8_t *base;
    size_t size;
    int kind;
    wgml_status st = wgml_file_bytes(path, 1, "a voice", &base, &size, &kind, err);
    if (st) return st;
    if (!pth_is_pth(base, size)) {
        st = kokoro_voice_from_bin(base, size, path, out, err);
        wgml_file_bytes_release(base, size, kind);
        return st;
    }
    /* the official voices/<name>.pt: one torch-saved tensor [510][1][256] */
    pth_file *p;
    st = pth_open_memory(base, size, path, &p, err);
    if (!st) {
        const pth_tensor *t = pth_n_tensors(p) == 1 ? pth_tensor_at(p, 0) : NULL;
        if (!t || t->numel != (int64_t)KOKORO_VOICE_ROWS * KOKORO_VOICE_DIM)
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: a voice file holds one tensor of 510 x 256 values", path);
        else
            st = pth_tensor_read_f32(p, t, &out->rows[0][0], (size_t)t->numel, err);
        for (int i = 0; !st && i < KOKORO_VOICE_ROWS * KOKORO_VOICE_DIM; i++)
            if (!isfinite(out->rows[i / KOKORO_VOICE_DIM][i % KOKORO_VOICE_DIM]))
                st = wgml_fail(err, WGML_ERR_FORMAT, "%s: value %d is not finite", path, i);
        pth_close(p);
    }
    wgml_file_bytes_release(base, size, kind);
    return st;
}
