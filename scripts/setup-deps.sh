#!/usr/bin/env bash
# setup-deps.sh - everything the build and the WebGPU side need, into deps/ and the system.
#
#   bash scripts/setup-deps.sh
#
# Idempotent: re-running checks and skips what is already in place. Prints one line
# per action it takes, a last line with the time, and nothing else unless it fails.
#
#   system (apt, as root or via sudo; WGML_SETUP_NO_APT=1 skips it):
#     build tools: cmake ninja-build pkg-config gcc libcmocka-dev libjson-c-dev python3
#     libvulkan1                  the Vulkan loader Dawn dlopens
#     espeak-ng                   the G2P of Kokoro's text input (run as a program: wgml phonemize)
#     sox                         tests: reads the WAV files of wgml speak (sox --i)
#     python3-jsonschema          tests: validates structured output (tests/test_structured.py)
#     mesa-vulkan-drivers >= 25   lavapipe; on bookworm from bookworm-backports
#                                 (Mesa 22.3 in bookworm main is rejected by Dawn)
#   deps/ (gitignored):
#     npm/*.tgz                   npm bun-webgpu-linux-x64@0.1.7, react-native-wgpu@0.4.1 (sha1-checked)
#     dawn/lib/libwebgpu_wrapper.so   Dawn (June 2025) with the C API
#     dawn/include/webgpu/webgpu.h    react-native-wgpu's header patched to the .so's ABI
#                                     (scripts/patch-webgpu-header.py; sha256 checked
#                                     against scripts/webgpu-header.sha256)
#     swiftshader/                libvk_swiftshader.so from Debian chromium-common (not installed)
#     icd/                        Vulkan ICD jsons with absolute paths: SwiftShader, lavapipe
#                                 (swiftshader_icd.json, lvp_icd.json)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=$ROOT/deps
START=$(date +%s.%N)

DAWN_PKG=bun-webgpu-linux-x64@0.1.7
DAWN_TGZ=bun-webgpu-linux-x64-0.1.7.tgz
DAWN_SHA1=f74749914acc2fbc2503cbe8eb5d4b378f285650
HDR_PKG=react-native-wgpu@0.4.1
HDR_TGZ=react-native-wgpu-0.4.1.tgz
HDR_SHA1=e119405945e21c816bb08cfef568809fc29d8966
HDR_SUM_FILE=$ROOT/scripts/webgpu-header.sha256
MESA_MIN=25

say() { echo "setup-deps: $*"; }
die() { echo "setup-deps: ERROR: $*" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Runs a command with its output kept in a log that is shown only if it fails.
quiet() {
    if ! "$@" >"$TMP/log" 2>&1; then
        cat "$TMP/log" >&2
        die "failed: $*"
    fi
}

# ---- system packages -------------------------------------------------------

SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
APT_OK=1
if [ "${WGML_SETUP_NO_APT:-0}" = 1 ] || ! command -v apt-get >/dev/null; then APT_OK=0; fi
if [ $APT_OK = 1 ] && [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then APT_OK=0; fi

installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }

APT_UPDATED=0
apt_update() {
    [ $APT_UPDATED = 1 ] && return 0
    say "apt-get update"
    # Other apt users may hold the lists lock for a while: retry.
    local i
    for i in 1 2 3 4 5 6; do
        if $SUDO apt-get update -qq >"$TMP/log" 2>&1; then APT_UPDATED=1; return 0; fi
        sleep 10
    done
    cat "$TMP/log" >&2
    die "apt-get update failed"
}

apt_install() {  # apt_install [-t suite] pkg...
    apt_update
    say "apt-get install $*"
    quiet $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        -o DPkg::Lock::Timeout=600 --no-install-recommends "$@"
}

CODENAME=$( (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || true)

if [ $APT_OK = 1 ]; then
    missing=()
    for p in cmake ninja-build pkg-config gcc libc6-dev libcmocka-dev libjson-c-dev python3 \
             python3-jsonschema ca-certificates libvulkan1 espeak-ng sox; do
        installed "$p" || missing+=("$p")
    done
    command -v npm >/dev/null || missing+=(npm)
    mesa_ver=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)
    need_mesa=0
    if ! installed mesa-vulkan-drivers || dpkg --compare-versions "$mesa_ver" lt "$MESA_MIN"; then need_mesa=1; fi

    # Enable bookworm-backports first, so that one apt-get update serves both installs.
    if [ $need_mesa = 1 ] && [ "$CODENAME" = bookworm ] &&
       ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        src=/etc/apt/sources.list.d/backports.sources
        say "enabling bookworm-backports ($src)"
        # Reuse the machine's own mirror and keyring (PLATFORM.md recipe).
        stanza=$(awk 'BEGIN{RS="";ORS="\n\n"} /Suites: bookworm bookworm-updates/' \
                 /etc/apt/sources.list.d/debian.sources 2>/dev/null \
                 | sed 's/^Suites: .*/Suites: bookworm-backports/' || true)
        if [ -z "$stanza" ]; then
            stanza=$'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        fi
        printf '%s\n' "$stanza" | $SUDO tee "$src" >/dev/null
    fi
    if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi
    if [ $need_mesa = 1 ]; then
        if [ "$CODENAME" = bookworm ]; then
            apt_install -t bookworm-backports mesa-vulkan-drivers
        else
            apt_install mesa-vulkan-drivers
        fi
        mesa_ver=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)
        dpkg --compare-versions "$mesa_ver" ge "$MESA_MIN" \
            || say "WARNING: mesa-vulkan-drivers $mesa_ver < $MESA_MIN: Dawn will reject lavapipe"
    fi
