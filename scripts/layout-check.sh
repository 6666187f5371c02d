#!/bin/bash
# CI's check of `scripts/release.sh --order` (scripts/test.sh, phase "layout"), on the debug
# build: release.sh --profile dev --order builds target/debug/k3rs keeping lld's reproduce
# tarball (only the crates whose features differ from the test build's compile), orders it
# with scripts/order-link.sh and packages it (the air-gap images are written by the ordered
# binary); then each binary, the one cargo linked and the packaged one, is started as
# scripts/idle-memory.sh does (server with the embedded agent until Ready and SETTLE seconds
# more) and the file-backed part of their resident memory is compared: the ordered binary
# must reach Ready and map less of itself. Prints both figures. As root on a machine that
# runs a node.
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d "${TMPDIR:-/var/tmp}/k3rs-layout-check-XXXX")
trap 'rm -rf "$W"' EXIT

DIST="$W/dist" bash scripts/release.sh --profile dev --order
cp "${CARGO_TARGET_DIR:-target}/debug/k3rs" "$W/k3rs"
ordered=$(find "$W/dist" -name 'k3rs-*' ! -name '*.tar')
(cd "$W/dist" && sha256sum --check --quiet sha256sum-*.txt)

rss_file() {
    local status
    status=$(SETTLE=${SETTLE:-20} bash scripts/idle-memory.sh "$1") || {
        echo "layout-check: $1 did not reach Ready at idle" >&2
        return 1
    }
    echo "$status" | awk '/^RssFile:/ { print $2 }'
}
plain_kb=$(rss_file "$W/k3rs")
ordered_kb=$(rss_file "$ordered")
echo "layout-check: idle server, file-backed RSS: $((plain_kb / 1024)) MiB as linked," \
    "$((ordered_kb / 1024)) MiB ordered" >&2
if [ -z "$plain_kb" ] || [ -z "$ordered_kb" ] || [ "$ordered_kb" -ge "$plain_kb" ]; then
    echo "layout-check: the ordered binary does not map less of itself" \
        "(${ordered_kb:-?} kB vs ${plain_kb:-?} kB)" >&2
    exit 1
fi
