/*
 * test_hub.c - the names of models by URL and Hugging Face name, their cache
 * paths, a repository's file list (hostile ones included) and the choice of
 * a file by quantization (net/hub.h). The downloads themselves, against a
 * local HTTP server: tests/test_fetch.py.
 */
#include "core/alloc.h"
#include "net/hub.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static wgml_hub_spec parse_ok(const char *model) {
    wgml_hub_spec s;
    wgml_error err = {0};
    wgml_status st = wgml_hub_parse(model, 0, &s, &err);
    if (st) fprintf(stderr, "%s: %s\n", model, err.message);
    assert_int_equal(st, WGML_OK);
    return s;
}

static void test_forms(void **state) {
    (void)state;
    wgml_hub_spec s = parse_ok("https://example.com/a/model.gguf");
    assert_int_equal(s.kind, WGML_HUB_URL);
    assert_string_equal(s.url, "https://example.com/a/model.gguf");
    s = parse_ok("HTTP://example.com/m.gguf");
    assert_int_equal(s.kind, WGML_HUB_URL);

    s = parse_ok("hf://ggml-org/gemma-3-1b-it-GGUF/gemma-3-1b-it-Q4_K_M.gguf");
    assert_int_equal(s.kind, WGML_HUB_HF);
    assert_string_equal(s.owner, "ggml-org");
    assert_string_equal(s.repo, "gemma-3-1b-it-GGUF");
    assert_string_equal(s.file, "gemma-3-1b-it-Q4_K_M.gguf");
    assert_string_equal(s.tag, "");

    s = parse_ok("hf://owner/repo/sub/dir/model.gguf");
    assert_string_equal(s.file, "sub/dir/model.gguf");
    s = parse_ok("hf://owner/Repo.v2:q8_0");
    assert_string_equal(s.repo, "Repo.v2");
    assert_string_equal(s.tag, "q8_0");
    s = parse_ok("hf://owner/repo");
    assert_int_equal(s.kind, WGML_HUB_HF);
    assert_string_equal(s.tag, "");
    assert_string_equal(s.file, "");
    s = parse_ok("unsloth/Qwen3-0.6B-GGUF:Q4_K_M");
    assert_int_equal(s.kind, WGML_HUB_HF);
    assert_string_equal(s.owner, "unsloth");
    assert_string_equal(s.tag, "Q4_K_M");

    /* paths stay paths */
    const char *paths[] = {"model.gguf", "models/stories260K.gguf", "/abs/path.gguf", "./o/r:Q4", "a/b/c:Q4",
                           "owner/repo", "C:\\models\\x.gguf", "o/r:", ""};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        s = parse_ok(paths[i]);
        assert_int_equal(s.kind, WGML_HUB_LOCAL);
    }
    /* an existing path wins over the form it looks like (check_local) */
    wgml_error err;
    assert_int_equal(wgml_hub_parse("/", 1, &s, &err), WGML_OK);
    assert_int_equal(s.kind, WGML_HUB_LOCAL);

    /* malformed remote forms: an error saying what is wrong */
    const char *bad[] = {"hf://", "hf://owner", "hf://../repo", "hf://owner/..", "hf://owner/repo/../../etc/passwd",
                         "hf://owner/repo/.hidden", "hf://own er/repo", "hf://owner/repo:Q4 K", "hf://owner/repo/a//b",
                         "https://", "https:///path", "https://host/a b", "http://host/\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(wgml_hub_parse(bad[i], 0, &s, &err), WGML_ERR_INVALID_ARGUMENT);
        assert_true(err.message[0]);
    }
    char longurl[3000] = "https://h/";
    memset(longurl + 10, 'a', 2500);
    longurl[2510] = '\0';
    assert_int_equal(wgml_hub_parse(longurl, 0, &s, &err), WGML_ERR_INVALID_ARGUMENT);
}

