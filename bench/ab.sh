#!/usr/bin/env bash
# bench/ab.sh - A/B two wgml binaries on one model, in alternating runs.
#
# On a shared host absolute speed drifts by 20-30% over minutes, so two
# versions of the code are compared by running them in turn, N rounds, in one
# sitting. Prints one line per run: binary, decode tokens/s, prompt tokens/s
# and decode as % of the bandwidth measured in that run.
#
#   bench/ab.sh OLD_WGML NEW_WGML bench/models/tinyllama-1.1b-Q4_0.gguf
#   N=6 TG=48 ARGS="--backend cpu -t 2" bench/ab.sh ...
#
# Build the old binary from a worktree, e.g.
#   git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release && ninja -C /tmp/old/build wgml
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: bench/ab.sh OLD_WGML NEW_WGML MODEL.gguf" >&2
  exit 2
fi
old=$1 new=$2 model=$3
N=${N:-3} PP=${PP:-1} TG=${TG:-48} ARGS=${ARGS:-"--backend cpu -t $(nproc)"}
for i in $(seq "$N"); do
  for b in "$old" "$new"; do
    # shellcheck disable=SC2086
    json=$("$b" bench -m "$model" $ARGS -p "$PP" -n "$TG" --json)
    node -e '
const r = JSON.parse(process.argv[1]);
console.log(`${process.argv[2]}\ttg ${r.tg_tokens_per_s.toFixed(2)}\tpp ${r.pp_tokens_per_s.toFixed(1)}\tdecode ${r.decode_roofline_pct.toFixed(1)}% of bw`);
' "$json" "$b"
  done
done
