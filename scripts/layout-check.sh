#!/bin/bash
# CI's check of scripts/order-link.sh (scripts/test.sh, phase "layout"), on the debug build:
# relinks target/debug/k3rs keeping lld's reproduce tarball (only the k3rs crate recompiles),
# orders it, then starts each binary as scripts/idle-memory.sh does (server with the embedded
# agent until Ready and SETTLE seconds more) and compares the file-backed part of their
# resident memory: the ordered binary must reach Ready and map less of itself than the binary
# it came from. Prints both figures. As root on a machine that runs a node.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${CARGO_TARGET_DIR:-target}/debug"
W=$(mktemp -d "${TMPDIR:-/var/tmp}/k3rs-layout-check-XXXX")
trap 'rm -rf "$W"' EXIT

cargo rustc --locked -p k3rs --bin k3rs -- -C "link-arg=-Wl,--reproduce=$W/link.tar"
cp "$out/k3rs" "$W/k3rs"
bash scripts/order-link.sh "$W/link.tar" "$W/k3rs-ordered"
rm -f "$W/link.tar"

rss_file() {
    local status
    status=$(SETTLE=${SETTLE:-20} bash scripts/idle-memory.sh "$1") || {
        echo "layout-check: $1 did not reach Ready at idle" >&2
        return 1
    }
    echo "$status" | awk '/^RssFile:/ { print $2 }'
}
plain=$(rss_file "$W/k3rs")
ordered=$(rss_file "$W/k3rs-ordered")
echo "layout-check: idle server, file-backed RSS: $(( plain / 1024 )) MiB as linked," \
    "$(( ordered / 1024 )) MiB ordered" >&2
if [ -z "$plain" ] || [ -z "$ordered" ] || [ "$ordered" -ge "$plain" ]; then
    echo "layout-check: the ordered binary does not map less of itself" \
        "(${ordered:-?} kB vs ${plain:-?} kB)" >&2
    exit 1
fi