static void test_cache_paths(void **state) {
    (void)state;
    char p[1024];
    assert_int_equal(wgml_hub_url_cache_path("https://example.com/models/a.gguf", p, sizeof p), 0);
    assert_string_equal(p, "url/example.com/models/a.gguf");
    assert_int_equal(wgml_hub_url_cache_path("http://user:pw@127.0.0.1:8080/x/y.gguf", p, sizeof p), 0);
    assert_string_equal(p, "url/127.0.0.1_8080/x/y.gguf"); /* no credentials in a path */
    assert_int_equal(wgml_hub_url_cache_path("https://h/../../etc/passwd", p, sizeof p), 0);
    assert_string_equal(p, "url/h/__/__/etc/passwd");
    assert_int_equal(wgml_hub_url_cache_path("https://h/a%20b/m.gguf?sig=1&x=2#frag", p, sizeof p), 0);
    assert_true(strncmp(p, "url/h/a_20b/q", 13) == 0);
    assert_non_null(strstr(p, "/m.gguf"));
    char q[1024];
    assert_int_equal(wgml_hub_url_cache_path("https://h/a%20b/m.gguf?sig=2", q, sizeof q), 0);
    assert_string_not_equal(p, q); /* another query, another folder */
    assert_int_equal(wgml_hub_url_cache_path("https://h", p, sizeof p), 0);
    assert_string_equal(p, "url/h/index");
    assert_int_equal(wgml_hub_url_cache_path("https://h/", p, sizeof p), 0);
    assert_string_equal(p, "url/h/index");
    assert_int_equal(wgml_hub_url_cache_path("https://example.com/models/a.gguf", p, 10), -1);
    assert_int_equal(wgml_hub_url_cache_path("nohost", p, sizeof p), -1);

    assert_true(wgml_hub_safe_path("model.gguf"));
    assert_true(wgml_hub_safe_path("a/b/c-Q4_K_M.gguf"));
    assert_false(wgml_hub_safe_path("../x"));
    assert_false(wgml_hub_safe_path("a/../x"));
    assert_false(wgml_hub_safe_path("/abs"));
    assert_false(wgml_hub_safe_path("a//b"));
    assert_false(wgml_hub_safe_path("a/"));
    assert_false(wgml_hub_safe_path(".git/config"));
    assert_false(wgml_hub_safe_path("a b"));
    assert_false(wgml_hub_safe_path("a\\b"));
    assert_false(wgml_hub_safe_path("1/2/3/4/5/6/7/8/9"));
    assert_false(wgml_hub_safe_path(""));
}

static const char *k_tree =
    "[{\"type\":\"file\",\"oid\":\"a\",\"size\":12,\"path\":\"README.md\"},"
    "{\"type\":\"directory\",\"oid\":\"b\",\"size\":0,\"path\":\"sub\"},"
    "{\"type\":\"file\",\"size\":100,\"path\":\"m-Q4_K_M.gguf\",\"lfs\":{\"oid\":"
    "\"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\",\"size\":100}},"
    "{\"type\":\"file\",\"size\":50,\"path\":\"../escape.gguf\"},"
    "{\"type\":\"file\",\"size\":50,\"path\":\"/abs.gguf\"},"
    "{\"type\":\"file\",\"size\":-5,\"path\":\"sub/m-Q8_0.gguf\",\"lfs\":{\"oid\":\"short\"}},"
    "{\"type\":\"file\",\"path\":7},{\"type\":\"file\"},[1,2],\"x\",null,"
    "{\"type\":\"file\",\"size\":1,\"path\":\"nul\\u0000.gguf\"}]";

