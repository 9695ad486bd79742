#!/usr/bin/env bash
# bench/vs-llamacpp.sh - wgml against llama.cpp on the same GGUF, in alternating runs.
#
#   bench/vs-llamacpp.sh WGML LBENCH MODEL.gguf
#   N=4 PP=64 TG=16 THREADS=2 bench/vs-llamacpp.sh build/wgml /tmp/lcpp/lbench bench/models/x.gguf
#
# LBENCH is bench/llamacpp/lbench.cpp built against a llama.cpp tree (bench/llamacpp/build.sh).
# Each of N rounds runs `wgml bench --backend cpu` and then lbench (llama-bench's method, decode
# on an empty cache) on the file, with THREADS threads; prints a line per round and the medians
# of prompt (pp) and decode (tg) tokens/s with their ratios. FA=1 turns on llama.cpp's flash
# attention (off by default, as llama-bench's default).
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: bench/vs-llamacpp.sh WGML LBENCH MODEL.gguf" >&2
  exit 2
fi
wgml=$1 lbench=$2 model=$3
N=${N:-4} PP=${PP:-64} TG=${TG:-16} THREADS=${THREADS:-2} FA=${FA:-0}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq "$N"); do
  w=$("$wgml" bench -m "$model" --backend cpu -t "$THREADS" -p "$PP" -n "$TG" --json)
  l=$("$lbench" "$model" -p "$PP" -n "$TG" -t "$THREADS" -r 1 -fa "$FA" --tg-clear 2>/dev/null | tail -1)
  python3 -c '
import json, sys
w, l = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("%.1f %.1f %.1f %.1f" % (w["pp_tokens_per_s"], w["tg_tokens_per_s"], l["pp_tok_s"], l["tg_tok_s"]))
' "$w" "$l" | tee -a "$out" | awk -v i="$i" '{printf "round %d: wgml pp %s tg %s | llama.cpp pp %s tg %s\n", i, $1, $2, $3, $4}'
done
python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
m = [statistics.median(r[k] for r in rows) for k in range(4)]
print("medians of %d: pp%s wgml %.1f, llama.cpp %.1f (%.2fx); tg%s wgml %.1f, llama.cpp %.1f (%.2fx)" %
      (len(rows), sys.argv[2], m[0], m[2], m[0] / m[2], sys.argv[3], m[1], m[3], m[1] / m[3]))
' "$out" "$PP" "$TG"
