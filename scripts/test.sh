#!/usr/bin/env bash
# The whole k3rs test suite, exactly as CI runs it (.ci/run executes this script):
# installs missing prerequisites, then `cargo fmt --check`, clippy with warnings denied,
# and every test of the workspace, including the end-to-end tests against a real etcd 3.4.
#
# Usage: ./scripts/test.sh [extra `cargo test` arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# Every phase is timed; the table is printed at the end, pass or fail (README: "CI time").
timings=$(mktemp)
started=$SECONDS
report() {
    local rc=$?
    {
        echo "test.sh: phase timings (seconds)"
        cat "$timings"
        printf '  %-44s %6s\n' total $((SECONDS - started))
    } >&2
    rm -f "$timings"
    exit "$rc"
}
trap report EXIT
phase() {
    local name=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    printf '  %-44s %6s%s\n' "$name" $((SECONDS - t0)) "$([ "$rc" -eq 0 ] || echo "  (failed: $rc)")" >>"$timings"
    return "$rc"
}

phase prereqs ./scripts/prereqs.sh test

# Build cache outside the clone (kept between CI runs when the machine is); only speed
# depends on it. Falls back to ./target when that directory cannot be used.
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
    cache=/var/cache/k3rs-target
    if mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ]; then
        export CARGO_TARGET_DIR="$cache"
    fi
fi
echo "test.sh: CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-./target}" >&2

# A persistent cache grows by the incremental state of every commit built; past 40 GiB it
# is trimmed first (a disk that fills up mid-run breaks the datastore tests, not just the
# build). Dependencies stay; only incremental state is rebuilt.
if [ -n "${CARGO_TARGET_DIR:-}" ] && [ -d "$CARGO_TARGET_DIR/debug/incremental" ]; then
    size_kb=$(du -sk "$CARGO_TARGET_DIR" | cut -f1)
    if [ "$size_kb" -gt $((40 * 1024 * 1024)) ]; then
        echo "test.sh: trimming the build cache ($((size_kb / 1024 / 1024)) GiB)" >&2
        rm -rf "$CARGO_TARGET_DIR/debug/incremental"
    fi
fi

# The end-to-end tests fail (never skip) when etcd/etcdctl/openssl are missing.
for tool in etcd etcdctl openssl; do
    command -v "$tool" >/dev/null || { echo "test.sh: $tool is missing" >&2; exit 1; }
done

# Each test binary's own time, from the harness's "Running …" and "finished in" lines.
binary_times() {
    awk '/^ *Running / { name = $NF; gsub(/[()]/, "", name); sub(/.*\//, "", name)
                         sub(/-[0-9a-f]+$/, "", name); if ($2 == "unittests") name = name " (unit)" }
         /^ *Doc-tests / { name = $2 " (doc)" }
         /^test result:/ { for (i = 1; i <= NF; i++) if ($i == "in") t = $(i + 1);
                           sub(/s$/, "", t); printf "  test %-39s %6.0f\n", name, t }' "$1" >>"$timings"
}

set -x
phase fmt cargo fmt --all --check
phase clippy cargo clippy --workspace --all-targets -- -D warnings
phase build cargo test --workspace --no-run
log=$(mktemp)
rc=0
phase test bash -o pipefail -c 'cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$0"' "$log" "$@" || rc=$?
binary_times "$log"
rm -f "$log"
# scripts/order-link.sh (release.sh --order) on the debug build: the ordered binary runs a
# node and maps less of itself at idle than the binary it came from.
phase layout bash scripts/layout-check.sh || rc=$?
exit "$rc"
