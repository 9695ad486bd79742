#!/usr/bin/env bash
# bench/whispercpp.sh - wgml's Whisper against whisper.cpp on the same ggml .bin files, CPU only,
# in alternating runs (wgml, whisper.cpp, wgml, ...), with the ratio pair by pair.
#
#   bench/whispercpp.sh build SRC OUT          # whisper.cpp at SRC (a checkout or an archive of
#                                              # github.com/ggml-org/whisper.cpp, never vendored
#                                              # here): cmake Release, CPU only, into OUT; and
#                                              # bench/whispercpp/wbench.cpp against it -> OUT/bin/wbench
#   bench/whispercpp.sh models WGML OUT DIR    # tiny and base with random weights (wgml synth, the
#                                              # real vocabulary from ../shared/whisper), as .bin
#                                              # (bench/whisper-gguf2bin.py): F16, and Q8_0 and Q5_0
#                                              # by whisper.cpp's whisper-quantize from the F16 file
#   bench/whispercpp.sh steps WGML OUT MODEL.bin [N]
#       encoder ms per 30 s window and decoder ms per token (STEPS single-token greedy steps
#       over the window): `wgml bench --only steps --repeat R --json` against `wbench`
#   bench/whispercpp.sh transcribe WGML OUT MODEL.bin [N]
#       whole transcriptions of the CLIP_SECONDS-long synthetic clip of `wgml bench` (written
#       next to MODEL.bin as clip-CLIP_SECONDS.wav, read by whisper.cpp), greedy or with BEAM > 1: `wgml bench
#       --only greedy|beam` (in-process wgml_transcribe) against `wbench --wav` (whisper_full);
#       the work is fixed as far as the two engines allow (language en, no fallback, no
#       timestamps, no previous text, at most MAX_TOKENS tokens a window) and the windows and
#       tokens each decoded are printed: random weights decode gibberish, and the two
#       decoders' rules differ, so the time per window and per token are given too.
#
# Environment: CMAKE_ARGS (build: more cmake options), N rounds (default 5), THREADS (2), R runs inside each process (1; the process
# reports the median), STEPS (64), CLIP_SECONDS (90), BEAM (0: greedy), MAX_TOKENS (224),
# FA (1: whisper.cpp's flash attention, its default; 0: -nfa), TIMESTAMPS (0; 1: both decode
# timestamp tokens, and each window advances as they say).
# Each line prints wgml's figure, whisper.cpp's, and whisper.cpp / wgml (above 1: wgml faster);
# the summary gives each side's median and the pairwise ratio's median, min and max.
set -euo pipefail
here=$(dirname "$(realpath "$0")")
shared=$(realpath -m "$here/../../shared/whisper")
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 1 ] || usage
cmd=$1
shift
N=${N:-5} THREADS=${THREADS:-2} R=${R:-1} STEPS=${STEPS:-64} CLIP=${CLIP_SECONDS:-90}
BEAM=${BEAM:-0} MAX_TOKENS=${MAX_TOKENS:-224} FA=${FA:-1}
nfa="" ts=""
[ "$FA" = 0 ] && nfa="-nfa"
[ "${TIMESTAMPS:-0}" = 1 ] && ts="--timestamps"

summary() { # stdin: lines "name wgml_value wcpp_value" (times: lower is faster)
  python3 -c '
import statistics as st, sys
rows = {}
for l in sys.stdin:
    k, a, b = l.split()
    rows.setdefault(k, []).append((float(a), float(b)))
for k, v in rows.items():
    r = [b / a for a, b in v]
    print("%-22s wgml median %9.3f, whisper.cpp median %9.3f; whisper.cpp/wgml pairwise median %.3f (min %.3f, max %.3f), %d pairs"
          % (k, st.median(a for a, _ in v), st.median(b for _, b in v), st.median(r), min(r), max(r), len(r)))
'
}

log=$(mktemp)
trap 'cat "$log" >&2; rm -f "$log"' EXIT # each round's figures, after the summary

