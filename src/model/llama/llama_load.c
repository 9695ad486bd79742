/*
 * llama_load.c - hyper-parameters and weights of a Llama-family GGUF.
 *
 * Every tensor the forward pass uses is looked up by its GGUF name, checked
 * against the shape the hyper-parameters imply and against the types the
 * backend can compute with, then handed to the backend (the CPU backend uses
 * it in place in the mapping; a GPU backend uploads it once).
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/family.h"
#include "model/llama/llama.h"

wgml_status llama_read_hparams(const gguf_file *f, llama_hparams *hp, wgml_error *err) {
    memset(hp, 0, sizeof *hp);
    const wgml_family *fam;
    wgml_status st = wgml_family_of(f, hp->arch, sizeof hp->arch, &fam, err);
    if (st) return st;
    if (fam != &wgml_family_llama)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: architecture '%s' is of the %s family, not llama", gguf_name(f),
                         hp->arch, fam->name);
    const char *arch = hp->arch;
    const int64_t big = 1 << 24;
    if ((st = wgml_hparam_int(f, arch, "embedding_length", 1, big, &hp->n_embd, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "block_count", 1, 4096, &hp->n_layer, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "feed_forward_length", 1, big, &hp->n_ff, 1, err)) ||
        (st = wgml_hparam_int(f, arch, "attention.head_count", 1, 4096, &hp->n_head, 1, err)))
        return st;
    hp->n_head_kv = hp->n_head;
    hp->n_ctx_train = 2048;
    if ((st = wgml_hparam_int(f, arch, "attention.head_count_kv", 1, 4096, &hp->n_head_kv, 0, err)) ||
        (st = wgml_hparam_int(f, arch, "context_length", 1, 1 << 24, &hp->n_ctx_train, 0, err)))
        return st;
    if (hp->n_head % hp->n_head_kv)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %d attention heads are not a multiple of %d KV heads", gguf_name(f),
                         hp->n_head, hp->n_head_kv);
    char kl[128];
    snprintf(kl, sizeof kl, "%s.attention.key_length", arch);
    if (!gguf_find_kv(f, kl) && hp->n_embd % hp->n_head)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: embedding %d is not divisible by %d heads", gguf_name(f),
                         hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = wgml_hparam_int(f, arch, "attention.key_length", 1, 65536, &hp->head_dim, 0, err))) return st;
    int v_len = hp->head_dim;
    if ((st = wgml_hparam_int(f, arch, "attention.value_length", 1, 65536, &v_len, 0, err))) return st;
    if (v_len != hp->head_dim)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: key length %d differs from value length %d", gguf_name(f),
                         hp->head_dim, v_len);
    hp->eps = 1e-5f;
    if ((st = wgml_hparam_float(f, arch, "attention.layer_norm_rms_epsilon", &hp->eps, err))) return st;
    if (!(hp->eps > 0 && hp->eps < 1))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: RMS norm epsilon %g is out of range", gguf_name(f), hp->eps);

    wgml_rope *rp = &hp->rope;
    rp->n_rot = hp->head_dim;
    if ((st = wgml_hparam_int(f, arch, "rope.dimension_count", 2, 65536, &rp->n_rot, 0, err))) return st;
    if (rp->n_rot > hp->head_dim || (rp->n_rot & 1))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: rope dimension %d does not fit head size %d", gguf_name(f),
                         rp->n_rot, hp->head_dim);
    rp->neox = strcmp(arch, "qwen2") == 0; /* Qwen2 rotates halves; Llama adjacent pairs */
    rp->freq_base = 10000.0f;
    rp->freq_scale = 1.0f;
    if ((st = wgml_hparam_float(f, arch, "rope.freq_base", &rp->freq_base, err))) return st;
    if (!(rp->freq_base > 1.0f))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: rope frequency base %g is out of range", gguf_name(f), rp->freq_base);
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    gguf_str stype;
    int r = gguf_get_str(f, key, &stype, err);
    if (r < 0) return WGML_ERR_FORMAT;
    float factor = 0;
    if ((st = wgml_hparam_float(f, arch, "rope.scaling.factor", &factor, err))) return st;
    if (r > 0 && !gguf_str_eq(stype, "none") && !gguf_str_eq(stype, "linear"))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: rope scaling '%.*s' is not supported (none and linear are)",
                         gguf_name(f), (int)stype.len, stype.ptr);
    if (r == 0) { /* older files: rope.scale_linear */
        if ((st = wgml_hparam_float(f, arch, "rope.scale_linear", &factor, err))) return st;
    }
    if ((r == 0 || gguf_str_eq(stype, "linear")) && factor > 0) {
        if (!(factor >= 1e-3f && factor <= 1e3f))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: rope scaling factor %g is out of range", gguf_name(f), factor);
        rp->freq_scale = 1.0f / factor;
    }
    return WGML_OK;
}

