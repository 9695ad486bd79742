#!/usr/bin/env bash
# run.sh TARGET SECONDS - runs one fuzz target for SECONDS on its corpus.
#
# TARGET is gguf, llama2c, model_load, pth, tokenizer, chat_template, g2p,
# kokoro_config, cli, serve, whisper_bin, tiktoken, grammar, json_schema, safetensors, hf or image. New interesting inputs are added to
# fuzz/corpus-run/TARGET/; a crash, a sanitizer report or a timeout
# leaves the input in fuzz/corpus-run/artifacts/TARGET/ and makes the script
# fail. Prints the executions per second and the total executions.
# Environment: WGML_FUZZ_BUILD (default build-fuzz), WGML_SHARED (default
# ../shared), WGML_FUZZ_ARGS (extra libFuzzer flags, e.g. "-jobs=2 -workers=2").
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: fuzz/run.sh TARGET SECONDS   (TARGET: gguf llama2c model_load pth tokenizer chat_template g2p kokoro_config cli serve whisper_bin tiktoken grammar json_schema safetensors hf hf_tokenizer hub image)" >&2
  exit 2
fi
target=$1
secs=$2
root=$(cd "$(dirname "$0")/.." && pwd)
build=${WGML_FUZZ_BUILD:-$root/build-fuzz}
export WGML_SHARED=${WGML_SHARED:-$root/../shared}
bin=$build/fuzz/fuzz_$target
corpus=$root/fuzz/corpus-run/$target
artifacts=$root/fuzz/corpus-run/artifacts/$target
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin not found (configure with -DCMAKE_C_COMPILER=clang -DWGML_FUZZ=ON, then ninja -C build-fuzz)" >&2
  exit 2
fi
[ -d "$corpus" ] || "$root/fuzz/make-corpus.sh" >/dev/null
mkdir -p "$corpus" "$artifacts"

flags=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
       -artifact_prefix="$artifacts/")
case $target in
  gguf)       flags+=(-max_len=65536 -dict="$root/fuzz/gguf.dict") ;;
  model_load) flags+=(-max_len=65536 -dict="$root/fuzz/gguf.dict") ;;
  llama2c)    flags+=(-max_len=65536) ;;
  pth)        flags+=(-max_len=65536 -dict="$root/fuzz/pth.dict") ;;
  tokenizer)  flags+=(-max_len=512) ;;
  chat_template) flags+=(-max_len=32768 -dict="$root/fuzz/jinja.dict") ;;
  g2p)        flags+=(-max_len=4096) ;;
  grammar)    flags+=(-max_len=4096) ;;
  json_schema) flags+=(-max_len=8192) ;;
  kokoro_config) flags+=(-max_len=16384) ;;
  cli)        flags+=(-max_len=65536) ;;
  serve)      flags+=(-max_len=20480 -dict="$root/fuzz/serve.dict") ;;
  whisper_bin) flags+=(-max_len=65536) ;;
  tiktoken)   flags+=(-max_len=65536) ;;
  safetensors) flags+=(-max_len=65536 -dict="$root/fuzz/safetensors.dict") ;;
  hf) flags+=(-max_len=8192) ;;
  hf_tokenizer) flags+=(-max_len=16384) ;;
  hub)        flags+=(-max_len=8192) ;;
  image)      flags+=(-max_len=65536) ;;
  *) echo "run.sh: unknown target '$target'" >&2; exit 2 ;;
esac

log=$(mktemp)
# shellcheck disable=SC2086
"$bin" "${flags[@]}" ${WGML_FUZZ_ARGS:-} "$corpus" >"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*ft: \([0-9]*\).*corp: \([0-9]*\).*/cov \1, ft \2, corpus \3/p')
if [ $rc -ne 0 ]; then
  echo "=== fuzz_$target FAILED (exit $rc); the input is in $artifacts/ ===" >&2
  grep -E 'ERROR|SUMMARY|fuzz_[a-z_]+: |runtime error|Test unit written|#[0-9]+ +0x[0-9a-f]+ in ' "$log" | head -40 >&2
  echo "full log: $log" >&2
  printf '%-11s %10s execs %8s exec/s  %s  CRASH\n' "$target" "${execs:-?}" "${rate:-?}" "$cov"
  exit 1
fi
printf '%-11s %10s execs %8s exec/s  %s  ok\n' "$target" "${execs:-?}" "${rate:-?}" "$cov"
rm -f "$log"