case $cmd in
build)
  [ $# -eq 2 ] || usage
  src=$(realpath "$1") out=$(realpath -m "$2")
  # shellcheck disable=SC2086 # CMAKE_ARGS: more options, e.g. -DGGML_LLAMAFILE=ON (tinyBLAS, off upstream)
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
    -DGGML_METAL=OFF -DWHISPER_BUILD_TESTS=OFF -DWHISPER_SDL2=OFF ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$out" -j "${JOBS:-2}" --target whisper-cli whisper-bench whisper-quantize
  g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" "$here/whispercpp/wbench.cpp" -o "$out/bin/wbench" \
    -L"$out/bin" -lwhisper -lggml -lggml-base -Wl,-rpath,"$out/bin"
  echo "built $out/bin/{whisper-cli,whisper-bench,whisper-quantize,wbench}"
  ;;
models)
  [ $# -eq 3 ] || usage
  wgml=$1 out=$2 dir=$3
  mkdir -p "$dir"
  for a in tiny base; do
    "$wgml" synth --arch "whisper-$a" --type F16 --vocab "$shared/whisper-micro-random.bin" -o "$dir/$a-f16.gguf" -t "$THREADS"
    python3 "$here/whisper-gguf2bin.py" "$dir/$a-f16.gguf" "$dir/$a-f16.bin"
    rm -f "$dir/$a-f16.gguf"
    for q in q8_0 q5_0; do
      "$out/bin/whisper-quantize" "$dir/$a-f16.bin" "$dir/$a-$q.bin" "$q" >/dev/null 2>&1
    done
  done
  ls -l "$dir"
  ;;
steps)
  [ $# -ge 3 ] || usage
  wgml=$1 out=$2 model=$3 n=${4:-$N}
  for i in $(seq "$n"); do
    w=$("$wgml" bench -m "$model" --backend cpu -t "$THREADS" --only steps --repeat "$R" --steps "$STEPS" --json)
    c=$("$out/bin/wbench" -m "$model" -t "$THREADS" --repeat "$R" --steps "$STEPS" $nfa)
    python3 -c '
import json, sys
w, c = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("encode_ms %.3f %.3f" % (w["encode_ms"], c["encode_ms"]))
print("decode_ms_per_token %.4f %.4f" % (w["decode_ms_per_token"], c["decode_ms_per_token"]))
print("decode_ms_p50 %.4f %.4f" % (w["decode_ms_per_token_p50"], c["decode_ms_per_token_p50"]))
' "$w" "$c"
  done | tee "$log" | summary
  ;;
transcribe)
  [ $# -ge 3 ] || usage
  wgml=$1 out=$2 model=$3 n=${4:-$N}
  wav=$(dirname "$model")/clip-$CLIP.wav
  [ -f "$wav" ] || "$wgml" bench -m "$model" --backend cpu -t "$THREADS" --only steps --repeat 1 --steps 1 \
    --seconds "$CLIP" --save-audio "$wav" --json >/dev/null
  if [ "$BEAM" -gt 1 ]; then only=beam; else only=greedy; fi
  for i in $(seq "$n"); do
    w=$("$wgml" bench -m "$model" --backend cpu -t "$THREADS" --only "$only" --beam "$BEAM" --repeat "$R" \
      --seconds "$CLIP" --max-tokens "$MAX_TOKENS" $ts --json)
    c=$("$out/bin/wbench" -m "$model" -t "$THREADS" --repeat "$R" --wav "$wav" --beam "$BEAM" \
      --max-tokens "$([ "$MAX_TOKENS" -ge 220 ] && echo 0 || echo "$MAX_TOKENS")" $nfa $ts)
    python3 -c '
import json, sys
w, c, k = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
W = lambda f: w[k + "_" + f]
print("transcribe_ms %.1f %.1f" % (W("ms"), c["transcribe_ms"]))
print("encode_ms_per_window %.1f %.1f" % (W("encode_ms") / W("windows"), c["encode_ms"] / c["windows"]))
if k == "greedy":  # a greedy window: its tokens, then the step that gives EOT (or max tokens)
    print("rest_ms_per_step %.3f %.3f" % (W("decode_ms") / (W("tokens") + W("windows")),
                                          (c["transcribe_ms"] - c["encode_ms"]) / c["decoder_steps"]))
else:  # a beam step decodes B hypotheses; wgml: at least one step per kept token (a lower bound on steps)
    print("rest_ms_per_beam_step %.3f %.3f" % (W("decode_ms") / W("tokens"),
                                               (c["transcribe_ms"] - c["encode_ms"]) / (c["decoder_steps"] / c["beam_size"])))
print("# wgml %d windows %d tokens; whisper.cpp %d windows %d tokens %d decoder steps" %
      (W("windows"), W("tokens"), c["windows"], c["tokens"], c["decoder_steps"]), file=sys.stderr)
' "$w" "$c" "$only"
  done | tee "$log" | summary
  ;;
*) usage ;;
esac
