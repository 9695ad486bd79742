// lbench.cpp - a small llama.cpp CPU benchmark over llama.h, for comparing wgml with llama.cpp on
// the same files (bench/vs-llamacpp.sh) where llama-bench itself cannot be built: llama-bench's
// method (one llama_decode of PP tokens, then TG single-token decodes; --tg-clear starts them on
// an empty cache as llama-bench's separate tg test does). Built against a llama.cpp source tree
// by bench/llamacpp/build.sh; nothing of llama.cpp is kept in this repository.
//
//   lbench MODEL.gguf -p PP -n TG -t THREADS -r REPS [-fa 0|1] [--tg-clear] [-v]
//
// One JSON line per repetition, then one with the medians (pp_tok_s, tg_tok_s).
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

static double now_s() {
    using clk = std::chrono::steady_clock;
    return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool g_verbose = false;
static void log_cb(enum ggml_log_level level, const char * text, void *) {
    if (g_verbose || level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

// fill batch with n tokens at positions [pos0, pos0+n), logits only for the last one
static void fill_batch(llama_batch & b, const llama_token * toks, int n, int pos0) {
    b.n_tokens = n;
    for (int i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = (i == n - 1);
    }
}

static void usage(const char * a0) {
    fprintf(stderr, "usage: %s MODEL.gguf -p PP -n TG -t THREADS -r REPS [-fa 0|1] [--tg-clear] [-v]\n"
                    "  --tg-clear : clear KV before the tg phase (exactly like llama-bench's separate tg test)\n", a0);
    exit(1);
}

int main(int argc, char ** argv) {
    if (argc < 2) usage(argv[0]);
    std::string model_path;
    int pp = 512, tg = 128, nt = 2, reps = 5, fa = 0;
    bool tg_clear = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() { if (i + 1 >= argc) usage(argv[0]); return atoi(argv[++i]); };
        if (a == "-p") pp = next();
        else if (a == "-n") tg = next();
        else if (a == "-t") nt = next();
        else if (a == "-r") reps = next();
        else if (a == "-fa") fa = next();
        else if (a == "--tg-clear") tg_clear = true;
        else if (a == "-v") g_verbose = true;
        else if (a[0] == '-') usage(argv[0]);
        else model_path = a;
    }
    if (model_path.empty() || pp < 0 || tg < 0 || nt < 1 || reps < 1) usage(argv[0]);

    llama_log_set(log_cb, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) { fprintf(stderr, "error: failed to load model %s\n", model_path.c_str()); return 1; }

    llama_context_params cp = llama_context_default_params();
    const int nb = std::max(pp, 512);
    cp.n_ctx = pp + tg + 16;
    cp.n_batch = nb;
    cp.n_ubatch = nb;
    cp.n_threads = nt;
    cp.n_threads_batch = nt;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "error: failed to create context\n"); return 1; }

    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int lo = n_vocab > 20 ? 10 : 0;

    char desc[256];
    llama_model_desc(model, desc, sizeof(desc));
    fprintf(stderr, "model: %s | %s | n_vocab %d | params %.3fM | size %.2f MiB | threads %d | n_ctx %u | n_batch %d | fa %d | sys: %s\n",
            model_path.c_str(), desc, n_vocab, llama_model_n_params(model) / 1e6, llama_model_size(model) / 1048576.0,
            nt, llama_n_ctx(ctx), (int) llama_n_batch(ctx), fa, llama_print_system_info());

    std::mt19937 rng(1234);
    std::uniform_int_distribution<int> dist(lo, n_vocab - 1);
    std::vector<llama_token> toks(std::max(pp, 1));
    llama_batch batch = llama_batch_init(nb, 0, 1);
    llama_memory_t mem = llama_get_memory(ctx);

    auto decode = [&](const llama_token * t, int n, int pos0) {
        fill_batch(batch, t, n, pos0);
        int rc = llama_decode(ctx, batch);
        if (rc != 0) { fprintf(stderr, "error: llama_decode rc=%d\n", rc); exit(1); }
    };

    // warm-up: pp-token prompt + 2 decode steps
    for (auto & t : toks) t = dist(rng);
    if (pp > 0) decode(toks.data(), pp, 0);
    llama_synchronize(ctx);
    for (int i = 0; i < 2; i++) { llama_token t = dist(rng); decode(&t, 1, pp + i); }
    llama_synchronize(ctx);

    std::vector<double> pps, tgs;
    for (int r = 0; r < reps; r++) {
        llama_memory_clear(mem, true);
        for (auto & t : toks) t = dist(rng);
        double pp_ts = 0.0, tg_ts = 0.0, pp_s = 0.0, tg_s = 0.0;
        if (pp > 0) {
            double t0 = now_s();
            decode(toks.data(), pp, 0);
            llama_synchronize(ctx);
            pp_s = now_s() - t0;
            pp_ts = pp / pp_s;
            pps.push_back(pp_ts);
        }
        int pos = pp;
        if (tg_clear) { llama_memory_clear(mem, true); pos = 0; }
        if (tg > 0) {
            std::vector<llama_token> gt(tg);
            for (auto & t : gt) t = dist(rng);
            double t0 = now_s();
            for (int i = 0; i < tg; i++) {
                decode(&gt[i], 1, pos + i);
                llama_synchronize(ctx);
            }
            tg_s = now_s() - t0;
            tg_ts = tg / tg_s;
            tgs.push_back(tg_ts);
        }
        printf("{\"rep\": %d, \"pp\": %d, \"tg\": %d, \"threads\": %d, \"pp_s\": %.6f, \"tg_s\": %.6f, \"pp_tok_s\": %.3f, \"tg_tok_s\": %.3f}\n",
               r, pp, tg, nt, pp_s, tg_s, pp_ts, tg_ts);
        fflush(stdout);
    }
    printf("{\"model\": \"%s\", \"pp\": %d, \"tg\": %d, \"threads\": %d, \"reps\": %d, \"pp_tok_s\": %.3f, \"tg_tok_s\": %.3f}\n",
           model_path.c_str(), pp, tg, nt, reps, median(pps), median(tgs));

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
