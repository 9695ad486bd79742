#!/usr/bin/env bash
# bench/ab-json.sh - A/B two wgml binaries on any `wgml bench ... --json`
# figure, in alternating runs (old, new, old, new, ...) in one sitting, and
# the ratio new/old pair by pair (bench/ab.sh prints the LLM figures run by run).
#
#   bench/ab-json.sh OLD_WGML NEW_WGML N FIELD -- BENCH ARGS...
#   bench/ab-json.sh /tmp/old/build/wgml build/wgml 7 tg_tokens_per_s -- \
#       bench -m tinyllama-1.1b-Q4_0.gguf --backend cpu -t 2 -p 8 -n 96 --no-limits
#   ... 6 sentence_rtf -- bench -m kokoro-82m-F32.gguf --backend cpu -t 2 --repeat 1
#   ... 6 batch_tokens_per_s -- bench --embed -m bge-small-F32.gguf --backend cpu -t 2
#
# Prints the median of each binary and the median, minimum and maximum of the
# pairwise ratios (for a time such as sentence_rtf, above 1 is slower).
set -euo pipefail
if [ $# -lt 5 ] || [ "$5" != "--" ]; then
  echo "usage: bench/ab-json.sh OLD_WGML NEW_WGML N FIELD -- BENCH ARGS..." >&2
  exit 2
fi
old=$1 new=$2 n=$3 field=$4
shift 5
for _ in $(seq "$n"); do
  for b in "$old" "$new"; do
    "$b" "$@" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$field"
  done
done | python3 -c '
import statistics as st, sys
v = [float(x) for x in sys.stdin]
o, w = v[0::2], v[1::2]
r = [b / a for a, b in zip(o, w)]
print("%s: old median %.4g, new median %.4g; new/old pairwise median %.3f (min %.3f, max %.3f), %d pairs"
      % (sys.argv[1], st.median(o), st.median(w), st.median(r), min(r), max(r), len(r)))
' "$field"
