/*
 * test_cli.c - the wgml command line as a user meets it: exit codes, messages
 * that name the problem, stdout carrying only the generated text; the limits
 * (-n 0, empty and invalid prompts, out-of-range flags, the context's end) and
 * the backend choice when no GPU can be had; `wgml transcribe` on WAVs written
 * here (every format, the errors of bad audio and of models that do not transcribe).
 * Runs the built binary ($WGML_CLI).
 */
#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "testutil.h"

typedef struct {
    int code;
    char out[65536];
    char err[65536];
} result;

/* Runs `ENV wgml ARGS <IN` through the shell, capturing stdout and stderr. */
static void run_in(result *r, const char *env, const char *args, const char *in) {
    const char *cli = getenv("WGML_CLI");
    assert_non_null(cli);
    const char *out = tu_tmp_path("cli.out"), *err = tu_tmp_path("cli.err");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s '%s' %s >'%s' 2>'%s' <'%s'", env, cli, args, out, err, in);
    int st = system(cmd);
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    size_t n;
    unsigned char *b = tu_read_file(out, &n);
    snprintf(r->out, sizeof r->out, "%s", b ? (char *)b : "");
    free(b);
    b = tu_read_file(err, &n);
    snprintf(r->err, sizeof r->err, "%s", b ? (char *)b : "");
    free(b);
}

static void run_env(result *r, const char *env, const char *args) { run_in(r, env, args, "/dev/null"); }

static void run(result *r, const char *args) { run_env(r, "", args); }

/* The exit status must be `code`; on a mismatch the command's stderr is shown, so a
 * CI log says why (a sanitizer report, a message) rather than only "1 != 0". */
static void expect_exit(const result *r, int code) {
    if (r->code != code) print_error("wgml exited %d, expected %d; its stderr:\n%s\n", r->code, code, r->err);
    assert_int_equal(r->code, code);
}

static const char *model(void) {
    static char buf[4200];
    snprintf(buf, sizeof buf, "-m '%s'", tu_shared("models/stories260K.gguf"));
    return buf;
}

static void test_run_reference(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "run %s --backend cpu --temp 0 -n 60 -p 'Once upon a time'", model());
    run(&r, args);
    expect_exit(&r, 0);
    size_t n;
    char *ref = (char *)tu_read_file(tu_shared("models/reference/stories260K.llama2c-run.t0.n64.once.txt"), &n);
    assert_non_null(ref);
    assert_string_equal(r.out, ref); /* stdout: prompt + continuation + newline, nothing else */
    assert_non_null(strstr(r.err, "tok/s"));
    free(ref);
}

static void test_missing_file(void **state) {
    (void)state;
    result r;
    run(&r, "run -m /no/such/model.gguf -n 4");
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "/no/such/model.gguf"));
    assert_non_null(strstr(r.err, "cannot open"));
    assert_string_equal(r.out, "");
}

static void test_bad_model(void **state) {
    (void)state;
    const char *p = tu_tmp_path("not-a-model.gguf");
    assert_int_equal(tu_write_file(p, "hello, this is not a model file at all", 38), 0);
    result r;
    char args[1024];
    snprintf(args, sizeof args, "run -m '%s' -n 4", p);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "not a GGUF file"));
    snprintf(args, sizeof args, "info '%s'", p);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "not a GGUF file"));
}

static void test_prompt_too_long(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args,
             "run %s --backend cpu -c 8 -n 4 -p 'Once upon a time there was a little girl named Lily who liked to play'",
             model());
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "context"));
}

static void test_usage_errors(void **state) {
    (void)state;
    result r;
    run(&r, "run --no-such-option");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "--no-such-option"));
    run(&r, "run -n abc");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "integer"));
    run(&r, "run --temp -1");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "--temp"));
    run(&r, "run --top-p 2");
    expect_exit(&r, 2);
    run(&r, "run --backend metal");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "--backend"));
    run(&r, "frobnicate");
    expect_exit(&r, 2);
    run(&r, "");
    expect_exit(&r, 2);
    run(&r, "run -m");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "needs a value"));
    run(&r, "verify --type Q4_7");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "unknown tensor type 'Q4_7'"));
    run(&r, "--help");
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "run"));
}

static void test_info(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "info %s --tensors", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "architecture:  llama"));
    assert_non_null(strstr(r.out, "family:        llama\n"));
    assert_non_null(strstr(r.out, "tasks:         generate\n"));
    assert_non_null(strstr(r.out, "layers:        5\n"));
    assert_non_null(strstr(r.out, "blk.4.ffn_down.weight"));
    assert_non_null(strstr(r.out, "F32"));
}

static void test_tokenize(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "tokenize %s --bos 'Once upon a time'", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "1 403 407 261 378\n");
}

/* wgml embed / rerank / bench --embed on synth files: outputs, JSON, and errors by name. */
static void test_embed_rerank(void **state) {
    (void)state;
    result r;
    char args[8800];
    char bge[1024], rr[1024], texts[1024]; /* tu_tmp_path's buffers are reused by run() */
    snprintf(bge, sizeof bge, "%s", tu_tmp_path("bge.gguf"));
    snprintf(rr, sizeof rr, "%s", tu_tmp_path("rerank.gguf"));
    snprintf(texts, sizeof texts, "%s", tu_tmp_path("texts.txt"));
    const char *vocab = tu_shared("vocab/ggml-vocab-bert-bge.gguf");
    snprintf(args, sizeof args, "synth --arch bge-small --type F16 --layers 1 --vocab '%s' -o '%s'", vocab, bge);
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(args, sizeof args, "synth --arch ms-marco-minilm-l6 --type F16 --layers 1 --vocab '%s' -o '%s'", vocab, rr);
    run(&r, args);
    expect_exit(&r, 0);
    const char *body = "first text\n\nthird, after an empty line\n";
    assert_int_equal(tu_write_file(texts, body, strlen(body)), 0);
    /* one vector per line, 384 values each (3 lines from the file, the empty one included) */
    snprintf(args, sizeof args, "embed -m '%s' --backend cpu -f '%s'", bge, texts);
    run(&r, args);
    expect_exit(&r, 0);
    int lines = 0, values = 0;
    for (const char *c = r.out; *c; c++) lines += *c == '\n', values += *c == ' ';
    assert_int_equal(lines, 3);
    assert_int_equal(values, 3 * 383);
    snprintf(args, sizeof args, "embed -m '%s' --backend cpu --json --dimensions 8 'Hello world' 'a'", bge);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\"object\":\"list\""));
    assert_non_null(strstr(r.out, "\"index\":1"));
    assert_non_null(strstr(r.out, "\"prompt_tokens\":7")); /* [CLS] hello world [SEP] + [CLS] a [SEP] */
    /* errors, each named */
    snprintf(args, sizeof args, "embed %s --backend cpu 'x'", model());
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "does not embed"));
    snprintf(args, sizeof args, "embed -m '%s' --backend cpu --pooling max 'x'", bge);
    run(&r, args);
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "--pooling"));
    snprintf(args, sizeof args, "embed -m '%s' --backend cpu --dimensions 999 'x'", bge);
    run(&r, args);
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "384"));
    snprintf(args, sizeof args, "embed -m '%s' --backend cpu", bge);
    run(&r, args);
    expect_exit(&r, 2);
    snprintf(args, sizeof args, "embed -m '%s' --backend cpu -f /nonexistent/texts", bge);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "/nonexistent/texts"));
    /* rerank: a score and the document per line, or JSON sorted by score */
    snprintf(args, sizeof args, "rerank -m '%s' --backend cpu -q 'what is first' -f '%s'", rr, texts);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\tfirst text\n"));
    snprintf(args, sizeof args, "rerank -m '%s' --backend cpu -q q --json a b", rr);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\"relevance_score\""));
    snprintf(args, sizeof args, "rerank -m '%s' --backend cpu a b", rr);
    run(&r, args);
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "-q"));
    snprintf(args, sizeof args, "rerank -m '%s' --backend cpu -q q a", bge);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "does not rerank"));
    snprintf(args, sizeof args, "info '%s'", rr);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "tasks:         rerank\n"));
    /* the benchmark's JSON */
    snprintf(args, sizeof args, "bench --embed -m '%s' --backend cpu --texts 4 --batch 2 --repeat 1 --no-limits --json", bge);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\"batch_tokens_per_s\""));
    assert_non_null(strstr(r.out, "\"single_latency_ms_p50\""));
    remove(bge);
    remove(rr);
    remove(texts);
}

