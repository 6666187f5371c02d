#!/usr/bin/env bash
# Sets up and runs k3rs on a fresh Debian/Ubuntu machine: installs the build prerequisites
# and, as root, the container runtime (containerd, runc, CNI plugins, iptables) when missing
# (Rust itself comes from rustup), builds the release binary and the pause/busybox images, and
# runs `k3rs server` with its embedded agent in the foreground: a single-node cluster (Ctrl-C
# stops it). Not as root, the server runs without its agent.
#
# Usage: ./scripts/run.sh [extra `k3rs server` flags]
# Environment: K3RS_DATA_DIR (default: /var/lib/k3rs as root, else ~/.local/share/k3rs),
#              K3RS_ETCD_CLIENT_PORT (default 2379),
#              K3RS_KUBECONFIG_OUTPUT (default: /etc/k3rs/k3rs.yaml as root, else <data dir>/k3rs.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then ./scripts/prereqs.sh run; else ./scripts/prereqs.sh build; fi
cargo build --release --bin k3rs

if [ "$(id -u)" -eq 0 ]; then default_dir=/var/lib/k3rs; else default_dir="$HOME/.local/share/k3rs"; fi
data_dir="${K3RS_DATA_DIR:-$default_dir}"
if [ "$(id -u)" -eq 0 ]; then default_kc=/etc/k3rs/k3rs.yaml; else default_kc="$data_dir/k3rs.yaml"; fi
export K3RS_KUBECONFIG_OUTPUT="${K3RS_KUBECONFIG_OUTPUT:-$default_kc}"
port="${K3RS_ETCD_CLIENT_PORT:-2379}"
target="${CARGO_TARGET_DIR:-target}"

agent=()
if [ "$(id -u)" -eq 0 ]; then
    # The embedded agent runs pods; its images (pause, busybox) are imported from here at start.
    if ! ls "$data_dir"/agent/images/*.tar >/dev/null 2>&1; then
        ./scripts/build-images.sh "$data_dir/agent/images"
    fi
else
    echo "k3rs: not root: no embedded agent (--disable-agent); the cluster has no node to run pods" >&2
    agent=(--disable-agent)
fi

echo "k3rs: data dir $data_dir, etcd API on https://127.0.0.1:$port" >&2
echo "k3rs: etcdctl certs in $data_dir/server/tls/etcd/ (see README.md)" >&2
echo "k3rs: Kubernetes API on https://127.0.0.1:${K3RS_HTTPS_LISTEN_PORT:-6443}, kubeconfig $K3RS_KUBECONFIG_OUTPUT" >&2
exec "$target/release/k3rs" server --data-dir "$data_dir" --etcd-client-port "$port" ${agent[@]+"${agent[@]}"} "$@"
