#!/usr/bin/env bash
# valgrind.sh - memcheck on a CPU-backend generation run of the CLI: no invalid
# access, no use of uninitialised values, no leak (definite or indirect).
#
#   scripts/valgrind.sh                 build/wgml on the shipped stories260K, 30 tokens
#   WGML_BUILD=build-x scripts/valgrind.sh
#
# Runs the release build (valgrind on -O3 code is what users run; the debug
# build is covered by ASan). Nothing is suppressed. Fails (exit 1) on any
# valgrind error; prints valgrind's summary lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${WGML_BUILD:-$root/build}
cli=$build/wgml
if ! command -v valgrind >/dev/null; then
  echo "valgrind.sh: valgrind is not installed (scripts/setup.sh installs it)" >&2
  exit 2
fi
if [ ! -x "$cli" ]; then
  echo "valgrind.sh: $cli not found; build first (scripts/setup.sh)" >&2
  exit 2
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Two runs: sampled and greedy decoding (different paths through the sampler
# and the backend's argmax), each prompt + 30 tokens on 2 threads.
for temp in 0.8 0; do
  SECONDS=0
  if ! valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect \
       --errors-for-leak-kinds=definite,indirect --track-origins=yes --error-exitcode=1 \
       --log-file="$log" \
       "$cli" run --backend cpu -t 2 -m "$root/models/stories260K.gguf" -n 30 --temp "$temp" --seed 1 \
       -p "Once upon a time" >/dev/null 2>&1; then
    status=1
    cat "$log" >&2
  fi
  printf 'valgrind (--temp %s, %d s): %s\n' "$temp" "$SECONDS" \
    "$(grep -E 'ERROR SUMMARY' "$log" | sed 's/^==[0-9]*== //')"
  grep -E 'definitely lost|indirectly lost|All heap blocks were freed' "$log" | sed 's/^==[0-9]*== /  /'
done
exit $status