/* wgml bench --images on a 1-layer synth CLIP tower: its JSON, chosen by the model's task too, and a
 * model that does not embed images named. */
static void test_bench_images(void **state) {
    (void)state;
    result r;
    char args[4400], clip[1024];
    snprintf(clip, sizeof clip, "%s", tu_tmp_path("bench-clip.gguf"));
    snprintf(args, sizeof args, "synth --arch clip-vit-b32 --type F16 --layers 1 -o '%s'", clip);
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(args, sizeof args, "bench -m '%s' --backend cpu --count 2 --batch 2 --repeat 1 --no-limits --json", clip);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\"batch_images_per_s\""));
    assert_non_null(strstr(r.out, "\"single_latency_ms_p50\""));
    assert_non_null(strstr(r.out, "\"rows_per_image\":50"));
    snprintf(args, sizeof args, "bench --images %s --backend cpu", model());
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "does not embed images"));
    remove(clip);
}

static double json_number_at(const char *p, const char *key);

static void test_bench_json(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "bench %s --backend cpu -p 16 -n 16 --json", model());
    run(&r, args);
    expect_exit(&r, 0);
    const char *keys[] = {"\"pp_tokens_per_s\"", "\"tg_tokens_per_s\"", "\"load_ms\"", "\"peak_rss_mb\"",
                          "\"backend\":\"cpu\"", "\"model\"", "\"load_to_first_token_ms\"",
                          "\"state\":\"none\""}; /* no pipeline cache on the CPU */
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) assert_non_null(strstr(r.out, keys[i]));
    assert_int_equal(r.out[0], '{');
    /* bytes per token count the session's own KV cache type: f32 reads twice the cache bytes of f16 */
    double bytes[2];
    const char *types[] = {"f16", "f32"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "bench %s --backend cpu -p 4 -n 4 --ctx 64 --kv-type %s --no-limits --json", model(),
                 types[i]);
        run(&r, args);
        expect_exit(&r, 0);
        const char *b = strstr(r.out, "\"bytes_per_token\":");
        assert_non_null(b);
        bytes[i] = strtod(b + strlen("\"bytes_per_token\":"), NULL);
    }
    /* stories260K: 5 layers, 4 KV heads of 8; mean context 64 + 4 / 2 = 66 tokens, K and V */
    assert_true(bytes[1] - bytes[0] == 2.0 * 5 * 66 * 32 * 2);

    /* the kernel table: matmuls named by weight type and row count (one row: gemv; prompts:
     * gemm), and only the model's own - 5 layers x (QKV, output, gate/up, down) + the head per
     * forward pass, one get_rows per pass - not the f32 matmuls of the device measurements
     * that run after each of the timed runs */
    snprintf(args, sizeof args, "bench %s --backend cpu -p 4 -n 4 --repeat 2 --profile --json", model());
    run(&r, args);
    expect_exit(&r, 0);
    const char *mv = strstr(r.out, "\"name\":\"matmul f32 gemv\""), *mm = strstr(r.out, "\"name\":\"matmul f32 gemm\""),
               *gr = strstr(r.out, "\"name\":\"get_rows\"");
    assert_non_null(mv);
    assert_non_null(mm);
    assert_non_null(gr);
    mv = strstr(mv, "\"calls\":");
    mm = strstr(mm, "\"calls\":");
    gr = strstr(gr, "\"calls\":");
    assert_non_null(mv);
    assert_non_null(mm);
    assert_non_null(gr);
    const long mm_calls = strtol(mv + 8, NULL, 10) + strtol(mm + 8, NULL, 10), passes = strtol(gr + 8, NULL, 10);
    assert_true(passes > 0);
    assert_int_equal(mm_calls, 21 * passes);
    /* the prompt's rate beside a matmul of the model's own weight type over as many rows */
    snprintf(args, sizeof args, "bench %s --backend cpu -p 4 -n 2 --json", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\"matmul_type\":\"F32\""));
    assert_true(json_number_at(r.out, "type_matmul_rows") == 4);
    assert_true(json_number_at(r.out, "type_matmul_gflops") > 0);
    assert_true(json_number_at(r.out, "pp_type_matmul_pct") > 0);
}

/* The number after `"key":` at p, or NAN. */
static double json_number_at(const char *p, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *v = p ? strstr(p, k) : NULL;
    return v ? strtod(v + strlen(k), NULL) : NAN;
}

/* --repeat R: a device measurement after each run, and the ratios are the
 * medians of the per-run ratios (each run's decode over its own bandwidth). */
static void test_bench_repeat(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "bench %s --backend cpu -p 8 -n 8 --repeat 3 --json", model());
    run(&r, args);
    expect_exit(&r, 0);
    const char *runs = strstr(r.out, "\"runs\":");
    assert_non_null(runs);
    const double bytes = json_number_at(r.out, "bytes_per_token");
    double roof[3];
    const char *p = runs;
    for (int i = 0; i < 3; i++) {
        p = strstr(p + 1, "\"tg_tokens_per_s\":");
        assert_non_null(p);
        const double tg = json_number_at(p, "tg_tokens_per_s"), gbs = json_number_at(p, "bandwidth_gbs");
        roof[i] = json_number_at(p, "decode_roofline_pct");
        assert_true(tg > 0 && gbs > 0);
        assert_true(fabs(roof[i] - bytes * tg / (gbs * 1e9) * 100) <= 1e-9 * roof[i]);
    }
    assert_null(strstr(p + 1, "\"tg_tokens_per_s\":")); /* exactly three runs */
    /* the top-level figure is the middle one of the three */
    const double lo = fmin(roof[0], fmin(roof[1], roof[2])), hi = fmax(roof[0], fmax(roof[1], roof[2]));
    const double mid = roof[0] + roof[1] + roof[2] - lo - hi, top = json_number_at(r.out, "decode_roofline_pct");
    assert_true(fabs(top - mid) <= 1e-9 * mid);
}

static void test_convert(void **state) {
    (void)state;
    result r;
    char args[8192];
    const char *out = tu_tmp_path("cli-conv.gguf");
    snprintf(args, sizeof args, "convert llama2c '%s' '%s' -o '%s'", tu_shared("models/llama2c/stories260K.bin"),
             tu_shared("models/llama2c/tok512.bin"), out);
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(args, sizeof args, "run -m '%s' --backend cpu --temp 0 -n 8 -p 'Once upon a time'", out);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "Once upon a time, there was a little girl"));
    snprintf(args, sizeof args, "convert llama2c '%s' '%s' -o '%s'", tu_shared("models/llama2c/tok512.bin"),
             tu_shared("models/llama2c/tok512.bin"), tu_tmp_path("bad.gguf"));
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "tok512.bin"));
    remove(out);
}

/* Kokoro: convert the tiny checkpoint with its voices, describe it, speak to
 * WAV files a standard tool reads (sox --i), word times, and the errors. */
/* ---- wgml transcribe ---- */

