/*
 * cmd_chat.c - `wgml chat`: talk to a model in the terminal, or one message
 * per line from a pipe.
 *
 * The conversation is kept as OpenAI-style messages; each turn renders all
 * of it through the model's chat template (wgml_chat_render), tokenizes the
 * prompt, and evaluates only what follows the longest prefix the KV cache
 * already holds (a one-sequence wgml_batch: wgml_batch_seq_keep cuts the
 * cache back to that prefix), so a turn costs its own tokens, not the whole
 * conversation's. The reply streams until an end-of-generation token, -n
 * tokens, or Ctrl-C (which stops the reply, not the program). When the
 * conversation no longer fits the context (with room for a reply), its
 * oldest turns are dropped (the system message stays) and the rest is
 * evaluated again, with a note.
 *
 * Commands: /reset, /save FILE, /load FILE (the messages as a JSON array),
 * /help, /exit. --stats prints each turn's token counts to stderr.
 */
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef WGML_HAVE_LIBEDIT
#include <editline/readline.h>
#include <errno.h>
#include <sys/select.h>
#endif

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    const char *system;
    int n_predict, n_ctx, stats;
    wgml_kv_type kv;
    cli_sampling_opts s;
} chat_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, chat_opts, mo),
    CLI_GROUP("Conversation:"),
    CLI_STRING("--system", NULL, chat_opts, system, "TEXT", "system message"),
    CLI_INT("--n-predict", "-n", chat_opts, n_predict, "N", -1, 1 << 30,
            "most tokens per reply; -1 = until the end of the turn (default -1)"),
    CLI_INT("--ctx", "-c", chat_opts, n_ctx, "N", 16, 1 << 20, "context length (default: the model's, at most 4096)"),
    CLI_KV_TYPE(chat_opts, kv),
    CLI_FLAG("--stats", NULL, chat_opts, stats, "each turn's prompt, reused, evaluated and generated tokens on stderr"),
    CLI_GROUP("Sampling:"),
    CLI_INCLUDE(cli_sampling_table, chat_opts, s),
    CLI_END,
};

/* the end of --help, and what /help prints */
#define CHAT_COMMANDS                                                                                          \
    "In the chat: /reset starts over, /save FILE and /load FILE write and read the conversation\n" \
    "(OpenAI-style JSON messages), /exit quits (or Ctrl-D); Ctrl-C stops a reply.\n"

static const cli_spec spec = {
    .usage = "usage: wgml chat [options]\n",
    .about = "Chat with a model: streaming replies, the conversation kept in the KV cache between turns.\n"
             "From a pipe each input line is one message and each reply is printed on one line.\n",
    .opts = options,
    .more = "\n" CHAT_COMMANDS,
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct {
    wgml_model *m;
    wgml_batch *b;
    const char *tmpl;
    json_object *msgs; /* the conversation */
    int n_ctx, n_predict, stats, tty;
    wgml_sampler_params sp;
    const wgml_grammar *grammar; /* --grammar / --json-schema: every reply follows it */
} chat;

static void add_message(chat *c, const char *role, const char *text, size_t len) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "role", json_object_new_string(role));
    json_object_object_add(o, "content", json_object_new_string_len(text, (int)len));
    json_object_array_add(c->msgs, o);
}

