/*
 * api.c - the public API (include/wgml.h): models, sessions, generation.
 *
 * A wgml_model ties together the GGUF file (kept open: on the CPU the weights
 * are used in place from its mapping), the backend, the tokenizer and the
 * model's weights. A wgml_session owns one KV cache and its activations, the
 * tokens it holds, and the last logits. wgml_generate runs the loop:
 * tokenize, evaluate the prompt in batches, then sample, stream and evaluate
 * one token at a time until EOS, n_predict or the context is full.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"
#include "api_model.h"
#include "backend/backend.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/quant.h"
#include "format/gguf.h"
#include "format/model_file.h"
#include "model/family.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "wgml.h"


struct wgml_session {
    wgml_model *m;
    const wgml_decoder *dec;
    void *st;         /* the decoder's state: one sequence */
    int n_ctx, n_batch, n_vocab;
    int n_past;       /* tokens in the KV cache */
    int32_t *tokens;  /* the n_past tokens, then at most one pending token */
    int has_pending;  /* tokens[n_past] was sampled but not evaluated yet */
    float *logits;    /* n_vocab, valid when has_logits */
    int has_logits;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

wgml_model_params wgml_model_default_params(void) {
    return (wgml_model_params){.backend = WGML_BACKEND_AUTO};
}

wgml_session_params wgml_session_default_params(void) { return (wgml_session_params){0, 0, WGML_KV_DEFAULT}; }

wgml_sampler_params wgml_sampler_default_params(void) {
    return (wgml_sampler_params){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                 .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0};
}

wgml_generate_params wgml_generate_default_params(void) {
    return (wgml_generate_params){.n_predict = 128, .add_bos = 1, .sampler = wgml_sampler_default_params()};
}

const char *wgml_stop_reason_name(wgml_stop_reason r) {
    switch (r) {
    case WGML_STOP_NONE: return "none";
    case WGML_STOP_EOS: return "end of sequence";
    case WGML_STOP_MAX_TOKENS: return "token limit";
    case WGML_STOP_CONTEXT_FULL: return "context full";
    case WGML_STOP_CALLBACK: return "stopped by callback";
    }
    return "unknown";
}

typedef struct {
    const wgml_model_params *p;
} progress_ctx;

static int load_progress(void *user, uint64_t done, uint64_t total) {
    const wgml_model_params *p = ((progress_ctx *)user)->p;
    return p->progress ? p->progress(p->progress_user, "load", done, total) : 0;
}

static void compile_progress(void *user, int done, int total) {
    const wgml_model_params *p = ((progress_ctx *)user)->p;
    if (p->progress) p->progress(p->progress_user, "compile", (uint64_t)done, (uint64_t)total);
}

/* Names the model's structure for the backend's list of kernels it used
 * (backend.h kernels_prepare): the architecture and an FNV-1a 64 hash of the
 * tensor table (names, types, shapes), so that every file of one structure
 * shares it whatever its weights. */
static void structure_key(const gguf_file *g, char *out, size_t cap) {
    char arch[64] = "model";
    gguf_str a;
    if (gguf_get_str(g, "general.architecture", &a, NULL) == 1 && a.len > 0 && a.len < sizeof arch) {
        memcpy(arch, a.ptr, (size_t)a.len);
        arch[a.len] = '\0';
    }
    uint64_t h = wgml_fnv64(WGML_FNV64_BASIS, arch, strlen(arch) + 1);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        h = wgml_fnv64(h, t->name, strlen(t->name) + 1);
        h = wgml_fnv64(h, &t->type, sizeof t->type);
        h = wgml_fnv64(h, t->ne, sizeof t->ne);
    }
    snprintf(out, cap, "%.63s-%016llx", arch, (unsigned long long)h);
}

