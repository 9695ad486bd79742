/*
 * api_embed.c - the public API's embedding and reranking (include/wgml.h),
 * for models whose family has an encoder (model/family.h: bert's, and the
 * text towers of the clip family).
 *
 * Texts are tokenized with the vocabulary's special tokens ([CLS] text
 * [SEP]; a reranker's pair as [CLS] query [SEP] doc [SEP]; CLIP's
 * <|startoftext|> text <|endoftext|>; SigLIP's text </s>), cut to the
 * context when asked, and packed in input order into steps of up to n_batch
 * tokens: each text attends to its own rows only, so a text's vector does
 * not depend on its neighbours. No row is padding except for an encoder
 * trained on padded texts (SigLIP: each text padded to the context).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"

/* Tokens per step by default: on the CPU steps whose activations stay in the
 * caches (512 rows: 10% faster than 2048 on bge-small and nomic-embed), on a
 * GPU large ones (parallelism, fewer submits). */
static int default_batch(const wgml_model *m) { return strcmp(m->be->name, "cpu") ? 2048 : 512; }

wgml_embed_params wgml_embed_default_params(void) {
    return (wgml_embed_params){.pooling = WGML_POOLING_MODEL, .normalize = WGML_NORMALIZE_L2};
}

/* The model's encoder and what it reads and gives (info); NULL when it has none (a family whose
 * encoder interface this model lacks, e.g. a vision tower without a text tower, gives dim 0). */
static const wgml_encoder *encoder(const wgml_model *m, wgml_encoder_info *info) {
    memset(info, 0, sizeof *info);
    info->pad_id = -1;
    if (!m || !m->fam->encoder) return NULL;
    m->fam->encoder->info(m->impl, info);
    return info->dim > 0 ? m->fam->encoder : NULL;
}

int wgml_embed_dim(const wgml_model *model, const wgml_embed_params *params) {
    wgml_encoder_info ei;
    if (!encoder(model, &ei)) { /* an image encoder without a text tower: its vectors' */
        if (!model || !model->fam->vision) return -1;
        wgml_vision_info vi;
        model->fam->vision->info(model->impl, &vi);
        return params && params->dimensions && params->dimensions != vi.dim ? -1 : vi.dim;
    }
    int d = params && params->dimensions ? params->dimensions : ei.dim;
    return d >= 1 && d <= ei.dim ? d : -1;
}

/* Every text's tokens, one after another: text i is toks[off[i] .. off[i+1]). */
typedef struct {
    int32_t *toks, *types;
    int *off;
    int n;
} token_lists;

static void lists_free(token_lists *L) {
    wgml_free(L->toks);
    wgml_free(L->types);
    wgml_free(L->off);
}

/* [CLS] text [SEP] into dst (cap >= len + 2 holds any text: a token covers a byte or more) */
static int encode(const wgml_model *m, const char *text, int32_t *dst, int cap, wgml_error *err) {
    size_t len = strlen(text);
    return wgml_tokenizer_encode(m->tok, text, len, 1, dst, cap, err);
}

/* Tokenizes n texts (n pairs with a query: [CLS] query [SEP] doc [SEP], the
 * document's tokens of type 1), cutting those longer than the context when
 * truncate is set (pairs: the document's end). */