/* The conversation's prompt tokens into *toks (malloc'ed): the count, or -1 after printing why. */
static int render(chat *c, int32_t **toks) {
    *toks = NULL;
    wgml_chat_params p = wgml_chat_default_params();
    p.add_generation_prompt = 1;
    p.model = c->m;
    char *prompt = NULL;
    wgml_error err;
    const char *json = json_object_to_json_string_ext(c->msgs, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (wgml_chat_render(c->tmpl, json, &p, &prompt, &err)) {
        cli_fail("the chat template failed: %s", err.message);
        return -1;
    }
    size_t len = strlen(prompt);
    int n = wgml_tokenize(c->m, prompt, len, 0, NULL, 0, &err);
    if (n > 0 && (*toks = malloc((size_t)n * sizeof **toks))) n = wgml_tokenize(c->m, prompt, len, 0, *toks, n, &err);
    free(prompt);
    if (n < 0) {
        cli_fail_err(&err);
        return -1;
    }
    if (!*toks) {
        cli_fail(n ? "out of memory" : "the chat template gave an empty prompt");
        return -1;
    }
    return n;
}

/* Drops the oldest turn (after a system message): 1, or 0 when there is none left to drop. */
static int drop_oldest(chat *c) {
    size_t n = json_object_array_length(c->msgs), first = 0;
    json_object *role;
    if (n && json_object_object_get_ex(json_object_array_get_idx(c->msgs, 0), "role", &role) &&
        !strcmp(json_object_get_string(role), "system"))
        first = 1;
    if (n < first + 2) return 0; /* only the new message is left */
    /* a turn: the user's message and the replies up to the next user message */
    size_t end = first + 1;
    while (end < n - 1 && json_object_object_get_ex(json_object_array_get_idx(c->msgs, end), "role", &role) &&
           strcmp(json_object_get_string(role), "user"))
        end++;
    json_object_array_del_idx(c->msgs, first, end - first);
    return 1;
}

/* One reply to the conversation as it stands (its last message the user's). 0, or -1 on an error. */
static int reply(chat *c) {
    int32_t *toks = NULL;
    int n = render(c, &toks), dropped = 0;
    int room = c->n_ctx / 4 < 256 ? c->n_ctx / 4 : 256; /* kept free for the reply */
    while (n > 0 && n > c->n_ctx - room) {
        free(toks);
        if (!drop_oldest(c)) {
            cli_fail("the message is %d tokens, more than the context of %d can take with room for a reply", n,
                     c->n_ctx);
            json_object_array_del_idx(c->msgs, json_object_array_length(c->msgs) - 1, 1);
            return 0;
        }
        dropped++;
        n = render(c, &toks);
    }
    if (n < 0) {
        json_object_array_del_idx(c->msgs, json_object_array_length(c->msgs) - 1, 1);
        return -1;
    }
    /* reuse what the cache holds of this prompt; at least the last token is evaluated */
    int held;
    const int32_t *h = wgml_batch_seq_tokens(c->b, 0, &held);
    int keep = 0;
    while (keep < held && keep < n - 1 && h[keep] == toks[keep]) keep++;
    wgml_error err;
    if (dropped) {
        cli_line_start();
        fprintf(stderr, "wgml chat: the context is full: dropped the oldest %d turn%s, evaluating %d tokens again\n",
                dropped, dropped > 1 ? "s" : "", n - keep);
    }
    int rc = wgml_batch_seq_keep(c->b, 0, keep, &err) || wgml_batch_seq_sampler(c->b, 0, &c->sp, &err) ||
             (c->grammar && wgml_batch_seq_grammar(c->b, 0, c->grammar, NULL, 0, &err));
    int chunk = wgml_batch_n_batch(c->b), fed = keep, n_gen = 0;
    int32_t next = -1, prev = toks[n - 1];
    size_t cap = 1024, len = 0;
    char *text = malloc(cap);
    interrupted = 0;
    double t0 = cli_now_ms();
    while (!rc && fed < n && !interrupted) {
        int k = n - fed < chunk ? n - fed : chunk;
        wgml_batch_item it = {.seq = 0, .tokens = toks + fed, .n_tokens = k, .sample = fed + k == n};
        rc = wgml_batch_step(c->b, &it, 1, &err) != WGML_OK;
        fed += k;
        next = it.next;
    }
    double t_prompt = cli_now_ms() - t0;
    const char *why = "end of turn";
    while (!rc && text && next >= 0 && !interrupted) {
        if (wgml_token_is_eog(c->m, next)) break;
        char piece[256];
        int pl = wgml_token_to_text(c->m, prev, next, piece, (int)sizeof piece);
        if (pl > (int)sizeof piece) pl = (int)sizeof piece;
        if (pl > 0) {
            if (len + (size_t)pl + 1 > cap) {
                char *t = realloc(text, cap *= 2);
                if (!t) break;
                text = t;
            }
            memcpy(text + len, piece, (size_t)pl);
            len += (size_t)pl;
            cli_out(piece, (size_t)pl);
        }
        prev = next;
        n_gen++;
        if (c->n_predict >= 0 && n_gen >= c->n_predict) {
            why = "token limit";
            break;
        }
        wgml_batch_seq_tokens(c->b, 0, &held);
        if (held >= c->n_ctx) {
            why = "context full";
            break;
        }
        wgml_batch_item it = {.seq = 0, .tokens = &next, .n_tokens = 1, .sample = 1};
        rc = wgml_batch_step(c->b, &it, 1, &err) != WGML_OK;
        next = it.next;
    }
    if (!rc && next < 0 && !interrupted) { /* the grammar has no token to go on with */
        rc = 1;
        err.code = WGML_ERR_INVALID_ARGUMENT;
        snprintf(err.message, sizeof err.message, "%s", wgml_batch_seq_error(c->b, 0));
    }
    if (interrupted) why = "interrupted";
    double t_gen = cli_now_ms() - t0 - t_prompt;
    cli_out("\n", c->tty || len == 0 || text[len - 1] != '\n' ? 1 : 0);
    if (rc) {
        cli_fail_err(&err);
        wgml_batch_seq_keep(c->b, 0, 0, NULL); /* the cache may hold half a step */
    }
    if (text) add_message(c, "assistant", text, len);
    if (c->stats || (strcmp(why, "end of turn") && c->tty)) {
        cli_line_start();
        fprintf(stderr, "wgml chat: prompt %d tokens, %d reused, %d evaluated (%.0f ms); %d generated (%.1f tok/s); %s\n",
                n, keep, n - keep, t_prompt, n_gen, n_gen > 1 ? (n_gen - 1) / (t_gen / 1e3) : 0.0, why);
    }
    free(text);
    free(toks);
    interrupted = 0;
    return rc ? -1 : 0;
}

#ifdef WGML_HAVE_LIBEDIT
/* libedit's key reader. SIGINT stays blocked while libedit runs and is let in only inside
 * pselect, atomically with the wait: a Ctrl-C pressed between the prompt and the wait (which
 * a plain read() would sleep through, its handler already run) is pending there and ends the
 * wait at once. An interrupt ends the line as a failed read does (EINTR): readline returns NULL. */
static int chat_getc(FILE *f) {
    const int fd = fileno(f);
    sigset_t open;
    sigprocmask(SIG_SETMASK, NULL, &open);
    sigdelset(&open, SIGINT);
    for (;;) {
        if (interrupted) {
            errno = EINTR;
            return EOF;
        }
        fd_set r;
        FD_ZERO(&r);
        FD_SET(fd, &r);
        if (pselect(fd + 1, &r, NULL, NULL, NULL, &open) < 0) {
            if (errno == EINTR) continue;
            return EOF;
        }
        unsigned char ch;
        ssize_t k = read(fd, &ch, 1);
        if (k == 1) return ch;
        if (k < 0 && errno == EINTR) continue;
        return EOF;
    }
}
#endif

static char *read_line(chat *c) {
#ifdef WGML_HAVE_LIBEDIT
    if (c->tty) {
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigprocmask(SIG_BLOCK, &block, &old);
        rl_getc_function = chat_getc;
        char *l = readline("> ");
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (l && *l) add_history(l);
        return l;
    }
#endif
    if (c->tty) {
        fputs("> ", stdout);
        fflush(stdout);
    }
    size_t cap = 256, n = 0;
    char *b = malloc(cap);
    int ch;
    while (b && (ch = getchar()) != EOF && ch != '\n') {
        if (n + 1 >= cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) break;
            b = nb;
        }
        b[n++] = (char)ch;
    }
    if (!b || (ch == EOF && n == 0)) {
        free(b);
        return NULL;
    }
    if (n && b[n - 1] == '\r') n--;
    b[n] = 0;
    return b;
}