/* Creates the backend the parameters ask for and loads the weights on it. */
static wgml_status load_on_backend(wgml_model *m, const wgml_model_params *p, const wgml_model_load_options *x,
                                   wgml_backend_kind kind, wgml_error *err) {
    wgml_status st;
    if (x && x->exact) {
        st = wgml_backend_cpu_create_exact(p->n_threads, &m->be, err);
    } else if (kind == WGML_BACKEND_CPU) {
        st = wgml_backend_cpu_create(p->n_threads, &m->be, err);
    } else {
        wgml_webgpu_options o = {.adapter = p->adapter,
                                 .allow_software = p->adapter != NULL,
                                 .force_f32 = (p->webgpu_flags & WGML_WEBGPU_NO_F16) != 0,
                                 .no_subgroups = (p->webgpu_flags & WGML_WEBGPU_NO_SUBGROUPS) != 0};
        st = wgml_backend_webgpu_create(&o, &m->be, err);
    }
    if (st) return st;
    if (m->be->kernels_prepare) {
        /* the kernels this structure used here before compile while the weights go up */
        char key[96];
        structure_key(m->gguf, key, sizeof key);
        m->be->kernels_prepare(m->be, key);
    }
    progress_ctx pc = {p};
    wgml_weight_fault fault = {x ? x->fault_tensor : NULL, x ? x->fault_factor : 1.0f, x ? x->fault_block : 0};
    wgml_family_load_params lp = {fault.tensor ? &fault : NULL, load_progress, &pc};
    st = m->fam->load(m->gguf, m->be, &lp, &m->impl, err);
    if (st) {
        m->be->free(m->be);
        m->be = NULL;
    }
    return st;
}

typedef struct {
    wgml_read_fn read;
    void *user;
} stream_src;

static int64_t stream_read(void *user, uint64_t offset, void *buf, size_t len) {
    const stream_src *s = user;
    return s->read(s->user, offset, buf, len);
}

static wgml_status model_open(gguf_file *g, const wgml_model_params *params, const wgml_model_load_options *x,
                              const stream_src *src, wgml_model **out, wgml_error *err) {
    wgml_model_params defaults = wgml_model_default_params();
    const wgml_model_params *p = params ? params : &defaults;
    wgml_model *m = wgml_calloc(1, sizeof *m);
    if (!m) {
        gguf_close(g);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading a model");
    }
    m->gguf = g;
    m->log = p->log;
    m->log_user = p->log_user;
    char arch[64];
    wgml_status st = wgml_family_of(g, arch, sizeof arch, &m->fam, err);
    if (!st) st = m->fam->describe(g, NULL, NULL, err); /* the hyper-parameters, before the tokenizer */
    /* a family whose files need no tokenizer (Kokoro; the clip family's vision towers) still loads one
     * its file holds (CLIP's and SigLIP's text towers) */
    if (!st && (!m->fam->no_tokenizer || gguf_find_kv(g, "tokenizer.ggml.model")))
        st = wgml_tokenizer_load(g, &m->tok, err);
    if (!st) st = chat_model_info_load(g, m->tok, m->fam->decoder != NULL, &m->chat, err);
    if (!st) {
        gguf_str name;
        if (gguf_get_str(g, "general.name", &name, NULL) == 1) {
            size_t n = name.len < sizeof m->name - 1 ? (size_t)name.len : sizeof m->name - 1;
            memcpy(m->name, name.ptr, n);
        }
        if (p->backend == WGML_BACKEND_AUTO && !(x && x->exact)) {
            wgml_error gpu_err;
            wgml_error_clear(&gpu_err);
            st = load_on_backend(m, p, x, WGML_BACKEND_WEBGPU, &gpu_err);
            if (st) {
                if (st != WGML_ERR_UNSUPPORTED || p->adapter)
                    wgml_note(p->log, p->log_user, "webgpu unavailable (%s); using the CPU", gpu_err.message);
                st = load_on_backend(m, p, x, WGML_BACKEND_CPU, err);
            }
        } else {
            st = load_on_backend(m, p, x, p->backend, err);
        }
    }
    if (!st && src) {
        progress_ctx pc = {p};
        st = wgml_weights_stream(m->fam->weights(m->impl), g, stream_read, (void *)src, load_progress, &pc, err);
    }
    if (!st && m->be->kernels_wait) {
        progress_ctx pc = {p};
        st = m->be->kernels_wait(m->be, compile_progress, &pc, err);
    }
    if (st) {
        wgml_model_free(m);
        return st;
    }
    *out = m;
    return WGML_OK;
}