static wgml_status tokenize_all(const wgml_model *m, const char *query, const char *const *texts, int n, int truncate,
                                token_lists *L, wgml_error *err) {
    wgml_encoder_info ei;
    encoder(m, &ei);
    const int n_ctx = ei.n_ctx, n_types = ei.n_types, pad = ei.pad_id;
    memset(L, 0, sizeof *L);
    size_t total = 0, qlen = query ? strlen(query) + 2 : 0;
    for (int i = 0; i < n; i++) {
        if (!texts[i]) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "text %d is NULL", i);
        size_t need = strlen(texts[i]) + 2 + qlen;
        total += pad >= 0 && need < (size_t)n_ctx ? (size_t)n_ctx : need;
    }
    L->toks = wgml_malloc((total + 1) * sizeof *L->toks);
    L->types = wgml_calloc(total + 1, sizeof *L->types);
    L->off = wgml_malloc(((size_t)n + 1) * sizeof *L->off);
    if (!L->toks || !L->types || !L->off) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory tokenizing");
    int32_t *qt = NULL;
    int nq = 0;
    if (query) {
        if (!(qt = wgml_malloc(qlen * sizeof *qt))) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        if ((nq = encode(m, query, qt, (int)qlen, err)) < 0) {
            wgml_free(qt);
            return err ? err->code : WGML_ERR_TOKENIZER;
        }
    }
    size_t at = 0;
    wgml_status st = WGML_OK;
    for (int i = 0; i < n && !st; i++) {
        L->off[i] = (int)at;
        int32_t *t = L->toks + at;
        if (nq) memcpy(t, qt, (size_t)nq * sizeof *t);
        int k = encode(m, texts[i], t + nq, (int)(total - at - (size_t)nq), err);
        if (k < 0) {
            st = err ? err->code : WGML_ERR_TOKENIZER;
            wgml_error_prefix(err, "text %d", i);
            break;
        }
        if (query && k > 0 && t[nq] == wgml_tokenizer_bos(m->tok)) { /* the document's [CLS] goes */
            memmove(t + nq, t + nq + 1, (size_t)(k - 1) * sizeof *t);
            k--;
        }
        int len = nq + k;
        if (query && n_types > 1)
            for (int j = nq; j < len; j++) L->types[at + (size_t)j] = 1;
        if (len > n_ctx) {
            if (!truncate || (query && nq >= n_ctx - 1)) {
                st = wgml_fail(err, WGML_ERR_CONTEXT_FULL, "%s %d is %d tokens; the model's context is %d%s",
                               query ? "the query with document" : "text", i, len, n_ctx,
                               query ? " (the query alone must leave room for the document)"
                                     : " (truncation was not asked for)");
                break;
            }
            wgml_note(m->log, m->log_user, "%s %d: %d tokens cut to the context of %d", query ? "document" : "text", i,
                      len, n_ctx);
            t[n_ctx - 1] = t[len - 1]; /* keep the closing [SEP] */
            len = n_ctx;
        }
        for (; pad >= 0 && len < n_ctx; len++) t[len] = pad; /* padded to the context (SigLIP) */
        at += (size_t)len;
    }
    L->off[n] = (int)at;
    L->n = n;
    wgml_free(qt);
    return st;
}

/* Runs the texts through the encoder in packed steps; result i (per floats) to out + i * per. */
static wgml_status run_steps(wgml_model *m, const token_lists *L, int n_batch, wgml_pool_mode mode,
                             wgml_encoder_output what, int per, float *out, wgml_error *err) {
    wgml_encoder_info ei;
    const wgml_encoder *enc = encoder(m, &ei);
    const int E = ei.dim, res = what == WGML_ENCODE_SCORE ? 1 : E;
    int longest = 0;
    for (int i = 0; i < L->n; i++)
        if (L->off[i + 1] - L->off[i] > longest) longest = L->off[i + 1] - L->off[i];
    const int cap = n_batch > longest ? n_batch : longest;
    int32_t *start = wgml_malloc(((size_t)cap + 1) * sizeof *start);
    float *tmp = per != res ? wgml_malloc((size_t)cap * (size_t)res * sizeof *tmp) : NULL;
    wgml_status st = start && (per == res || tmp) ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    /* this request's state: the one waiting on the model, or a new one */
    void *state = wgml_model_take_state(m, WGML_STATE_ENCODER);
    if (!st && !state) st = enc->create(m->impl, cap, &state, err);
    for (int i0 = 0; i0 < L->n && !st;) {
        int i1 = i0, rows = 0;
        start[0] = 0;
        while (i1 < L->n && rows + (L->off[i1 + 1] - L->off[i1]) <= cap) {
            rows += L->off[i1 + 1] - L->off[i1];
            start[++i1 - i0] = rows;
        }
        wgml_encoder_batch batch = {.tokens = L->toks + L->off[i0], .types = L->types + L->off[i0], .start = start,
                            .n_tokens = rows, .n_seq = i1 - i0};
        float *dst = tmp ? tmp : out + (size_t)i0 * (size_t)per;
        st = enc->encode(m->impl, state, &batch, mode, what, dst, err);
        if (!st && tmp)
            for (int i = 0; i < i1 - i0; i++)
                memcpy(out + (size_t)(i0 + i) * (size_t)per, tmp + (size_t)i * (size_t)res, (size_t)per * sizeof *out);
        i0 = i1;
    }
    wgml_model_give_state(m, WGML_STATE_ENCODER, state, enc->free);
    wgml_free(start);
    wgml_free(tmp);
    return st;
}