else
    say "skipping apt (not root and no sudo, no apt-get, or WGML_SETUP_NO_APT=1)"
fi

# ---- npm tarballs (Dawn and its header) ------------------------------------

command -v npm >/dev/null || die "npm is needed to fetch Dawn (apt-get install npm)"
mkdir -p "$DEPS/npm"

sha1_of() { sha1sum "$1" | cut -d' ' -f1; }

fetch_npm() {  # fetch_npm package@version file sha1
    local pkg=$1 file=$DEPS/npm/$2 want=$3
    if [ -f "$file" ] && [ "$(sha1_of "$file")" = "$want" ]; then return 0; fi
    rm -f "$file"
    say "npm pack $pkg"
    (cd "$TMP" && quiet npm pack --silent "$pkg")
    local got
    got=$(sha1_of "$TMP/$2")
    if [ "$got" != "$want" ]; then
        die "$2: sha1 $got, expected $want (the npm package changed: re-measure PLATFORM.md before trusting it)"
    fi
    mv "$TMP/$2" "$file"
}
fetch_npm "$DAWN_PKG" "$DAWN_TGZ" "$DAWN_SHA1"
fetch_npm "$HDR_PKG" "$HDR_TGZ" "$HDR_SHA1"

# ---- Dawn library ----------------------------------------------------------

LIB=$DEPS/dawn/lib/libwebgpu_wrapper.so
STAMP=$DEPS/dawn/lib/.from-$DAWN_SHA1
if [ ! -f "$LIB" ] || [ ! -f "$STAMP" ]; then
    say "extracting libwebgpu_wrapper.so -> deps/dawn/lib/"
    rm -rf "$DEPS/dawn/lib"
    mkdir -p "$DEPS/dawn/lib"
    tar -xzf "$DEPS/npm/$DAWN_TGZ" -C "$TMP" package/libwebgpu_wrapper.so package/LICENSE
    mv "$TMP/package/libwebgpu_wrapper.so" "$LIB"
    mv "$TMP/package/LICENSE" "$DEPS/dawn/LICENSE.bun-webgpu"
    touch "$STAMP"
fi

# ---- patched header --------------------------------------------------------

HDR=$DEPS/dawn/include/webgpu/webgpu.h
[ -f "$HDR_SUM_FILE" ] || die "missing $HDR_SUM_FILE"
want_hdr=$(cut -d' ' -f1 "$HDR_SUM_FILE")
if [ ! -f "$HDR" ] || [ "$(sha256sum "$HDR" | cut -d' ' -f1)" != "$want_hdr" ]; then
    say "patching webgpu.h -> deps/dawn/include/webgpu/webgpu.h"
    command -v python3 >/dev/null || die "python3 is needed to patch webgpu.h"
    tar -xzf "$DEPS/npm/$HDR_TGZ" -C "$TMP" package/cpp/webgpu/webgpu.h
    mkdir -p "$(dirname "$HDR")"
    python3 "$ROOT/scripts/patch-webgpu-header.py" "$TMP/package/cpp/webgpu/webgpu.h" "$TMP/webgpu.h"
    got_hdr=$(sha256sum "$TMP/webgpu.h" | cut -d' ' -f1)
    if [ "$got_hdr" != "$want_hdr" ]; then
        die "patched webgpu.h has sha256 $got_hdr, expected $want_hdr ($HDR_SUM_FILE).
