#!/usr/bin/env bash
# bench/run.sh - the performance table of bench/RESULTS.md, on this machine.
#
# For every target model (random weights of real shapes, made once with
# `wgml synth` into bench/models/) and backend, runs `wgml bench --json` and
# appends a row to bench/out/results.jsonl, then prints a Markdown table.
#
#   bench/run.sh                      the full set (takes a while: lavapipe is slow)
#   MODELS="stories110m:Q4_0" BACKENDS="cpu" bench/run.sh      a subset
#   PP=128 TG=64 REPEAT=3 CTX=0 bench/run.sh                 run parameters
#
# Backends: cpu, lavapipe (WebGPU on Mesa's software Vulkan), swiftshader, and
# gpu (the best hardware WebGPU adapter, when there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
WGML=${WGML:-./build/wgml}
MODELS=${MODELS:-"stories110m:Q4_0 stories110m:Q8_0 stories110m:F16 tinyllama-1.1b:Q4_0 tinyllama-1.1b:Q4_K_M tinyllama-1.1b:Q8_0 llama-3.2-1b:Q4_K_M llama-3.2-1b:Q8_0 llama-3.2-1b:F16"}
BACKENDS=${BACKENDS:-"cpu lavapipe"}
PP=${PP:-128} TG=${TG:-64} REPEAT=${REPEAT:-1} CTX=${CTX:-0} THREADS=${THREADS:-$(nproc)}
mkdir -p bench/models bench/out
out=bench/out/results.jsonl

for spec in $MODELS; do
  arch=${spec%%:*} type=${spec##*:}
  file=bench/models/$arch-$type.gguf
  if [ ! -f "$file" ]; then
    echo "bench: synthesizing $file" >&2
    "$WGML" synth --arch "$arch" --type "$type" -o "$file" >&2
  fi
  for be in $BACKENDS; do
    case $be in
      cpu) args=(--backend cpu -t "$THREADS") ;;
      lavapipe) args=(--adapter llvmpipe) ;;
      swiftshader) args=(--adapter swiftshader) ;;
      gpu) args=(--backend webgpu) ;;
      *) echo "bench: unknown backend $be" >&2; exit 2 ;;
    esac
    pp=$PP tg=$TG
    # software adapters are slow: fewer tokens, same measurements
    if [ "$be" = lavapipe ] || [ "$be" = swiftshader ]; then pp=${PP_SOFT:-32}; tg=${TG_SOFT:-16}; fi
    echo "bench: $arch $type on $be" >&2
    if json=$("$WGML" bench -m "$file" "${args[@]}" -p "$pp" -n "$tg" --ctx "$CTX" --repeat "$REPEAT" --json); then
      printf '%s\n' "$json" | tr -d '\n' | sed "s/^{/{\"label\":\"$arch $type $be\",/" >> "$out"
      printf '\n' >> "$out"
    else
      echo "bench: $arch $type on $be failed" >&2
    fi
  done
done

# the table, from every row recorded so far
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
const f = (x, d = 1) => (x === undefined ? "-" : Number(x).toFixed(d));
console.log("| model | backend | weights MB | pp tok/s | tg tok/s | ms/tok p50 | bytes/tok MB | bandwidth GB/s | decode % of bw | matmul GFLOP/s | pp % of matmul | dispatches/tok | submits/tok | readback B/tok |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  const [arch, type, be] = r.label.split(" ");
  console.log(`| ${arch} ${type} | ${be}${r.adapter && be !== "cpu" ? "" : ""} | ${f(r.weights_bytes / 1e6, 0)} | ${f(r.pp_tokens_per_s)} | ${f(r.tg_tokens_per_s, 2)} | ${f(r.ms_per_token_p50, 2)} | ${f(r.bytes_per_token / 1e6, 0)} | ${f(r.bandwidth_gbs)} | ${f(r.decode_roofline_pct)} | ${f(r.matmul_gflops)} | ${f(r.pp_matmul_pct)} | ${f(r.dispatches_per_token)} | ${f(r.submits_per_token, 2)} | ${f(r.readback_bytes_per_token, 0)} |`);
}' "$out"
