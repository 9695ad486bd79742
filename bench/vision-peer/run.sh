#!/usr/bin/env bash
# bench/vision-peer/run.sh - wgml's vision towers against ONNX Runtime (CPU) on the same weights.
#
#   bench/vision-peer/run.sh WGML MODEL.gguf
#   ROUNDS=3 COUNT=32 BATCH=16 THREADS=2 bench/vision-peer/run.sh build/wgml /tmp/vp/clip-vit-b32-F32.gguf
#
# Exports MODEL.gguf to ONNX with export_onnx.py (Debian's torch, float32, the GGUF's weights
# dequantized; checked against tests/reference/clip_ref.py), then for ROUNDS rounds runs
# `wgml bench --images --backend cpu --json` and ort_bench.mjs (onnxruntime-node, CPU,
# THREADS intra-op threads, 1 inter-op) one after the other; prints a line per round and the
# medians of images/s at batch 1 and BATCH with the ratios wgml / ORT.
#
# Not the same work: wgml's figures include preprocessing (resize of a synthetic 640x480 photo,
# crop, normalization); ORT gets pixel_values already preprocessed. This only disadvantages wgml.
#
# Environment: ROUNDS (3), COUNT images per run (32), BATCH (16), REPEAT runs per figure inside
# each tool (3, medians), THREADS (2), PYTHON (/usr/bin/python3, with python3-torch and
# python3-onnx), ORT_DIR (/tmp/vision-peer: a folder with node_modules/onnxruntime-node),
# ONNX (the .onnx to write and use; default: MODEL.gguf's path with .onnx; reused if newer
# than the GGUF unless EXPORT=1), CHECK (1: compare torch with the float64 reference first).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bench/vision-peer/run.sh WGML MODEL.gguf" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
wgml=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
model=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
ROUNDS=${ROUNDS:-3} COUNT=${COUNT:-32} BATCH=${BATCH:-16} REPEAT=${REPEAT:-3} THREADS=${THREADS:-2}
PYTHON=${PYTHON:-/usr/bin/python3} ORT_DIR=${ORT_DIR:-/tmp/vision-peer} CHECK=${CHECK:-1}
ONNX=${ONNX:-${model%.gguf}.onnx}

if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  echo "run.sh: no $ORT_DIR/node_modules/onnxruntime-node (mkdir -p $ORT_DIR && cd $ORT_DIR &&" \
       "npm install --ignore-scripts onnxruntime-node)" >&2
  exit 1
fi
if [ "${EXPORT:-0}" = 1 ] || [ ! -s "$ONNX" ] || [ "$model" -nt "$ONNX" ]; then
  flags=()
  [ "$CHECK" = 1 ] || flags+=(--no-check)
  OMP_NUM_THREADS=$THREADS "$PYTHON" "$here/export_onnx.py" "${flags[@]}" "$model" "$ONNX"
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# wgml: $wgml bench --images --backend cpu -t $THREADS --batch $BATCH --count $COUNT --repeat $REPEAT"
echo "#   (end to end: preprocessing of synthetic 640x480 images included)"
echo "# ORT:  onnxruntime-node CPU, intraOpNumThreads $THREADS, interOpNumThreads 1, graphOptimizationLevel all"
echo "#   (input already preprocessed: pixel_values [N,3,S,S]; no resize/crop/normalize timed)"
for i in $(seq "$ROUNDS"); do
  w=$("$wgml" bench --images -m "$model" --backend cpu -t "$THREADS" --json --batch "$BATCH" \
        --count "$COUNT" --repeat "$REPEAT" --no-limits)
  o=$(cd "$ORT_DIR" && node "$here/ort_bench.mjs" "$ONNX" --batch "$BATCH" --count "$COUNT" \
        --repeat "$REPEAT" --threads "$THREADS")
  python3 -c '
import json, sys
w, o = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if w["dim"] != o["batchN"]["dim"]:
    sys.exit("run.sh: vector sizes differ: wgml %d, ORT %d" % (w["dim"], o["batchN"]["dim"]))
print("%.3f %.3f %.3f %.3f" % (w["single_images_per_s"], w["batch_images_per_s"],
                               o["batch1"]["images_per_s"], o["batchN"]["images_per_s"]))
' "$w" "$o" | tee -a "$out" | awk -v i="$i" -v b="$BATCH" \
    '{printf "round %d: wgml b1 %s b%d %s img/s | ORT b1 %s b%d %s img/s\n", i, $1, b, $2, $3, b, $4}'
done
python3 -c '
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
m = [st.median(c) for c in zip(*rows)]
b = sys.argv[2]
print("median of %d rounds: wgml b1 %.2f b%s %.2f img/s | ORT b1 %.2f b%s %.2f img/s" % (len(rows), m[0], b, m[1], m[2], b, m[3]))
print("ratio wgml/ORT: batch %s %.2fx, batch 1 %.2fx   (wgml includes preprocessing, ORT does not)" % (
    b, m[1] / m[3], m[0] / m[2]))
' "$out" "$BATCH"
