#!/usr/bin/env bash
# Installs, with apt-get and only when missing, what building and testing k3rs needs:
# a C toolchain (for crates that build C), and for the tests the reference etcd 3.4
# (etcd-server), etcdctl (etcd-client), openssl and ip (iproute2), and the Python `kubernetes`
# client (pip, in a venv: /var/cache/k3rs-venv, or ~/.cache/k3rs-venv when /var/cache is not
# writable; the python_client test looks there), and for the agent's container tests containerd
# (with ctr), runc, the CNI plugins (/usr/lib/cni), busybox-static (scripts/build-images.sh builds
# the pause and busybox images from it) and iptables, and for install.sh's test shellcheck and
# systemd-analyze (systemd), and for the private registry test docker-registry, skopeo and
# htpasswd (apache2-utils). Rust itself comes from rustup.
#
# Usage: scripts/prereqs.sh [build|run|test]   (default: test)
set -euo pipefail

what="${1:-test}"
need=()

# What the agent runs pods with: containerd (with ctr), runc, the CNI plugins, busybox-static
# (scripts/build-images.sh builds the pause and busybox images from it; the images have no libc,
# so not the dynamically linked busybox) and iptables (the service proxy).
runtime_needs() {
    command -v containerd >/dev/null 2>&1 || need+=(containerd)
    command -v runc >/dev/null 2>&1 || need+=(runc)
    [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
    if ! [ -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
        need+=(busybox-static)
    fi
    command -v iptables >/dev/null 2>&1 || need+=(iptables)
}
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# CronJobs' spec.timeZone is looked up in the system's zoneinfo database (the server needs it).
[ -d /usr/share/zoneinfo/America ] || need+=(tzdata)
# `run`: building, plus what the server's embedded agent needs to run pods.
[ "$what" = run ] && runtime_needs
if [ "$what" = test ]; then
    command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
    command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
    command -v openssl >/dev/null 2>&1 || need+=(openssl)
    # `curl` scrapes /metrics in the HA test.
    command -v curl >/dev/null 2>&1 || need+=(curl)
    # `ip` makes the network namespaces of the HA tests (ha_netns, ha_faults).
    command -v ip >/dev/null 2>&1 || need+=(iproute2)
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    python3 -m venv --help >/dev/null 2>&1 || need+=(python3-venv)
    # The agent's container runtime tests (agent/tests/cri_containerd.rs and the node tests).
    runtime_needs
    command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
    # install.sh's test: shellcheck on the scripts, systemd-analyze verify on the units.
    command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
    command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
    # The private registry test: a registry with htpasswd auth, and skopeo to push to it.
    command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
    command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
    command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
    # The layout check (scripts/layout-check.sh): a loop-mounted ext4, nm and objcopy.
    command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
    command -v losetup >/dev/null 2>&1 || need+=(mount)
    command -v objcopy >/dev/null 2>&1 || need+=(binutils)
fi

if [ "${#need[@]}" -gt 0 ]; then
    echo "prereqs: installing ${need[*]}" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -q
    # Debian's etcd-server package may start a system etcd on 2379; the tests never use
    # that port (they pick free ports), so it does no harm.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "prereqs: cargo not found: install Rust with rustup (https://rustup.rs), then rerun" >&2
    exit 1
fi
if [ "$what" = test ] && ! command -v kubectl >/dev/null 2>&1; then
    # Debian has no current kubectl package; the Kubernetes API tests drive the real one.
    echo "prereqs: kubectl (1.32) is not on the PATH: install it, then rerun" >&2
    exit 1
fi
if [ "$what" = test ]; then
    for component in rustfmt clippy; do
        if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
            echo "prereqs: adding the $component component" >&2
            rustup component add "$component"
        fi
    done
fi

if [ "$what" = test ]; then
    venv="${K3RS_VENV:-/var/cache/k3rs-venv}"
    if ! { mkdir -p "$venv" && [ -w "$venv" ]; } 2>/dev/null; then
        venv="$HOME/.cache/k3rs-venv"
    fi
    if ! "$venv/bin/python3" -c 'import kubernetes' >/dev/null 2>&1; then
        echo "prereqs: installing the Python kubernetes client into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check kubernetes
    fi
fi
