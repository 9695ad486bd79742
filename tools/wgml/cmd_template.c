/*
 * cmd_template.c - `wgml template [-m MODEL | --template FILE] ...`: reads
 * {"messages": [...], ...} as JSON on stdin and writes the prompt the chat
 * template makes of it to stdout, with nothing added: what a model would be
 * given. The other keys of the object (e.g. "tools") become template
 * variables. A template's raise_exception exits 1 with its message.
 *
 * With -m, only the model's metadata is read (no weights): its
 * tokenizer.chat_template and BOS/EOS texts, or the built-in fallback its
 * architecture and vocabulary point to (named in a note on stderr).
 */
#include "cli.h"
#include "tools_internal.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *tmpl;
    wgml_chat_params p;
} template_opts;

static const cli_opt options[] = {
    CLI_STRING("--model", "-m", template_opts, model, "FILE",
               "the GGUF's tokenizer.chat_template, BOS and EOS (a built-in\n"
               "fallback when it has none; default: the default model)"),
    CLI_STRING("--template", NULL, template_opts, tmpl, "FILE", "a Jinja template file instead"),
    CLI_STRING("--bos", NULL, template_opts, p.bos_token, "S", "the bos_token text (default: the model's, else \"\")"),
    CLI_STRING("--eos", NULL, template_opts, p.eos_token, "S", "the eos_token text (default: the model's, else \"\")"),
    CLI_FLAG_SET("--no-generation-prompt", NULL, template_opts, p.add_generation_prompt, 0,
                 "add_generation_prompt = false (default true)"),
    CLI_STRING("--now", NULL, template_opts, p.now, "\"YYYY-MM-DD HH:MM:SS\"", "fixes the clock strftime_now reads"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml template [-m MODEL | --template FILE] [options] < conversation.json\n",
    .about = "Reads {\"messages\": [{\"role\": ..., \"content\": ...}, ...]} on stdin and writes the prompt the\n"
             "chat template renders, byte for byte as Hugging Face's apply_chat_template. Other keys of the\n"
             "object (e.g. \"tools\") become template variables.\n",
    .opts = options,
};

/* All of a stream; NULL after printing an error. */
static char *read_all(FILE *f, const char *what, size_t *len) {
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap);
    if (!buf) return cli_fail("out of memory reading %s", what), NULL;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *nb = cap > ((size_t)1 << 30) ? NULL : realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return cli_fail("%s is too large", what), NULL;
            }
            buf = nb;
        }
    }
    if (ferror(f)) {
        free(buf);
        return cli_fail("cannot read %s", what), NULL;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return cli_fail("%s contains a NUL byte", what), NULL;
    }
    if (len) *len = n;
    return buf;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return cli_fail("cannot open '%s'", path), NULL;
    char *s = read_all(f, path, NULL);
    fclose(f);
    return s;
}

int cmd_template(int argc, char **argv) {
    template_opts opt = {.p = wgml_chat_default_params()};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const char *model = opt.model, *tmpl_path = opt.tmpl;
    wgml_chat_params p = opt.p;
    if (model && tmpl_path) return cli_usage_error("give either -m MODEL or --template FILE, not both");

    rc = CLI_FAIL;
    char *input = NULL, *file_tmpl = NULL, *prompt = NULL;
    gguf_file *g = NULL;
    wgml_tokenizer *tok = NULL;
    chat_model_info info = {0};
    json_object *root = NULL;
    wgml_error err;
    const char *tmpl;

    /* the template */
    if (tmpl_path) {
        if (!(file_tmpl = read_file(tmpl_path))) goto done;
        tmpl = file_tmpl;
    } else {
        char fetched[4096];
        if ((!model && !(model = cli_default_model())) || !(model = cli_fetch_model(model, fetched, sizeof fetched)))
            goto done;
        const wgml_family *fam = NULL;
        char arch[64];
        if (wgml_model_file_open(model, &g, &err) || wgml_family_of(g, arch, sizeof arch, &fam, &err)) {
            rc = cli_fail_err(&err);
            goto done;
        }
        if ((!fam->no_tokenizer || gguf_find_kv(g, "tokenizer.ggml.model")) && wgml_tokenizer_load(g, &tok, &err)) {
            rc = cli_fail_err(&err);
            goto done;
        }
        if (chat_model_info_load(g, tok, fam && (fam->tasks & WGML_TASK_GENERATE), &info, &err)) {
            rc = cli_fail_err(&err);
            goto done;
        }
        int fallback;
        if (!(tmpl = chat_model_info_template(&info, &fallback))) {
            cli_fail("%s has no chat template (a %s model does not generate text); give --template FILE", model,
                     fam->name);
            goto done;
        }
        if (fallback)
            fprintf(stderr, "wgml template: note: %s has no chat template; using the built-in %s template\n", model,
                    info.name);
        if (!p.bos_token) p.bos_token = info.bos ? info.bos : "";
        if (!p.eos_token) p.eos_token = info.eos ? info.eos : "";
    }

    /* the conversation */
    size_t len;
    if (!(input = read_all(stdin, "standard input", &len))) goto done;
    json_tokener *jt = json_tokener_new();
    if (!jt) {
        cli_fail("out of memory");
        goto done;
    }
    root = json_tokener_parse_ex(jt, input, (int)(len > 0x7fffffff ? 0x7fffffff : len));
    enum json_tokener_error jerr = json_tokener_get_error(jt);
    size_t end = json_tokener_get_parse_end(jt);
    json_tokener_free(jt);
    while (end < len && strchr(" \t\r\n", input[end]))
        end++;
    if (!root || jerr != json_tokener_success || end != len) {
        cli_fail("standard input: invalid JSON (%s)",
                 jerr != json_tokener_success ? json_tokener_error_desc(jerr) : "text after the value");
        goto done;
    }
    json_object *messages;
    if (!json_object_is_type(root, json_type_object) || !json_object_object_get_ex(root, "messages", &messages) ||
        !json_object_is_type(messages, json_type_array)) {
        cli_fail("standard input: expected {\"messages\": [...]} (a JSON object with a messages array)");
        goto done;
    }
    const char *messages_json =
        json_object_to_json_string_ext(messages, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    p.extra_json = input; /* every key a variable (messages is set again from messages_json) */
    wgml_status st = wgml_chat_render(tmpl, messages_json, &p, &prompt, &err);
    if (st == WGML_ERR_TEMPLATE) {
        cli_fail("%s", err.message);
        goto done;
    }
    if (st) {
        rc = cli_fail_err(&err);
        goto done;
    }
    if (fwrite(prompt, 1, strlen(prompt), stdout) != strlen(prompt) || fflush(stdout)) {
        cli_fail("cannot write the prompt to standard output");
        goto done;
    }
    rc = CLI_OK;
done:
    free(prompt);
    json_object_put(root);
    chat_model_info_free(&info);
    wgml_tokenizer_free(tok);
    gguf_close(g);
    free(file_tmpl);
    free(input);
    return rc;
}