/* A 16-bit PCM WAV of `frames` frames at `rate` Hz with `channels` channels: a 440 Hz sine on the first
 * channel, the others silent (the CLI averages them and the library resamples to 16 kHz). */
static void write_wav(const char *path, int frames, int rate, int channels) {
    const size_t data = (size_t)frames * channels * 2;
    unsigned char *b = calloc(1, 44 + data);
    assert_non_null(b);
    const uint32_t u32[] = {(uint32_t)(36 + data), 16, (uint32_t)rate, (uint32_t)(rate * channels * 2), (uint32_t)data};
    memcpy(b, "RIFF", 4), memcpy(b + 8, "WAVEfmt ", 8), memcpy(b + 36, "data", 4);
    const size_t at[] = {4, 16, 24, 28, 40};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 4; k++) b[at[i] + k] = (unsigned char)(u32[i] >> (8 * k));
    b[20] = 1, b[22] = (unsigned char)channels, b[32] = (unsigned char)(channels * 2), b[34] = 16; /* PCM */
    for (int i = 0; i < frames; i++) {
        int v = (int)lrint(12000 * sin(2 * M_PI * 440.0 * i / rate));
        b[44 + (size_t)i * channels * 2] = (unsigned char)(v & 0xff);
        b[45 + (size_t)i * channels * 2] = (unsigned char)((v >> 8) & 0xff);
    }
    assert_int_equal(tu_write_file(path, b, 44 + data), 0);
    free(b);
}

/* The times of each "A --> B" line (SRT "HH:MM:SS,mmm", VTT "[HH:]MM:SS.mmm"): they must not go back, and
 * each ends no earlier than it starts. Returns the count. */
static int check_cue_times(const char *text) {
    int n = 0;
    double prev = 0;
    for (const char *p = text; (p = strstr(p, " --> ")); p += 5) {
        const char *ls = p;
        while (ls > text && ls[-1] != '\n') ls--;
        double t[2];
        const char *q[2] = {ls, p + 5};
        for (int k = 0; k < 2; k++) {
            int f[4] = {0}, c = 0;
            for (const char *x = q[k]; c < 4 && *x && *x != ' ' && *x != '\n';) {
                f[c++] = (int)strtol(x, (char **)&x, 10);
                if (*x == ':' || *x == ',' || *x == '.') x++;
            }
            assert_true(c == 3 || c == 4);
            t[k] = c == 4 ? f[0] * 3600 + f[1] * 60 + f[2] + f[3] / 1e3 : f[0] * 60 + f[1] + f[2] / 1e3;
        }
        assert_true(t[0] >= prev && t[1] >= t[0]);
        prev = t[0];
        n++;
    }
    return n;
}

/* wgml transcribe with the shared micro Whisper (random weights: gibberish text, exact token ids) on a 44.1 kHz
 * stereo WAV: every --format, the same text in each, -o, and bad inputs that fail naming the problem. Each
 * decode is held to 8 tokens without the fallback (random weights would decode 224 tokens six times). */
