/*
 * cmd_pull.c - `wgml pull MODEL...`: models by URL or Hugging Face name
 * (wgml_model_fetch, docs/models-by-url.md) downloaded into the cache ahead
 * of use, as `ollama pull` does; prints each one's local path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tools_internal.h"

typedef struct {
    int offline;
    const char *cache_dir;
} pull_opts;

static const cli_opt options[] = {
    CLI_FLAG("--offline", NULL, pull_opts, offline,
             "only look in the cache: print the local path, or fail when it is not there"),
    CLI_STRING("--cache-dir", NULL, pull_opts, cache_dir, "DIR",
               "keep the models in DIR (default: $WGML_CACHE_DIR/models, $XDG_CACHE_HOME/wgml/models, "
               "~/.cache/wgml/models)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml pull MODEL... [--offline] [--cache-dir DIR]\n",
    .about = "Downloads models into the cache and prints their local paths. MODEL is one of\n"
             "  https://host/path/model.gguf       a file at a URL\n"
             "  hf://owner/repo/path/file.gguf     a file of a Hugging Face repository\n"
             "  hf://owner/repo:Q4_K_M             its GGUF of that quantization (owner/repo:Q4_K_M too)\n"
             "  hf://owner/repo                    its Q4_K_M GGUF, else Q8_0, else the first; or its\n"
             "                                     config.json + safetensors as a folder\n"
             "Every command's -m takes these too. Downloads resume where they stopped and are\n"
             "checked against the size and SHA-256 the server gives. HF_TOKEN is sent to Hugging\n"
             "Face ($HF_ENDPOINT) for gated repositories; WGML_OFFLINE=1 keeps to the cache.\n",
    .opts = options,
    .max_args = -1,
};

int cmd_pull(int argc, char **argv) {
    pull_opts opt = {0};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    if (n_args == 0) return cli_usage_error("no model given");
    for (int i = 0; i < n_args; i++) {
        if (!wgml_model_is_remote(argv[i]))
            return cli_fail("'%s' is neither a URL, hf://OWNER/REPO[/FILE] nor OWNER/REPO:TAG", argv[i]);
        cli_progress bar;
        cli_progress_begin(&bar, "downloading");
        wgml_fetch_params fp = wgml_fetch_default_params();
        fp.offline = opt.offline, fp.cache_dir = opt.cache_dir;
        fp.progress = cli_progress_cb, fp.progress_user = &bar, fp.log = cli_log_cb;
        char path[4096];
        wgml_error err;
        wgml_status st = wgml_model_fetch(argv[i], &fp, path, sizeof path, &err);
        cli_progress_end(&bar);
        if (st) return cli_fail_err(&err);
        printf("%s\n", path);
        fflush(stdout);
    }
    return CLI_OK;
}
