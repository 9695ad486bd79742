/*
 * fuzz_hf.c - libFuzzer target: Hugging Face folders (model/hf.h) through
 * the clip family's converter (model/clip/clip_hf.c) and the image
 * preprocessing's preprocessor_config.json reader (image/image_prep.h).
 *
 * The input is config.json, then optionally a NUL byte and
 * preprocessor_config.json. Both are written into a temporary folder (in
 * $TMPDIR, else /dev/shm when writable, else /tmp; removed at exit) beside a
 * fixed model.safetensors that holds a tiny tower under the names of all
 * three checkpoints (CLIPModel, SiglipModel, ViTForImageClassification: width
 * 4, one layer, 4 x 4 images of 2 x 2 patches, 3 labels), so that a config
 * that fits it converts and one that does not fails on a missing or
 * mis-sized tensor. A converted folder is then read as the family reads it
 * (clip_read_hparams). Anything but a clean error is a finding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "model/clip/clip.h"
#include "model/hf.h"

#define D 4 /* width */
#define F 8 /* feed-forward */
#define K 12 /* 3 x 2 x 2: a patch */
#define N 5 /* rows: 4 patches + the class row */
#define L 3 /* labels */

static char dir[256];

static void cleanup(void) {
    static const char *const files[] = {"config.json", "preprocessor_config.json", "model.safetensors"};
    char p[320];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* Appends one F32 tensor entry of n values to the header (hdr) and counts its bytes. */
static void entry(char *hdr, size_t cap, size_t *at, const char *name, const char *shape, size_t n) {
    size_t k = strlen(hdr);
    snprintf(hdr + k, cap - k, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
             k > 1 ? "," : "", name, shape, *at, *at + 4 * n);
    *at += 4 * n;
}

/* A block's tensors under pfx with the given names (q, k, v, out, norm1, norm2, fc1, fc2). */
static void block(char *h, size_t cap, size_t *at, const char *pfx, const char *const nm[8]) {
    char n[160];
    for (int i = 0; i < 8; i++) {
        const int fc1 = i == 6, fc2 = i == 7, ln = i == 4 || i == 5;
        snprintf(n, sizeof n, "%s%s.weight", pfx, nm[i]);
        entry(h, cap, at, n, ln ? "4" : fc1 ? "8,4" : fc2 ? "4,8" : "4,4", ln ? D : fc1 || fc2 ? D * F : D * D);
        snprintf(n, sizeof n, "%s%s.bias", pfx, nm[i]);
        entry(h, cap, at, n, fc1 ? "8" : "4", fc1 ? F : D);
    }
}

static void write_model(void) {
    static char h[16384];
    size_t at = 0;
    strcpy(h, "{");
    static const char *const clip[8] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
                                        "layer_norm1",      "layer_norm2",      "mlp.fc1",          "mlp.fc2"};
    static const char *const vit[8] = {"attention.attention.query", "attention.attention.key",
                                       "attention.attention.value", "attention.output.dense",
                                       "layernorm_before",          "layernorm_after",
                                       "intermediate.dense",        "output.dense"};
    /* CLIP and SigLIP share vision_model.*: the union of both */
    entry(h, sizeof h, &at, "vision_model.embeddings.patch_embedding.weight", "4,3,2,2", D * K);
    entry(h, sizeof h, &at, "vision_model.embeddings.patch_embedding.bias", "4", D);
    entry(h, sizeof h, &at, "vision_model.embeddings.class_embedding", "4", D);
    entry(h, sizeof h, &at, "vision_model.embeddings.position_embedding.weight", "5,4", N * D);
    entry(h, sizeof h, &at, "vision_model.pre_layrnorm.weight", "4", D);
    entry(h, sizeof h, &at, "vision_model.pre_layrnorm.bias", "4", D);
    block(h, sizeof h, &at, "vision_model.encoder.layers.0.", clip);
    entry(h, sizeof h, &at, "vision_model.post_layernorm.weight", "4", D);
    entry(h, sizeof h, &at, "vision_model.post_layernorm.bias", "4", D);
    entry(h, sizeof h, &at, "visual_projection.weight", "4,4", D * D);
    entry(h, sizeof h, &at, "vision_model.head.probe", "1,1,4", D);
    entry(h, sizeof h, &at, "vision_model.head.attention.in_proj_weight", "12,4", 3 * D * D);
    entry(h, sizeof h, &at, "vision_model.head.attention.in_proj_bias", "12", 3 * D);
    static const char *const head[8] = {"x", "x", "x", "attention.out_proj", "x", "layernorm", "mlp.fc1", "mlp.fc2"};
    for (int i = 3; i < 8; i++) {
        if (i == 4) continue;
        char n[160];
        const int fc1 = i == 6, fc2 = i == 7, ln = i == 5;
        snprintf(n, sizeof n, "vision_model.head.%s.weight", head[i]);
        entry(h, sizeof h, &at, n, ln ? "4" : fc1 ? "8,4" : fc2 ? "4,8" : "4,4", ln ? D : fc1 || fc2 ? D * F : D * D);
        snprintf(n, sizeof n, "vision_model.head.%s.bias", head[i]);
        entry(h, sizeof h, &at, n, fc1 ? "8" : "4", fc1 ? F : D);
    }
    entry(h, sizeof h, &at, "vit.embeddings.cls_token", "1,1,4", D);
    entry(h, sizeof h, &at, "vit.embeddings.position_embeddings", "1,5,4", N * D);
    entry(h, sizeof h, &at, "vit.embeddings.patch_embeddings.projection.weight", "4,3,2,2", D * K);
    entry(h, sizeof h, &at, "vit.embeddings.patch_embeddings.projection.bias", "4", D);
    block(h, sizeof h, &at, "vit.encoder.layer.0.", vit);
    entry(h, sizeof h, &at, "vit.layernorm.weight", "4", D);
    entry(h, sizeof h, &at, "vit.layernorm.bias", "4", D);
    entry(h, sizeof h, &at, "classifier.weight", "3,4", L * D);
    entry(h, sizeof h, &at, "classifier.bias", "3", L);
    strcat(h, "}");
    char p[320];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    uint64_t hn = strlen(h);
    fwrite(&hn, 8, 1, f);
    fwrite(h, 1, hn, f);
    for (size_t i = 0; i < at / 4; i++) {
        float v = (float)((int)(i * 37 % 19) - 9) / 16.0f;
        fwrite(&v, 4, 1, f);
    }
    fclose(f);
}

