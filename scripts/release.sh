#!/usr/bin/env bash
# Builds the release k3rs binary (the [profile.release] of Cargo.toml: LTO, stripped) and writes
# what install.sh downloads from a release:
#   dist/k3rs-<arch>            the binary
#   dist/sha256sum-<arch>.txt   its `sha256sum` line
# <arch> is Kubernetes' name for the target's architecture (amd64, arm64, arm, ...).
#
# Usage: scripts/release.sh [--target <rust target triple>]   (default: this machine)
# Cross builds need the target's toolchain (rustup target add <triple>) and C linker.
set -euo pipefail
cd "$(dirname "$0")/.."

target=""
if [ "${1:-}" = --target ]; then
    target="${2:?--target needs a triple}"
fi
triple="${target:-$(rustc -vV | sed -n 's/^host: //p')}"
case "$triple" in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    arm-* | armv7-*) arch=arm ;;
    s390x-*) arch=s390x ;;
    riscv64*) arch=riscv64 ;;
    powerpc64le-*) arch=ppc64le ;;
    *) echo "release.sh: no release architecture name for $triple" >&2; exit 1 ;;
esac

args=(build --release --locked --bin k3rs)
out="${CARGO_TARGET_DIR:-target}"
if [ -n "$target" ]; then
    args+=(--target "$target")
    out="$out/$target"
fi
start=$(date +%s)
cargo "${args[@]}"
echo "release.sh: built in $(( $(date +%s) - start )) s" >&2

mkdir -p dist
cp "$out/release/k3rs" "dist/k3rs-$arch.tmp"
mv -f "dist/k3rs-$arch.tmp" "dist/k3rs-$arch"
(cd dist && sha256sum "k3rs-$arch" >"sha256sum-$arch.txt")
size=$(stat -c %s "dist/k3rs-$arch")
echo "release.sh: dist/k3rs-$arch: $size bytes ($(( (size + 524288) / 1048576 )) MiB)" >&2
cat "dist/sha256sum-$arch.txt"