wgml_status wgml_model_load_with(const char *path, const wgml_model_params *params,
                                 const wgml_model_load_options *options, wgml_model **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_load: out is NULL");
    *out = NULL;
    if (!path) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_load: path is NULL");
    gguf_file *g;
    wgml_status st = WGML_OK;
    char *local = NULL;
#if !defined(__wasm__)
    if (wgml_model_is_remote(path)) { /* by URL or Hugging Face name: the download reports as stage "download" */
        wgml_model_params d = wgml_model_default_params();
        const wgml_model_params *p = params ? params : &d;
        wgml_fetch_params fp = wgml_fetch_default_params();
        fp.progress = p->progress, fp.progress_user = p->progress_user, fp.log = p->log, fp.log_user = p->log_user;
        if (!(local = wgml_malloc(4096))) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        st = wgml_model_fetch(path, &fp, local, 4096, err);
        path = local;
    }
#endif
    if (!st) st = wgml_model_file_open(path, &g, err);
    wgml_free(local);
    if (st) return st;
    return model_open(g, params, options, NULL, out, err);
}

wgml_status wgml_model_load(const char *path, const wgml_model_params *params, wgml_model **out, wgml_error *err) {
    return wgml_model_load_with(path, params, NULL, out, err);
}

wgml_status wgml_model_load_memory(const void *data, size_t size, const wgml_model_params *params, wgml_model **out,
                                   wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_load_memory: out is NULL");
    *out = NULL;
    gguf_file *g;
    wgml_status st = wgml_model_file_open_memory(data, size, "<memory>", &g, err);
    if (st) return st;
    return model_open(g, params, NULL, NULL, out, err);
}

/* GGUF only: a whisper.cpp ggml .bin is converted whole (format/model_file.h),
 * so it loads by path or from memory, not as a stream. */
wgml_status wgml_model_load_stream(wgml_read_fn read, void *user, uint64_t size, const wgml_model_params *params,
                                   wgml_model **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_load_stream: out is NULL");
    *out = NULL;
    if (!read) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_load_stream: no read function");
    /* the header (metadata and tensor table): read a prefix, doubling it until it parses */
    size_t want = size < (256u << 10) ? (size_t)size : (256u << 10);
    for (;;) {
        uint8_t *prefix = wgml_malloc(want ? want : 1);
        if (!prefix) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory reading the model header");
        int64_t got = read(user, 0, prefix, want);
        if (got != (int64_t)want) {
            wgml_free(prefix);
            return wgml_fail(err, WGML_ERR_IO, "model stream: reading %zu header bytes failed", want);
        }
        if (wgml_model_format_detect(prefix, want) == WGML_MODEL_FORMAT_WHISPER_BIN) {
            wgml_free(prefix);
            return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                             "<stream>: a whisper.cpp ggml .bin cannot be streamed; load it by path or from memory");
        }
        gguf_file *g;
        int more;
        wgml_status st = gguf_open_header(prefix, want, size, "<stream>", &g, &more, err);
        if (st && more && want < size) {
            want = size - want < want ? (size_t)size : want * 2;
            continue;
        }
        if (st) return st;
        stream_src src = {read, user};
        return model_open(g, params, NULL, &src, out, err);
    }
}

void *wgml_model_take_state(wgml_model *m, int task) { return atomic_exchange(&m->idle[task], NULL); }

void wgml_model_give_state(wgml_model *m, int task, void *state, void (*free_fn)(void *)) {
    void *none = NULL;
    if (state && !atomic_compare_exchange_strong(&m->idle[task], &none, state)) free_fn(state);
}

void wgml_model_free(wgml_model *m) {
    if (!m) return;
    void *enc = wgml_model_take_state(m, WGML_STATE_ENCODER), *spk = wgml_model_take_state(m, WGML_STATE_SPEAKER);
    if (enc) m->fam->encoder->free(enc);
    if (spk) m->fam->speaker->free(spk);
    void *tr = wgml_model_take_state(m, WGML_STATE_TRANSCRIBER);
    if (tr) m->fam->transcriber->free(tr);
    void *vis = wgml_model_take_state(m, WGML_STATE_VISION);
    if (vis) m->fam->vision->free(vis);
    if (m->impl) m->fam->free(m->impl);
    if (m->be) m->be->free(m->be);
    chat_model_info_free(&m->chat);
    wgml_model_grammar_vocab_free(m);
    wgml_tokenizer_free(m->tok);
    gguf_close(m->gguf);
    wgml_free(m);
}

