#!/usr/bin/env bash
# The whole k3rs test suite, exactly as CI runs it (.ci/run executes this script):
# installs missing prerequisites, then `cargo fmt --check`, clippy with warnings denied,
# and every test of the workspace, including the end-to-end tests against a real etcd 3.4.
#
# Usage: ./scripts/test.sh [extra `cargo test` arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/prereqs.sh test

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

set -x
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --no-fail-fast "$@"
