/*
 * cmd_synth.c - `wgml synth --arch NAME --type TYPE -o OUT.gguf [--vocab V] [--seed S] [--layers N]`:
 * the transformer architectures of tools/synth.h (Whisper's too), and Kokoro (kokoro_synth).
 */
#include "cli.h"
#include "tools_internal.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The shipped vocabularies (models/README.md): their licences allow
 * redistribution, so files made with them can be shared. */
#define SYNTH_VOCAB_SPM       "stories260K.gguf"
#define SYNTH_VOCAB_BPE       "ggml-vocab-gpt-2.gguf"
#define SYNTH_VOCAB_WORDPIECE "ggml-vocab-bert-bge.gguf"

typedef struct {
    const char *arch, *type, *out, *vocab, *prosody_type;
    uint64_t seed;
    int layers, threads, list;
} synth_opts;

static const cli_opt options[] = {
    CLI_STRING("--arch", NULL, synth_opts, arch, "NAME",
               "decoders: stories15m, stories110m, tinyllama-1.1b, llama-3.2-1b,\n"
               "qwen2.5-0.5b, smollm2-135m, smollm2-360m; encoders (BERT family):\n"
               "bge-small, all-minilm-l6, ms-marco-minilm-l6 (reranker), nomic-embed\n"
               "(--list shows their hyper-parameters); speech: kokoro-82m (Kokoro v1.0's\n"
               "shapes; --type F32, F16, BF16 or Q8_0 and --prosody-type as wgml convert\n"
               "kokoro) and kokoro-tiny\n"
               "(../shared/kokoro/kokoro-tiny.pth's widths), with one random voice 'synth';\n"
               "Whisper: whisper-micro, whisper-micro-v3, whisper-tiny, whisper-base, whisper-small,\n"
               "whisper-large-v3-turbo (../shared/whisper/README.md's random weights; micro and tiny\n"
               "bit for bit make_random_whisper.py's; --type F32, F16, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1)"),
    CLI_STRING("--type", NULL, synth_opts, type, "TYPE", "F32, F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, ... as for 'wgml quantize'"),
    CLI_STRING("--prosody-type", NULL, synth_opts, prosody_type, "T",
               "Kokoro: the type of the matrices that make F0 and N (default F32)"),
    CLI_STRING("--output", "-o", synth_opts, out, "FILE", "the GGUF to write"),
    CLI_STRING("--vocab", NULL, synth_opts, vocab, "FILE",
               "GGUF whose tokenizer is copied, resized to the architecture's vocabulary\n"
               "(padded with [PAD<i>] tokens or truncated). Default: the shipped files, the\n"
               "512-token SentencePiece vocabulary of " SYNTH_VOCAB_SPM " for SentencePiece\n"
               "models, the GPT-2 byte-level BPE vocabulary " SYNTH_VOCAB_BPE "\n"
               "for BPE ones and bert-base-uncased's WordPiece vocabulary\n"
               SYNTH_VOCAB_WORDPIECE " for the encoders. Whisper: a Whisper model (GGUF or\n"
               "whisper.cpp .bin) whose tokens are copied; default: a made-up vocabulary (bytes, then\n"
               "syllables: decoded text is not words)"),
    CLI_U64("--seed", NULL, synth_opts, seed, "S", "random seed (default 42; Whisper: the variant's own, --list)"),
    CLI_INT("--layers", NULL, synth_opts, layers, "N", 1, 4096,
            "keep only the first N layers (same shapes; for fast tests; Whisper: of each stack)"),
    CLI_INT("--threads", "-t", synth_opts, threads, "N", 1, 512, "threads (default: one per core)"),
    CLI_FLAG("--list", NULL, synth_opts, list, "list the architectures with their hyper-parameters"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml synth --arch NAME --type TYPE -o OUT.gguf [options]\n"
             "       wgml synth --list\n",
    .about = "Writes a model with random weights and the exact tensor names, shapes and metadata of a real\n"
             "architecture, for benchmarks and tests. Weights ~ N(0, 0.02), norms ~ 1, deterministic per seed.\n",
    .opts = options,
};

static const char *pooling_name(int p) {
    switch (p) {
    case SYNTH_POOL_MEAN: return ", mean pooling";
    case SYNTH_POOL_CLS: return ", CLS pooling";
    case SYNTH_POOL_LAST: return ", last-token pooling";
    case SYNTH_POOL_RANK: return ", reranker (CLS + classifier head)";
    default: return "";
    }
}

static void list_archs(void) {
    printf("%-18s %-10s %7s %7s %6s %6s %6s %6s %9s %6s %-5s %s\n", "name", "arch", "vocab", "ctx", "embd", "layers",
           "heads", "kv", "ffn", "theta", "eps", "source");
    for (int i = 0; i < synth_arch_count(); i++) {
        const synth_arch *a = synth_arch_at(i);
        if (a->kind == SYNTH_WHISPER || a->kind == SYNTH_VISION) continue;
        printf("%-18s %-10s %7d %7d %6d %6d %6d %6d %9d %6g %-5g %s%s%s%s%s\n", a->name, a->arch, a->n_vocab, a->n_ctx,
               a->n_embd, a->n_layer, a->n_head, a->n_head_kv, a->n_ff, a->rope_base, a->eps, a->source,
               a->tied ? ", tied output" : "", a->qkv_bias ? ", QKV biases" : "",
               a->rope3_factor > 0 ? ", llama3 rope scaling" : "", pooling_name(a->pooling));
    }
    printf("\n%-22s %-10s %7s %5s %6s %9s %6s %9s %10s %6s %s\n", "name", "arch", "vocab", "mels", "width", "enc+dec",
           "heads", "text ctx", "seed", "EOT x", "source");
    for (int i = 0; i < synth_arch_count(); i++) {
        const synth_arch *a = synth_arch_at(i);
        if (a->kind != SYNTH_WHISPER) continue;
        char layers[32];
        snprintf(layers, sizeof layers, "%d+%d", a->n_audio_layer, a->n_layer);
        printf("%-22s %-10s %7d %5d %6d %9s %6d %9d %10llu %6g %s\n", a->name, a->arch, a->n_vocab, a->n_mels,
               a->n_embd, layers, a->n_head, a->n_ctx, (unsigned long long)a->whisper_seed, a->eot_factor, a->source);
    }
    printf("\n%-18s %-10s %6s %6s %6s %6s %6s %6s %6s %s\n", "name", "arch", "image", "patch", "width", "layers",
           "heads", "ffn", "out", "source");
    for (int i = 0; i < synth_arch_count(); i++) {
        const synth_arch *a = synth_arch_at(i);
        if (a->kind != SYNTH_VISION) continue;
        printf("%-18s %-10s %6d %6d %6d %6d %6d %6d %6d %s%s\n", a->name, a->arch, a->image_size, a->patch_size,
               a->n_embd, a->n_layer, a->n_head, a->n_ff,
               a->proj_dim ? a->proj_dim : a->n_labels ? a->n_labels : a->n_embd, a->source,
               a->n_labels ? " (classifier)" : "");
    }
}

static int kokoro_progress(void *user, uint64_t done, uint64_t total) {
    cli_progress_update(user, done, total);
    return 0;
}

/* Kokoro: the official checkpoint's tensors with random values through the converter (kokoro_synth). */
/* F16, BF16 or Q8_0; 0 (WGML_F32) for F32 and for anything else */
static uint32_t kokoro_type(const char *name) {
    return !strcmp(name, "F32") ? WGML_F32 : !strcmp(name, "F16") ? WGML_F16 : !strcmp(name, "BF16") ? WGML_BF16
         : !strcmp(name, "Q8_0") ? WGML_Q8_0 : 0;
}

static int synth_kokoro(const char *arch, const char *type, const char *prosody_type, const char *out, uint64_t seed) {
    kokoro_config cfg;
    if (!strcmp(arch, "kokoro-tiny")) kokoro_config_tiny(&cfg);
    else kokoro_config_default(&cfg);
    if (!type) return cli_usage_error("give the weight type with --type F32, F16, BF16 or Q8_0");
    const uint32_t t = kokoro_type(type), pt = prosody_type ? kokoro_type(prosody_type) : WGML_F32;
    if (!t && strcmp(type, "F32")) return cli_usage_error("--type %s: a Kokoro model is F32, F16, BF16 or Q8_0", type);
    if (prosody_type && !pt && strcmp(prosody_type, "F32"))
        return cli_usage_error("--prosody-type %s: not F32, F16, BF16 or Q8_0", prosody_type);
    if (!out) return cli_usage_error("give the output file with -o OUT.gguf");
    cli_progress bar;
    cli_progress_begin(&bar, "generating");
    kokoro_convert_options o = {.type = t, .prosody_type = pt, .progress = kokoro_progress, .user = &bar};
    wgml_error err;
    double t0 = cli_now_ms();
    wgml_status st = kokoro_synth(&cfg, &o, seed, out, NULL, NULL, &err);
    cli_progress_end(&bar);
    if (st) return cli_fail_err(&err);
    struct stat sb;
    fprintf(stderr, "wgml synth: wrote %s: %s, %s, %.1f MiB in %.1f s\n", out, arch, type,
            stat(out, &sb) == 0 ? (double)sb.st_size / 1048576.0 : 0.0, (cli_now_ms() - t0) / 1e3);
    return CLI_OK;
}

static void log_line(void *user, const char *line) {
    cli_progress_end(user);
    cli_log_cb(NULL, line);
}

int cmd_synth(int argc, char **argv) {
    synth_opts opt = {.seed = UINT64_MAX}; /* not given: 42, or a Whisper variant's own seed */
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    if (opt.list) {
        list_archs();
        return CLI_OK;
    }
    const char *arch = opt.arch, *type = opt.type, *out = opt.out, *vocab = opt.vocab, *prosody_type = opt.prosody_type;
    uint64_t seed = opt.seed == UINT64_MAX ? 42 : opt.seed;
    const int layers = opt.layers;
    if (!arch) return cli_usage_error("give the architecture with --arch NAME (--list shows them)");
    if (!strcmp(arch, "kokoro-82m") || !strcmp(arch, "kokoro-tiny"))
        return synth_kokoro(arch, type, prosody_type, out, seed);
    if (prosody_type) return cli_usage_error("--prosody-type is for the kokoro architectures");
    const synth_arch *sa = synth_arch_find(arch);
    if (!sa) return cli_usage_error("unknown architecture '%s' (--list shows them)", arch);
    if (!type) return cli_usage_error("give the weight type with --type TYPE (e.g. F16, Q8_0, Q4_K_M)");
    if (!quantize_recipe_find(type))
        return cli_usage_error("unknown type '%s' (known: %s)", type, quantize_recipe_list());
    if (!out) return cli_usage_error("give the output file with -o OUT.gguf");
    if (layers > synth_arch_max_layers(sa))
        return cli_usage_error("--layers %d: %s has %d layers", layers, sa->name, synth_arch_max_layers(sa));
    if (sa->kind == SYNTH_WHISPER) {
        if (opt.seed == UINT64_MAX) seed = 0; /* the variant's own */
    } else if (sa->kind == SYNTH_VISION) {
        if (vocab) return cli_usage_error("--vocab: %s has no text tower to give a vocabulary", sa->name);
    } else {
        const char *default_vocab = sa->kind != SYNTH_DECODER ? SYNTH_VOCAB_WORDPIECE
                                    : sa->bpe                 ? SYNTH_VOCAB_BPE
                                                              : SYNTH_VOCAB_SPM;
        if (!vocab && !(vocab = cli_data_file(default_vocab))) return CLI_FAIL;
    }

    cli_progress bar;
    cli_progress_begin(&bar, "generating");
    synth_params sp = {.arch = sa->name,
                       .type = type,
                       .vocab = vocab,
                       .seed = seed,
                       .n_layer = layers,
                       .n_threads = opt.threads,
                       .progress = cli_progress_cb,
                       .progress_user = &bar,
                       .log = log_line,
                       .log_user = &bar};
    synth_result r;
    wgml_error err;
    double t0 = cli_now_ms();
    wgml_status st = synth_write(out, &sp, &r, &err);
    cli_progress_end(&bar);
    if (st) return cli_fail_err(&err);
    double s = (cli_now_ms() - t0) / 1e3;
    struct stat sb;
    double mib = stat(out, &sb) == 0 ? (double)sb.st_size / 1048576.0 : (double)r.data_bytes / 1048576.0;
    fprintf(stderr,
            "wgml synth: wrote %s: %s, %d layers, %d tensors, %.1f M parameters, file type %u (%s), %.1f MiB in %.1f s "
            "(%.0f MB/s)\n",
            out, sa->name, layers ? layers : synth_arch_max_layers(sa), r.n_tensors, r.n_params / 1e6, r.file_type,
            quantize_ftype_name(r.file_type), mib, s, s > 0 ? mib * 1.048576 / s : 0.0);
    return CLI_OK;
}