void wgml_model_get_info(const wgml_model *m, wgml_model_info *info) {
    memset(info, 0, sizeof *info);
    m->fam->get_info(m->impl, info); /* architecture, sizes, the family's section, perhaps its tasks */
    info->family = m->fam->name;
    if (!info->tasks) info->tasks = m->fam->tasks;
    if (!info->matmul_type) info->matmul_type = "";
    info->name = m->name;
    info->backend = m->be->name;
    info->adapter = m->be->device_name ? m->be->device_name : "";
    info->n_threads = m->be->n_threads;
    info->bos = m->tok ? wgml_tokenizer_bos(m->tok) : -1;
    info->eos = m->tok ? wgml_tokenizer_eos(m->tok) : -1;
}

int wgml_tokenize(const wgml_model *m, const char *text, size_t len, int add_bos, int32_t *tokens, int cap,
                  wgml_error *err) {
    if (!m || (!text && len)) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tokenize: NULL argument");
        return -1;
    }
    if (!m->tok) {
        wgml_fail(err, WGML_ERR_UNSUPPORTED, "wgml_tokenize: a %s model has no text tokenizer", m->fam->name);
        return -1;
    }
    return wgml_tokenizer_encode(m->tok, text ? text : "", len, add_bos, tokens, cap, err);
}

int wgml_token_to_piece(const wgml_model *m, int32_t token, char *buf, int cap) {
    return m && m->tok ? wgml_tokenizer_piece(m->tok, token, buf, cap) : -1;
}

/* ---- sessions ---- */

const wgml_decoder *wgml_model_decoder(const wgml_model *m, const char *what, wgml_error *err) {
    if (!m->fam->decoder)
        wgml_fail(err, WGML_ERR_UNSUPPORTED, "a %s model does not generate text (%s are for generation)", m->fam->name,
                  what);
    return m->fam->decoder;
}

int wgml_model_default_ctx(const wgml_model *m) {
    int n = m->fam->decoder->n_ctx_train(m->impl);
    return n < 4096 ? n : 4096;
}

wgml_status wgml_model_kv_dtype(const wgml_model *m, wgml_kv_type want, uint32_t *out, wgml_error *err) {
    uint32_t kv = m->be->kv_type;
    if (want == WGML_KV_F16 || want == WGML_KV_F32) {
        kv = want == WGML_KV_F16 ? WGML_F16 : WGML_F32;
        if (!(m->be->kv_types & (1u << kv)))
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this device keeps its KV cache in %s, not %s",
                             wgml_dtype_name(m->be->kv_type), wgml_dtype_name(kv));
    } else if (want != WGML_KV_DEFAULT) {
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown KV cache type %d", (int)want);
    }
    *out = kv;
    return WGML_OK;
}