wgml_status wgml_embed(wgml_model *model, const char *const *texts, int n, const wgml_embed_params *params, float *out,
                       int dim, wgml_error *err) {
    wgml_encoder_info ei;
    if (!model || n < 0 || (n > 0 && (!texts || !out)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_embed: NULL argument or negative count");
    if (!encoder(model, &ei))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "a %s model does not embed text (%s)", model->fam->name,
                         model->fam->encoder ? "this one has no text tower" : "its family has no encoder");
    if (!model->tok)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this %s model has no tokenizer in its file", model->fam->name);
    wgml_embed_params p = params ? *params : wgml_embed_default_params();
    const int E = ei.dim, want = wgml_embed_dim(model, &p);
    if (want < 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "dimensions %d: the model's vectors have %d", p.dimensions, E);
    if (dim != want)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_embed: dim is %d, the vectors have %d", dim, want);
    if (p.n_batch < 0 || (p.normalize != WGML_NORMALIZE_L2 && p.normalize != WGML_NORMALIZE_NONE))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_embed: bad batch size or normalization");
    wgml_pool_mode mode;
    switch (p.pooling) {
    case WGML_POOLING_MODEL: mode = ei.pool; break;
    case WGML_POOLING_MEAN: mode = WGML_POOL_MEAN; break;
    case WGML_POOLING_CLS: mode = WGML_POOL_FIRST; break;
    case WGML_POOLING_LAST: mode = WGML_POOL_LAST; break;
    default: return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_embed: unknown pooling %d", (int)p.pooling);
    }
    if (n == 0) return WGML_OK;
    token_lists L;
    wgml_status st = tokenize_all(model, NULL, texts, n, p.truncate, &L, err);
    /* whole vectors are normalized on the device; a Matryoshka prefix after it is cut here */
    const int l2 = p.normalize == WGML_NORMALIZE_L2;
    wgml_encoder_output what = l2 && dim == E ? WGML_ENCODE_L2 : WGML_ENCODE_POOLED;
    if (!st) st = run_steps(model, &L, p.n_batch ? p.n_batch : default_batch(model), mode, what, dim, out, err);
    for (int i = 0; !st && l2 && dim < E && i < n; i++) {
        float *v = out + (size_t)i * (size_t)dim;
        double ss = 0;
        for (int j = 0; j < dim; j++) ss += (double)v[j] * v[j];
        double norm = sqrt(ss) > 1e-12 ? sqrt(ss) : 1e-12;
        for (int j = 0; j < dim; j++) v[j] = (float)(v[j] / norm);
    }
    lists_free(&L);
    return st;
}

wgml_status wgml_rerank(wgml_model *model, const char *query, const char *const *docs, int n, float *scores,
                        wgml_error *err) {
    wgml_encoder_info ei;
    if (!model || !query || n < 0 || (n > 0 && (!docs || !scores)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_rerank: NULL argument or negative count");
    if (!encoder(model, &ei) || !ei.rerank)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                         "this model does not rerank (a cross-encoder has pooling 'rank' and a cls.output head)");
    if (n == 0) return WGML_OK;
    token_lists L;
    wgml_status st = tokenize_all(model, query, docs, n, 1, &L, err);
    if (!st) st = run_steps(model, &L, default_batch(model), WGML_POOL_FIRST, WGML_ENCODE_SCORE, 1, scores, err);
    lists_free(&L);
    return st;
}