static void test_transcribe(void **state) {
    (void)state;
    if (!tu_shared_present()) skip();
    char model_bin[4096], wav[4096], out[4096], bad[4096], kok[4096];
    snprintf(model_bin, sizeof model_bin, "%s", tu_shared("whisper/whisper-micro-random.bin"));
    snprintf(wav, sizeof wav, "%s", tu_tmp_path("speech.wav"));
    snprintf(out, sizeof out, "%s", tu_tmp_path("transcript.srt"));
    snprintf(bad, sizeof bad, "%s", tu_tmp_path("bad-audio"));
    snprintf(kok, sizeof kok, "%s", tu_tmp_path("kokoro-for-transcribe.gguf"));
    write_wav(wav, 44100, 44100, 2);
    result r;
    char args[16384];
    const char *quick = "--backend cpu --max-tokens 8 --no-fallback";

    /* verbose_json: OpenAI's shape; its text is each other format's */
    snprintf(args, sizeof args, "transcribe -m '%s' %s -f verbose_json '%s'", model_bin, quick, wav);
    run(&r, args);
    expect_exit(&r, 0);
    json_object *v = json_tokener_parse(r.out);
    assert_non_null(v);
    json_object *x, *segs;
    assert_true(json_object_object_get_ex(v, "task", &x) && !strcmp(json_object_get_string(x), "transcribe"));
    assert_true(json_object_object_get_ex(v, "duration", &x) && json_object_get_double(x) == 1.0);
    assert_true(json_object_object_get_ex(v, "language", &x) && json_object_get_string_len(x) > 1);
    assert_true(json_object_object_get_ex(v, "segments", &segs) && json_object_array_length(segs) >= 1);
    char text[8192];
    assert_true(json_object_object_get_ex(v, "text", &x));
    snprintf(text, sizeof text, "%s", json_object_get_string(x));
    assert_true(strlen(text) > 0);
    double prev = 0;
    for (size_t i = 0; i < json_object_array_length(segs); i++) {
        json_object *g = json_object_array_get_idx(segs, i), *st, *en, *tok;
        assert_true(json_object_object_get_ex(g, "start", &st) && json_object_object_get_ex(g, "end", &en));
        assert_true(json_object_get_double(st) >= prev && json_object_get_double(en) >= json_object_get_double(st));
        prev = json_object_get_double(st);
        assert_true(json_object_object_get_ex(g, "tokens", &tok) && json_object_array_length(tok) >= 1);
        const char *keys[] = {"id", "seek", "text", "temperature", "avg_logprob", "compression_ratio", "no_speech_prob"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) assert_true(json_object_object_get_ex(g, keys[k], &x));
    }
    json_object_put(v);
    assert_non_null(strstr(r.err, "wgml transcribe: 1.00 s of audio (WAV"));
    assert_non_null(strstr(r.err, "44100 Hz, 2 channels"));
    /* json: {"text", "usage"} */
    snprintf(args, sizeof args, "transcribe -m '%s' %s --format json '%s'", model_bin, quick, wav);
    run(&r, args);
    expect_exit(&r, 0);
    v = json_tokener_parse(r.out);
    assert_non_null(v);
    assert_true(json_object_object_get_ex(v, "text", &x) && !strcmp(json_object_get_string(x), text));
    assert_true(json_object_object_get_ex(v, "usage", &x));
    json_object_put(v);
    /* txt: a line per segment, the text's words */
    snprintf(args, sizeof args, "transcribe -m '%s' %s '%s'", model_bin, quick, wav);
    run(&r, args);
    expect_exit(&r, 0);
    assert_true(strlen(r.out) > 0 && r.out[strlen(r.out) - 1] == '\n');
    char first[64];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(text, " "), text);
    assert_non_null(strstr(r.out, first));
    /* srt (to a file with -o: stdout stays empty), vtt, tsv */
    snprintf(args, sizeof args, "transcribe -m '%s' %s -f srt -o '%s' '%s'", model_bin, quick, out, wav);
    run(&r, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "");
    size_t n;
    char *srt = (char *)tu_read_file(out, &n);
    assert_non_null(srt);
    assert_true(!strncmp(srt, "1\n00:00:", 8));
    assert_true(check_cue_times(srt) >= 1);
    free(srt);
    snprintf(args, sizeof args, "transcribe -m '%s' %s -f vtt '%s'", model_bin, quick, wav);
    run(&r, args);
    expect_exit(&r, 0);
    assert_true(!strncmp(r.out, "WEBVTT\n\n", 8));
    assert_true(check_cue_times(r.out) >= 1);
    snprintf(args, sizeof args, "transcribe -m '%s' %s -f tsv '%s'", model_bin, quick, wav);
    run(&r, args);
    expect_exit(&r, 0);
    assert_true(!strncmp(r.out, "start\tend\ttext\n", 15));
    /* --word-timestamps: each segment's words in verbose_json (the official result's keys) and OpenAI's "words" */
    snprintf(args, sizeof args, "transcribe -m '%s' %s --word-timestamps -f verbose_json '%s'", model_bin, quick, wav);
    run(&r, args);
    expect_exit(&r, 0);
    v = json_tokener_parse(r.out);
    assert_non_null(v);
    json_object *all;
    assert_true(json_object_object_get_ex(v, "words", &all) && json_object_is_type(all, json_type_array));
    assert_true(json_object_object_get_ex(v, "segments", &segs));
    size_t n_seg_words = 0;
    for (size_t i = 0; i < json_object_array_length(segs); i++) {
        json_object *g = json_object_array_get_idx(segs, i), *ws;
        if (!json_object_object_get_ex(g, "words", &ws)) continue;
        for (size_t k = 0; k < json_object_array_length(ws); k++, n_seg_words++) {
            json_object *w = json_object_array_get_idx(ws, k), *a = json_object_array_get_idx(all, n_seg_words), *y;
            const char *keys[] = {"word", "start", "end", "probability"};
            for (size_t j = 0; j < 4; j++) assert_true(json_object_object_get_ex(w, keys[j], &x));
            assert_non_null(a);
            assert_true(json_object_object_get_ex(a, "word", &x));
            assert_true(json_object_object_get_ex(w, "word", &y) && !strcmp(json_object_get_string(x), json_object_get_string(y)));
        }
    }
    assert_int_equal(n_seg_words, json_object_array_length(all));
    json_object_put(v);
    /* the same audio as 16 kHz mono, and (when sox is there) as FLAC: the FLAC's samples are the WAV's */
    if (system("command -v sox >/dev/null 2>&1") == 0) {
        char flac[4096], cmd[9000];
        snprintf(flac, sizeof flac, "%s", tu_tmp_path("speech.flac"));
        snprintf(cmd, sizeof cmd, "sox '%s' '%s' 2>/dev/null", wav, flac);
        if (system(cmd) == 0) {
            snprintf(args, sizeof args, "transcribe -m '%s' %s -f json '%s'", model_bin, quick, flac);
            run(&r, args);
            expect_exit(&r, 0);
            assert_non_null(strstr(r.out, text));
            assert_non_null(strstr(r.err, "FLAC"));
        }
    }
    write_wav(bad, 16000, 16000, 1);
    snprintf(args, sizeof args, "transcribe -m '%s' %s --language de --translate -f verbose_json '%s'", model_bin, quick,
             bad);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\"task\":\"translate\""));
    assert_non_null(strstr(r.out, "\"language\":\"german\""));
    assert_non_null(strstr(r.err, "16000 Hz, 1 channel)"));

    /* errors: exit 1 (the work failed) or 2 (the command line), naming the problem; nothing on stdout */
    struct {
        const char *setup; /* bytes of the bad file ("" none), or NULL: the argument as it is */
        size_t len;
        const char *extra, *file;
        int code;
        const char *says;
    } cases[] = {
        {NULL, 0, "", "/no/such/audio.wav", 1, "cannot open '/no/such/audio.wav'"},
#define BYTES(s) s, sizeof s - 1
        {BYTES("this is a text file, not audio\n"), "", NULL, 1, "is not audio that can be read"},
        /* an MP4 (AAC) header: a container libsndfile does not read */
        {BYTES("\0\0\0\x18" "ftypM4A \0\0\0\0M4A mp42isom\0\0\0\x08" "free"), "", NULL, 1,
         "is not audio that can be read"},
#undef BYTES
        {"", 0, "", NULL, 1, "is empty"},
        {NULL, 0, "", "/", 1, "is not a regular file"},
        {NULL, 0, "--language klingon", "WAV", 2, "is not a Whisper language"},
        {NULL, 0, "--format docx", "WAV", 2, "--format"},
        {NULL, 0, "--beam-size 99", "WAV", 2, "--beam-size"},
        {NULL, 0, "--temperature -1", "WAV", 2, "--temperature"},
        {NULL, 0, "", "", 2, "give the audio file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *file = cases[i].file;
        if (cases[i].setup) {
            assert_int_equal(tu_write_file(bad, cases[i].setup, cases[i].len), 0);
            file = bad;
        } else if (file && !strcmp(file, "WAV")) {
            file = wav;
        }
        if (file && *file) snprintf(args, sizeof args, "transcribe -m '%s' %s %s '%s'", model_bin, quick, cases[i].extra, file);
        else snprintf(args, sizeof args, "transcribe -m '%s' %s %s", model_bin, quick, cases[i].extra);
        run(&r, args);
        if (r.code != cases[i].code || !strstr(r.err, cases[i].says) || r.out[0])
            fail_msg("case %zu (%s %s): exit %d, stderr: %s, stdout: %s", i, cases[i].extra, file ? file : "", r.code,
                     r.err, r.out);
    }
    /* a WAV cut inside its data (its header promises more), a header alone, no frames */
    unsigned char *whole = tu_read_file(wav, &n);
    assert_non_null(whole);
    const size_t cuts[] = {n / 2, 30};
    const char *says[] = {"is truncated", "is not audio that can be read"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tu_write_file(bad, whole, cuts[i]), 0);
        snprintf(args, sizeof args, "transcribe -m '%s' %s '%s'", model_bin, quick, bad);
        run(&r, args);
        expect_exit(&r, 1);
        if (!strstr(r.err, says[i])) fail_msg("cut at %zu: %s", cuts[i], r.err);
    }
    free(whole);
    write_wav(bad, 0, 16000, 1);
    snprintf(args, sizeof args, "transcribe -m '%s' %s '%s'", model_bin, quick, bad);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "holds no audio"));
    /* 25 hours of 8 kHz audio by its header (a sparse file of 1.4 GB): refused before a sample is read */
    {
        write_wav(bad, 0, 8000, 1);
        unsigned char *h = tu_read_file(bad, &n);
        assert_non_null(h);
        const uint32_t data = 25u * 3600u * 8000u * 2u;
        for (int k = 0; k < 4; k++) h[40 + k] = (unsigned char)(data >> (8 * k)), h[4 + k] = (unsigned char)((36 + data) >> (8 * k));
        FILE *f = fopen(bad, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(h, 1, 44, f), 44);
        assert_int_equal(fclose(f), 0);
        free(h);
        assert_int_equal(truncate(bad, 44 + (off_t)data), 0);
        snprintf(args, sizeof args, "transcribe -m '%s' %s '%s'", model_bin, quick, bad);
        run(&r, args);
        expect_exit(&r, 1);
        if (!strstr(r.err, "is 90000 s long; the limit is 86400 s")) fail_msg("25 h: %s", r.err);
        assert_int_equal(truncate(bad, 0), 0);
    }
    /* models that do not transcribe: a llama, a Kokoro, no file at all, not a model */
    snprintf(args, sizeof args, "transcribe %s %s '%s'", model(), quick, wav);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "does not transcribe speech"));
    snprintf(args, sizeof args, "synth --arch kokoro-tiny --type Q8_0 -o '%s'", kok);
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(args, sizeof args, "transcribe -m '%s' %s '%s'", kok, quick, wav);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "a kokoro model"));
    snprintf(args, sizeof args, "transcribe -m /no/such/model.bin %s '%s'", quick, wav);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "/no/such/model.bin"));
    snprintf(args, sizeof args, "transcribe %s '%s'", quick, wav);
    run(&r, args);
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "-m MODEL is required"));
    remove(wav);
    remove(bad);
    remove(kok);
}

