#!/usr/bin/env bash
# bench/llamacpp/build.sh - builds llama.cpp's CPU backend and lbench.cpp, outside the repository,
# for bench/vs-llamacpp.sh. No cmake: the sources are compiled as upstream's `cmake -DGGML_NATIVE=ON`
# build compiles them for the CPU (-O3 -march=native, OpenMP, llamafile's sgemm, the CPU repack of
# Q4_0/Q4_K into interleaved tiles), into a static library and the driver.
#
#   bench/llamacpp/build.sh GGML_DIR LLAMA_DIR OUT_DIR
#
# GGML_DIR holds ggml's include/ and src/, LLAMA_DIR llama's include/ and src/: for an upstream
# checkout SRC/ggml and SRC; for the copy ollama vendors (e.g. its commit b1fccab, llama.cpp
# ec98e2002) ml/backend/ggml/ggml and llama/llama.cpp. JOBS (default 2) compiles in parallel.
# The sources' file list follows that llama.cpp (ec98e2002); another version may need it edited.
set -euo pipefail
shopt -s nullglob # ollama's copy has mem_*.cpp, upstream has none
if [ $# -ne 3 ]; then
  echo "usage: bench/llamacpp/build.sh GGML_DIR LLAMA_DIR OUT_DIR" >&2
  exit 2
fi
G=$(realpath "$1") L=$(realpath "$2") O=$(realpath -m "$3")
here=$(dirname "$(realpath "$0")")
mkdir -p "$O/obj"
DEFS="-DNDEBUG -D_GNU_SOURCE -D_XOPEN_SOURCE=600 -DGGML_SCHED_MAX_COPIES=4 -DGGML_USE_CPU -DGGML_USE_LLAMAFILE"
DEFS="$DEFS -DGGML_USE_CPU_REPACK -DGGML_USE_OPENMP -DGGML_VERSION=\"0.0.0\" -DGGML_COMMIT=\"unknown\""
INC="-I$G/include -I$G/src -I$G/src/ggml-cpu -I$L/include -I$L/src"
OPT="-O3 -march=native -fopenmp -pthread"
export CFLAGS="-std=gnu11 $OPT $DEFS $INC" CXXFLAGS="-std=gnu++17 $OPT $DEFS $INC" OBJ=$O/obj
srcs=(
  "$G"/src/{ggml.c,ggml.cpp,ggml-alloc.c,ggml-backend.cpp,ggml-opt.cpp,ggml-threading.cpp,ggml-quants.c,gguf.cpp}
  "$G"/src/ggml-backend-reg.cpp "$G"/src/mem_*.cpp
  "$G"/src/ggml-cpu/{ggml-cpu.c,ggml-cpu.cpp,repack.cpp,hbm.cpp,quants.c,traits.cpp,binary-ops.cpp,unary-ops.cpp}
  "$G"/src/ggml-cpu/{vec.cpp,ops.cpp} "$G"/src/ggml-cpu/amx/{amx.cpp,mmq.cpp} "$G"/src/ggml-cpu/llamafile/sgemm.cpp
  "$G"/src/ggml-cpu/arch/x86/{quants.c,repack.cpp}
  "$L"/src/*.cpp "$L"/src/models/*.cpp
)
compile() {
  local obj
  obj=$OBJ/$(echo "$1" | tr '/' '_').o
  if [ ! -f "$obj" ] || [ "$1" -nt "$obj" ]; then
    case $1 in
      *.c) gcc $CFLAGS -c "$1" -o "$obj" ;;
      *.cpp) g++ $CXXFLAGS -c "$1" -o "$obj" ;;
    esac
  fi
}
export -f compile
printf '%s\n' "${srcs[@]}" | xargs -P "${JOBS:-2}" -I{} bash -c 'compile {}'
objs=()
for s in "${srcs[@]}"; do objs+=("$O/obj/$(echo "$s" | tr '/' '_').o"); done
rm -f "$O/libllama_cpu.a"
ar rcs "$O/libllama_cpu.a" "${objs[@]}"
# shellcheck disable=SC2086
g++ $CXXFLAGS "$here/lbench.cpp" "$O/libllama_cpu.a" -o "$O/lbench" -fopenmp -pthread -ldl -lm
echo "built $O/lbench"