wgml_status wgml_session_create(wgml_model *m, const wgml_session_params *params, wgml_session **out, wgml_error *err) {
    if (!m || !out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_session_create: NULL argument");
    *out = NULL;
    const wgml_decoder *dec = wgml_model_decoder(m, "sessions", err);
    if (!dec) return WGML_ERR_UNSUPPORTED;
    wgml_session_params sp = params ? *params : wgml_session_default_params();
    if (sp.n_ctx < 0 || sp.n_batch < 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "context %d and batch %d must not be negative", sp.n_ctx,
                         sp.n_batch);
    if (sp.n_ctx == 0) sp.n_ctx = wgml_model_default_ctx(m);
    if (sp.n_batch == 0) sp.n_batch = 64;
    if (sp.n_ctx > (1 << 20)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "context %d is too large", sp.n_ctx);
    uint32_t kv = 0;
    wgml_status kst = wgml_model_kv_dtype(m, sp.kv_type, &kv, err);
    if (kst) return kst;
    wgml_session *s = wgml_calloc(1, sizeof *s);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    s->m = m;
    s->dec = dec;
    s->n_ctx = sp.n_ctx, s->n_batch = sp.n_batch, s->n_vocab = dec->n_vocab(m->impl);
    s->tokens = wgml_calloc((size_t)sp.n_ctx + 1, sizeof *s->tokens);
    s->logits = wgml_calloc((size_t)s->n_vocab, sizeof *s->logits);
    wgml_status st = WGML_OK;
    if (!s->tokens || !s->logits) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    wgml_decoder_params dp = {.n_seq = 0, .n_ctx = sp.n_ctx, .n_batch = sp.n_batch, .kv_type = kv};
    if (!st) st = dec->create(m->impl, &dp, &s->st, err);
    if (st) {
        wgml_session_free(s);
        return st;
    }
    *out = s;
    return WGML_OK;
}

void wgml_session_free(wgml_session *s) {
    if (!s) return;
    if (s->st) s->dec->free(s->st);
    wgml_free(s->tokens);
    wgml_free(s->logits);
    wgml_free(s);
}

void wgml_session_reset(wgml_session *s) {
    s->n_past = 0;
    s->has_pending = 0;
    s->has_logits = 0;
}

int wgml_session_n_ctx(const wgml_session *s) { return s->n_ctx; }
int wgml_session_n_past(const wgml_session *s) { return s->n_past; }
const float *wgml_session_logits(const wgml_session *s) { return s->has_logits ? s->logits : NULL; }

/* Evaluates tokens in batches; the last batch yields logits and/or the argmax. */
static wgml_status eval_tokens(wgml_session *s, const int32_t *tokens, int n, int want_logits, int32_t *argmax,
                               wgml_error *err) {
    int n_ctx = s->n_ctx, n_batch = s->n_batch;
    if (n > n_ctx - s->n_past)
        return wgml_fail(err, WGML_ERR_CONTEXT_FULL, "%d tokens do not fit: the context holds %d and %d are used", n,
                         n_ctx, s->n_past);
    s->has_logits = 0;
    for (int i = 0; i < n; i += n_batch) {
        int k = n - i < n_batch ? n - i : n_batch;
        int last = i + k == n;
        wgml_decoder_run run = {0, s->n_past, k};
        wgml_decoder_out o = {k - 1, last && want_logits ? s->logits : NULL, last ? argmax : NULL};
        wgml_status st = s->dec->eval(s->m->impl, s->st, tokens + i, k, &run, 1, &o, o.logits || o.argmax, err);
        if (st) return st;
        memmove(s->tokens + s->n_past, tokens + i, (size_t)k * sizeof *tokens);
        s->n_past += k;
    }
    s->has_logits = want_logits;
    return WGML_OK;
}

wgml_status wgml_session_eval(wgml_session *s, const int32_t *tokens, int n, wgml_error *err) {
    if (!s || (!tokens && n)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_session_eval: NULL argument");
    if (n <= 0) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_session_eval: no tokens");
    if (s->has_pending) { /* the last generated token joins the context first */
        s->has_pending = 0;
        wgml_status st = eval_tokens(s, &s->tokens[s->n_past], 1, 0, NULL, err);
        if (st) return st;
    }
    return eval_tokens(s, tokens, n, 1, NULL, err);
}

/* Holds back the bytes of an incomplete UTF-8 character between pieces. */
typedef struct {
    char buf[8];
    int n;
} utf8_carry;

static int utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) return 2;
    if ((c & 0xf0) == 0xe0) return 3;
    if ((c & 0xf8) == 0xf0) return 4;
    return 1; /* stray continuation or invalid lead byte: pass through */
}

/* Appends piece to the carry and returns how many bytes of `out` are whole characters. */
static int utf8_take(utf8_carry *c, const char *piece, int n, char *out, int cap, int flush) {
    int len = 0;
    for (int i = 0; i < c->n && len < cap; i++) out[len++] = c->buf[i];
    for (int i = 0; i < n && len < cap; i++) out[len++] = piece[i];
    c->n = 0;
    if (flush) return len;
    /* find the start of a trailing incomplete character */
    int i = len - 1, back = 0;
    while (i >= 0 && back < 3 && ((unsigned char)out[i] & 0xc0) == 0x80) {
        i--;
        back++;
    }
    if (i >= 0 && utf8_len((unsigned char)out[i]) > len - i) {
        c->n = len - i;
        memcpy(c->buf, out + i, (size_t)c->n);
        len = i;
    }
    return len;
}

static int emit(const wgml_generate_params *p, int32_t tok, const char *text, int len) {
    return p->on_token ? p->on_token(p->user, tok, text, (size_t)len) : 0;
}