static void test_speak(void **state) {
    (void)state;
    if (!tu_shared_present()) skip();
    result r;
    char args[16384];
    char gg[4096], wav[4096], words[4096], sox_txt[4096]; /* tu_tmp_path's buffer is reused */
    snprintf(gg, sizeof gg, "%s", tu_tmp_path("cli-kokoro.gguf"));
    snprintf(wav, sizeof wav, "%s", tu_tmp_path("cli-speech.wav"));
    snprintf(words, sizeof words, "%s", tu_tmp_path("cli-words.tsv"));
    snprintf(sox_txt, sizeof sox_txt, "%s", tu_tmp_path("sox.txt"));
    char voices[4096];
    snprintf(voices, sizeof voices, "%s", tu_shared("kokoro/voices"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "%s", tu_shared("kokoro/config-kokoro-tiny.json"));
    snprintf(args, sizeof args, "convert kokoro '%s' --config '%s' --voices '%s' -o '%s'",
             tu_shared("kokoro/kokoro-tiny.pth"), cfg, voices, gg);
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(args, sizeof args, "info -m '%s'", gg);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "speech"));
    assert_non_null(strstr(r.out, "af_heart, am_adam, bf_emma"));
    snprintf(args, sizeof args, "speak -m '%s' --list-voices", gg);
    run(&r, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "af_heart\nam_adam\nbf_emma\n");

    /* phonemes to a 16-bit WAV, with word times */
    snprintf(args, sizeof args, "speak -m '%s' --backend cpu --threads 2 -v am_adam --speed 1.2 --seed 7 "
                                "--phonemes 'həlˈoʊ wˈɜːld. hˌaʊ ɑːɹ juː?' --words '%s' -o '%s'", gg, words, wav);
    run(&r, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "real-time factor"));
    assert_non_null(strstr(r.err, "first audio after"));
    assert_non_null(strstr(r.err, "2 chunks"));
    size_t n;
    unsigned char *w = tu_read_file(words, &n);
    assert_non_null(w);
    int lines = 0;
    double prev = 0, a, b;
    for (char *p = (char *)w; *p; p = strchr(p, '\n') + 1) {
        assert_int_equal(sscanf(p, "%lf\t%lf", &a, &b), 2);
        assert_true(a >= prev && b > a);
        prev = b;
        lines++;
        if (!strchr(p, '\n')) break;
    }
    assert_int_equal(lines, 5);
    assert_non_null(strstr((char *)w, "\twˈɜːld\n")); /* the word's phonemes, without the full stop */
    free(w);
    int have_sox = system("command -v sox >/dev/null 2>&1") == 0;
    if (!have_sox && getenv("WGML_REQUIRE_SHARED")) fail_msg("sox is needed to check the WAV files");
    if (have_sox) {
        char cmd[20000];
        snprintf(cmd, sizeof cmd, "sox --i '%s' > '%s' 2>&1", wav, sox_txt);
        assert_int_equal(system(cmd), 0);
        unsigned char *t = tu_read_file(sox_txt, &n);
        assert_non_null(strstr((char *)t, "Sample Rate    : 24000"));
        assert_non_null(strstr((char *)t, "16-bit Signed Integer PCM"));
        assert_non_null(strstr((char *)t, "Channels       : 1"));
        free(t);
        /* 32-bit float to standard output, through a pipe */
        snprintf(cmd, sizeof cmd, "'%s' speak -m '%s' --backend cpu --phonemes 'hˈaɪ.' --wav-format f32 -o - 2>/dev/null"
                                  " | sox --i - > '%s' 2>&1", getenv("WGML_CLI"), gg, sox_txt);
        assert_int_equal(system(cmd), 0);
        t = tu_read_file(sox_txt, &n);
        assert_non_null(strstr((char *)t, "32-bit Floating Point PCM"));
        free(t);
    }
    /* text, when espeak-ng is there */
    if (system("command -v espeak-ng >/dev/null 2>&1") == 0) {
        snprintf(args, sizeof args, "speak -m '%s' --backend cpu -t 'Hello there. Bye!' -o '%s'", gg, wav);
        run(&r, args);
        expect_exit(&r, 0);
        assert_non_null(strstr(r.err, "2 chunks"));
    }

    /* a synthetic model of the same shapes, quantized, speaks with its one voice */
    char syn[4096];
    snprintf(syn, sizeof syn, "%s", tu_tmp_path("cli-kokoro-synth.gguf"));
    snprintf(args, sizeof args, "synth --arch kokoro-tiny --type Q8_0 -o '%s'", syn);
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(args, sizeof args, "speak -m '%s' --backend cpu --phonemes 'hˈaɪ.' -o '%s'", syn, wav);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.err, "1 chunk"));
    /* wgml bench on a speech model: the speech benchmark, as JSON */
    snprintf(args, sizeof args, "bench -m '%s' --backend cpu --repeat 1 --profile --json", syn);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "\"architecture\":\"kokoro\""));
    assert_non_null(strstr(r.out, "\"paragraph_chunks\":3"));
    const char *rtf = strstr(r.out, "\"sentence_rtf\":");
    assert_non_null(rtf);
    assert_true(strtod(rtf + 15, NULL) > 0);
    assert_non_null(strstr(r.out, "\"paragraph_first_audio_ms\":"));
    assert_non_null(strstr(r.out, "\"peak_rss_mb\":"));
    assert_non_null(strstr(r.out, "\"name\":\"lstm\""));
    snprintf(args, sizeof args, "bench --speech %s --backend cpu --repeat 1", model());
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "does not speak"));
    snprintf(args, sizeof args, "synth --arch kokoro-82m --type Q4_K_M -o '%s'", syn);
    run(&r, args);
    expect_exit(&r, 2);
    remove(syn);

    /* errors */
    snprintf(args, sizeof args, "speak -m '%s' --backend cpu --phonemes 'hˈaɪ' -v nobody -o '%s'", gg, wav);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "voice 'nobody'"));
    assert_non_null(strstr(r.err, "af_heart"));
    snprintf(args, sizeof args, "speak -m '%s' --backend cpu --phonemes '123' -o '%s'", gg, wav);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "nothing to say"));
    snprintf(args, sizeof args, "speak %s --backend cpu --phonemes 'hˈaɪ' -o '%s'", model(), wav);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "does not speak"));
    snprintf(args, sizeof args, "speak -m '%s' -o '%s'", gg, wav);
    run(&r, args);
    expect_exit(&r, 2);
    snprintf(args, sizeof args, "speak -m '%s' --phonemes 'hˈaɪ' --speed 9 -o '%s'", gg, wav);
    run(&r, args);
    expect_exit(&r, 2);
    snprintf(args, sizeof args, "speak -m '%s' --phonemes 'hˈaɪ' --wav-format mp3 -o '%s'", gg, wav);
    run(&r, args);
    expect_exit(&r, 2);
    remove(gg), remove(wav), remove(words), remove(sox_txt);
}

/* ---- limits ---- */

static void test_zero_tokens(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "run %s --backend cpu -n 0 -p 'Once upon a time'", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "Once upon a time\n");
    assert_non_null(strstr(r.err, "generated 0 tokens"));
    assert_non_null(strstr(r.err, "stop: token limit"));
}

static void test_empty_prompt(void **state) {
    (void)state;
    result r;
    char args[4400];
    /* from BOS: the model's usual opening */
    snprintf(args, sizeof args, "run %s --backend cpu --temp 0 -n 8 -p ''", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "Once upon a time, there was a\n");
    assert_non_null(strstr(r.err, "prompt 1 tokens"));
    /* an empty file is the same */
    const char *p = tu_tmp_path("empty.txt");
    assert_int_equal(tu_write_file(p, "", 0), 0);
    snprintf(args, sizeof args, "run %s --backend cpu --temp 0 -n 8 -f '%s'", model(), p);
    run(&r, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "Once upon a time, there was a\n");
    /* without BOS there is nothing to continue from */
    snprintf(args, sizeof args, "run %s --backend cpu --no-bos -n 8 -p ''", model());
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "empty prompt"));
}

