/*
 * cmd_convert.c - `wgml convert llama2c CHECKPOINT TOKENIZER -o OUT.gguf`,
 * `wgml convert kokoro MODEL.pth [--config config.json] [--voices DIR|FILES]
 * [--type F32|F16|BF16|Q8_0] [--prosody-type T] -o OUT.gguf` and
 * `wgml convert whisper MODEL.pt --vocab FILE [--type T] -o OUT.gguf` and
 * `wgml convert hf DIR [--type T] -o OUT.gguf` (a Hugging Face folder, model/hf.h).
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model/hf.h"
#include "tools/quantize.h"
#include "tools_internal.h"

typedef struct {
    const char *out, *config, *voices, *type, *prosody_type, *vocab;
} convert_opts;

static const cli_opt options[] = {
    CLI_STRING("--output", "-o", convert_opts, out, "OUT.gguf", "the GGUF file to write"),
    CLI_STRING("--type", NULL, convert_opts, type, "T",
               "the matrices' type. kokoro: F32 (default), F16, BF16 or Q8_0 (LSTM\n"
               "recurrences at most F16, the generator's last convolution always F32);\n"
               "whisper: F16 (default), F32, Q8_0, Q5_0, Q5_1, Q4_0 or Q4_1 (the\n"
               "convolutions stay F16, vectors and positional embeddings F32)"),
    CLI_GROUP("kokoro:"),
    CLI_STRING("--config", NULL, convert_opts, config, "FILE", "its config.json (default: the v1.0 values)"),
    CLI_STRING("--voices", NULL, convert_opts, voices, "DIR|FILE,FILE...",
               "voice files (.bin from kokoro-js or the official .pt), or a folder\n"
               "of them, named after their files"),
    CLI_STRING("--prosody-type", NULL, convert_opts, prosody_type, "T",
               "the type of the matrices that make F0 and N (ALBERT, the duration\n"
               "encoder, the shared LSTM, the F0/N blocks; default F32: rounding them\n"
               "moves the pitch, and with it the phase of the audio, far more than\n"
               "float32 does: docs/kokoro.md)"),
    CLI_GROUP("whisper:"),
    CLI_STRING("--vocab", NULL, convert_opts, vocab, "FILE",
               "the vocabulary (required: a .pt has none): a whisper.cpp .bin or\n"
               "Whisper GGUF of the same vocabulary, or openai/whisper's\n"
               "multilingual.tiktoken (gpt2.tiktoken for an English-only model)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml convert llama2c CHECKPOINT TOKENIZER -o OUT.gguf\n"
             "       wgml convert kokoro MODEL.pth [--config config.json] [--voices DIR|FILE,FILE...]\n"
             "                           [--type F32|F16|BF16|Q8_0] [--prosody-type T] -o OUT.gguf\n"
             "       wgml convert whisper MODEL.pt --vocab FILE [--type F16|F32|Q8_0|Q5_0|Q5_1|Q4_0|Q4_1]\n"
             "                            -o OUT.gguf\n"
             "       wgml convert hf DIR [--type F16|Q8_0|Q4_K_M|...] -o OUT.gguf\n",
    .about = "llama2c: a llama2.c checkpoint (legacy or v1 'ak42' fp32 format, shared or separate\n"
             "classifier) and its tokenizer.bin into a GGUF file that wgml and llama.cpp can run.\n"
             "kokoro: the official Kokoro checkpoint (kokoro-v1_0.pth) into a GGUF of architecture\n"
             "'kokoro' (weight norm folded, voices as tensors).\n"
             "whisper: the official Whisper checkpoint (openai/whisper's tiny.pt, ...) into the GGUF\n"
             "that wgml reads whisper.cpp's .bin as (docs/whisper.md), with the vocabulary of --vocab.\n"
             "hf: a Hugging Face model folder (config.json, model.safetensors or shards with their index,\n"
             "preprocessor_config.json) of a CLIP, SigLIP or ViT model into its GGUF (docs/vision.md),\n"
             "matrices as stored (F32, F16, BF16) or quantized with --type (a `wgml quantize` recipe).\n",
    .opts = options,
    .max_args = 3,
};

static int progress(void *user, uint64_t done, uint64_t total) {
    cli_progress_update(user, done, total);
    return 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Appends a copy of the first len bytes of s to v (count *cnt, capacity *cap); 0 when out of memory. */
static int push(char ***v, int *cnt, int *cap, const char *s, size_t len) {
    if (*cnt == *cap) {
        int c = *cap ? 2 * *cap : 16;
        char **nv = realloc(*v, (size_t)c * sizeof *nv);
        if (!nv) return 0;
        *v = nv, *cap = c;
    }
    char *copy = malloc(len + 1);
    if (!copy) return 0;
    memcpy(copy, s, len);
    copy[len] = 0;
    (*v)[(*cnt)++] = copy;
    return 1;
}

