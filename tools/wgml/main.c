/*
 * main.c - the wgml command-line tool: dispatches to one subcommand per file
 * (cmd_*.c in this folder).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tools_internal.h"

static const struct {
    const char *name;
    cli_cmd_fn fn;
    const char *help;
} commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"info", cmd_info, "print a model's architecture, hyper-parameters and tensors"},
    {"pull", cmd_pull, "download models by URL or Hugging Face name into the cache"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"bench", cmd_bench, "measure prompt processing and generation speed"},
    {"convert", cmd_convert, "convert a llama2.c checkpoint to GGUF"},
    {"devices", cmd_devices, "list the WebGPU adapters"},
    {"verify", cmd_verify, "check a WebGPU device against the CPU reference"},
    {"quantize", cmd_quantize, "convert a GGUF model's weights to another type"},
    {"synth", cmd_synth, "write a random-weight model of a real architecture"},
    {"embed", cmd_embed, "turn texts (BERT-family models) or images (CLIP, SigLIP, ViT) into vectors"},
    {"classify", cmd_classify, "label images with an image classifier (ViT)"},
    {"rerank", cmd_rerank, "score documents against a query (cross-encoder rerankers)"},
    {"phonemize", cmd_phonemize, "print the phonemes of English text (Kokoro's G2P, needs espeak-ng)"},
    {"speak", cmd_speak, "text to speech (Kokoro models): a WAV file"},
    {"transcribe", cmd_transcribe, "speech to text (Whisper models): txt, srt, vtt, json"},
    {"template", cmd_template, "render a conversation (JSON on stdin) through a chat template"},
#ifdef WGML_HAVE_SERVE
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with parallel slots"},
#endif
    {"chat", cmd_chat, "chat with a model in the terminal (or one message per line from a pipe)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: wgml <command> [options]   (wgml <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    cli_argv0 = argv[0];
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        /* what this build has: the CPU kernels this machine runs, and the GPU layer */
#ifdef WGML_HAVE_WEBGPU
        const char *webgpu = "Dawn";
#else
        const char *webgpu = "none";
#endif
        printf("wgml %d.%d.%d (CPU: %s; WebGPU: %s)\n", WGML_VERSION_MAJOR, WGML_VERSION_MINOR, WGML_VERSION_PATCH,
               cpu_kernels_features(), webgpu);
        char gemm[900];
        cpu_gemm_choice_describe(gemm, sizeof gemm);
        printf("CPU GEMM where a product may round: %s\n", gemm);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            cli_cmd = commands[i].name;
            return commands[i].fn(argc - 2, argv + 2);
        }
    }
    fprintf(stderr, "wgml: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
