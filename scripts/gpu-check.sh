#!/usr/bin/env bash
# scripts/gpu-check.sh - prove, measure and compare wgml on a real GPU in one run.
#
# Two steps (docs/webgpu-setup.md, "A real GPU: scripts/gpu-check.sh"):
#
#   scripts/gpu-check.sh --pack     here, after a build: gathers into .gpu-check/ (ignored by
#                                   git) what a bare x86-64 machine needs: the wgml binary,
#                                   Dawn's library and the shared libraries wgml links that a
#                                   bare system lacks, the Vulkan loader's .deb files, and the
#                                   stories260K reference text. Prints the paths to carry.
#   scripts/gpu-check.sh            there (or here): runs every stage below, each under its own
#                                   timeout so one hang loses one stage, and writes to $OUT
#                                   (default ./gpu-check-out) summary.md (the table), log.txt
#                                   and gpu-check.tar.gz (every stage's output).
#
# Stages: env (nvidia-smi, CPU), devices, verify (the full op grid and end to end on the
# adapter), golden (stories260K's greedy text on the adapter against the CPU's and the
# llama2.c reference), models (wgml synth: Llama-3.2-1B Q4_K_M/Q8_0/F16, TinyLlama Q4_0,
# Qwen2.5-0.5B Q8_0, bge-small, nomic-embed, kokoro-82m), bench-* (pp512/tg128 with the
# same-run bandwidth and f16/f32 matmul rates and --profile, on the adapter and on the CPU),
# embed-*, speech-*, parallel (4 streams), load (cold and warm load-to-first-token through
# the pipeline cache). Quick mode (GPU_CHECK_QUICK=1, or --quick) uses small models and
# short runs: the CI test runs it on lavapipe.
#
# Environment:
#   OUT                   where results go (default ./gpu-check-out)
#   GPU_CHECK_ADAPTER     adapter name substring (default: the best hardware adapter; a
#                         software one, e.g. llvmpipe, is named to test the script)
#   GPU_CHECK_QUICK       1: quick mode
#   GPU_CHECK_STAGES      space-separated stage names to run (default: all)
#   GPU_CHECK_TIMEOUT     seconds per stage (default 240; quick 120)
#   WGML                  the binary (default: .gpu-check/bin/wgml if packed, else build/wgml)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK="$ROOT/.gpu-check"
QUICK=${GPU_CHECK_QUICK:-0}
MODE=run
for a in "$@"; do
    case "$a" in
    --pack) MODE=pack ;;
    --quick) QUICK=1 ;;
    -h | --help)
        sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "gpu-check: unknown argument '$a' (--pack, --quick, --help)" >&2
        exit 2
        ;;
    esac
done

# ---- --pack: what travels to a bare machine -------------------------------------------
if [ "$MODE" = pack ]; then
    src=${WGML:-$ROOT/build/wgml}
    [ -x "$src" ] || { echo "gpu-check --pack: no $src (build first: scripts/setup.sh)" >&2; exit 1; }
    rm -rf "$PACK" && mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/gl" "$PACK/shared"
    cp "$src" "$PACK/bin/wgml"
    # every library wgml loads except the C runtime's, which any x86-64 Linux has
    ldd "$src" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
        case "$(basename "$lib")" in
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libstdc++.so.* | libgcc_s.so.*) ;;
        *) cp -L "$lib" "$PACK/lib/" ;;
        esac
    done
    ref="$ROOT/../shared/models/reference/stories260K.llama2c-run.t0.n64.once.txt"
    [ -f "$ref" ] && cp "$ref" "$PACK/shared/"
    # the Vulkan loader, as the device tool's README fetches it (needs this machine's apt)
    if command -v apt-get >/dev/null; then
        o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-check-apt'
        mkdir -p /tmp/gpu-check-apt/partial
        # shellcheck disable=SC2086
        (apt-get $o update >/dev/null 2>&1 && cd "$PACK/gl" && apt-get $o download libvulkan1 >/dev/null 2>&1) ||
            echo "gpu-check --pack: the Vulkan loader's .deb could not be fetched (the machine's own loader will be used)" >&2
    fi
    du -sh "$PACK" | awk '{print "gpu-check --pack: " $1 " in .gpu-check/"}'
    echo "carry: .gpu-check   (device tool: carry [\".gpu-check\"]; command: scripts/gpu-check.sh)"
    exit 0