static void test_tree(void **state) {
    (void)state;
    wgml_hub_file *f;
    int n;
    wgml_error err;
    assert_int_equal(wgml_hub_parse_tree(k_tree, strlen(k_tree), &f, &n, &err), WGML_OK);
    assert_int_equal(n, 3);
    assert_string_equal(f[0].path, "README.md");
    assert_null(f[0].sha256);
    assert_string_equal(f[1].path, "m-Q4_K_M.gguf");
    assert_int_equal(f[1].size, 100);
    assert_string_equal(f[1].sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
    assert_string_equal(f[2].path, "sub/m-Q8_0.gguf");
    assert_int_equal(f[2].size, -1);
    assert_null(f[2].sha256);
    wgml_free(f);

    const char *bad[] = {"", "{}", "[", "{\"a\":1}", "\"str\"", "[1,", "nul"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(wgml_hub_parse_tree(bad[i], strlen(bad[i]), &f, &n, &err), WGML_ERR_FORMAT);
        assert_null(f);
        assert_true(err.message[0]);
    }
    assert_int_equal(wgml_hub_parse_tree("[]", 2, &f, &n, &err), WGML_OK);
    assert_int_equal(n, 0);
    wgml_free(f);
}

static int pick(const char *const *names, int n, const char *tag, int *folder, char *msg) {
    wgml_hub_file f[32];
    for (int i = 0; i < n; i++) f[i] = (wgml_hub_file){names[i], 1, NULL};
    int idx[32];
    wgml_error err = {0};
    int k = wgml_hub_pick(f, n, tag, idx, folder, &err);
    if (msg) strcpy(msg, err.message);
    return k == 1 && !*folder ? idx[0] : k == 0 ? -1 : -2 - k;
}

static void test_pick(void **state) {
    (void)state;
    const char *const quants[] = {"README.md",
                                  "model-IQ4_K_M.gguf",
                                  "model-Q4_K.gguf",
                                  "model-Q4_K_M.gguf",
                                  "model-Q4_K_M-00001-of-00002.gguf",
                                  "model-Q8_0.gguf",
                                  "mmproj-model-f16.gguf",
                                  "big/model-Q4_K_M.gguf",
                                  "model.F16.gguf"};
    const int n = (int)(sizeof quants / sizeof *quants);
    int folder;
    char msg[WGML_ERROR_MESSAGE_MAX];
    assert_int_equal(pick(quants, n, "Q4_K_M", &folder, NULL), 3);  /* not IQ4_K_M, not the split, not big/ */
    assert_int_equal(pick(quants, n, "q4_k_m", &folder, NULL), 3);  /* any case */
    assert_int_equal(pick(quants, n, "Q4_K", &folder, NULL), 2);    /* not Q4_K_M */
    assert_int_equal(pick(quants, n, "Q8_0", &folder, NULL), 5);
    assert_int_equal(pick(quants, n, "f16", &folder, NULL), 8);     /* not the projector */
    assert_int_equal(pick(quants, n, "", &folder, NULL), 3);        /* the default: Q4_K_M */
    assert_int_equal(pick(quants + 5, 2, "", &folder, NULL), 0);    /* else Q8_0 */
    assert_int_equal(pick(quants, n, "Q2_K", &folder, msg), -1);
    assert_non_null(strstr(msg, "Q2_K"));
    assert_non_null(strstr(msg, "model-Q8_0.gguf")); /* the message lists what there is */

    const char *const only[] = {"b.gguf", "a.gguf", "mmproj.gguf"};
    assert_int_equal(pick(only, 3, NULL, &folder, NULL), 1); /* the first in byte order */

    const char *const whisper[] = {"README.md", "ggml-base.en.bin", "ggml-base.bin", "ggml-tiny.bin", "model.bin"};
    assert_int_equal(pick(whisper, 5, "base", &folder, NULL), 2);
    assert_int_equal(pick(whisper, 5, "base.en", &folder, NULL), 1);
    assert_int_equal(pick(whisper, 5, "tiny", &folder, NULL), 3);

    const char *const hf[] = {"README.md", "config.json", "model.safetensors", "tokenizer.json", "onnx/model.onnx",
                              "pytorch_model.bin", "special_tokens_map.json", "sub/model.safetensors"};
    wgml_hub_file f[8];
    for (int i = 0; i < 8; i++) f[i] = (wgml_hub_file){hf[i], 1, NULL};
    int idx[8];
    wgml_error err;
    int k = wgml_hub_pick(f, 8, NULL, idx, &folder, &err);
    assert_int_equal(k, 4);
    assert_int_equal(folder, 1);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 2);
    assert_int_equal(idx[2], 3);
    assert_int_equal(idx[3], 6);
    assert_int_equal(wgml_hub_pick(f, 8, "Q4_K_M", idx, &folder, &err), 0); /* a tag needs GGUF files */
    assert_int_equal(wgml_hub_pick(f, 1, NULL, idx, &folder, &err), 0);     /* README.md alone */
    assert_int_equal(err.code, WGML_ERR_UNSUPPORTED);
    assert_int_equal(wgml_hub_pick(f, 0, NULL, idx, &folder, &err), 0);
}

/* wgml_model_fetch without the network: a local path comes back as it is; offline, a model that
 * is not in the cache is an error naming it; WGML_CACHE_DIR=off refuses. */
static void test_fetch_offline(void **state) {
    (void)state;
    char path[4096], dir[] = "/tmp/wgml-hub-XXXXXX";
    wgml_error err;
    assert_non_null(mkdtemp(dir));
    wgml_fetch_params p = wgml_fetch_default_params();
    p.offline = 1;
    p.cache_dir = dir;
    assert_int_equal(wgml_model_fetch("some/local.gguf", &p, path, sizeof path, &err), WGML_OK);
    assert_string_equal(path, "some/local.gguf");
    assert_false(wgml_model_is_remote("some/local.gguf"));
    assert_true(wgml_model_is_remote("https://example.com/m.gguf"));
    assert_true(wgml_model_is_remote("owner/repo:Q8_0"));
    assert_int_equal(wgml_model_fetch("https://example.com/m.gguf", &p, path, sizeof path, &err), WGML_ERR_NETWORK);
    assert_non_null(strstr(err.message, "offline"));
    assert_int_equal(wgml_model_fetch("hf://owner/repo:Q8_0", &p, path, sizeof path, &err), WGML_ERR_NETWORK);
    assert_non_null(strstr(err.message, "offline"));
    assert_int_equal(wgml_model_fetch("hf://owner/repo/x.gguf", &p, path, 8, &err), WGML_ERR_NETWORK);
    assert_int_equal(wgml_model_fetch("hf://bad", &p, path, sizeof path, &err), WGML_ERR_INVALID_ARGUMENT);
    const char *old = getenv("WGML_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("WGML_CACHE_DIR", "off", 1);
    p.cache_dir = NULL;
    assert_int_equal(wgml_model_fetch("https://example.com/m.gguf", &p, path, sizeof path, &err),
                     WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "WGML_CACHE_DIR"));
    if (saved) setenv("WGML_CACHE_DIR", saved, 1), free(saved);
    else unsetenv("WGML_CACHE_DIR");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),         cmocka_unit_test(test_cache_paths), cmocka_unit_test(test_tree),
        cmocka_unit_test(test_pick),          cmocka_unit_test(test_fetch_offline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