/* The voice files of --voices: a folder's .bin and .pt files (sorted), or comma-separated files. */
static int voice_list(const char *list, char ***out, int *n) {
    *out = NULL, *n = 0;
    DIR *d = opendir(list);
    char **v = NULL;
    int cnt = 0, cap = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!ends_with(e->d_name, ".bin") && !ends_with(e->d_name, ".pt")) continue;
            char path[4096];
            int len = snprintf(path, sizeof path, "%s/%s", list, e->d_name);
            if (len < 0 || (size_t)len >= sizeof path || !push(&v, &cnt, &cap, path, (size_t)len)) {
                closedir(d);
                *out = v, *n = cnt;
                return cli_fail("--voices: out of memory or too long a path in '%s'", list);
            }
        }
        closedir(d);
        for (int i = 1; i < cnt; i++) /* sorted: the GGUF's voice order does not depend on the file system */
            for (int j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
                char *t = v[j];
                v[j] = v[j - 1], v[j - 1] = t;
            }
        if (!cnt) {
            free(v);
            return cli_usage_error("--voices: folder '%s' holds no .bin or .pt voice", list);
        }
    } else {
        for (const char *p = list; *p;) {
            size_t len = strcspn(p, ",");
            if (len && !push(&v, &cnt, &cap, p, len)) {
                *out = v, *n = cnt;
                return cli_fail("--voices: out of memory");
            }
            p += len + (p[len] == ',');
        }
    }
    *out = v, *n = cnt;
    return CLI_OK;
}

/* A Kokoro file type: F32, F16, BF16 or Q8_0; -1 (after an error message) otherwise. */
static int kokoro_type(const char *opt, const char *name) {
    int t = wgml_dtype_from_name(name);
    if (t != WGML_F32 && t != WGML_F16 && t != WGML_BF16 && t != WGML_Q8_0) {
        cli_usage_error("%s: '%s' is not F32, F16, BF16 or Q8_0", opt, name);
        return -1;
    }
    return t;
}

static int convert_kokoro(const char *pth, const char *config, const char *voices, const char *type,
                          const char *prosody_type, const char *out) {
    kokoro_config cfg;
    wgml_error err;
    if (config) {
        FILE *fp = fopen(config, "rb");
        if (!fp) return cli_fail("cannot open config '%s'", config);
        char *json = malloc(1 << 20);
        size_t len = fread(json, 1, (1 << 20) - 1, fp);
        fclose(fp);
        wgml_status st = kokoro_config_parse(json, len, &cfg, &err);
        free(json);
        if (st) return cli_fail_errf(&err, "%s", config);
    }
    kokoro_convert_options opt = {.config = config ? &cfg : NULL, .type = WGML_F32, .progress = progress};
    int t;
    if (type) {
        if ((t = kokoro_type("--type", type)) < 0) return CLI_USAGE;
        opt.type = (uint32_t)t;
    }
    if (prosody_type) {
        if ((t = kokoro_type("--prosody-type", prosody_type)) < 0) return CLI_USAGE;
        opt.prosody_type = (uint32_t)t;
    }
    char **files = NULL;
    int n = 0, rc;
    if (voices && (rc = voice_list(voices, &files, &n)) != CLI_OK) {
        for (int i = 0; i < n; i++) free(files[i]);
        free(files);
        return rc;
    }
    opt.voices = (const char *const *)files, opt.n_voices = n;
    cli_progress bar;
    cli_progress_begin(&bar, "converting");
    opt.user = &bar;
    wgml_status st = kokoro_convert(pth, &opt, out, NULL, NULL, &err);
    cli_progress_end(&bar);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    if (st) return cli_fail_err(&err);
    fprintf(stderr, "wgml convert: wrote %s (%d voices)\n", out, n);
    return CLI_OK;
}