fi

# ---- the run ---------------------------------------------------------------------------
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
RES="$WORK/results"
mkdir -p "$RES"
LOG="$OUT/log.txt"
: >"$LOG"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

# the binary and its libraries: packed, else the build tree's
if [ -z "${WGML:-}" ]; then
    if [ -x "$PACK/bin/wgml" ]; then WGML="$PACK/bin/wgml"; else WGML="$ROOT/build/wgml"; fi
fi
[ -d "$PACK/lib" ] && export LD_LIBRARY_PATH="$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d "$ROOT/deps/dawn/lib" ] && export LD_LIBRARY_PATH="$ROOT/deps/dawn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# the Vulkan loader: the system's, else the carried .deb unpacked beside the results
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
    for f in "$PACK"/gl/*.deb "$ROOT"/.gl/*.deb; do
        [ -f "$f" ] && dpkg -x "$f" "$WORK/root" 2>>"$LOG"
    done
    [ -d "$WORK/root/usr/lib/x86_64-linux-gnu" ] &&
        export LD_LIBRARY_PATH="$WORK/root/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
fi
# NVIDIA's ICD where the loader finds no driver of its own (the device machines' layout)
nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && [ -f "$nv" ] &&
    ! grep -qs nvidia /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json; then
    export VK_DRIVER_FILES=$nv
fi
ADAPTER=${GPU_CHECK_ADAPTER:-}
DEVARGS="--backend webgpu${ADAPTER:+ --adapter $ADAPTER}" # adapter substrings have no spaces
NPROC=$(nproc 2>/dev/null || echo 2)
TMO=${GPU_CHECK_TIMEOUT:-$([ "$QUICK" = 1 ] && echo 120 || echo 240)}
export WGML_CACHE_DIR="$WORK/cache"
MODELS="$WORK/models"
mkdir -p "$MODELS"
SUMMARY="$RES/stages.tsv"
: >"$SUMMARY"
S260="$ROOT/models/stories260K.gguf"
export WGML DEVARGS RES PACK ROOT S260

want() { [ -z "${GPU_CHECK_STAGES:-}" ] || [[ " $GPU_CHECK_STAGES " == *" $1 "* ]]; }

# stage NAME TIMEOUT CMD...: runs CMD (a program or an exported function) with stdout in
# NAME.out and stderr in NAME.err, records its exit status and seconds (124: timed out)
stage() {
    local name=$1 t=$2
    shift 2
    want "$name" || return 0
    log "stage $name (timeout ${t}s): $*"
    local t0 rc dt
    t0=$(date +%s.%N)
    timeout -k 10 "$t" bash -c '"$@"' "$name" "$@" >"$RES/$name.out" 2>"$RES/$name.err"
    rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    printf '%s\t%s\t%s\n' "$name" "$rc" "$dt" >>"$SUMMARY"
    if [ "$rc" = 0 ]; then log "  ok in ${dt}s"; else log "  FAILED (exit $rc) in ${dt}s: $(tail -n 2 "$RES/$name.err" | tr '\n' ' ')"; fi
    return 0
}

# --- env, devices, verify
env_info() {
    uname -a
    nvidia-smi || echo "(no nvidia-smi)"
    (lscpu || head -30 /proc/cpuinfo) 2>/dev/null
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
    "$WGML" --version
}
# golden text: stories260K greedy on the adapter, against the CPU's and llama2.c's
golden() {
    local dev cpu ref
    # shellcheck disable=SC2086
    dev=$("$WGML" run -m "$S260" -p "Once upon a time" -n 60 --temp 0 $DEVARGS) || return 1
    cpu=$("$WGML" run -m "$S260" -p "Once upon a time" -n 60 --temp 0 --backend cpu) || return 1
    printf 'device: %s\ncpu:    %s\n' "$dev" "$cpu"
    [ "$dev" = "$cpu" ] || { echo "MISMATCH: the device's text is not the CPU's"; return 1; }
    for ref in "$PACK/shared/stories260K.llama2c-run.t0.n64.once.txt" \
        "$ROOT/../shared/models/reference/stories260K.llama2c-run.t0.n64.once.txt"; do
        [ -f "$ref" ] || continue
        if [ "$dev" = "$(cat "$ref")" ]; then echo "= llama2.c's reference text"; return 0; fi
        echo "MISMATCH: not llama2.c's reference text ($ref)"
        return 1
    done
    echo "(no llama2.c reference text here: compared with the CPU only)"
}
# load to first token: an empty pipeline cache (cold), then the same run again (warm)
loadrun() {
    local dir="$WGML_CACHE_DIR/load"
    rm -rf "$dir" && mkdir -p "$dir"
    # shellcheck disable=SC2086
    WGML_CACHE_DIR=$dir "$WGML" bench -m "$1" $DEVARGS -p 16 -n 4 --no-limits --json >"$RES/load-cold.json" &&
        WGML_CACHE_DIR=$dir "$WGML" bench -m "$1" $DEVARGS -p 16 -n 4 --no-limits --json >"$RES/load-warm.json" &&
        echo "cold and warm runs in load-cold.json, load-warm.json"
}
export -f env_info golden loadrun

stage env 30 env_info
stage devices 60 "$WGML" devices --json
if [ "$QUICK" = 1 ]; then
    stage verify "$TMO" "$WGML" verify ${ADAPTER:+--adapter "$ADAPTER"} --quick -n 16
else
    stage verify "$TMO" "$WGML" verify ${ADAPTER:+--adapter "$ADAPTER"}
fi
stage golden 120 golden

# --- models, made here by wgml synth (deterministic per seed)
declare -A FILE
synth() { # key arch type [extra...]
    local key=$1 arch=$2 type=$3
    shift 3
    FILE[$key]="$MODELS/$key.gguf"
    want models || return 0
    timeout -k 10 "$TMO" "$WGML" synth --arch "$arch" --type "$type" -o "${FILE[$key]}" "$@" >>"$RES/models.out" 2>&1 ||
        { log "  synth $key failed"; rm -f "${FILE[$key]}"; }
}
t0=$(date +%s)
want models && log "stage models: wgml synth"
if [ "$QUICK" = 1 ]; then
    LLMS="s15-q4_0 s15-q8_0"
    synth s15-q4_0 stories15m Q4_0
    synth s15-q8_0 stories15m Q8_0
    EMBS="bge-small"
    synth bge-small bge-small F16 --layers 2
    SPEECH="kokoro-tiny"
    synth kokoro-tiny kokoro-tiny F32
    PP=64 TG=16
    EMBARGS="--texts 8 --batch 4 --repeat 1" SPARGS="--repeat 1"
else
    LLMS="l1b-q4_k_m l1b-q8_0 l1b-f16 tinyllama-q4_0 qwen05-q8_0"
    synth l1b-q4_k_m llama-3.2-1b Q4_K_M
    synth l1b-q8_0 llama-3.2-1b Q8_0
    synth l1b-f16 llama-3.2-1b F16
    synth tinyllama-q4_0 tinyllama-1.1b Q4_0
    synth qwen05-q8_0 qwen2.5-0.5b Q8_0
    EMBS="bge-small nomic-embed"
    synth bge-small bge-small F16
    synth nomic-embed nomic-embed F16
    SPEECH="kokoro-82m"
    synth kokoro-82m kokoro-82m F32
    PP=512 TG=128
    EMBARGS="" SPARGS="--repeat 2"
fi
if want models; then
    n_ok=$(find "$MODELS" -name '*.gguf' | wc -l)
    n_all=$(($(echo $LLMS $EMBS $SPEECH | wc -w)))
    printf '%s\t%s\t%s\n' models "$([ "$n_ok" = "$n_all" ] && echo 0 || echo 1)" "$(($(date +%s) - t0))" >>"$SUMMARY"
    log "  $n_ok of $n_all models in $(($(date +%s) - t0))s"
fi

# --- benchmarks: each model on the adapter, then on this machine's CPU
have() { [ -f "${FILE[$1]}" ]; }
# shellcheck disable=SC2086
for k in $LLMS; do
    have "$k" || continue
    stage "bench-$k-gpu" "$TMO" "$WGML" bench -m "${FILE[$k]}" $DEVARGS -p $PP -n $TG --profile --json
    stage "bench-$k-cpu" "$TMO" "$WGML" bench -m "${FILE[$k]}" --backend cpu -t "$NPROC" -p $PP -n $TG --json
done
# shellcheck disable=SC2086
for k in $EMBS; do
    have "$k" || continue
    stage "embed-$k-gpu" "$TMO" "$WGML" bench --embed -m "${FILE[$k]}" $DEVARGS $EMBARGS --json
    stage "embed-$k-cpu" "$TMO" "$WGML" bench --embed -m "${FILE[$k]}" --backend cpu -t "$NPROC" $EMBARGS --json
done
# shellcheck disable=SC2086
for k in $SPEECH; do
    have "$k" || continue
    stage "speech-$k-gpu" "$TMO" "$WGML" bench -m "${FILE[$k]}" $DEVARGS $SPARGS --json
    stage "speech-$k-cpu" "$TMO" "$WGML" bench -m "${FILE[$k]}" --backend cpu -t "$NPROC" $SPARGS --json
done
first=${LLMS%% *}
if have "$first"; then
    # shellcheck disable=SC2086
    stage parallel "$TMO" "$WGML" bench --parallel 4 -m "${FILE[$first]}" $DEVARGS -n $TG --json
    stage load "$TMO" loadrun "${FILE[$first]}"
fi

# --- the summary table (python3 where there is one; else the stage list alone)
summarize() {
    python3 - "$RES" "$SUMMARY" <<'PY'
import json, os, sys
res, summary = sys.argv[1], sys.argv[2]
def js(name):
    for n in (name + ".out", name):
        p = os.path.join(res, n)
        try:
            with open(p) as f: return json.load(f)
        except Exception: pass
    return None
def f(x, d=1):
    return "-" if x is None else (f"{x:.{d}f}" if isinstance(x, (int, float)) else str(x))
rows = [l.rstrip("\n").split("\t") for l in open(summary) if l.strip()]
print("# wgml gpu-check\n")
dev = js("devices")
if isinstance(dev, list) and dev:
    for a in dev:
        print(f"- adapter: {a.get('name', a.get('device', '?'))} ({a.get('backend', a.get('backend_type', ''))}, {a.get('adapter_type', a.get('type', ''))})")
print("\n## Stages\n\n| stage | exit | seconds |\n|---|---|---|")
for r in rows: print(f"| {r[0]} | {'ok' if r[1] == '0' else 'FAILED ' + r[1]} | {r[2]} |")
print("\n## Generation (pp / tg tokens/s; same-run bandwidth and matmul rates)\n")
print("| model | backend | pp tok/s | tg tok/s | GB/s measured | decode % of bandwidth | matmul GFLOP/s | pp % of matmul | load to first token ms |")
print("|---|---|---|---|---|---|---|---|---|")
names = sorted({r[0][6:-4] for r in rows if r[0].startswith("bench-")})
for k in names:
    for b in ("gpu", "cpu"):
        j = js(f"bench-{k}-{b}")
        if not j: continue
        print(f"| {k} | {j.get('backend')} {j.get('adapter','')} | {f(j.get('pp_tokens_per_s'))} | {f(j.get('tg_tokens_per_s'))} | {f(j.get('bandwidth_gbs'))} | {f(j.get('decode_roofline_pct'))} | {f(j.get('matmul_gflops'))} | {f(j.get('pp_matmul_pct'))} | {f(j.get('load_to_first_token_ms'))} |")
    g, c = js(f"bench-{k}-gpu"), js(f"bench-{k}-cpu")
    if g and c and c.get("tg_tokens_per_s") and c.get("pp_tokens_per_s"):
        print(f"| {k} | gpu / cpu | {f(g['pp_tokens_per_s'] / c['pp_tokens_per_s'], 2)}x | {f(g['tg_tokens_per_s'] / c['tg_tokens_per_s'], 2)}x | | | | | |")
def pick(j, keys):
    return ", ".join(f"{k} {f(j[k], 3 if abs(j[k]) < 10 else 1)}" for k in keys if isinstance(j.get(k), (int, float)))
EMB = ("batch_tokens_per_s", "batch_texts_per_s", "batch_matmul_pct", "single_tokens_per_s", "single_latency_ms_p50", "matmul_gflops")
SPK = ("sentence_rtf", "paragraph_first_audio_ms", "paragraph_rtf", "load_ms", "peak_rss_mb")
for kind, title, keys in (("embed", "Embeddings", EMB), ("speech", "Speech", SPK)):
    names = sorted({r[0][len(kind) + 1:-4] for r in rows if r[0].startswith(kind + "-")})
    if not names: continue
    print(f"\n## {title}\n")
    for k in names:
        for b in ("gpu", "cpu"):
            j = js(f"{kind}-{k}-{b}")
            if j: print(f"- {k} on {j.get('backend')} {j.get('adapter','')}: " + pick(j, keys))
p = js("parallel")
if p:
    print("\n## Parallel streams\n\n- " + pick(p, ("parallel", "single_tps", "aggregate_tps", "per_stream_tps", "ratio")))
cold, warm = js("load-cold.json"), js("load-warm.json")
if cold and warm:
    pc = lambda j: j.get("pipeline_cache", {})
    print("\n## Load to first token (pipeline cache)\n")
    print(f"- cold: {f(cold.get('load_to_first_token_ms'))} ms (cache {pc(cold).get('state')}, {pc(cold).get('misses')} misses, compile {f(cold.get('pipeline_compile_ms'))} ms)")
    print(f"- warm: {f(warm.get('load_to_first_token_ms'))} ms (cache {pc(warm).get('state')}, {pc(warm).get('hits')} hits, compile {f(warm.get('pipeline_compile_ms'))} ms)")
for name in ("golden", "verify"):
    p = os.path.join(res, name + ".out")
    if os.path.exists(p):
        tail = open(p, errors="replace").read().strip().splitlines()[-6:]
        print(f"\n## {name}\n\n```\n" + "\n".join(tail) + "\n```")
PY
}
if command -v python3 >/dev/null; then
    summarize >"$OUT/summary.md" 2>>"$LOG" || { log "summary failed"; awk -F'\t' '{print $1, ($2 == 0 ? "ok" : "FAILED " $2), $3 "s"}' "$SUMMARY" >"$OUT/summary.md"; }
else
    awk -F'\t' '{print $1, ($2 == 0 ? "ok" : "FAILED " $2), $3 "s"}' "$SUMMARY" >"$OUT/summary.md"
fi
cp "$SUMMARY" "$OUT/stages.tsv"
tar -czf "$OUT/gpu-check.tar.gz" -C "$WORK" results 2>>"$LOG"
rm -rf "$WORK"
failed=$(awk -F'\t' '$2 != 0' "$OUT/stages.tsv" | wc -l)
cat "$OUT/summary.md"
log "done: $(wc -l <"$OUT/stages.tsv") stages, $failed failed; results in $OUT"
[ "$failed" = 0 ]