wgml_status wgml_generate(wgml_session *s, const char *prompt, const wgml_generate_params *params,
                          wgml_generate_result *result, wgml_error *err) {
    wgml_generate_result res = {0};
    if (result) *result = res;
    if (!s) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_generate: session is NULL");
    wgml_generate_params p = params ? *params : wgml_generate_default_params();
    wgml_status st = wgml_sampler_check(&p.sampler, err);
    if (st) return st;
    wgml_model *m = s->m;
    int n_ctx = s->n_ctx, n_vocab = s->n_vocab;
    double t_start = now_ms();

    /* prompt tokens: a pending token from the last call, BOS, the text */
    const char *text = prompt ? prompt : "";
    size_t text_len = strlen(text);
    int add_bos = p.add_bos && s->n_past == 0 && !s->has_pending && wgml_tokenizer_wants_bos(m->tok);
    int cap = n_ctx + 2;
    int32_t *toks = wgml_calloc((size_t)cap, sizeof *toks);
    if (!toks) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory tokenizing the prompt");
    int n_pend = s->has_pending ? 1 : 0;
    if (n_pend) toks[0] = s->tokens[s->n_past];
    int n_text = wgml_tokenizer_encode(m->tok, text, text_len, add_bos, toks + n_pend, cap - n_pend, err);
    if (n_text < 0) {
        wgml_free(toks);
        return err ? err->code : WGML_ERR_TOKENIZER;
    }
    int n_prompt = n_pend + n_text;
    res.n_prompt = n_text;
    if (n_prompt > n_ctx - s->n_past) {
        wgml_free(toks);
        return wgml_fail(err, WGML_ERR_CONTEXT_FULL,
                         "the prompt is %d tokens but the context has room for %d (size %d, %d used)", n_text,
                         n_ctx - s->n_past - n_pend, n_ctx, s->n_past);
    }
    if (n_prompt == 0 && !s->has_logits) {
        wgml_free(toks);
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "empty prompt and no BOS token: nothing to continue from");
    }

    int greedy = wgml_sampler_is_greedy(&p.sampler) && !p.grammar;
    wgml_sampler *sampler = NULL;
    grammar_state *gstate = NULL;
    if (!greedy && (st = wgml_sampler_create(&p.sampler, n_vocab, &sampler, err))) {
        wgml_free(toks);
        return st;
    }
    if (p.grammar && (st = wgml_grammar_bind(m, p.grammar, NULL, 0, sampler, &gstate, err))) {
        wgml_sampler_free(sampler);
        wgml_free(toks);
        return st;
    }
    s->has_pending = 0;
    int32_t next = -1;
    if (n_prompt > 0) {
        st = eval_tokens(s, toks, n_prompt, !greedy, greedy ? &next : NULL, err);
    } else if (greedy) {
        next = 0; /* continue from the logits of an earlier eval */
        for (int i = 1; i < n_vocab; i++)
            if (s->logits[i] > s->logits[next]) next = i;
    }
    wgml_free(toks);
    res.prompt_ms = now_ms() - t_start;

    wgml_tokenizer *tok = m->tok;
    /* (not with a grammar: the text is then exactly what the grammar followed) */
    int strip_space = !p.grammar && wgml_tokenizer_kind(tok) == WGML_VOCAB_SPM && s->n_past > 0 &&
                      s->tokens[s->n_past - 1] == wgml_tokenizer_bos(tok);
    utf8_carry carry = {{0}, 0};
    char piece[256], out[300];
    double t_first = 0;
    res.stop = WGML_STOP_NONE;
    while (!st) {
        if (p.n_predict >= 0 && res.n_generated >= p.n_predict) {
            res.stop = WGML_STOP_MAX_TOKENS;
            break;
        }
        if (!greedy && (next = wgml_sampler_sample(sampler, s->logits, s->tokens, s->n_past)) < 0) {
            st = err ? err->code : WGML_ERR_INVALID_ARGUMENT; /* a grammar no token can continue */
            break;
        }
        if (res.n_generated == 0) t_first = now_ms();
        if (!p.ignore_eos && wgml_tokenizer_is_eog(tok, next)) {
            res.stop = WGML_STOP_EOS;
            break;
        }
        res.n_generated++;
        s->tokens[s->n_past] = next;
        s->has_pending = 1;
        int plen = wgml_tokenizer_piece(tok, next, piece, (int)sizeof piece);
        if (plen < 0) plen = 0;
        if (plen > (int)sizeof piece) plen = (int)sizeof piece;
        const char *pc = piece;
        if (strip_space && plen > 0 && piece[0] == ' ') {
            pc++;
            plen--;
        }
        strip_space = 0;
        int olen = utf8_take(&carry, pc, plen, out, (int)sizeof out, 0);
        if (emit(&p, next, out, olen)) {
            res.stop = WGML_STOP_CALLBACK;
            break;
        }
        if (p.n_predict >= 0 && res.n_generated >= p.n_predict) {
            res.stop = WGML_STOP_MAX_TOKENS;
            break;
        }
        if (s->n_past >= n_ctx) {
            res.stop = WGML_STOP_CONTEXT_FULL;
            break;
        }
        s->has_pending = 0;
        st = eval_tokens(s, &next, 1, !greedy, greedy ? &next : NULL, err);
    }
    if (carry.n && !st) {
        int olen = utf8_take(&carry, "", 0, out, (int)sizeof out, 1);
        emit(&p, -1, out, olen);
    }
    double t_end = now_ms();
    if (res.n_generated > 0) {
        res.ttft_ms = t_first - t_start;
        res.generate_ms = t_end - t_first;
    }
    wgml_sampler_free(sampler);
    grammar_state_free(gstate);
    if (result) *result = res;
    return st;
}

