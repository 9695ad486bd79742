/*
 * bert_load.c - hyper-parameters and weights of a BERT-family GGUF, named as
 * llama.cpp's converter names them:
 *
 *   token_embd, token_types, position_embd (bert), token_embd_norm.{weight,bias}
 *   blk.N.attn_{q,k,v}.{weight,bias} (bert) or blk.N.attn_qkv.weight (nomic-bert)
 *   blk.N.attn_output.{weight,bias}, blk.N.attn_output_norm.{weight,bias}
 *   blk.N.ffn_up.{weight,bias}, blk.N.ffn_gate.weight (nomic-bert),
 *   blk.N.ffn_down.{weight,bias}, blk.N.layer_output_norm.{weight,bias}
 *   cls.{weight,bias}, cls.output.{weight,bias} (rerankers)
 *
 * Biases are optional everywhere (nomic-bert has none).
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/bert/bert.h"

wgml_status bert_read_hparams(const gguf_file *f, bert_hparams *hp, wgml_error *err) {
    memset(hp, 0, sizeof *hp);
    const wgml_family *fam;
    wgml_status st = wgml_family_of(f, hp->arch, sizeof hp->arch, &fam, err);
    if (st) return st;
    if (fam != &wgml_family_bert)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: architecture '%s' is of the %s family, not bert", gguf_name(f),
                         hp->arch, fam->name);
    const char *arch = hp->arch;
    hp->nomic = strcmp(arch, "nomic-bert") == 0;
    const int64_t big = 1 << 24;
    if ((st = wgml_hparam_int(f, arch, "embedding_length", 1, big, &hp->n_embd, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "block_count", 1, 4096, &hp->n_layer, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "feed_forward_length", 1, big, &hp->n_ff, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "attention.head_count", 1, 4096, &hp->n_head, 1, err)))
        return st;
    hp->n_ctx_train = 512;
    if ((st = wgml_hparam_int(f, arch, "context_length", 1, 1 << 20, &hp->n_ctx_train, 0, err))) return st;
    if (hp->n_embd % hp->n_head)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: embedding %d is not divisible by %d heads", gguf_name(f),
                         hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    hp->eps = 1e-12f;
    if ((st = wgml_hparam_float(f, arch, "attention.layer_norm_epsilon", &hp->eps, err))) return st;
    if (!(hp->eps > 0 && hp->eps < 1))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: layer norm epsilon %g is out of range", gguf_name(f), hp->eps);
    if ((st = wgml_hparam_bool(f, arch, "attention.causal", &hp->causal, err))) return st;
    hp->pooling = BERT_POOL_NONE;
    if ((st = wgml_hparam_int(f, arch, "pooling_type", 0, BERT_POOL_RANK, &hp->pooling, 0, err))) return st;
    int64_t types = 2;
    int r = gguf_get_int(f, "tokenizer.ggml.token_type_count", 1, 1 << 16, &types, err);
    if (r < 0) return WGML_ERR_FORMAT;
    hp->n_types = (int)types;
    if (hp->nomic) {
        hp->rope = (wgml_rope){.n_rot = hp->head_dim, .neox = 1, .freq_base = 10000.0f, .freq_scale = 1.0f};
        if ((st = wgml_hparam_float(f, arch, "rope.freq_base", &hp->rope.freq_base, err))) return st;
        if (!(hp->rope.freq_base > 1.0f))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: rope frequency base %g is out of range", gguf_name(f),
                             hp->rope.freq_base);
        if (hp->head_dim & 1)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: rotary positions need an even head size, not %d",
                             gguf_name(f), hp->head_dim);
    }
    return WGML_OK;
}

static wgml_status load_layer(wgml_weights_loader *L, bert_model *m, int i) {
    const bert_hparams *hp = &m->hp;
    bert_layer *l = &m->layers[i];
    const int64_t E = hp->n_embd, F = hp->n_ff;
    char n[96];
    wgml_status st;
#define T(field, suffix, a, b, req)                            \
    snprintf(n, sizeof n, "blk.%d.%s", i, suffix);             \
    if ((st = wgml_weights_load(L, &l->field, n, a, b, req))) return st;
    if (hp->nomic) { /* Wq, Wk and Wv are rows [0, E), [E, 2E), [2E, 3E) of the fused matrix */
        snprintf(n, sizeof n, "blk.%d.attn_qkv.weight", i);
        if ((st = wgml_weights_load_part(L, &l->wq, n, E, 3 * E, 0, E)) ||
            (st = wgml_weights_load_part(L, &l->wk, n, E, 3 * E, E, E)) ||
            (st = wgml_weights_load_part(L, &l->wv, n, E, 3 * E, 2 * E, E)))
            return st;
    } else {
        T(wq, "attn_q.weight", E, E, 1)
        T(wk, "attn_k.weight", E, E, 1)
        T(wv, "attn_v.weight", E, E, 1)
    }
    T(bq, "attn_q.bias", E, 1, 0)
    T(bk, "attn_k.bias", E, 1, 0)
    T(bv, "attn_v.bias", E, 1, 0)
    T(wo, "attn_output.weight", E, E, 1)
    T(bo, "attn_output.bias", E, 1, 0)
    T(attn_norm_w, "attn_output_norm.weight", E, 1, 1)
    T(attn_norm_b, "attn_output_norm.bias", E, 1, 0)
    T(up, "ffn_up.weight", E, F, 1)
    T(b_up, "ffn_up.bias", F, 1, 0)
    T(gate, "ffn_gate.weight", E, F, hp->nomic)
    T(down, "ffn_down.weight", F, E, 1)
    T(b_down, "ffn_down.bias", E, 1, 0)
    T(out_norm_w, "layer_output_norm.weight", E, 1, 1)
    T(out_norm_b, "layer_output_norm.bias", E, 1, 0)