static int convert_whisper(const char *pt, const char *vocab, const char *type, const char *out) {
    whisper_convert_options opt = {.type = WGML_F16, .vocab = vocab, .progress = progress};
    if (type) {
        int t = wgml_dtype_from_name(type);
        if (t != WGML_F16 && t != WGML_F32 && t != WGML_Q8_0 && t != WGML_Q5_0 && t != WGML_Q5_1 && t != WGML_Q4_0 &&
            t != WGML_Q4_1)
            return cli_usage_error("--type: '%s' is not F16, F32, Q8_0, Q5_0, Q5_1, Q4_0 or Q4_1", type);
        opt.type = (uint32_t)t;
    }
    if (!vocab)
        return cli_usage_error("a Whisper checkpoint holds no vocabulary: give --vocab FILE (a whisper.cpp .bin or "
                               "Whisper GGUF of the same vocabulary, or openai/whisper's whisper/assets/"
                               "multilingual.tiktoken; gpt2.tiktoken for an English-only .en model)");
    cli_progress bar;
    cli_progress_begin(&bar, "converting");
    opt.user = &bar;
    wgml_error err;
    wgml_status st = whisper_convert(pt, &opt, out, NULL, NULL, &err);
    cli_progress_end(&bar);
    if (st) return cli_fail_err(&err);
    fprintf(stderr, "wgml convert: wrote %s (matrices %s)\n", out, wgml_dtype_name(opt.type));
    return CLI_OK;
}

/* `wgml convert hf DIR`: the folder's GGUF as its family converts it, then quantized to `type`. */
static int convert_hf(const char *dir, const char *type, const char *out) {
    if (type && !quantize_recipe_find(type))
        return cli_usage_error("unknown type '%s' (known: %s)", type, quantize_recipe_list());
    if (!wgml_hf_detect(dir))
        return cli_fail("%s: not a Hugging Face model folder (a folder with config.json, or a .safetensors file in one)",
                        dir);
    wgml_error err;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.hf-tmp", out);
    const char *first = type ? tmp : out;
    if (wgml_hf_convert(dir, first, &err)) return cli_fail_err(&err);
    if (type) {
        cli_progress bar;
        cli_progress_begin(&bar, "quantizing");
        quantize_params qp = {.progress = cli_progress_cb, .progress_user = &bar};
        wgml_status st = quantize_file(tmp, out, type, &qp, NULL, &err);
        cli_progress_end(&bar);
        remove(tmp);
        if (st) return cli_fail_err(&err);
    }
    fprintf(stderr, "wgml convert: wrote %s%s%s\n", out, type ? " as " : "", type ? type : "");
    return CLI_OK;
}

int cmd_convert(int argc, char **argv) {
    convert_opts opt = {0};
    int n_pos, rc = cli_parse(&spec, &opt, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    char **pos = argv;
    const char *out = opt.out, *config = opt.config, *voices = opt.voices, *type = opt.type,
               *prosody_type = opt.prosody_type, *vocab = opt.vocab;
    if (n_pos == 0) return cli_usage_error("name the source format (llama2c, kokoro, whisper or hf)");
    if (!strcmp(pos[0], "hf")) {
        if (n_pos != 2) return cli_usage_error("give the folder: wgml convert hf DIR -o OUT.gguf");
        if (config || voices || prosody_type || vocab)
            return cli_usage_error("--config, --voices, --prosody-type and --vocab are not for hf");
        if (!out) return cli_usage_error("give the output file with -o OUT.gguf");
        return convert_hf(pos[1], type, out);
    }
    const int kokoro = !strcmp(pos[0], "kokoro"), whisper = !strcmp(pos[0], "whisper");
    if (!kokoro && !whisper && strcmp(pos[0], "llama2c") != 0)
        return cli_usage_error("unknown source format '%s' (llama2c, kokoro, whisper and hf are supported)", pos[0]);
    if (!out) return cli_usage_error("give the output file with -o OUT.gguf");
    if (whisper) {
        if (n_pos != 2)
            return cli_usage_error("give the checkpoint: wgml convert whisper MODEL.pt --vocab FILE -o OUT.gguf");
        if (config || voices || prosody_type)
            return cli_usage_error("--config, --voices and --prosody-type are for kokoro");
        return convert_whisper(pos[1], vocab, type, out);
    }
    if (vocab) return cli_usage_error("--vocab is for whisper");
    if (kokoro) {
        if (n_pos != 2) return cli_usage_error("give the checkpoint: wgml convert kokoro MODEL.pth -o OUT.gguf");
        return convert_kokoro(pos[1], config, voices, type, prosody_type, out);
    }
    if (config || voices || type || prosody_type)
        return cli_usage_error("--config, --voices, --type and --prosody-type are for kokoro (--type for whisper too)");
    if (n_pos != 3) return cli_usage_error("give CHECKPOINT and TOKENIZER");
    cli_progress bar;
    cli_progress_begin(&bar, "converting");
    wgml_error err;
    wgml_status st = llama2c_convert(pos[1], pos[2], out, progress, &bar, &err);
    cli_progress_end(&bar);
    if (st) return cli_fail_err(&err);
    fprintf(stderr, "wgml convert: wrote %s\n", out);
    return CLI_OK;
}