/* Invalid UTF-8 is accepted: echoed byte for byte, tokenized through byte
 * fallback. A NUL byte would cut the prompt short, so it is refused. */
static void test_invalid_utf8(void **state) {
    (void)state;
    static const char bad[] = "Once \xff\xfe upon \xc3 a \xe2\x82 time \x80";
    const char *p = tu_tmp_path("bad-utf8.txt");
    assert_int_equal(tu_write_file(p, bad, sizeof bad - 1), 0);
    result r;
    char args[4400];
    snprintf(args, sizeof args, "run %s --backend cpu --temp 0 -n 4 -f '%s'", model(), p);
    run(&r, args);
    expect_exit(&r, 0);
    assert_memory_equal(r.out, bad, sizeof bad - 1);
    assert_true(strlen(r.out) > sizeof bad);
    assert_non_null(strstr(r.err, "stop: token limit"));
    static const char nul[] = "Once upon\0 a time";
    assert_int_equal(tu_write_file(p, nul, sizeof nul - 1), 0);
    run(&r, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "NUL byte at offset 9"));
    assert_string_equal(r.out, "");
}

static void test_flag_ranges(void **state) {
    (void)state;
    static const char *bad[][2] = {
        {"--temp -1", "--temp"},
        {"--temp nan", "--temp"},
        {"--top-p 0", "--top-p"},
        {"--top-p 1.5", "--top-p"},
        {"--top-k -1", "--top-k"},
        {"--min-p 2", "--min-p"},
        {"--min-p -0.5", "--min-p"},
        {"--repeat-penalty 0", "--repeat-penalty"},
        {"--kv-type q8_0", "--kv-type"},
        {"--ctx 0", "--ctx"},
        {"-c -5", "-c"},
        {"-n -2", "-n"},
        {"--repeat-last-n -1", "--repeat-last-n"},
        {"--seed -3", "--seed"},
        {"-t 0", "-t"},
    };
    result r;
    char args[4400];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "run %s --backend cpu -n 2 %s", model(), bad[i][0]);
        run(&r, args);
        if (r.code != 2 || !strstr(r.err, bad[i][1])) fail_msg("'%s': exit %d, stderr: %s", bad[i][0], r.code, r.err);
        assert_string_equal(r.out, "");
    }
    /* the edges of every range are fine */
    snprintf(args, sizeof args,
             "run %s --backend cpu -n 2 -c 8 --temp 0 --top-p 1 --top-k 0 --min-p 0 --repeat-penalty 1 "
             "--repeat-last-n 0 --seed 0 -p Once",
             model());
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(args, sizeof args,
             "run %s --backend cpu -n 2 --temp 100 --top-p 1e-9 --min-p 1 --repeat-penalty 100 -p Once", model());
    run(&r, args);
    expect_exit(&r, 0);
}

static void test_context_end(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "run %s --backend cpu --temp 0 -c 16 -n -1 -p 'Once upon a time'", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.err, "stop: context full"));
    assert_non_null(strstr(r.err, "prompt 5 tokens"));
    assert_non_null(strstr(r.err, "generated 12 tokens"));
    assert_int_equal(strncmp(r.out, "Once upon a time, there was a little girl", 41), 0);
    /* -n larger than the room left ends the same way */
    snprintf(args, sizeof args, "run %s --backend cpu --temp 0 -c 16 -n 100 -p 'Once upon a time'", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.err, "stop: context full"));
}

/* ---- no GPU ---- */

/* Whether an adapter whose name contains `name` is there; NULL: any hardware adapter. */
static int have_adapter(const char *name) {
    wgml_gpu_adapter_info a[16];
    int n = wgml_gpu_list_adapters(a, 16, NULL);
    for (int i = 0; i < n && i < 16; i++)
        if (name ? strstr(a[i].name, name) != NULL : a[i].type != WGML_GPU_CPU) return 1;
    return 0;
}

/* Skips the test without lavapipe, or fails it where CI requires the adapter. */
static void need_lavapipe(void) {
    if (have_adapter("llvmpipe")) return;
    if (getenv("WGML_REQUIRE_ADAPTERS") && strstr(getenv("WGML_REQUIRE_ADAPTERS"), "llvmpipe"))
        fail_msg("llvmpipe is required but not found");
    skip();
}

static void test_no_driver(void **state) {
    (void)state;
    const char *none = "VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json";
    result r;
    char args[4400];
    snprintf(args, sizeof args, "run %s --temp 0 -n 8 -p 'Once upon a time'", model());
    run_env(&r, none, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.err, "webgpu unavailable"));
    assert_non_null(strstr(r.err, "using the CPU"));
    assert_non_null(strstr(r.err, "on cpu"));
    assert_int_equal(strncmp(r.out, "Once upon a time, there was a little girl", 41), 0);
    snprintf(args, sizeof args, "run %s --backend webgpu -n 8 -p Once", model());
    run_env(&r, none, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "no WebGPU adapter"));
    /* with the drivers back, auto still takes no software adapter */
    if (have_adapter(NULL)) return;
    snprintf(args, sizeof args, "run %s -n 2 -p Once", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.err, "on cpu"));
}

/* wgml bench on lavapipe reports the pipeline cache at the first token: cold
 * in an empty directory, warm the second time, off when WGML_CACHE_DIR=off. */
static void test_bench_pipeline_cache(void **state) {
    (void)state;
#ifndef WGML_DAWN_BLOB_CACHE
    skip(); /* this Dawn's header has no blob cache (cmake/webgpu.cmake) */
#endif
    need_lavapipe();
    result r;
    char args[4400], env[700];
    snprintf(env, sizeof env, "WGML_CACHE_DIR='%s'", tu_tmp_path("bench-pipelines"));
    snprintf(args, sizeof args, "bench %s --backend webgpu --adapter llvmpipe -p 4 -n 2 --no-limits --json", model());
    const char *want[] = {"\"state\":\"cold\"", "\"state\":\"warm\""};
    for (int i = 0; i < 2; i++) {
        run_env(&r, env, args);
        expect_exit(&r, 0);
        if (!strstr(r.out, want[i])) fail_msg("no %s in:\n%s", want[i], r.out);
        assert_true(json_number_at(r.out, "load_to_first_token_ms") >= json_number_at(r.out, "load_ms"));
        assert_true(json_number_at(strstr(r.out, "\"pipeline_cache\""), i ? "hits" : "stores") > 0);
    }
    snprintf(args, sizeof args, "bench %s --backend webgpu --adapter llvmpipe -p 4 -n 2 --no-limits", model());
    run_env(&r, env, args);
    expect_exit(&r, 0);
    const char *line = strstr(r.out, "pipelines    cache warm at the first token: ");
    if (!line) fail_msg("no pipeline cache line in:\n%s", r.out);
    run_env(&r, "WGML_CACHE_DIR=off", args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "pipelines    cache off at the first token: 0 hits, 0 misses, 0 stored\n"));
}

/* A model too large for the device: exit 1 naming the tensor. */
static void test_gpu_out_of_memory(void **state) {
    (void)state;
    need_lavapipe();
    result r;
    char args[4400];
    snprintf(args, sizeof args, "run %s --adapter llvmpipe -n 4 -p Once", model());
    run_env(&r, "WGML_GPU_MEMORY_LIMIT=2800000", args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "loading tensor 'blk."));
    assert_non_null(strstr(r.err, "out of memory"));
    assert_string_equal(r.out, "");
}