/* ---- performance monitor ---- */

void wgml_model_get_counters(const wgml_model *m, wgml_counters *c) {
    wgml_backend_stats bs;
    m->be->get_stats(m->be, &bs);
    /* by name: the public struct is a subset of the backend's, in its own order */
    *c = (wgml_counters){.steps = bs.steps,
                         .submits = bs.submits,
                         .dispatches = bs.dispatches,
                         .buffers_created = bs.buffers_created,
                         .bind_groups_created = bs.bind_groups_created,
                         .pipelines_created = bs.pipelines_created,
                         .upload_bytes = bs.upload_bytes,
                         .readback_bytes = bs.readback_bytes,
                         .device_memory_bytes = bs.device_memory_bytes,
                         .pipeline_compile_ms = bs.pipeline_compile_ms};
}

void wgml_model_set_profiling(wgml_model *m, int on) { m->be->set_profiling(m->be, on); }

int wgml_model_get_kernel_times(const wgml_model *m, wgml_kernel_stat *out, int cap) {
    wgml_kernel_time t[64];
    int n = m->be->get_kernel_times(m->be, t, 64);
    for (int i = 0; i < n && i < cap && i < 64; i++) out[i] = (wgml_kernel_stat){t[i].name, t[i].calls, t[i].total_ms, t[i].flop};
    return n;
}

wgml_backend *wgml_model_backend(const wgml_model *m) { return m->be; }

int wgml_model_quantized_matmuls(const wgml_model *m) {
    if (m->fam->quantized_matmuls) return m->fam->quantized_matmuls(m->impl);
    /* any block-quantized weight but the tables read by row */
    const wgml_weights *w = m->fam->weights(m->impl);
    int q = 0;
    for (int i = 0; i < w->n; i++) {
        const char *name = w->src[i]->name;
        if (strcmp(name, "token_embd.weight") && strcmp(name, "position_embd.weight") &&
            strcmp(name, "token_types.weight"))
            q |= wgml_dtype_get(w->src[i]->type)->quantized;
    }
    return q;
}

uint64_t wgml_session_decode_bytes(const wgml_session *s, int kv_len) {
    return s->dec->step_bytes(s->m->impl, s->st, kv_len);
}

/* The f32 matmul rate of the backend's matmul op: W [1024 x 1024] times 1024 token rows. */
/* The backend's matmul of a K x M weight of `type` (quantized from fixed
 * values) over N token rows: the best pass after a warm-up. */
