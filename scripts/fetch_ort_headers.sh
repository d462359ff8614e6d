#!/usr/bin/env bash
# Obtain the ONNX Runtime C/C++ headers (>= 1.21) for building the custom-op library, without
# vendoring them. Prints the include directory on the last line of stdout.
#
# Order: $ORT_INCLUDE_DIR, the system's /usr/include/onnxruntime, Debian's libonnxruntime-dev
# (Debian 13 directly; Debian 12 from the trixie suite, headers only, unpacked with dpkg -x),
# then the official release archive.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dest="${ORT_HEADERS_CACHE:-$here/.deps/onnxruntime}"
has_headers() { [ -f "$1/onnxruntime_cxx_api.h" ] && [ -f "$1/onnxruntime_lite_custom_op.h" ]; }

if [ -n "${ORT_INCLUDE_DIR:-}" ] && has_headers "$ORT_INCLUDE_DIR"; then echo "$ORT_INCLUDE_DIR"; exit 0; fi
for d in /usr/include/onnxruntime "$dest/include" "$dest/usr/include/onnxruntime"; do
  if has_headers "$d"; then echo "$d"; exit 0; fi
done

mkdir -p "$dest"
log() { echo "fetch_ort_headers: $*" >&2; }

from_debian() {
  command -v apt-get >/dev/null && command -v dpkg >/dev/null || return 1
  local codename
  codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
  local work; work=$(mktemp -d)
  if [ "$codename" = "trixie" ] || [ "$codename" = "forky" ] || [ "$codename" = "sid" ]; then
    (cd "$work" && apt-get download -q libonnxruntime-dev) >&2 \
      || { apt-get update -q >&2 && (cd "$work" && apt-get download -q libonnxruntime-dev) >&2; } \
      || return 1
  else
    # A private apt configuration that sees the trixie suite; nothing is installed from it.
    local src=/etc/apt/sources.list.d/debian.sources
    [ -f "$src" ] || return 1
    mkdir -p "$work/lists/partial" "$work/sources" "$work/cache/archives/partial"
    sed -E 's/\b(bookworm|bullseye)(-updates|-security)?\b/trixie\2/g' "$src" > "$work/sources/debian.sources"
    local opts=(-o "Dir::Etc::SourceParts=$work/sources" -o "Dir::Etc::SourceList=/dev/null"
                -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
                -o "Dir::State::status=/dev/null" -o "APT::Get::List-Cleanup=0")
    apt-get "${opts[@]}" update -q >&2 || return 1
    (cd "$work" && apt-get "${opts[@]}" download -q libonnxruntime-dev) >&2 || return 1
  fi
  local deb; deb=$(ls "$work"/libonnxruntime-dev_*.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] || return 1
  dpkg -x "$deb" "$work/x"
  rm -rf "$dest/include"; mkdir -p "$dest/include"
  cp -r "$work/x/usr/include/onnxruntime/." "$dest/include/"
  rm -rf "$work"
  has_headers "$dest/include"
}

from_release() {
  local ver="${ORT_RELEASE_VERSION:-1.21.1}" arch
  case "$(uname -m)" in x86_64) arch=x64;; aarch64) arch=aarch64;; *) return 1;; esac
  local name="onnxruntime-linux-$arch-$ver"
  local url="https://github.com/microsoft/onnxruntime/releases/download/v$ver/$name.tgz"
  local work; work=$(mktemp -d)
  curl -fsSL "$url" -o "$work/ort.tgz" || return 1
  tar -xzf "$work/ort.tgz" -C "$work" "$name/include"
  rm -rf "$dest/include"; mkdir -p "$dest/include"
  cp -r "$work/$name/include/." "$dest/include/"
  rm -rf "$work"
  has_headers "$dest/include"
}

if from_debian; then log "headers from Debian's libonnxruntime-dev"; echo "$dest/include"; exit 0; fi
log "Debian's libonnxruntime-dev not available; trying the ONNX Runtime release archive"
if from_release; then echo "$dest/include"; exit 0; fi
log "could not obtain ONNX Runtime headers; set ORT_INCLUDE_DIR to a directory holding onnxruntime_cxx_api.h"
exit 1