static void put(const char *name, const uint8_t *data, size_t n) {
    char p[320];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!data) {
        unlink(p);
        return;
    }
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*dir) {
        const char *t = getenv("TMPDIR");
        if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/fuzz-hf-%d", t, (int)getpid());
        mkdir(dir, 0700);
        write_model();
        atexit(cleanup);
    }
    if (size > 65536) return 0;
    const uint8_t *nul = memchr(data, 0, size);
    const size_t n_cfg = nul ? (size_t)(nul - data) : size;
    put("config.json", data, n_cfg);
    put("preprocessor_config.json", nul ? nul + 1 : NULL, nul ? size - n_cfg - 1 : 0);
    gguf_file *g = NULL;
    wgml_error err;
    static int verbose = -1; /* WGML_FUZZ_VERBOSE=1: each input's outcome (to check the seeds) */
    if (verbose < 0) verbose = getenv("WGML_FUZZ_VERBOSE") != NULL;
    if (wgml_hf_open(dir, &g, &err) == WGML_OK) {
        clip_hparams hp;
        wgml_status st = clip_read_hparams(g, &hp, &err);
        if (verbose) fprintf(stderr, "fuzz_hf: converted; %s\n", st ? err.message : "read back");
        gguf_close(g);
    } else if (verbose) {
        fprintf(stderr, "fuzz_hf: %s\n", err.message);
    }
    if (!g && !err.message[0]) {
        abort(); /* an error must say what it is */
    }
    return 0;
}
