/*
 * llama_family.c - the Llama family's registry entry (model/family.h):
 * decoder-only LLMs with architectures "llama" and "qwen2", task generate.
 */
#include <stdio.h>

#include "model/llama/llama.h"

static const char *const archs[] = {"llama", "qwen2", NULL};

static wgml_status describe(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err) {
    llama_hparams hp;
    wgml_status st = llama_read_hparams(f, &hp, err);
    if (st || !field) return st;
    char v[128];
#define F(key, ...) (snprintf(v, sizeof v, __VA_ARGS__), field(user, key, v))
    F("layers", "%d", hp.n_layer);
    F("embedding", "%d", hp.n_embd);
    F("feed-forward", "%d", hp.n_ff);
    F("heads", "%d (KV heads %d, head size %d)", hp.n_head, hp.n_head_kv, hp.head_dim);
    F("context", "%d (training)", hp.n_ctx_train);
    F("rms norm eps", "%g", hp.eps);
    F("rope", "%s, %d dims, base %g, scale %g", hp.rope.neox ? "neox" : "normal", hp.rope.n_rot, hp.rope.freq_base,
      hp.rope.freq_scale);
#undef F
    return WGML_OK;
}

static wgml_status load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err) {
    llama_model *m = NULL;
    wgml_status st = llama_model_load_fault(f, be, p ? p->fault : NULL, p ? p->progress : NULL, p ? p->user : NULL, &m, err);
    *out = m;
    return st;
}

static void model_free(void *m) { llama_model_free(m); }

static wgml_weights *weights(void *m) { return &((llama_model *)m)->w; }

static void get_info(const void *model, wgml_model_info *info) {
    const llama_model *m = model;
    const llama_hparams *hp = &m->hp;
    info->architecture = hp->arch;
    info->n_params = m->w.n_params;
    info->weights_bytes = m->w.bytes;
    info->matmul_type = wgml_weights_main_type(&m->w);
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_ctx_train;
    info->n_embd = hp->n_embd;
    info->n_layer = hp->n_layer;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->n_ff = hp->n_ff;
    info->head_dim = hp->head_dim;
    info->tied_embeddings = m->output.buf == m->tok_embd.buf;
    uint64_t table = (uint64_t)hp->n_vocab * (uint64_t)hp->n_embd;
    info->matmul_params = m->w.n_params - table * (info->tied_embeddings ? 1 : 2);
}

const wgml_family wgml_family_llama = {
    .name = "llama",
    .archs = archs,
    .tasks = WGML_TASK_GENERATE,
    .describe = describe,
    .load = load,
    .free = model_free,
    .weights = weights,
    .get_info = get_info,
};
