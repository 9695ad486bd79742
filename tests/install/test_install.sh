#!/bin/bash
# test_install.sh - `cmake --install` gives a library other programs link.
#
# Installs this build (the static library) into a temporary prefix, and a second
# build of the same sources with -DBUILD_SHARED_LIBS=ON (the library and the CLI
# only) into another; checks each tree (files, RUNPATHs, the shared library's
# SONAME and exported symbols, the installed CLI); then builds consumer.c against
# each, once with `pkg-config --cflags --libs wgml` and once as a CMake project
# with find_package(wgml) (CMakeLists.txt here), and runs it on the installed
# default model, share/wgml/stories260K.gguf, greedily on the CPU: its text must
# be the llama2.c reference for "Once upon a time".
#
# Environment (set by tests/CMakeLists.txt): WGML_SOURCE, WGML_BUILD (the build to
# install), WGML_DAWN_FILE (Dawn's library, empty without WebGPU), WGML_SHARED
# (the reference data, default ../shared), CMAKE, CC, WGML_INSTALL_JOBS (parallel
# jobs of the shared build, default 2).
# Exit: 0 passed, 1 failed (with what failed on stderr), 77 skipped.
set -u

src=${WGML_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${WGML_BUILD:-$src/build}
shared=${WGML_SHARED:-$src/../shared}
cmake=${CMAKE:-cmake}
cc=${CC:-cc}
jobs=${WGML_INSTALL_JOBS:-2}
prompt="Once upon a time"
n_predict=60 # the reference holds llama2.c's first 60 tokens after the prompt, as test_cli checks too
reference=$shared/models/reference/stories260K.llama2c-run.t0.n64.once.txt

tmp=$(mktemp -d "${TMPDIR:-/tmp}/wgml-install.XXXXXX") || { echo "test_install: FAILED: mktemp" >&2; exit 1; }
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

step="setup"
fail() {
    echo "test_install: FAILED: [$step] $*" >&2
    exit 1
}
# Runs a command quietly; on failure shows its output and what failed.
run() {
    if ! "$@" >"$tmp/cmd.log" 2>&1; then
        cat "$tmp/cmd.log" >&2
        fail "command failed: $*"
    fi
}
cache() { sed -n "s/^$1:[A-Za-z]*=//p" "$build/CMakeCache.txt"; }
join() { tr '\n' ' ' <<<"$1" | sed 's/ *$//'; } # a list on lines -> on one line
elapsed() { echo "$(($(date +%s) - t0)) s"; }
t0=$(date +%s)

[ -f "$build/CMakeCache.txt" ] || fail "no CMakeCache.txt in $build"
if [ ! -d "$shared" ] && [ -z "${WGML_REQUIRE_SHARED:-}" ]; then
    echo "test_install: skipped: no shared test data at $shared"
    exit 77
fi
[ -f "$reference" ] || fail "no reference text $reference (set WGML_SHARED)"
for tool in readelf nm pkg-config "$cc"; do
    command -v "$tool" >/dev/null || fail "$tool not found"
done
if [ "$(cache WGML_SANITIZE)" = ON ]; then
    echo "test_install: skipped: a sanitizer build (programs linking it need the sanitizer runtime)"
    exit 77
fi
dawn=${WGML_DAWN_FILE-unset} # Dawn's library file name when the build has WebGPU, else empty
[ "$dawn" != unset ] || fail "WGML_DAWN_FILE is not set (run through ctest)"
webgpu=$([ -n "$dawn" ] && echo Dawn || echo none)
api=$(grep -oE 'wgml_[a-z0-9_]+[(]' "$src/include/wgml.h" | tr -d '(' | sort -u)
echo "test_install: $build, WebGPU: $webgpu${dawn:+ ($dawn)}"

# ---- the installed tree ------------------------------------------------------------------
runpath() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p'; }

check_tree() { # prefix kind
    local p=$1 kind=$2 f
    step="$kind install: files"
    for f in bin/wgml include/wgml.h lib/libwgml.a lib/pkgconfig/wgml.pc lib/cmake/wgml/wgmlConfig.cmake \
        lib/cmake/wgml/wgmlConfigVersion.cmake lib/cmake/wgml/wgmlTargets.cmake share/doc/wgml/LICENSE \
        share/wgml/stories260K.gguf share/wgml/ggml-vocab-gpt-2.gguf share/wgml/README.md \
        share/wgml/LICENSE.stories260K.txt share/wgml/LICENSE.ggml-vocab-gpt-2.txt ${dawn:+lib/$dawn}; do
        [ -f "$p/$f" ] || fail "$p/$f is missing"
    done
    for f in "$src"/models/*; do
        cmp -s "$f" "$p/share/wgml/$(basename "$f")" || fail "share/wgml/$(basename "$f") differs from models/"
    done
    cmp -s "$src/include/wgml.h" "$p/include/wgml.h" || fail "include/wgml.h differs from the source"
    cmp -s "$src/LICENSE" "$p/share/doc/wgml/LICENSE" || fail "share/doc/wgml/LICENSE differs from LICENSE"

    step="$kind install: bin/wgml"
    local rp
    rp=$(runpath "$p/bin/wgml")
    [ "$rp" = "\$ORIGIN/../lib" ] || fail "bin/wgml RUNPATH is '$rp', not '\$ORIGIN/../lib'"
    if [ -n "$dawn" ]; then
        needed "$p/bin/wgml" | grep -qx "$dawn" || fail "bin/wgml does not need $dawn"
    fi
    local version
    version=$(env -u LD_LIBRARY_PATH "$p/bin/wgml" --version 2>&1) || fail "bin/wgml --version: $version"
    echo "$version" | grep -qE "^wgml [0-9]+\.[0-9]+\.[0-9]+ \(CPU: [^;]+; WebGPU: $webgpu\)$" ||
        fail "bin/wgml --version printed '$version'"
    echo "  $kind: bin/wgml --version: $version; RUNPATH $rp"

    if [ "$kind" = shared ]; then
        step="$kind install: libwgml.so"
        local version real
        version=$(sed -n 's/^Version: //p' "$p/lib/pkgconfig/wgml.pc")
        real=$(readlink -f "$p/lib/libwgml.so")
        if [ ! -L "$p/lib/libwgml.so" ] || [ ! -L "$p/lib/libwgml.so.0" ] || [ "$real" != "$p/lib/libwgml.so.$version" ] ||
            [ -L "$real" ]; then
            fail "expected lib/libwgml.so -> libwgml.so.0 -> libwgml.so.$version: $(ls -l "$p"/lib/libwgml.so*)"
        fi
        local so=$p/lib/libwgml.so.0
        [ "$(soname "$so")" = libwgml.so.0 ] || fail "SONAME is '$(soname "$so")', not libwgml.so.0"
        rp=$(runpath "$so")
        [ "$rp" = "\$ORIGIN" ] || fail "libwgml.so.0 RUNPATH is '$rp', not '\$ORIGIN'"
        if [ -n "$dawn" ]; then
            needed "$so" | grep -qx "$dawn" || fail "libwgml.so.0 does not need $dawn"
        fi
        local syms bad missing extra
        syms=$(nm -D --defined-only "$so" | awk '{print $NF}' | sort -u)
        bad=$(echo "$syms" | grep -v '^wgml_')
        [ -z "$bad" ] || fail "libwgml.so.0 exports symbols other than wgml_*: $(join "$bad")"
        missing=$(comm -23 <(echo "$api") <(echo "$syms"))
        extra=$(comm -13 <(echo "$api") <(echo "$syms"))
        [ -z "$missing" ] || fail "libwgml.so.0 lacks functions of wgml.h: $(join "$missing")"
        [ -z "$extra" ] || fail "libwgml.so.0 exports internal functions: $(join "$extra")"
        echo "  $kind: libwgml.so.0: SONAME $(soname "$so"), RUNPATH $rp, NEEDED $(join "$(needed "$so")");" \
            "$(echo "$syms" | wc -l) symbols exported, all wgml_*, = the $(echo "$api" | wc -l) functions of wgml.h"
    fi
}

# ---- programs that use it ------------------------------------------------------------------
check_program() { # prefix kind how exe
    local p=$1 kind=$2 how=$3 exe=$4
    step="$kind, $how: the program's links"
    local need rp
    need=$(needed "$exe")
    rp=$(runpath "$exe")
    if [ "$kind" = shared ]; then
        echo "$need" | grep -qx libwgml.so.0 || fail "$exe does not need libwgml.so.0 (NEEDED: $(join "$need"))"
        echo ":$rp:" | grep -qF ":$p/lib:" || fail "$exe RUNPATH '$rp' lacks $p/lib"
    else
        echo "$need" | grep -q libwgml && fail "$exe needs a shared libwgml in the static case (NEEDED: $(join "$need"))"
        if [ -n "$dawn" ]; then
            echo "$need" | grep -qx "$dawn" || fail "$exe does not need $dawn (NEEDED: $(join "$need"))"
            echo ":$rp:" | grep -qF ":$p/lib:" || fail "$exe RUNPATH '$rp' lacks $p/lib"
        fi
    fi
    step="$kind, $how: the program's text"
    local out=$tmp/out.txt
    if ! env -u LD_LIBRARY_PATH "$exe" "$p/share/wgml/stories260K.gguf" "$prompt" "$n_predict" >"$out" 2>"$tmp/err.txt"; then
        cat "$tmp/err.txt" >&2
        fail "$exe failed"
    fi
    if ! cmp -s "$out" "$reference"; then
        echo "--- expected ($reference):" >&2
        cat "$reference" >&2
        echo "--- got:" >&2
        cat "$out" >&2
        fail "the greedy continuation of '$prompt' is not the reference"
    fi
    echo "  $kind, $how: NEEDED $(join "$need"); RUNPATH ${rp:-none}; text = reference ($(tail -n1 "$tmp/err.txt"))"
}

consumers() { # prefix kind
    local p=$1 kind=$2 d=$tmp/$2-consumer
    mkdir -p "$d"
    step="$kind, pkg-config: build"
    local flags
    flags=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --cflags --libs wgml) || fail "pkg-config --cflags --libs wgml"
    echo "  $kind, pkg-config: $flags"
    # shellcheck disable=SC2086
    run "$cc" -std=c11 -Wall -Wextra -Werror -O2 -o "$d/consumer-pc" "$src/tests/install/consumer.c" $flags
    check_program "$p" "$kind" pkg-config "$d/consumer-pc"

    step="$kind, find_package: build"
    run "$cmake" -S "$src/tests/install" -B "$d/cmake" -G "$(cache CMAKE_GENERATOR)" \
        "-DCMAKE_MAKE_PROGRAM=$(cache CMAKE_MAKE_PROGRAM)" "-DCMAKE_C_COMPILER=$cc" -DCMAKE_BUILD_TYPE=Release \
        "-DCMAKE_PREFIX_PATH=$p" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    grep -E "^-- wgml " "$tmp/cmd.log" | sed 's/^-- /  '"$kind"', find_package: /'
    run "$cmake" --build "$d/cmake"
    check_program "$p" "$kind" find_package "$d/cmake/consumer"
}

# ---- the static library: this build --------------------------------------------------------
step="static: install"
run "$cmake" --install "$build" --prefix "$tmp/static"
check_tree "$tmp/static" static
consumers "$tmp/static" static
echo "test_install: static library passed ($(elapsed))"

# ---- the shared library: a second build -------------------------------------------------------
step="shared: configure"
args=(-G "$(cache CMAKE_GENERATOR)" "-DCMAKE_MAKE_PROGRAM=$(cache CMAKE_MAKE_PROGRAM)"
    "-DCMAKE_C_COMPILER=$(cache CMAKE_C_COMPILER)" "-DCMAKE_BUILD_TYPE=$(cache CMAKE_BUILD_TYPE)"
    -DBUILD_SHARED_LIBS=ON -DWGML_BUILD_TESTS=OFF -DWGML_WEB=OFF -DWGML_FUZZ=OFF)
for var in WGML_WERROR WGML_WEBGPU WGML_DAWN_DIR WGML_DAWN_ABI_CHECK WGML_ICD_DIR; do
    value=$(cache $var)
    [ -n "$value" ] && args+=("-D$var=$value")
done
run "$cmake" -S "$src" -B "$tmp/shared-build" "${args[@]}"
step="shared: build"
run "$cmake" --build "$tmp/shared-build" --target wgml wgml_shared wgml_cli -j "$jobs"
step="shared: install"
run "$cmake" --install "$tmp/shared-build" --prefix "$tmp/shared"
echo "test_install: shared build and install done ($(elapsed))"
check_tree "$tmp/shared" shared
consumers "$tmp/shared" shared
echo "test_install: shared library passed"
echo "test_install: passed in $(elapsed)"
