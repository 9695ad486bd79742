// bench/whispercpp/wbench.cpp - whisper.cpp timed the way `wgml bench -m WHISPER` times wgml
// (tools/wgml/cmd_bench_transcribe.c), for bench/whispercpp.sh. Built against a whisper.cpp
// tree outside this repository (bench/whispercpp.sh build); prints one JSON object.
//
//   wbench -m MODEL.bin [-t 2] [--repeat R] [--steps N] [--wav CLIP.wav --beam B --max-tokens K] [-nfa]
//
// encoder: whisper_encode of one 30 s window (whisper_set_mel of zeros, as whisper-bench; the
//          cross-attention keys and values included, as in wgml), one warm-up, then R runs:
//          the median and the minimum.
// decoder: after the encode, N single-token whisper_decode steps at positions 0 .. N-1 (SOT,
//          then the argmax of the logits, read on the host as wgml's greedy loop does), R runs:
//          tokens/s of each run (the median), and the median step over all runs (p50).
// transcribe (--wav): whisper_full on the 16-bit mono 16 kHz WAV with wgml bench's fixed work:
//          language en, no temperature fallback (temperature_inc 0), no timestamps (unless
//          --timestamps), no previous
//          text (n_max_text_ctx 0), max_tokens K per segment (0: whisper.cpp's own bound, 220),
//          greedy (B <= 1) or beam search of B; one warm-up on the first 5 s, then R runs: the
//          median wall time and encoder time (whisper_get_timings), the windows encoded
//          (encoder_begin_callback), the tokens kept and the decoder steps (logits_filter_callback:
//          one per hypothesis per step).
// Flash attention is on by default, as in whisper-cli and whisper-bench; -nfa turns it off.
#include "whisper.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// the samples of a 16-bit PCM mono WAV, as whisper.cpp's read_audio_data scales them (x / 32768)
static bool read_wav(const char *path, std::vector<float> &pcm) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    std::vector<unsigned char> b;
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) b.insert(b.end(), buf, buf + n);
    fclose(f);
    if (b.size() < 12 || memcmp(b.data(), "RIFF", 4) || memcmp(b.data() + 8, "WAVE", 4)) return false;
    size_t p = 12;
    int fmt = 0, ch = 0, bits = 0;
    while (p + 8 <= b.size()) {
        uint32_t len;
        memcpy(&len, b.data() + p + 4, 4);
        if (!memcmp(b.data() + p, "fmt ", 4) && len >= 16) {
            fmt = b[p + 8] | b[p + 9] << 8;
            ch = b[p + 10] | b[p + 11] << 8;
            bits = b[p + 22] | b[p + 23] << 8;
        } else if (!memcmp(b.data() + p, "data", 4)) {
            if (fmt != 1 || ch != 1 || bits != 16) return false;
            size_t m = std::min<size_t>(len, b.size() - p - 8) / 2;
            pcm.resize(m);
            for (size_t i = 0; i < m; i++) {
                int16_t s;
                memcpy(&s, b.data() + p + 8 + 2 * i, 2);
                pcm[i] = s / 32768.0f;
            }
            return true;
        }
        p += 8 + len + (len & 1);
    }
    return false;
}

struct counts {
    int windows = 0, steps = 0;
};

static bool on_encoder(struct whisper_context *, struct whisper_state *, void *user) {
    ((counts *)user)->windows++;
    return true;
}

// once per decoder per step: the logits it picks from
static void on_logits(struct whisper_context *, struct whisper_state *, const whisper_token_data *, int, float *,
                      void *user) {
    ((counts *)user)->steps++;
}

static void quiet(enum ggml_log_level, const char *, void *) {}