/* lavapipe with 512-bit SIMD runs subgroups of 16 lanes, wider than the
 * lane-rows matvec's input tile of 8 vec4s: the matmul ops must still match
 * the CPU reference (the fused RMS norm counts each input once). One weight
 * type only (`--type`, spelled in lower case here): at 16 lanes llvmpipe
 * compiles slowly, 36 s for these cases with an empty shader cache. */
static void test_verify_wide_simd(void **state) {
    (void)state;
    need_lavapipe();
    result r;
    run_env(&r, "LP_NATIVE_VECTOR_WIDTH=512", "verify --adapter llvmpipe --quick --op matmul --type q4_0 --verbose");
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "512 bits"));
    assert_non_null(strstr(r.out, "Q4_0 K="));
    assert_null(strstr(r.out, "Q8_0"));
    assert_non_null(strstr(r.out, " 0 failed"));
}

/* ---- verify against the exact reference ---- */

/* A 1-layer TinyLlama-shaped Q4_K_M file (Q4_K and Q6_K weights, a 32000-token
 * head), written once per process. */
static const char *q4km_model(void) {
    static char path[4200];
    if (path[0]) return path;
    const char *p = tu_tmp_path("tinyllama-q4km-1layer.gguf");
    char args[8800];
    snprintf(args, sizeof args, "synth --arch tinyllama-1.1b --type Q4_K_M --layers 1 --vocab '%s' -o '%s'",
             tu_shared("models/stories260K.gguf"), p);
    result r;
    run(&r, args);
    expect_exit(&r, 0);
    snprintf(path, sizeof path, "%s", p);
    return path;
}

/* The line of r.out that starts with `prefix`, or NULL. */
static const char *line_of(const result *r, const char *prefix) {
    for (const char *p = r->out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) return p;
    return NULL;
}

/* The e2e row ends in `verdict` (the table's rows end at a newline). */
static void expect_e2e(const result *r, const char *verdict) {
    const char *e = line_of(r, "e2e ");
    if (!e) fail_msg("no e2e row in:\n%s", r->out);
    const char *end = strchr(e, '\n');
    size_t n = end ? (size_t)(end - e) : strlen(e), v = strlen(verdict);
    if (n < v || strncmp(e + n - v, verdict, v)) fail_msg("e2e is not %s:\n%s", verdict, r->out);
}

/* A correct device passes on a real quantized model: lavapipe against the exact
 * CPU reference (the fast CPU backend's 8-bit activations made this fail when it
 * was the reference). A device with a bug passes no longer: one block of 256
 * weights of attn_q with its scale 25% off, on the device only. */
static void test_verify_quantized(void **state) {
    (void)state;
    need_lavapipe();
    const char *m = q4km_model();
    result r;
    char args[4400];
    snprintf(args, sizeof args, "verify --adapter llvmpipe -m '%s' --no-ops -n 16", m);
    run(&r, args);
    expect_exit(&r, 0);
    expect_e2e(&r, "PASS");
    assert_non_null(strstr(r.out, "top-1 12/12"));
    assert_non_null(strstr(r.out, "tolerance"));
    assert_null(line_of(&r, "matmul")); /* --no-ops */
    run_env(&r, "WGML_VERIFY_FAULT=blk.0.attn_q.weight:1.25", args);
    expect_exit(&r, 1);
    expect_e2e(&r, "FAIL");
    assert_non_null(strstr(r.out, "planted fault: blk.0.attn_q.weight, block 0 scaled by 1.25"));
    assert_non_null(strstr(r.out, "verify: 0 passed, 1 failed"));
}

/* A transcriber: the micro Whisper's encoder output and teacher-forced decoder
 * logits on lavapipe against the exact CPU reference; a weight of the encoder's
 * first block 5% off in one block on the device fails both (the decoder reads the
 * encoder's output). */
static void test_verify_whisper(void **state) {
    (void)state;
    if (!tu_shared_present()) skip();
    need_lavapipe();
    result r;
    char args[4400];
    snprintf(args, sizeof args, "verify --adapter llvmpipe -m '%s' --no-ops -n 8",
             tu_shared("whisper/whisper-micro-random.bin"));
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "a 30 s window encoded"));
    assert_non_null(strstr(r.out, "8 decoder steps over the window"));
    assert_non_null(strstr(r.out, "top-1 8/8"));
    assert_non_null(strstr(r.out, "verify: 2 passed, 0 failed"));
    run_env(&r, "WGML_VERIFY_FAULT=encoder.blocks.0.attn.query.weight:1.05", args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.out, "verify: 0 passed, 2 failed"));
}

/* The fast CPU backend as the device, against the exact one: the op grid and the
 * model pass with tolerances for its 8-bit activations, and a bug large enough to
 * stand out from them fails (one block of the head's weights at twice its scale). */
/* `wgml chat` from a pipe: one message per line, one reply line each; the second turn
 * reuses the first's KV cache (only its new tokens are evaluated); /save writes the
 * conversation as OpenAI-style JSON, which /load reads back. */
static void run_stdin(result *r, const char *input, const char *args) {
    const char *in = tu_tmp_path("chat.in"); /* tu_tmp_path rotates 8 buffers: run_in's two leave it */
    assert_int_equal(tu_write_file(in, input, strlen(input)), 0);
    run_in(r, "", args, in);
}

static void test_chat_pipe(void **state) {
    (void)state;
    result r;
    char args[4400], input[4400];
    const char *saved = tu_tmp_path("chat.json");
    snprintf(input, sizeof input, "Hello there\nTell me a story\n/save %s\n", saved);
    snprintf(args, sizeof args, "chat %s --backend cpu --temp 0 -n 8 --stats", model());
    run_stdin(&r, input, args);
    expect_exit(&r, 0);
    /* two replies, one line each */
    int lines = 0;
    for (const char *p = r.out; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 2);
    int n1, k1, e1, g1, n2, k2, e2, g2;
    const char *t1 = strstr(r.err, "wgml chat: prompt "), *t2 = t1 ? strstr(t1 + 1, "wgml chat: prompt ") : NULL;
    assert_non_null(t2);
    assert_int_equal(sscanf(t1, "wgml chat: prompt %d tokens, %d reused, %d evaluated (%*[^;]; %d generated", &n1, &k1, &e1,
                            &g1), 4);
    assert_int_equal(sscanf(t2, "wgml chat: prompt %d tokens, %d reused, %d evaluated (%*[^;]; %d generated", &n2, &k2, &e2,
                            &g2), 4);
    assert_int_equal(k1, 0);
    assert_int_equal(e1, n1);
    assert_true(g1 > 0 && g1 <= 8);
    assert_true(k2 >= n1); /* the whole first prompt came from the cache */
    assert_int_equal(e2, n2 - k2); /* the reply as the template writes it, and the new message */
    /* the saved conversation: user, assistant, user, assistant */
    size_t len;
    char *json = (char *)tu_read_file(saved, &len);
    assert_non_null(json);
    int users = 0, assistants = 0;
    for (const char *p = json; (p = strstr(p, "\"role\"")); p++) {
        users += !strncmp(strchr(p + 6, '"'), "\"user\"", 6);
        assistants += !strncmp(strchr(p + 6, '"'), "\"assistant\"", 11);
    }
    free(json);
    assert_int_equal(users, 2);
    assert_int_equal(assistants, 2);
    /* /load brings it back: the next turn's prompt holds all of it */
    snprintf(input, sizeof input, "/load %s\nAnd then?\n", saved);
    run_stdin(&r, input, args);
    expect_exit(&r, 0);
    int n3, k3, e3;
    const char *t3 = strstr(r.err, "wgml chat: prompt ");
    assert_non_null(t3);
    assert_int_equal(sscanf(t3, "wgml chat: prompt %d tokens, %d reused, %d evaluated", &n3, &k3, &e3), 3);
    assert_true(n3 > n2);
    /* a file that is not a conversation is refused with a message, and the chat goes on */
    snprintf(input, sizeof input, "/load %s\nHi\n", tu_shared("models/stories260K.gguf"));
    run_stdin(&r, input, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.err, "is not a conversation"));
    assert_non_null(strstr(r.err, "wgml chat: prompt "));
}