static void reset(chat *c, const char *system) {
    json_object_put(c->msgs);
    c->msgs = json_object_new_array();
    if (system) add_message(c, "system", system, strlen(system));
    wgml_batch_seq_keep(c->b, 0, 0, NULL);
}

static void save(chat *c, const char *path) {
    if (json_object_to_file_ext(path, c->msgs, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE))
        cli_fail("cannot write '%s': %s", path, strerror(errno));
    else
        fprintf(stderr, "wgml chat: saved %zu messages to %s\n", json_object_array_length(c->msgs), path);
}

static void load(chat *c, const char *path) {
    json_object *a = json_object_from_file(path);
    size_t n = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
    for (size_t i = 0; a && i < n; i++) {
        json_object *m = json_object_array_get_idx(a, i), *r;
        if (!json_object_is_type(m, json_type_object) || !json_object_object_get_ex(m, "role", &r) ||
            !json_object_is_type(r, json_type_string)) {
            json_object_put(a);
            a = NULL;
        }
    }
    if (!a || !json_object_is_type(a, json_type_array)) {
        cli_fail("'%s' is not a conversation (a JSON array of messages with a 'role')", path);
        json_object_put(a);
        return;
    }
    json_object_put(c->msgs);
    c->msgs = a;
    fprintf(stderr, "wgml chat: loaded %zu messages from %s\n", n, path);
}