static wgml_status measure_matmul(wgml_backend *be, uint32_t type, int N, double *gflops, wgml_error *err) {
    const int K = 1024, M = 1024;
    const size_t row = wgml_row_size(type, K);
    float *w = wgml_malloc((size_t)K * M * sizeof *w), *x = wgml_malloc((size_t)K * N * sizeof *x);
    uint8_t *wq = type == WGML_F32 ? NULL : wgml_malloc(row * (size_t)M);
    wgml_buffer *bw = NULL, *bx = NULL, *bo = NULL;
    wgml_status st = w && x && (type == WGML_F32 || wq) ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; !st && i < (size_t)K * M; i++) w[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; !st && i < (size_t)K * N; i++) x[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    for (int r = 0; !st && wq && r < M; r++)
        if (wgml_quantize_row(type, w + (size_t)r * K, wq + (size_t)r * row, K) != row)
            st = wgml_fail(err, WGML_ERR_UNSUPPORTED, "cannot make %s weights to measure", wgml_dtype_name(type));
    if (!st) st = be->weight_create(be, type, K, M, wq ? (const void *)wq : (const void *)w, "bench.w", &bw, err);
    if (!st) st = be->buffer_create(be, (size_t)K * N * 4, WGML_BUFFER_ACTIVATIONS, &bx, err);
    if (!st) st = be->buffer_create(be, (size_t)M * N * 4, WGML_BUFFER_ACTIVATIONS, &bo, err);
    if (!st) st = be->buffer_write(be, bx, 0, x, (size_t)K * N * 4, err);
    wgml_tensor tw = {.type = type, .ne = {K, M, 1, 1}, .buf = bw, .name = "bench.w"};
    wgml_tensor tx = {.type = WGML_F32, .ne = {K, N, 1, 1}, .buf = bx, .name = "bench.x"};
    wgml_tensor to = {.type = WGML_F32, .ne = {M, N, 1, 1}, .buf = bo, .name = "bench.out"};
    /* at least 4 passes and 200 ms (a short pass on a shared host can lose its thread to a
     * neighbour: the best one counts), at most 64 */
    double best = 1e30, start = now_ms();
    for (int pass = 0; !st && pass < 64 && (pass < 4 || now_ms() - start < 200); pass++) {
        double t0 = now_ms();
        be->begin(be, &(wgml_step){0, N});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &tx, .n_w = 1, .w = {&tw}, .out = {&to}});
        st = be->end(be, err);
        double ms = now_ms() - t0;
        if (pass > 0 && ms < best) best = ms; /* the first pass compiles and warms up */
    }
    if (!st) *gflops = 2.0 * K * M * N / (best / 1e3) / 1e9;
    if (bw) be->buffer_free(be, bw);
    if (bx) be->buffer_free(be, bx);
    if (bo) be->buffer_free(be, bo);
    wgml_free(w);
    wgml_free(x);
    wgml_free(wq);
    return st;
}

wgml_status wgml_model_measure_matmul(wgml_model *m, const char *type, int n_rows, double *gflops, wgml_error *err) {
    if (!m || !type || !gflops) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_measure_matmul: NULL argument");
    *gflops = 0;
    const int t = wgml_dtype_from_name(type);
    if (t < 0 || (t != WGML_F32 && !wgml_can_quantize((uint32_t)t)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cannot measure a matmul of '%s' weights", type);
    if (n_rows < 1 || n_rows > 4096)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d rows (1..4096 allowed)", n_rows);
    if (!m->be->supports_type(m->be, (uint32_t)t))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "the %s backend has no matmul for %s weights", m->be->name, type);
    return measure_matmul(m->be, (uint32_t)t, n_rows, gflops, err);
}

wgml_status wgml_model_measure_fma_peak(wgml_model *m, double *f32_gflops, double *bf16_gflops, wgml_error *err) {
    *f32_gflops = *bf16_gflops = 0;
    if (!m) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_model_measure_fma_peak: NULL model");
    if (!m->be->measure_fma_peak)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "the %s backend has no arithmetic peak measurement", m->be->name);
    return m->be->measure_fma_peak(m->be, f32_gflops, bf16_gflops, err);
}

wgml_status wgml_model_measure_device(wgml_model *m, double *read_gbs, double *matmul_gflops, wgml_error *err) {
    wgml_status st = m->be->measure_bandwidth(m->be, read_gbs, err);
    if (!st && matmul_gflops) st = measure_matmul(m->be, WGML_F32, 1024, matmul_gflops, err);
    return st;
}
