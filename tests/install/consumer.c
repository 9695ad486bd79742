/*
 * consumer.c - a program that uses an installed wgml through its public API
 * only, built by tests/install/test_install.sh against the installed tree with
 * pkg-config and with find_package(wgml) (CMakeLists.txt here). It generates
 * greedily on the CPU and prints the prompt and the continuation, then a
 * newline, as `wgml run` does:
 *
 *   consumer <model.gguf> <prompt> <n_predict>
 */
#include <stdio.h>
#include <stdlib.h>

#include <wgml.h>

static int print_piece(void *user, int32_t token, const char *text, size_t len) {
    (void)user;
    (void)token;
    fwrite(text, 1, len, stdout);
    return 0;
}

static int fail(const char *what, const wgml_error *err) {
    fprintf(stderr, "consumer: %s: %s: %s\n", what, wgml_status_name(err->code), err->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <model.gguf> <prompt> <n_predict>\n", argv[0]);
        return 2;
    }
    wgml_error err;
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    wgml_model *model;
    if (wgml_model_load(argv[1], &mp, &model, &err) != WGML_OK) return fail(argv[1], &err);

    wgml_session *session;
    if (wgml_session_create(model, NULL, &session, &err) != WGML_OK) {
        wgml_model_free(model);
        return fail("session", &err);
    }
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = atoi(argv[3]);
    gp.sampler.temperature = 0.0f; /* greedy */
    gp.on_token = print_piece;
    fputs(argv[2], stdout);
    wgml_generate_result res;
    const wgml_status st = wgml_generate(session, argv[2], &gp, &res, &err);
    putchar('\n');
    if (st == WGML_OK) {
        wgml_model_info info;
        wgml_model_get_info(model, &info);
        fprintf(stderr, "consumer: wgml %d.%d.%d, %s (%s): %d prompt tokens, %d generated, stop: %s\n",
                WGML_VERSION_MAJOR, WGML_VERSION_MINOR, WGML_VERSION_PATCH, info.backend, info.adapter,
                res.n_prompt, res.n_generated, wgml_stop_reason_name(res.stop));
    }
    wgml_session_free(session);
    wgml_model_free(model);
    return st == WGML_OK ? 0 : fail("generate", &err);
}