static wgml_status load_layer(wgml_weights_loader *L, llama_model *m, int i) {
    const llama_hparams *hp = &m->hp;
    llama_layer *l = &m->layers[i];
    int64_t q = (int64_t)hp->n_head * hp->head_dim, kv = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[96];
    wgml_status st;
#define T(field, suffix, a, b, req)                            \
    snprintf(n, sizeof n, "blk.%d.%s", i, suffix);             \
    if ((st = wgml_weights_load(L, &l->field, n, a, b, req))) return st;
    T(attn_norm, "attn_norm.weight", hp->n_embd, 1, 1)
    T(wq, "attn_q.weight", hp->n_embd, q, 1)
    T(wk, "attn_k.weight", hp->n_embd, kv, 1)
    T(wv, "attn_v.weight", hp->n_embd, kv, 1)
    T(bq, "attn_q.bias", q, 1, 0)
    T(bk, "attn_k.bias", kv, 1, 0)
    T(bv, "attn_v.bias", kv, 1, 0)
    T(wo, "attn_output.weight", q, hp->n_embd, 1)
    T(ffn_norm, "ffn_norm.weight", hp->n_embd, 1, 1)
    T(w_gate, "ffn_gate.weight", hp->n_embd, hp->n_ff, 1)
    T(w_up, "ffn_up.weight", hp->n_embd, hp->n_ff, 1)
    T(w_down, "ffn_down.weight", hp->n_ff, hp->n_embd, 1)
#undef T
    return WGML_OK;
}

wgml_status llama_model_load(const gguf_file *f, wgml_backend *be, llama_progress_fn progress, void *user,
                             llama_model **out, wgml_error *err) {
    return llama_model_load_fault(f, be, NULL, progress, user, out, err);
}

wgml_status llama_model_load_fault(const gguf_file *f, wgml_backend *be, const llama_fault *fault,
                                   llama_progress_fn progress, void *user, llama_model **out, wgml_error *err) {
    *out = NULL;
    llama_model *m = wgml_calloc(1, sizeof *m);
    if (!m) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
    m->be = be;
    wgml_status st = llama_read_hparams(f, &m->hp, err);
    if (st) goto fail;
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: missing tensor 'token_embd.weight'", gguf_name(f));
        goto fail;
    }
    if (te->ne[1] < 1 || te->ne[1] > (1 << 24) || te->n_dims != 2) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: token_embd.weight has a bad shape", gguf_name(f));
        goto fail;
    }
    m->hp.n_vocab = (int)te->ne[1];
    m->layers = wgml_calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
        goto fail;
    }
    wgml_weights_loader L;
    wgml_weights_begin(&L, f, be, &m->w, fault, progress, user, err);
    const llama_hparams *hp = &m->hp;
    if ((st = wgml_weights_load(&L, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, 1))) goto fail;
    if ((st = wgml_weights_load(&L, &m->out_norm, "output_norm.weight", hp->n_embd, 1, 1))) goto fail;
    if ((st = wgml_weights_load(&L, &m->output, "output.weight", hp->n_embd, hp->n_vocab, 0))) goto fail;
    if (!m->output.buf) m->output = m->tok_embd; /* tied embeddings */
    if ((st = wgml_weights_load(&L, &m->rope_freqs, "rope_freqs.weight", hp->rope.n_rot / 2, 1, 0))) goto fail;
    for (int i = 0; i < hp->n_layer; i++)
        if ((st = load_layer(&L, m, i))) goto fail;
    if ((st = wgml_weights_end(&L))) goto fail;
    *out = m;
    return WGML_OK;
fail:
    llama_model_free(m);
    return st;
}

void llama_model_free(llama_model *m) {
    if (!m) return;
    wgml_weights_free(&m->w);
    wgml_free(m->layers);
    wgml_free(m);
}

wgml_status llama_model_stream(llama_model *m, const gguf_file *f, llama_read_fn read, void *read_user,
                               llama_progress_fn progress, void *user, wgml_error *err) {
    return wgml_weights_stream(&m->w, f, read, read_user, progress, user, err);
}