#undef T
    return WGML_OK;
}

wgml_status bert_model_load(const gguf_file *f, wgml_backend *be, const wgml_weight_fault *fault,
                            wgml_load_progress_fn progress, void *user, bert_model **out, wgml_error *err) {
    *out = NULL;
    bert_model *m = wgml_calloc(1, sizeof *m);
    if (!m) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
    m->be = be;
    wgml_status st = bert_read_hparams(f, &m->hp, err);
    if (st) goto fail;
    bert_hparams *hp = &m->hp;
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: missing tensor 'token_embd.weight'", gguf_name(f));
        goto fail;
    }
    if (te->ne[1] < 1 || te->ne[1] > (1 << 24) || te->n_dims != 2) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: token_embd.weight has a bad shape", gguf_name(f));
        goto fail;
    }
    hp->n_vocab = (int)te->ne[1];
    m->layers = wgml_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
        goto fail;
    }
    wgml_weights_loader L;
    wgml_weights_begin(&L, f, be, &m->w, fault, progress, user, err);
    const int64_t E = hp->n_embd;
    if ((st = wgml_weights_load(&L, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, 1)) ||
        (st = wgml_weights_load(&L, &m->types, "token_types.weight", E, hp->n_types, 0)) ||
        (st = wgml_weights_load(&L, &m->pos_embd, "position_embd.weight", E, hp->n_ctx_train, !hp->nomic)) ||
        (st = wgml_weights_load(&L, &m->embd_norm_w, "token_embd_norm.weight", E, 1, 1)) ||
        (st = wgml_weights_load(&L, &m->embd_norm_b, "token_embd_norm.bias", E, 1, 0)))
        goto fail;
    for (int i = 0; i < hp->n_layer; i++)
        if ((st = load_layer(&L, m, i))) goto fail;
    if (hp->pooling == BERT_POOL_RANK) {
        if ((st = wgml_weights_load(&L, &m->cls_w, "cls.weight", E, E, 0)) ||
            (st = wgml_weights_load(&L, &m->cls_b, "cls.bias", E, 1, 0)) ||
            (st = wgml_weights_load(&L, &m->cls_out_w, "cls.output.weight", E, 1, 1)) ||
            (st = wgml_weights_load(&L, &m->cls_out_b, "cls.output.bias", 1, 1, 0)))
            goto fail;
    }
    if ((st = wgml_weights_end(&L))) goto fail;
    *out = m;
    return WGML_OK;
fail:
    bert_model_free(m);
    return st;
}

int bert_is_reranker(const bert_model *m) { return m->hp.pooling == BERT_POOL_RANK && m->cls_out_w.buf != NULL; }