int main(int argc, char **argv) {
    const char *model = nullptr, *wav = nullptr;
    int threads = 2, repeat = 3, steps = 64, beam = 0, max_tokens = 0;
    bool fa = true, timestamps = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) {
                fprintf(stderr, "wbench: %s needs a value\n", a.c_str());
                exit(2);
            }
            return argv[++i];
        };
        if (a == "-m") model = next();
        else if (a == "-t") threads = atoi(next());
        else if (a == "--repeat") repeat = atoi(next());
        else if (a == "--steps") steps = atoi(next());
        else if (a == "--wav") wav = next();
        else if (a == "--beam") beam = atoi(next());
        else if (a == "--max-tokens") max_tokens = atoi(next());
        else if (a == "-nfa") fa = false;
        else if (a == "--timestamps") timestamps = true;
        else {
            fprintf(stderr, "usage: wbench -m MODEL.bin [-t N] [--repeat R] [--steps N] [--wav F --beam B --max-tokens K [--timestamps]] [-nfa]\n");
            return 2;
        }
    }
    if (!model || repeat < 1 || steps < 1 || steps > 448) {
        fprintf(stderr, "wbench: give -m MODEL.bin (and 1 <= --steps <= 448)\n");
        return 2;
    }
    whisper_log_set(quiet, nullptr);
    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = false;
    cp.flash_attn = fa;
    double t0 = now_ms();
    whisper_context *ctx = whisper_init_from_file_with_params(model, cp);
    if (!ctx) {
        fprintf(stderr, "wbench: cannot load %s\n", model);
        return 1;
    }
    const double load_ms = now_ms() - t0;
    std::vector<double> enc, tps, step; // step: every timed decoder step's ms
    std::string tr_json;
    if (!wav) {
        if (whisper_set_mel(ctx, nullptr, 0, whisper_model_n_mels(ctx))) return 3;
        const int V = whisper_n_vocab(ctx);
        auto decode_run = [&](int n, double *ms) -> bool {
            whisper_token tok = whisper_token_sot(ctx);
            double t = now_ms();
            for (int i = 0; i < n; i++) {
                const double ts = now_ms();
                if (whisper_decode(ctx, &tok, 1, i, threads)) return false;
                const float *lg = whisper_get_logits(ctx);
                tok = (whisper_token)(std::max_element(lg, lg + V) - lg);
                if (ms) step.push_back(now_ms() - ts);
            }
            if (ms) *ms = now_ms() - t;
            return true;
        };
        if (whisper_encode(ctx, 0, threads) || !decode_run(std::min(steps, 8), nullptr)) return 4;
        for (int r = 0; r < repeat; r++) {
            double t = now_ms(), dms;
            if (whisper_encode(ctx, 0, threads)) return 4;
            enc.push_back(now_ms() - t);
            if (!decode_run(steps, &dms)) return 4;
            tps.push_back(steps / (dms / 1e3));
        }
    } else {
        std::vector<float> pcm;
        if (!read_wav(wav, pcm)) {
            fprintf(stderr, "wbench: %s is not a 16-bit mono WAV\n", wav);
            return 1;
        }
        whisper_full_params p =
            whisper_full_default_params(beam > 1 ? WHISPER_SAMPLING_BEAM_SEARCH : WHISPER_SAMPLING_GREEDY);
        p.n_threads = threads;
        p.language = "en";
        p.translate = false;
        p.no_timestamps = !timestamps;
        p.n_max_text_ctx = 0;
        p.temperature_inc = 0.0f;
        p.max_tokens = max_tokens;
        p.print_progress = p.print_realtime = p.print_timestamps = p.print_special = false;
        if (beam > 1) p.beam_search.beam_size = beam;
        counts c;
        p.encoder_begin_callback = on_encoder;
        p.encoder_begin_callback_user_data = &c;
        p.logits_filter_callback = on_logits;
        p.logits_filter_callback_user_data = &c;
        const int warm = (int)std::min<size_t>(pcm.size(), 5 * 16000);
        if (whisper_full(ctx, p, pcm.data(), warm)) return 5;
        std::vector<double> ms, enc_ms;
        int windows = 0, tokens = 0, steps_ = 0;
        for (int r = 0; r < repeat; r++) {
            c.windows = c.steps = 0;
            whisper_reset_timings(ctx);
            double t = now_ms();
            if (whisper_full(ctx, p, pcm.data(), (int)pcm.size())) return 5;
            ms.push_back(now_ms() - t);
            windows = c.windows;
            steps_ = c.steps;
            enc_ms.push_back(whisper_get_timings(ctx)->encode_ms * windows); // per-run mean x runs
            tokens = 0;
            for (int s = 0; s < whisper_full_n_segments(ctx); s++)
                for (int k = 0; k < whisper_full_n_tokens(ctx, s); k++)
                    tokens += whisper_full_get_token_id(ctx, s, k) < whisper_token_eot(ctx);
        }
        const double seconds = pcm.size() / 16000.0, med = median(ms);
        char b[512];
        snprintf(b, sizeof b,
                 ", \"clip_seconds\": %.3f, \"beam_size\": %d, \"max_tokens\": %d, \"timestamps\": %s, "
                 "\"transcribe_ms\": %.3f, \"rtf\": %.5f, \"encode_ms\": %.3f, \"windows\": %d, \"tokens\": %d, "
                 "\"decoder_steps\": %d",
                 seconds, beam > 1 ? beam : 0, max_tokens, timestamps ? "true" : "false", med, med / 1e3 / seconds,
                 median(enc_ms), windows, tokens, steps_);
        tr_json = b;
    }
    printf("{\"model\": \"%s\", \"threads\": %d, \"flash_attn\": %s, \"repeat\": %d, \"load_ms\": %.3f", model, threads,
           fa ? "true" : "false", repeat, load_ms);
    if (!wav) {
        printf(", \"encode_ms\": %.3f, \"encode_ms_min\": %.3f, \"decode_steps\": %d, \"decode_tokens_per_s\": %.3f",
               median(enc), *std::min_element(enc.begin(), enc.end()), steps, median(tps));
        printf(", \"decode_ms_per_token\": %.4f, \"decode_ms_per_token_p50\": %.4f", 1e3 / median(tps), median(step));
    }
    printf("%s}\n", tr_json.c_str());
    whisper_free(ctx);
    return 0;
}
