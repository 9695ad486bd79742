#!/usr/bin/env bash
# tests/gpu_check/test_gpu_check.sh - scripts/gpu-check.sh end to end on lavapipe in quick
# mode (so that its first run on a real GPU is not its first run): every stage passes,
# the summary has its tables and the golden text matched; then a stage that outlives its
# timeout is recorded as such (exit 124) and fails the run without losing the others.
# Environment: WGML (the binary), WGML_SOURCE (the tree); skips (77) without lavapipe.
set -u
src=${WGML_SOURCE:?}
"$WGML" devices 2>/dev/null | grep -q llvmpipe || { echo "skipping: no lavapipe adapter"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"/a/log.txt 2>/dev/null; exit 1; }

# stages get 400 s here (the script's quick default is 120): lavapipe on a CI machine busy with other tests
OUT=$out/a GPU_CHECK_ADAPTER=llvmpipe GPU_CHECK_QUICK=1 GPU_CHECK_TIMEOUT=400 bash "$src/scripts/gpu-check.sh" >"$out/a.txt" 2>&1 ||
    fail "the quick run failed: $(tail -n 20 "$out/a.txt")"
for f in summary.md stages.tsv log.txt gpu-check.tar.gz; do [ -s "$out/a/$f" ] || fail "no $f"; done
n=$(wc -l <"$out/a/stages.tsv")
[ "$n" -ge 14 ] || fail "$n stages ran (14 expected)"
awk -F'\t' '$2 != 0 {exit 1}' "$out/a/stages.tsv" || fail "a stage failed: $(cat "$out/a/stages.tsv")"
for want in "| golden | ok" "## Generation" "| s15-q4_0 | webgpu llvmpipe" "| s15-q4_0 | gpu / cpu" "## Embeddings" \
    "## Speech" "## Parallel streams" "- warm:" "= llama2.c's reference text" "verify: "; do
    grep -qF -- "$want" "$out/a/summary.md" || fail "the summary lacks '$want'"
done
tar -tzf "$out/a/gpu-check.tar.gz" | grep -q 'results/bench-s15-q4_0-gpu.out' || fail "the archive lacks the bench output"

# a hang: verify with one second to run
OUT=$out/b GPU_CHECK_ADAPTER=llvmpipe GPU_CHECK_QUICK=1 GPU_CHECK_STAGES="devices verify" GPU_CHECK_TIMEOUT=1 \
    bash "$src/scripts/gpu-check.sh" >"$out/b.txt" 2>&1 && fail "a timed-out stage passed"
grep -qP '^verify\t124\t' "$out/b/stages.tsv" || fail "verify's timeout not recorded: $(cat "$out/b/stages.tsv")"
grep -qP '^devices\t0\t' "$out/b/stages.tsv" || fail "devices did not run beside it"
echo "gpu-check: $n stages passed on lavapipe; a timeout recorded as 124"
