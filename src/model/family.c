/*
 * family.c - the registry of model families (family.h): a new family adds
 * its folder under src/model/ (and to WGML_SRC_DIRS) and one line here.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/family.h"
#include "model/bert/bert.h"
#include "model/clip/clip.h"
#include "model/kokoro/kokoro.h"
#include "model/llama/llama.h"
#include "model/whisper/whisper.h"

static const wgml_family *const families[] = {
    &wgml_family_llama,
    &wgml_family_bert,
    &wgml_family_kokoro,
    &wgml_family_whisper,
    &wgml_family_clip,
};
#define N_FAMILIES ((int)(sizeof families / sizeof families[0]))

int wgml_family_count(void) { return N_FAMILIES; }
const wgml_family *wgml_family_at(int i) { return i >= 0 && i < N_FAMILIES ? families[i] : NULL; }

const wgml_family *wgml_family_find(const char *arch) {
    for (int i = 0; arch && i < N_FAMILIES; i++)
        for (const char *const *a = families[i]->archs; *a; a++)
            if (!strcmp(*a, arch)) return families[i];
    return NULL;
}

wgml_status wgml_family_of(const gguf_file *f, char *arch, size_t cap, const wgml_family **out, wgml_error *err) {
    *out = NULL;
    if (cap) arch[0] = '\0';
    gguf_str a;
    int r = gguf_get_str(f, "general.architecture", &a, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: missing required metadata 'general.architecture'", gguf_name(f));
    if (memchr(a.ptr, 0, (size_t)a.len)) /* "llama\0..." must not pass for "llama" */
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: 'general.architecture' contains a NUL byte", gguf_name(f));
    if (!cap) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_family_of: no room for the architecture");
    size_t n = (size_t)a.len < cap - 1 ? (size_t)a.len : cap - 1;
    memcpy(arch, a.ptr, n);
    arch[n] = '\0';
    const wgml_family *fam = wgml_family_find(arch);
    if (!fam) {
        char known[256];
        size_t k = 0;
        known[0] = '\0';
        for (int i = 0; i < N_FAMILIES; i++)
            for (const char *const *p = families[i]->archs; *p && k < sizeof known; p++)
                k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", k ? ", " : "", *p);
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported; known: %s", gguf_name(f),
                         arch, known);
    }
    *out = fam;
    return WGML_OK;
}

wgml_status wgml_hparam_int(const gguf_file *f, const char *arch, const char *suffix, int64_t lo, int64_t hi, int *out,
                            int required, wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    int r = gguf_get_int(f, key, lo, hi, &v, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) {
        if (required) return wgml_fail(err, WGML_ERR_FORMAT, "%s: missing required metadata '%s'", gguf_name(f), key);
        return WGML_OK;
    }
    *out = (int)v;
    return WGML_OK;
}

wgml_status wgml_hparam_float(const gguf_file *f, const char *arch, const char *suffix, float *out, wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    int r = gguf_get_float(f, key, &v, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r > 0) *out = (float)v;
    return WGML_OK;
}

wgml_status wgml_hparam_bool(const gguf_file *f, const char *arch, const char *suffix, int *out, wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int v;
    int r = gguf_get_bool(f, key, &v, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r > 0) *out = v != 0;
    return WGML_OK;
}

const char *wgml_task_name(uint32_t task) {
    switch (task) {
    case WGML_TASK_GENERATE: return "generate";
    case WGML_TASK_EMBED: return "embed";
    case WGML_TASK_RERANK: return "rerank";
    case WGML_TASK_SPEECH: return "speech";
    case WGML_TASK_TRANSCRIBE: return "transcribe";
    case WGML_TASK_EMBED_IMAGE: return "embed-image";
    case WGML_TASK_CLASSIFY: return "classify";
    }
    return "unknown";
}

char *wgml_tasks_format(uint32_t tasks, char *buf, size_t cap) {
    size_t k = 0;
    if (!cap) return buf;
    buf[0] = '\0';
    for (int b = 0; b < 32 && k < cap; b++)
        if (tasks & (1u << b))
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", wgml_task_name(1u << b));
    if (!tasks) snprintf(buf, cap, "none");
    return buf;
}
