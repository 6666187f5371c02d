#!/usr/bin/env bash
# Writes a release as install.sh downloads it (serve dist/ over http(s) and point
# INSTALL_K3RS_DOWNLOAD_URL at it, or use file:///path/to/dist):
#   dist/k3rs-<arch>                      the stripped binary
#   dist/k3rs-airgap-images-<arch>.tar    the images a node needs that k3rs provides (the pause
#                                         image, also embedded in the binary), for
#                                         <data-dir>/agent/images or a private registry
#   dist/sha256sum-<arch>.txt             `sha256sum` lines of both
#   dist/install.sh                       the installer
# <arch> is Kubernetes' name for the target's architecture (amd64, arm64, arm, ...). amd64 and
# arm64 have an embedded pause image; elsewhere no images tarball is written (nodes pull
# registry.k8s.io/pause).
#
# Usage: scripts/release.sh [--target <rust target triple>] [--bin-from <k3rs binary>] [--order]
#                           [--profile <cargo profile>]
#   --target     cross build (needs `rustup target add <triple>` and the target's C linker)
#   --bin-from   package this already built binary instead of building one (it is
#                stripped on the way; the architecture is the target's, default this
#                machine's)
#   --order      link the functions an idle cluster executes first (scripts/order-link.sh:
#                about half the resident memory of an idle server or agent, same code): the
#                build keeps its link's inputs, and the link is replayed after a run of a server
#                and an agent. As root on a machine that runs a node (scripts/prereqs.sh test);
#                not with --bin-from or a cross --target.
#   --profile    build with this cargo profile instead of `release` (CI's check of --order,
#                scripts/layout-check.sh, packages the debug build: `--profile dev`)
# DIST=<dir> writes somewhere else than dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

target=""
bin_from=""
order=""
profile=release
while [ "$#" -gt 0 ]; do
    case "$1" in
        --target) target="${2:?--target needs a triple}"; shift 2 ;;
        --bin-from) bin_from="${2:?--bin-from needs a path}"; shift 2 ;;
        --order) order=1; shift ;;
        --profile) profile="${2:?--profile needs a name}"; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *)
            echo "usage: $0 [--target <triple>] [--bin-from <k3rs binary>] [--order]" \
                "[--profile <name>]" >&2
            exit 2
            ;;
    esac
done
host="$(rustc -vV 2>/dev/null | sed -n 's/^host: //p' || true)"
if [ -z "$host" ]; then
    host="$(uname -m)-unknown-linux-gnu"
fi
triple="${target:-$host}"
case "$triple" in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    arm-* | armv7-*) arch=arm ;;
    s390x-*) arch=s390x ;;
    riscv64*) arch=riscv64 ;;
    powerpc64le-*) arch=ppc64le ;;
    *) echo "release.sh: no release architecture name for $triple" >&2; exit 1 ;;
esac
dist="${DIST:-dist}"
if [ -n "$order" ] && { [ -n "$bin_from" ] || [ "$triple" != "$host" ]; }; then
    echo "release.sh: --order relinks a build of this machine's architecture made here" >&2
    exit 2
fi

if [ -n "$bin_from" ]; then
    [ -x "$bin_from" ] || { echo "release.sh: $bin_from is not an executable" >&2; exit 1; }
    bin="$bin_from"
else
    args=(build --profile "$profile" --locked --bin k3rs)
    out="${CARGO_TARGET_DIR:-target}"
    if [ -n "$target" ]; then
        args+=(--target "$target")
        out="$out/$target"
    fi
    start=$(date +%s)
    if [ -z "$order" ]; then
        cargo "${args[@]}"
    else
        # The same build with lld's copy of the link's inputs, replayed in order-link.sh.
        work=$(mktemp -d "${TMPDIR:-/var/tmp}/k3rs-release-XXXX")
        trap 'rm -rf "$work"' EXIT
        args[0]=rustc
        cargo "${args[@]}" -- -C "link-arg=-Wl,--reproduce=$work/link.tar"
    fi
    echo "release.sh: built in $(( $(date +%s) - start )) s" >&2
    # Cargo's directory of a profile's output: `dev` (and `test`) build into debug/.
    case "$profile" in
        dev | test) bin="$out/debug/k3rs" ;;
        *) bin="$out/$profile/k3rs" ;;
    esac
    if [ -n "$order" ]; then
        bash scripts/order-link.sh "$work/link.tar" "$work/k3rs"
        rm -f "$work/link.tar"
        bin="$work/k3rs"
    fi
fi

mkdir -p "$dist"
cp "$bin" "$dist/k3rs-$arch.tmp"
# The release profile strips already; a --bin-from debug build is stripped here.
if command -v strip >/dev/null 2>&1 && [ "$triple" = "$host" ]; then
    strip "$dist/k3rs-$arch.tmp"
fi
chmod 0755 "$dist/k3rs-$arch.tmp"
mv -f "$dist/k3rs-$arch.tmp" "$dist/k3rs-$arch"

images="k3rs-airgap-images-$arch.tar"
rm -f "$dist/$images"
case "$arch" in
    amd64 | arm64)
        # Any k3rs writes any architecture's tarball: this machine's binary does it.
        if [ "$triple" = "$host" ]; then
            "$dist/k3rs-$arch" airgap-images --arch "$arch" --output "$dist/$images"
        else
            cargo run --quiet --profile "$profile" --locked --bin k3rs -- \
                airgap-images --arch "$arch" --output "$dist/$images"
        fi
        ;;
    *) echo "release.sh: no embedded pause image for $arch: no $images" >&2 ;;
esac

cp install.sh "$dist/install.sh.tmp"
chmod 0755 "$dist/install.sh.tmp"
mv -f "$dist/install.sh.tmp" "$dist/install.sh"

files=("k3rs-$arch")
[ -e "$dist/$images" ] && files+=("$images")
(cd "$dist" && sha256sum "${files[@]}" >"sha256sum-$arch.txt.tmp" &&
    mv -f "sha256sum-$arch.txt.tmp" "sha256sum-$arch.txt")
size=$(stat -c %s "$dist/k3rs-$arch")
echo "release.sh: $dist/k3rs-$arch: $size bytes ($(( (size + 524288) / 1048576 )) MiB)" >&2
cat "$dist/sha256sum-$arch.txt"