If you changed scripts/patch-webgpu-header.py on purpose, check the result and update that file."
    fi
    mv "$TMP/webgpu.h" "$HDR"
fi

# ---- SwiftShader (from chromium-common, extracted, not installed) ----------

SS=$DEPS/swiftshader
if [ ! -f "$SS/libvk_swiftshader.so" ] || [ ! -f "$SS/vk_swiftshader_icd.json" ]; then
    if [ $APT_OK = 1 ] || command -v apt-get >/dev/null; then
        say "apt-get download chromium-common (SwiftShader) -> deps/swiftshader/"
        if ! (cd "$TMP" && apt-get download -o APT::Sandbox::User=root chromium-common >"$TMP/log" 2>&1); then
            # Empty or stale package lists (a fresh container): update once and retry.
            if [ $APT_OK = 1 ] && [ $APT_UPDATED = 0 ]; then apt_update; fi
            (cd "$TMP" && quiet apt-get download -o APT::Sandbox::User=root chromium-common)
        fi
        deb=$(ls "$TMP"/chromium-common_*.deb)
        rm -rf "$SS"
        mkdir -p "$SS" "$TMP/x"
        dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$TMP/x" \
            ./usr/lib/chromium/libvk_swiftshader.so ./usr/lib/chromium/vk_swiftshader_icd.json
        mv "$TMP/x/usr/lib/chromium/libvk_swiftshader.so" "$TMP/x/usr/lib/chromium/vk_swiftshader_icd.json" "$SS/"
        basename "$deb" >"$SS/FROM"
    else
        say "WARNING: no apt-get: SwiftShader not fetched"
    fi
fi

# ---- Vulkan ICD jsons for the software adapters ----------------------------

mkdir -p "$DEPS/icd"
write_if_changed() {  # write_if_changed file (content on stdin)
    cat >"$TMP/icd.json"
    if ! cmp -s "$TMP/icd.json" "$1"; then
        say "writing ${1#"$ROOT"/}"
        mv "$TMP/icd.json" "$1"
    fi
}
if [ -f "$SS/libvk_swiftshader.so" ]; then
    api=$(sed -n 's/.*"api_version": *"\([^"]*\)".*/\1/p' "$SS/vk_swiftshader_icd.json")
    printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "%s"}}\n' \
        "$SS/libvk_swiftshader.so" "${api:-1.0.5}" | write_if_changed "$DEPS/icd/swiftshader_icd.json"
fi
# Mesa 25 names it lvp_icd.json; Mesa 22 lvp_icd.x86_64.json.
LVP_SYS=
for f in /usr/share/vulkan/icd.d/lvp_icd.json /usr/share/vulkan/icd.d/lvp_icd.x86_64.json; do
    if [ -f "$f" ]; then LVP_SYS=$f; break; fi
done
if [ -n "$LVP_SYS" ]; then
    # Mesa writes an absolute library_path; make sure of it.
    lvp_lib=$(sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' "$LVP_SYS")
    case "$lvp_lib" in
        /*) ;;
        *) lvp_lib=/usr/lib/x86_64-linux-gnu/$(basename "$lvp_lib") ;;
    esac
    sed "s|\"library_path\": *\"[^\"]*\"|\"library_path\": \"$lvp_lib\"|" "$LVP_SYS" \
        | write_if_changed "$DEPS/icd/lvp_icd.json"
else
    say "WARNING: no lavapipe ICD json in /usr/share/vulkan/icd.d: no lavapipe adapter"
fi

END=$(date +%s.%N)
say "ok ($(awk -v a="$START" -v b="$END" 'BEGIN { printf "%.1f", b - a }') s)"