int cmd_chat(int argc, char **argv) {
    chat_opts o = {.n_predict = -1, .s.sp = wgml_sampler_default_params()};
    int rc = cli_parse(&spec, &o, argc, argv, NULL);
    if (rc >= 0) return rc;
    cli_sampling_seed(&o.s);
    const char *system = o.system;
    wgml_grammar *grammar;
    if (cli_sampling_grammar(&o.s, &grammar)) return CLI_FAIL;
    wgml_model *m = cli_load_model(&o.mo, NULL);
    if (!m) {
        wgml_grammar_free(grammar);
        return CLI_FAIL;
    }
    chat c = {.m = m, .n_predict = o.n_predict, .stats = o.stats, .sp = o.s.sp, .tty = isatty(STDIN_FILENO),
              .grammar = grammar};
    int is_fallback = 0;
    rc = CLI_OK;
    c.tmpl = wgml_model_chat_template(m, &is_fallback);
    wgml_batch_params bp = wgml_batch_default_params();
    bp.n_seq = 1;
    bp.n_ctx = o.n_ctx;
    bp.kv_type = o.kv;
    wgml_error err;
    if (!c.tmpl) {
        rc = cli_fail("this model has no chat template (it does not generate text?)");
    } else if (wgml_batch_create(m, &bp, &c.b, &err)) {
        rc = cli_fail_err(&err);
    }
    if (rc) {
        wgml_model_free(m);
        wgml_grammar_free(grammar);
        return rc;
    }
    c.n_ctx = wgml_batch_n_ctx(c.b);
    if (is_fallback)
        fprintf(stderr, "wgml chat: the model has no chat template; using the built-in '%s' format\n",
                wgml_model_chat_template_name(m));
    reset(&c, system);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: a read at the prompt returns */
    sigaction(SIGINT, &sa, NULL);
    if (c.tty) fprintf(stderr, "wgml chat: /help for commands, Ctrl-C stops a reply, Ctrl-D quits\n");
    for (;;) {
        interrupted = 0;
        char *line = read_line(&c);
        if (!line) {
            if (interrupted && c.tty) { /* Ctrl-C at the prompt: a fresh line */
                clearerr(stdin);
                fputs("\n", stdout);
                continue;
            }
            break;
        }
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) {
            free(line);
            break;
        } else if (!strcmp(line, "/help")) {
            fputs(CHAT_COMMANDS, stderr);
        } else if (!strcmp(line, "/reset")) {
            reset(&c, system);
            fprintf(stderr, "wgml chat: a new conversation\n");
        } else if (!strncmp(line, "/save ", 6) && line[6]) {
            save(&c, line + 6);
        } else if (!strncmp(line, "/load ", 6) && line[6]) {
            load(&c, line + 6);
        } else if (line[0] == '/' && c.tty) {
            fprintf(stderr, "wgml chat: unknown command '%s' (/help)\n", line);
        } else if (line[0]) {
            add_message(&c, "user", line, strlen(line));
            if (reply(&c)) rc = CLI_FAIL;
        }
        free(line);
        if (rc) break;
    }
    json_object_put(c.msgs);
    wgml_batch_free(c.b);
    wgml_model_free(m);
    wgml_grammar_free(grammar);
    return rc;
}