/* bench --parallel: one run gives the single-stream and the N-stream rates and their ratio. */
static void test_bench_parallel(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "bench %s --backend cpu --parallel 3 -n 8 --ctx 4 --repeat 1 --json", model());
    run(&r, args);
    expect_exit(&r, 0);
    assert_int_equal(r.out[0], '{');
    const char *keys[] = {"single_tps", "batch1_tps", "aggregate_tps", "per_stream_tps", "ratio"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) assert_true(json_number_at(r.out, keys[i]) > 0);
    assert_int_equal((int)json_number_at(r.out, "parallel"), 3);
    snprintf(args, sizeof args, "bench %s --parallel 0", model());
    run(&r, args);
    expect_exit(&r, 2);
}

static void test_verify_cpu(void **state) {
    (void)state;
    const char *m = q4km_model();
    result r;
    char args[4400];
    snprintf(args, sizeof args, "verify --backend cpu -m '%s' --quick -n 16", m);
    run(&r, args);
    expect_exit(&r, 0);
    assert_non_null(strstr(r.out, "8-bit activations"));
    assert_non_null(strstr(r.out, " 0 failed"));
    expect_e2e(&r, "PASS");
    snprintf(args, sizeof args, "verify --backend cpu -m '%s' --no-ops -n 16", m);
    run_env(&r, "WGML_VERIFY_FAULT=output.weight:2", args);
    expect_exit(&r, 1);
    expect_e2e(&r, "FAIL");
    run(&r, "verify --backend cpu --adapter llvmpipe");
    expect_exit(&r, 2);
    run(&r, "verify --no-ops --no-e2e");
    expect_exit(&r, 2);
    run_env(&r, "WGML_VERIFY_FAULT=blk.0.attn_q.weight:x", "verify --backend cpu --no-ops");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "WGML_VERIFY_FAULT"));
}

/* wgml template: a conversation on stdin through a chat template, the prompt on stdout as is. */
static void test_template(void **state) {
    (void)state;
    result r;
    char args[8800];
    const char *conv = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    /* a shared real template (Qwen2.5's adds its default system prompt) */
    snprintf(args, sizeof args, "template --template '%s'", tu_shared("chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    run_stdin(&r, conv, args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                               "assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    assert_string_equal(r.err, "");
    /* the options, and other keys of the input as variables */
    char t[4200];
    snprintf(t, sizeof t, "%s", tu_tmp_path("t.jinja")); /* tu_tmp_path's buffer is reused */
    const char *tt = "{{ bos_token }}{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}"
                     "{{ tools | length }}{{ eos_token }}{{ add_generation_prompt }}{{ strftime_now('%Y-%m-%d') }}\n";
    assert_int_equal(tu_write_file(t, tt, strlen(tt)), 0);
    snprintf(args, sizeof args,
             "template --template '%s' --bos '<s>' --eos '</s>' --no-generation-prompt --now '2026-11-24 09:30:00'", t);
    run_stdin(&r, "{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xc3\xa9\"}], \"tools\": [1, 2]}", args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "<s>user=caf\xc3\xa9;2</s>False2026-11-24"); /* nothing added, the final newline gone as in Jinja */
    /* raise_exception: exit 1 with the template's message */
    tt = "{% if messages[0].role != 'system' %}{{ raise_exception('The first message must be a system message') }}"
         "{% endif %}ok";
    assert_int_equal(tu_write_file(t, tt, strlen(tt)), 0);
    snprintf(args, sizeof args, "template --template '%s'", t);
    run_stdin(&r, conv, args);
    expect_exit(&r, 1);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "The first message must be a system message"));
    /* a model without a template: the built-in fallback, named in a note; BOS from the vocabulary */
    snprintf(args, sizeof args, "template %s", model());
    run_stdin(&r, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", args);
    expect_exit(&r, 0);
    assert_string_equal(r.out, "<s>[INST] Hi [/INST]");
    assert_non_null(strstr(r.err, "no chat template"));
    assert_non_null(strstr(r.err, "llama2"));
    /* errors that name the problem */
    tt = "{% for m in messages %}\n{{ m.role | nosuch }}{% endfor %}";
    assert_int_equal(tu_write_file(t, tt, strlen(tt)), 0);
    snprintf(args, sizeof args, "template --template '%s'", t);
    run_stdin(&r, conv, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "line 2"));
    assert_non_null(strstr(r.err, "nosuch"));
    run_stdin(&r, "{\"messages\": [", args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "invalid JSON"));
    run_stdin(&r, "{\"msgs\": []}", args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "messages"));
    snprintf(args, sizeof args, "template --template '%s' --now yesterday", t);
    run_stdin(&r, conv, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "YYYY-MM-DD HH:MM:SS"));
    snprintf(args, sizeof args, "template --template /no/such.jinja");
    run_stdin(&r, conv, args);
    expect_exit(&r, 1);
    assert_non_null(strstr(r.err, "/no/such.jinja"));
    snprintf(args, sizeof args, "template --template '%s' %s", t, model());
    run_stdin(&r, conv, args);
    expect_exit(&r, 2);
    run_stdin(&r, conv, "template --bogus");
    expect_exit(&r, 2);
    assert_non_null(strstr(r.err, "--bogus"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_reference), cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_bad_model),     cmocka_unit_test(test_prompt_too_long),
        cmocka_unit_test(test_usage_errors),  cmocka_unit_test(test_info),
        cmocka_unit_test(test_tokenize),      cmocka_unit_test(test_embed_rerank),
        cmocka_unit_test(test_bench_json),    cmocka_unit_test(test_bench_images),
        cmocka_unit_test(test_bench_repeat),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_speak),       cmocka_unit_test(test_transcribe),
        cmocka_unit_test(test_zero_tokens),
        cmocka_unit_test(test_empty_prompt),  cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_flag_ranges),   cmocka_unit_test(test_context_end),
        cmocka_unit_test(test_no_driver),     cmocka_unit_test(test_gpu_out_of_memory),
        cmocka_unit_test(test_bench_pipeline_cache),
        cmocka_unit_test(test_verify_wide_simd), cmocka_unit_test(test_verify_quantized),
        cmocka_unit_test(test_verify_cpu),       cmocka_unit_test(test_verify_whisper),
        cmocka_unit_test(test_chat_pipe),
        cmocka_unit_test(test_bench_parallel),
        cmocka_unit_test(test_template),
    };
    const char *only = getenv("WGML_TEST_FILTER"); /* e.g. "test_transcribe" */
    if (only && *only) cmocka_set_test_filter(only);
    /* the parts CTest runs in parallel (tests/CMakeLists.txt): WGML_TEST_ONLY or WGML_TEST_SKIP,
     * comma-separated test names */
    const char *keep = getenv("WGML_TEST_ONLY"), *skip = getenv("WGML_TEST_SKIP");
    struct CMUnitTest part[sizeof tests / sizeof tests[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int listed = 0;
        const char *list = keep && *keep ? keep : skip && *skip ? skip : NULL;
        for (const char *p = list; p && *p;) {
            size_t len = strcspn(p, ",");
            if (len == strlen(tests[i].name) && !strncmp(p, tests[i].name, len)) listed = 1;
            p += len + (p[len] == ',');
        }
        if (!list || (keep && *keep ? listed : !listed)) part[n++] = tests[i];
    }
    return _cmocka_run_group_tests("test_cli", part, n, NULL, NULL);
}
