#!/bin/sh
# Installs k3rs as a service, the way k3s's installer does (same variables, k3rs names).
#
# Usage:
#   curl -sfL <url>/install.sh | sh -                                  a server
#   curl -sfL <url>/install.sh | K3RS_URL=https://srv:6443 K3RS_TOKEN=K10... sh -   an agent
#   curl -sfL <url>/install.sh | sh -s - server --tls-san=k3rs.example    flags for the service
#   INSTALL_K3RS_FROM_SOURCE=1 ./install.sh                            from this checkout
# Run it as root (`| sudo sh -`); pass variables after sudo (`sudo K3RS_URL=... sh -`).
#
# Environment variables:
#   K3RS_*                     Written to the service's environment file (mode 0600) for the
#                              k3rs binary, which reads them as its flags (K3RS_URL = --server,
#                              K3RS_TOKEN = --token, ...). K3RS_URL without a command selects
#                              `agent` and then K3RS_TOKEN or K3RS_TOKEN_FILE is required.
#                              HTTP_PROXY, HTTPS_PROXY and NO_PROXY are kept too.
#   INSTALL_K3RS_EXEC          Command and flags of the service (`server ...`, `agent ...`, or
#                              only flags); the script's arguments are appended to it. Split at
#                              white space: give flags with spaces as script arguments.
#   INSTALL_K3RS_NAME          Service name is k3rs-<name> (default: k3rs for a server,
#                              k3rs-agent for an agent).
#   INSTALL_K3RS_VERSION       Release to download (default: the latest release).
#   INSTALL_K3RS_DOWNLOAD_URL  Directory URL holding k3rs-<arch> and sha256sum-<arch>.txt
#                              (a mirror, or file:///path/to/dist); overrides the release URL.
#   INSTALL_K3RS_RELEASES_URL  Releases base URL (default https://github.com/k3rs/k3rs/releases;
#                              files come from <it>/download/<version> or <it>/latest/download).
#   INSTALL_K3RS_BIN           Install this local k3rs binary instead of downloading one.
#   INSTALL_K3RS_SKIP_DOWNLOAD true: use the k3rs binary already in INSTALL_K3RS_BIN_DIR.
#   INSTALL_K3RS_FROM_SOURCE   1: `cargo build --release` the checkout this script is in.
#   INSTALL_K3RS_BIN_DIR       Binary, symlink and scripts go here (default /usr/local/bin).
#   INSTALL_K3RS_SYSTEMD_DIR   Unit and env file go here (default /etc/systemd/system).
#   INSTALL_K3RS_SYMLINK       skip: no kubectl/crictl symlinks; force: replace existing ones;
#                              default: link kubectl and crictl -> k3rs when not on the PATH
#                              (kubectl only when there is a kubectl for it to run).
#   INSTALL_K3RS_SKIP_KUBECTL  true: do not download kubectl. Otherwise, when no kubectl is on
#                              the PATH, the official kubectl (the pinned KUBECTL_VERSION below)
#                              is downloaded, checked against its published sha256, and
#                              installed as <bin dir>/k3rs-kubectl, which `k3rs kubectl` and the
#                              kubectl -> k3rs link run with the admin kubeconfig.
#   INSTALL_K3RS_KUBECTL_URL   Directory URL holding kubectl and kubectl.sha256 (a mirror, or
#                              file://; default https://dl.k8s.io/release/<version>/bin/linux/<arch>).
#   INSTALL_K3RS_SKIP_ENABLE   true: neither enable nor start the service.
#   INSTALL_K3RS_SKIP_START    true: enable but do not (re)start the service.
#   INSTALL_K3RS_FORCE_RESTART true: restart the service even when nothing changed.
#   INSTALL_K3RS_SKIP_PREREQS  true: do not check for (or install) containerd, runc, the CNI
#                              plugins, iptables, the memory cgroup and kernel modules.
#   INSTALL_K3RS_INIT          systemd or openrc (default: what the machine runs).
#   INSTALL_K3RS_ROOT          Install under this directory instead of / (a scratch root for
#                              tests or image building): every file is written below it, and
#                              nothing touches the running system: systemctl, rc-update, package
#                              managers and service restarts are logged as "skipped (root ...)"
#                              instead of run, and enabling is done by writing the symlink
#                              systemctl/rc-update would write. The generated k3rs-killall.sh and
#                              <name>-uninstall.sh honour the same variable.
#
# Nothing is changed before the downloads are verified: an unsupported system (not Linux, an
# architecture without a release, neither systemd nor OpenRC) or a checksum mismatch stops the
# script with the root as it was.
#
# Re-running with the same inputs changes no file and restarts nothing; when the binary, the
# unit or the environment file changes, the service is reloaded and restarted. Directories the
# installer creates are listed in /etc/k3rs/.installer-dirs, so the uninstaller removes exactly
# those (when empty) after the last k3rs service is gone.
set -eu

# The kubectl downloaded when the machine has none (the Kubernetes version k3rs serves).
KUBECTL_VERSION=v1.33.0

info() { echo "[INFO]  $*"; }
warn() { echo "[WARN]  $*" >&2; }
fatal() {
    echo "[ERROR] $*" >&2
    exit 1
}

# --- the root everything is written under: "" for the real system ---
setup_root() {
    R=${INSTALL_K3RS_ROOT:-/}
    case $R in
    /*) ;;
    *) fatal "INSTALL_K3RS_ROOT must be an absolute path (have $R)" ;;
    esac
    while [ "${R%/}" != "$R" ]; do R=${R%/}; done
    if [ -n "$R" ]; then
        [ -d "$R" ] || fatal "INSTALL_K3RS_ROOT $R is not a directory"
        info "Installing under the scratch root $R; the running system is left alone"
    elif [ "$(id -u)" -ne 0 ]; then
        fatal "Run the installer as root (curl ... | sudo sh -)"
    fi
}

# --- runs a command that acts on the running system; only logged under a scratch root ---
on_host() {
    if [ -n "$R" ]; then
        info "skipped (root $R): $*"
    else
        info "running: $*"
        "$@"
    fi
}

# --- mkdir -p that records each directory it creates in the installer's list ---
DIRS_LIST=/etc/k3rs/.installer-dirs
mkdir_p() {
    new=""
    d=$1
    while [ ! -d "$R$d" ]; do
        new="$d $new"
        d=$(dirname "$d")
    done
    [ -n "$new" ] || return 0
    mkdir -p "$R$1"
    for d in $new; do
        if ! grep -qxF "$d" "$R$DIRS_LIST" 2>/dev/null; then
            printf '%s\n' "$d" >>"$R$DIRS_LIST"
        fi
    done
}

# --- installs $1 as $2 (a path below the root) with mode $3 unless the same file is there ---
# Returns 0 when it wrote the file, 1 when the file was already identical.
put_file() {
    dest=$R$2
    if [ -f "$dest" ] && cmp -s "$1" "$dest"; then
        if [ "$(stat -c %a "$dest")" != "${3#0}" ]; then
            chmod "$3" "$dest"
            info "Set mode $3 on $2"
        fi
        info "Unchanged: $2"
        return 1
    fi
    mkdir_p "$(dirname "$2")"
    rm -f "$dest.k3rs-new"
    (umask 077 && cp "$1" "$dest.k3rs-new")
    chmod "$3" "$dest.k3rs-new"
    mv -f "$dest.k3rs-new" "$dest"
    info "Wrote $2"
    return 0
}

# --- a value as the environment file and systemd read it (double quotes when needed) ---
quote_value() {
    case $1 in
    *[!A-Za-z0-9_./:@,+=%-]* | "")
        printf '"%s"' "$(printf '%s' "$1" | sed -e 's/[\\"$`]/\\&/g')"
        ;;
    *) printf '%s' "$1" ;;
    esac
}

# --- an ExecStart argument: % and $ doubled for systemd, quoted when needed ---
quote_unit_arg() {
    v=$(printf '%s' "$1" | sed -e 's/%/%%/g; s/\$/$$/g')
    case $v in
    *[!A-Za-z0-9_./:@,+=%\$-]* | "")
        printf '"%s"' "$(printf '%s' "$v" | sed -e 's/[\\"]/\\&/g')"
        ;;
    *) printf '%s' "$v" ;;
    esac
}

# --- a shell word in single quotes (OpenRC's command_args) ---
quote_shell() {
    printf "'%s'" "$(printf '%s' "$1" | sed -e "s/'/'\\\\''/g")"
}

# --- command, service name and file names from INSTALL_K3RS_EXEC, arguments and K3RS_URL ---
setup_env() {
    case ${1:-} in
    "" | -*)
        if [ -n "${K3RS_URL:-}" ]; then CMD=agent; else CMD=server; fi
        ;;
    *)
        CMD=$1
        shift
        ;;
    esac
    case $CMD in
    server | agent) ;;
    *) fatal "Unknown k3rs command '$CMD' for the service: use server or agent" ;;
    esac
    case ${K3RS_URL:-} in
    "" | https://*) ;;
    *) fatal "K3RS_URL must be an https:// URL (have ${K3RS_URL})" ;;
    esac
    if [ "$CMD" = agent ] && [ -n "${K3RS_URL:-}" ] &&
        [ -z "${K3RS_TOKEN:-}" ] && [ -z "${K3RS_TOKEN_FILE:-}" ]; then
        fatal "K3RS_URL is set, so k3rs runs as an agent, but neither K3RS_TOKEN nor K3RS_TOKEN_FILE is set: set one to the join token (the server's /var/lib/k3rs/server/agent-token, or 'k3rs token create')"
    fi
    EXEC_ARGS=""
    EXEC_UNIT="    $CMD"
    for arg in "$@"; do
        EXEC_ARGS="$EXEC_ARGS $(quote_shell "$arg")"
        EXEC_UNIT="$EXEC_UNIT \\
    $(quote_unit_arg "$arg")"
    done
    NEEDS_RUNTIME=true
    for arg in "$@"; do
        if [ "$CMD" = server ] && [ "$arg" = --disable-agent ]; then NEEDS_RUNTIME=false; fi
    done

    if [ -n "${INSTALL_K3RS_NAME:-}" ]; then
        NAME=k3rs-$INSTALL_K3RS_NAME
    elif [ "$CMD" = server ]; then
        NAME=k3rs
    else
        NAME=k3rs-$CMD
    fi
    case $NAME in
    *[!A-Za-z0-9_.-]*) fatal "Invalid characters in the service name '$NAME'" ;;
    esac

    BIN_DIR=${INSTALL_K3RS_BIN_DIR:-/usr/local/bin}
    SYSTEMD_DIR=${INSTALL_K3RS_SYSTEMD_DIR:-/etc/systemd/system}
    if [ -z "${INSTALL_K3RS_INIT:-}" ]; then
        if [ -x "$R/sbin/openrc-run" ]; then
            INSTALL_K3RS_INIT=openrc
        elif [ -d "$R/run/systemd/system" ] || [ -x "$R/bin/systemctl" ] ||
            [ -x "$R/usr/bin/systemctl" ]; then
            INSTALL_K3RS_INIT=systemd
        else
            fatal "Found neither systemd nor OpenRC to run k3rs (set INSTALL_K3RS_INIT=systemd|openrc)"
        fi
    fi
    case $INSTALL_K3RS_INIT in
    systemd)
        FILE_SERVICE=$SYSTEMD_DIR/$NAME.service
        FILE_ENV=$SYSTEMD_DIR/$NAME.service.env
        ;;
    openrc)
        FILE_SERVICE=/etc/init.d/$NAME
        FILE_ENV=/etc/k3rs/$NAME.env
        ;;
    *) fatal "INSTALL_K3RS_INIT must be systemd or openrc (have $INSTALL_K3RS_INIT)" ;;
    esac
    KILLALL_SH=$BIN_DIR/k3rs-killall.sh
    UNINSTALL_SH=$BIN_DIR/$NAME-uninstall.sh
    TMP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/k3rs-install.XXXXXXXX")
    trap 'rm -rf "$TMP_DIR"' EXIT
    CHANGED=false
    RELOAD=false
}

# --- prerequisites: report, then install the missing packages or say what to install ---
package_manager() {
    for pm in apt-get dnf yum apk zypper; do
        if command -v "$pm" >/dev/null 2>&1; then
            echo "$pm"
            return
        fi
    done
}

# The packages holding containerd, runc, the CNI plugins and iptables for a package manager.
package_name() {
    case $1:$2 in
    apt-get:cni | dnf:cni | yum:cni) echo containernetworking-plugins ;;
    apk:cni | zypper:cni) echo cni-plugins ;;
    *) echo "$2" ;;
    esac
}

cni_dir() {
    for d in /usr/lib/cni /opt/cni/bin /usr/libexec/cni; do
        if [ -x "$d/bridge" ] && [ -x "$d/host-local" ] && [ -x "$d/loopback" ]; then
            echo "$d"
            return
        fi
    done
}

check_prereqs() {
    if [ "${INSTALL_K3RS_SKIP_PREREQS:-}" = true ]; then
        info "Skipping the prerequisite checks (INSTALL_K3RS_SKIP_PREREQS=true)"
        return
    fi
    missing=""
    if [ "$NEEDS_RUNTIME" = true ]; then
        for prog in containerd runc iptables; do
            if command -v "$prog" >/dev/null 2>&1; then
                info "prerequisite $prog: found ($(command -v "$prog"))"
            else
                info "prerequisite $prog: missing"
                missing="$missing $prog"
            fi
        done
        if [ -n "$(cni_dir)" ]; then
            info "prerequisite CNI plugins: found ($(cni_dir))"
        else
            info "prerequisite CNI plugins: missing (bridge, host-local, loopback in /usr/lib/cni or /opt/cni/bin)"
            missing="$missing cni"
        fi
    fi
    if grep -qsw memory /sys/fs/cgroup/cgroup.controllers ||
        grep -qsE '^memory[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+1' /proc/cgroups; then
        info "prerequisite memory cgroup: enabled"
    else
        warn "The memory cgroup is not enabled: add 'cgroup_memory=1 cgroup_enable=memory' to the kernel command line (/boot/cmdline.txt on a Raspberry Pi) and reboot"
    fi
    for mod in overlay br_netfilter; do
        if [ -d "/sys/module/$mod" ]; then
            info "prerequisite kernel module $mod: loaded"
        elif command -v modprobe >/dev/null 2>&1 && modprobe -n "$mod" >/dev/null 2>&1; then
            info "prerequisite kernel module $mod: available (the service loads it)"
        else
            warn "Kernel module $mod is neither loaded nor loadable: install your kernel's modules package, or build a kernel with CONFIG_$(echo "$mod" | tr '[:lower:]' '[:upper:]' | sed -e 's/^OVERLAY$/OVERLAY_FS/; s/^BR_NETFILTER$/BRIDGE_NETFILTER/')"
        fi
    done
    [ -n "$missing" ] || return 0

    pm=$(package_manager)
    if [ -z "$pm" ]; then
        fatal "Missing:$missing (containerd, runc, the CNI plugins bridge/host-local/loopback into /opt/cni/bin, iptables) and no apt-get, dnf, yum, apk or zypper to install them: install them, or set INSTALL_K3RS_SKIP_PREREQS=true"
    fi
    pkgs=""
    for m in $missing; do pkgs="$pkgs $(package_name "$pm" "$m")"; done
    pkgs=${pkgs# }
    info "Installing the missing prerequisites with $pm: $pkgs"
    # shellcheck disable=SC2086 # one word per package
    case $pm in
    apt-get)
        on_host apt-get update -q
        on_host env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkgs
        ;;
    dnf | yum) on_host "$pm" install -y $pkgs ;;
    apk) on_host apk add --no-cache $pkgs ;;
    zypper) on_host zypper --non-interactive install $pkgs ;;
    esac
    if [ -z "$R" ] && [ -n "$(echo "$missing" | grep -w cni || true)" ] && [ -z "$(cni_dir)" ]; then
        fatal "$pm installed $(package_name "$pm" cni) but no bridge/host-local/loopback plugins are in /usr/lib/cni or /opt/cni/bin: link or copy them into /opt/cni/bin"
    fi
}

# --- the k3rs binary: a local file, the one in place, a source build, or a verified download ---
setup_arch() {
    case $(uname -m) in
    x86_64 | amd64) ARCH=amd64 ;;
    aarch64 | arm64) ARCH=arm64 ;;
    armv7* | armv6* | arm) ARCH=arm ;;
    s390x) ARCH=s390x ;;
    riscv64) ARCH=riscv64 ;;
    ppc64le) ARCH=ppc64le ;;
    *) fatal "Unsupported architecture $(uname -m)" ;;
    esac
}

download() {
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL -o "$1" "$2" || fatal "Download of $2 failed"
    elif command -v wget >/dev/null 2>&1; then
        wget -qO "$1" "$2" || fatal "Download of $2 failed"
    else
        fatal "Found neither curl nor wget to download $2"
    fi
}

sha256() {
    h=$(sha256sum "$1")
    echo "${h%%[[:space:]]*}"
}

# Downloads URL $2 to $3 and stops unless its sha256 is $1 ($5 says who published that sum);
# returns 1 without downloading when the installed $4 (a path below the root) has it already.
fetch_verified() {
    fv_name=${2##*/}
    if [ -x "$R$4" ] && [ "$(sha256 "$R$4")" = "$1" ]; then
        info "Unchanged: $4 (its sha256 matches $5's)"
        return 1
    fi
    info "Downloading $2"
    download "$3" "$2"
    fv_got=$(sha256 "$3")
    if [ "$fv_got" != "$1" ]; then
        fatal "The sha256 of $fv_name is $fv_got, $5 says $1: refusing to install it"
    fi
    info "Verified the sha256 of $fv_name ($fv_got)"
}

download_binary() {
    setup_arch
    if [ -n "${INSTALL_K3RS_DOWNLOAD_URL:-}" ]; then
        url=${INSTALL_K3RS_DOWNLOAD_URL%/}
    elif [ -n "${INSTALL_K3RS_VERSION:-}" ]; then
        url=${INSTALL_K3RS_RELEASES_URL:-https://github.com/k3rs/k3rs/releases}/download/$INSTALL_K3RS_VERSION
    else
        url=${INSTALL_K3RS_RELEASES_URL:-https://github.com/k3rs/k3rs/releases}/latest/download
    fi
    info "Downloading the checksums $url/sha256sum-$ARCH.txt"
    download "$TMP_DIR/sha256sum.txt" "$url/sha256sum-$ARCH.txt"
    expected=$(awk -v f="k3rs-$ARCH" '$2 == f || $2 == "*" f { print $1; exit }' "$TMP_DIR/sha256sum.txt")
    [ -n "$expected" ] || fatal "$url/sha256sum-$ARCH.txt has no checksum for k3rs-$ARCH"
    if fetch_verified "$expected" "$url/k3rs-$ARCH" "$TMP_DIR/k3rs" "$BIN_DIR/k3rs" "the release"; then
        NEW_BIN=$TMP_DIR/k3rs
    fi
}

build_from_source() {
    src=$(cd "$(dirname "$0")" && pwd)
    grep -qs '^name = "k3rs"' "$src/Cargo.toml" ||
        fatal "INSTALL_K3RS_FROM_SOURCE=1 needs the script inside a k3rs checkout (run ./install.sh there, not through a pipe)"
    command -v cargo >/dev/null 2>&1 || fatal "INSTALL_K3RS_FROM_SOURCE=1 needs cargo (https://rustup.rs)"
    info "Building k3rs from $src (cargo build --release --bin k3rs)"
    (cd "$src" && cargo build --release --bin k3rs)
    NEW_BIN=${CARGO_TARGET_DIR:-$src/target}/release/k3rs
}

# Sets NEW_BIN to the verified binary to install, or leaves it empty to keep the one in place.
# Runs before anything is written, so a failed download or build leaves the root untouched.
get_binary() {
    NEW_BIN=""
    if [ -n "${INSTALL_K3RS_BIN:-}" ]; then
        [ -f "$INSTALL_K3RS_BIN" ] || fatal "INSTALL_K3RS_BIN $INSTALL_K3RS_BIN is not a file"
        NEW_BIN=$INSTALL_K3RS_BIN
    elif [ "${INSTALL_K3RS_SKIP_DOWNLOAD:-}" = true ]; then
        [ -x "$R$BIN_DIR/k3rs" ] ||
            fatal "INSTALL_K3RS_SKIP_DOWNLOAD=true but there is no executable k3rs at $BIN_DIR/k3rs"
        info "Using the k3rs binary in place ($BIN_DIR/k3rs)"
    elif [ "${INSTALL_K3RS_FROM_SOURCE:-}" = 1 ]; then
        build_from_source
    else
        download_binary
    fi
}

# --- kubectl: the PATH's, else the official one downloaded beside k3rs ---
PRIVATE_KUBECTL=k3rs-kubectl

# The first kubectl on the PATH (below the root) that is not a link to k3rs.
real_kubectl() {
    old_ifs=$IFS
    IFS=:
    for dir in $PATH; do
        f=$R$dir/kubectl
        if [ -n "$dir" ] && [ -x "$f" ] && [ ! -d "$f" ] && [ "$(readlink "$f" || true)" != k3rs ]; then
            IFS=$old_ifs
            echo "$dir/kubectl"
            return 0
        fi
    done
    IFS=$old_ifs
    return 1
}

# Sets NEW_KUBECTL to a verified kubectl to install as $BIN_DIR/$PRIVATE_KUBECTL, or leaves it
# empty (skipped, a kubectl on the PATH, or the same one installed already).
get_kubectl() {
    NEW_KUBECTL=""
    if [ "${INSTALL_K3RS_SKIP_KUBECTL:-}" = true ]; then
        info "Not downloading kubectl (INSTALL_K3RS_SKIP_KUBECTL=true)"
        return
    fi
    if found=$(real_kubectl); then
        info "kubectl: using $found"
        return
    fi
    setup_arch
    url=${INSTALL_K3RS_KUBECTL_URL:-https://dl.k8s.io/release/$KUBECTL_VERSION/bin/linux/$ARCH}
    url=${url%/}
    info "No kubectl on the PATH: downloading the checksum $url/kubectl.sha256"
    download "$TMP_DIR/kubectl.sha256" "$url/kubectl.sha256"
    expected=$(awk '{ print $1; exit }' "$TMP_DIR/kubectl.sha256")
    case $expected in
    [0-9a-f]*) [ ${#expected} -eq 64 ] || fatal "$url/kubectl.sha256 holds no sha256" ;;
    *) fatal "$url/kubectl.sha256 holds no sha256" ;;
    esac
    if fetch_verified "$expected" "$url/kubectl" "$TMP_DIR/kubectl" "$BIN_DIR/$PRIVATE_KUBECTL" "$url/kubectl.sha256"; then
        NEW_KUBECTL=$TMP_DIR/kubectl
    fi
}

# --- the first executable $1 in the PATH's directories below the root ---
on_path() {
    old_ifs=$IFS
    IFS=:
    for dir in $PATH; do
        if [ -n "$dir" ] && [ -x "$R$dir/$1" ] && [ ! -d "$R$dir/$1" ]; then
            IFS=$old_ifs
            echo "$dir/$1"
            return 0
        fi
    done
    IFS=$old_ifs
    return 1
}

# --- kubectl, crictl -> k3rs (k3rs run as kubectl is `k3rs kubectl`: the admin kubeconfig;
# as crictl, `k3rs crictl`: the node's containerd) ---
create_symlinks() {
    [ "${INSTALL_K3RS_SYMLINK:-}" = skip ] && return 0
    for cmd in kubectl crictl; do
        link=$BIN_DIR/$cmd
        if [ "$cmd" = kubectl ] && [ ! -x "$R$BIN_DIR/$PRIVATE_KUBECTL" ] && ! real_kubectl >/dev/null; then
            if [ "$(readlink "$R$link" 2>/dev/null || true)" = k3rs ]; then
                rm -f "$R$link"
                info "Removed $link -> k3rs: there is no kubectl for it to run"
            else
                info "Not linking $link -> k3rs: there is no kubectl for it to run (install one, or run without INSTALL_K3RS_SKIP_KUBECTL; then 'k3rs kubectl' uses it)"
            fi
            continue
        fi
        if [ -L "$R$link" ] && [ "$(readlink "$R$link")" = k3rs ]; then
            info "Unchanged: $link -> k3rs"
        elif [ "${INSTALL_K3RS_SYMLINK:-}" = force ]; then
            ln -sfn k3rs "$R$link"
            info "Linked $link -> k3rs (INSTALL_K3RS_SYMLINK=force)"
        elif [ -e "$R$link" ] || [ -L "$R$link" ]; then
            info "Not linking $link -> k3rs: $link exists"
        elif found=$(on_path "$cmd"); then
            info "Not linking $link -> k3rs: $cmd is on the PATH at $found"
        else
            ln -s k3rs "$R$link"
            info "Linked $link -> k3rs"
        fi
    done
}

# --- the environment file: K3RS_* and the proxy variables, sorted, mode 0600 ---
create_env_file() {
    : >"$TMP_DIR/env"
    names=$(env | sed -n -e 's/^\(K3RS_[A-Za-z0-9_]*\)=.*/\1/p' \
        -e 's/^\([Hh][Tt][Tt][Pp][Ss]\{0,1\}_[Pp][Rr][Oo][Xx][Yy]\)=.*/\1/p' \
        -e 's/^\([Nn][Oo]_[Pp][Rr][Oo][Xx][Yy]\)=.*/\1/p' | sort -u)
    for n in $names; do
        eval "v=\${$n:-}"
        # shellcheck disable=SC2154 # v is set by the eval
        printf '%s=%s\n' "$n" "$(quote_value "$v")" >>"$TMP_DIR/env"
    done
    if put_file "$TMP_DIR/env" "$FILE_ENV" 0600; then
        CHANGED=true
        RELOAD=true
    fi
}

systemd_unit() {
    cat <<EOF
[Unit]
Description=k3rs, a lightweight Kubernetes
Wants=network-online.target
After=network-online.target

[Install]
WantedBy=multi-user.target

[Service]
Type=notify
EnvironmentFile=-/etc/default/%N
EnvironmentFile=-/etc/sysconfig/%N
EnvironmentFile=-$FILE_ENV
KillMode=process
Delegate=yes
User=root
# Limits left unlimited: containers get theirs from their own cgroups.
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
# Starting sends STATUS= progress (systemctl status shows what it waits for); a start that
# is not READY in 15 minutes fails instead of hanging.
TimeoutStartSec=15min
Restart=always
RestartSec=5s
ExecStartPre=-/sbin/modprobe br_netfilter
ExecStartPre=-/sbin/modprobe overlay
ExecStart=$BIN_DIR/k3rs \\
$EXEC_UNIT
EOF
}

openrc_script() {
    cat <<EOF
#!/sbin/openrc-run
# The variables below are read by openrc-run, which sources this file.
# shellcheck shell=sh disable=SC2034,SC1091

depend() {
    after network-online
    want cgroups
}

start_pre() {
    modprobe br_netfilter 2>/dev/null || true
    modprobe overlay 2>/dev/null || true
}

supervisor=supervise-daemon
name=$NAME
command="$BIN_DIR/k3rs"
command_args="$CMD$(printf '%s' "$EXEC_ARGS" | sed -e 's/[\\"$`]/\\&/g') >>/var/log/$NAME.log 2>&1"
output_log=/var/log/$NAME.log
error_log=/var/log/$NAME.log
pidfile="/var/run/$NAME.pid"
respawn_delay=5
respawn_max=0
rc_ulimit="-n 1048576"

set -o allexport
if [ -f /etc/environment ]; then . /etc/environment; fi
if [ -f $FILE_ENV ]; then . $FILE_ENV; fi
set +o allexport
EOF
}

create_service_file() {
    if [ "$INSTALL_K3RS_INIT" = systemd ]; then
        systemd_unit >"$TMP_DIR/service"
        if put_file "$TMP_DIR/service" "$FILE_SERVICE" 0644; then
            CHANGED=true
            RELOAD=true
        fi
    else
        openrc_script >"$TMP_DIR/service"
        if put_file "$TMP_DIR/service" "$FILE_SERVICE" 0755; then CHANGED=true; fi
        printf '/var/log/%s.log {\n\tmissingok\n\tnotifempty\n\tcopytruncate\n}\n' "$NAME" >"$TMP_DIR/logrotate"
        put_file "$TMP_DIR/logrotate" "/etc/logrotate.d/$NAME" 0644 || true
    fi
}

# --- enable, then restart only when something changed ---
service_enable_and_start() {
    if [ "${INSTALL_K3RS_SKIP_ENABLE:-}" = true ]; then
        info "Not enabling or starting $NAME (INSTALL_K3RS_SKIP_ENABLE=true)"
        return
    fi
    if [ "$INSTALL_K3RS_INIT" = systemd ]; then
        # The unit or its environment file changed: systemd reads both again.
        if [ "$RELOAD" = true ]; then on_host systemctl daemon-reload; fi
        wants=$SYSTEMD_DIR/multi-user.target.wants
        if [ -n "$R" ]; then
            if [ "$(readlink "$R$wants/$NAME.service" 2>/dev/null || true)" = "$FILE_SERVICE" ]; then
                info "Unchanged: $NAME is enabled"
            else
                mkdir_p "$wants"
                ln -sfn "$FILE_SERVICE" "$R$wants/$NAME.service"
                info "Enabled $NAME (linked $wants/$NAME.service, as systemctl enable does)"
            fi
        elif systemctl is-enabled --quiet "$NAME" 2>/dev/null; then
            info "Unchanged: $NAME is enabled"
        else
            on_host systemctl enable "$NAME"
        fi
        restart="systemctl restart $NAME"
    else
        runlevel=/etc/runlevels/default
        if [ -L "$R$runlevel/$NAME" ]; then
            info "Unchanged: $NAME is in the default runlevel"
        elif [ -n "$R" ]; then
            mkdir_p "$runlevel"
            ln -sfn "$FILE_SERVICE" "$R$runlevel/$NAME"
            info "Enabled $NAME (linked $runlevel/$NAME, as rc-update add does)"
        else
            on_host rc-update add "$NAME" default
        fi
        restart="$FILE_SERVICE restart"
    fi
    if [ "${INSTALL_K3RS_SKIP_START:-}" = true ]; then
        info "Not starting $NAME (INSTALL_K3RS_SKIP_START=true)"
    elif [ "$CHANGED" = false ] && [ "${INSTALL_K3RS_FORCE_RESTART:-}" != true ]; then
        info "No change: not restarting $NAME"
    else
        # shellcheck disable=SC2086 # the command and its arguments
        on_host $restart
    fi
}

# --- the scripts: generated from the files next to this one when present ---
killall_script() {
    cat <<'EOF'
#!/bin/sh
# Stops every k3rs service and what k3rs started: its containerd and the containerd-shims of
# its pods; unmounts the pods' mounts, deletes the pods' network namespaces, the CNI bridge and
# veths, and the KUBE-/CNI- iptables rules. Data is kept (the uninstall script removes it).
# Generated by k3rs's install.sh. Under INSTALL_K3RS_ROOT (a scratch root) only the mounts
# below that root are touched: processes, interfaces and iptables belong to the running system.
set -eu
R=${INSTALL_K3RS_ROOT:-/}
while [ "${R%/}" != "$R" ]; do R=${R%/}; done
[ -n "$R" ] || [ "$(id -u)" -eq 0 ] || exec sudo --preserve-env=K3RS_DATA_DIR "$0" "$@"
K3RS_DATA_DIR=${K3RS_DATA_DIR:-/var/lib/k3rs}

unmount_under() {
    awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/self/mounts |
        sort -r | while read -r m; do
        echo "+ umount $m"
        umount -f "$m" || umount -l "$m" || true
    done
}

if [ -n "$R" ]; then
    echo "Scratch root $R: not stopping services or processes, not touching interfaces or iptables"
    unmount_under "$R$K3RS_DATA_DIR"
    unmount_under "$R/run/k3rs"
    exit 0
fi

for service in /etc/systemd/system/k3rs*.service; do
    [ -s "$service" ] || continue
    echo "+ systemctl stop $(basename "$service")"
    systemctl stop "$(basename "$service")" || true
done
for service in /etc/init.d/k3rs*; do
    [ -x "$service" ] || continue
    echo "+ $service stop"
    "$service" stop || true
done

children() {
    ps -e -o ppid= -o pid= | awk -v p="$1" '$1 == p { print $2 }'
}
tree() {
    for pid in "$@"; do
        echo "$pid"
        # shellcheck disable=SC2046 # one word per pid
        tree $(children "$pid")
    done
}
# k3rs's own processes, its containerd and the shims started by it (their arguments name the
# data dir's containerd socket, config or state).
# (The path goes to awk through its environment: in awk's arguments it would match awk.)
pids=$(ps -e -o pid= -o args= | DIR="$K3RS_DATA_DIR/agent/" awk '
    index($0, ENVIRON["DIR"]) > 0 || $2 ~ /(^|\/)k3rs$/ { print $1 }' | grep -vx "$$" || true)
if [ -n "$pids" ]; then
    # shellcheck disable=SC2086 # one word per pid
    all=$(tree $pids | sort -u | tr '\n' ' ')
    echo "+ kill -9 $all"
    # shellcheck disable=SC2086 # one word per pid
    kill -9 $all 2>/dev/null || true
fi

unmount_under "$K3RS_DATA_DIR"
unmount_under /run/k3rs
for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ { print $1 }'); do
    echo "+ ip netns delete $ns"
    ip netns delete "$ns" || true
done
unmount_under /run/netns/cni-
if ip link show cni0 >/dev/null 2>&1; then
    for veth in $(ip -o link show master cni0 | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
        echo "+ ip link delete $veth"
        ip link delete "$veth" || true
    done
    echo "+ ip link delete cni0"
    ip link delete cni0 || true
fi
rm -rf /run/k3rs
for xt in iptables ip6tables; do
    if command -v "$xt-save" >/dev/null 2>&1 && command -v "$xt-restore" >/dev/null 2>&1; then
        echo "+ $xt-save | grep -v KUBE- CNI- | $xt-restore"
        "$xt-save" | grep -v -e KUBE- -e CNI- | "$xt-restore" || true
    fi
done
EOF
}

# The uninstall script's lines that disable and remove the service.
uninstall_service() {
    if [ "$INSTALL_K3RS_INIT" = systemd ]; then
        cat <<EOF
on_host systemctl disable $NAME
on_host systemctl reset-failed $NAME
rm -f "\$R$SYSTEMD_DIR/multi-user.target.wants/$NAME.service"
rm -f "\$R$FILE_SERVICE" "\$R$FILE_ENV"
on_host systemctl daemon-reload
EOF
    else
        cat <<EOF
on_host rc-update delete $NAME default
rm -f "\$R/etc/runlevels/default/$NAME"
rm -f "\$R$FILE_SERVICE" "\$R$FILE_ENV" "\$R/etc/logrotate.d/$NAME"
EOF
    fi
}

uninstall_script() {
    cat <<EOF
#!/bin/sh
# Uninstalls the $NAME service: runs k3rs-killall.sh, disables and removes the service and its
# environment file; when no other k3rs service remains, also the binary, k3rs-kubectl, the links,
# the scripts, /etc/k3rs, /run/k3rs, the data dir (K3RS_DATA_DIR, default /var/lib/k3rs) and
# the directories install.sh created. Generated by k3rs's install.sh; honours INSTALL_K3RS_ROOT.
set -eu
R=\${INSTALL_K3RS_ROOT:-/}
while [ "\${R%/}" != "\$R" ]; do R=\${R%/}; done
[ -n "\$R" ] || [ "\$(id -u)" -eq 0 ] || exec sudo --preserve-env=K3RS_DATA_DIR "\$0" "\$@"
K3RS_DATA_DIR=\${K3RS_DATA_DIR:-/var/lib/k3rs}
on_host() {
    if [ -n "\$R" ]; then echo "skipped (root \$R): \$*"; else echo "+ \$*"; "\$@" || true; fi
}

"\$R$KILLALL_SH"

$(uninstall_service)
rm -f "\$R$UNINSTALL_SH"

for other in "\$R$SYSTEMD_DIR"/k3rs*.service "\$R"/etc/init.d/k3rs*; do
    if [ -e "\$other" ]; then
        echo "Another k3rs service remains (\${other#"\$R"}): keeping the binary, scripts and data"
        exit 0
    fi
done

for cmd in kubectl crictl; do
    if [ "\$(readlink "\$R$BIN_DIR/\$cmd" 2>/dev/null || true)" = k3rs ]; then
        rm -f "\$R$BIN_DIR/\$cmd"
    fi
done
rm -f "\$R$BIN_DIR/k3rs" "\$R$BIN_DIR/$PRIVATE_KUBECTL" "\$R$KILLALL_SH"
created=\$(cat "\$R$DIRS_LIST" 2>/dev/null || true)
for dir in "\$R/etc/k3rs" "\$R/run/k3rs" "\$R\$K3RS_DATA_DIR"; do
    [ -e "\$dir" ] || continue
    if awk -v p="\$dir" '\$2 == p || index(\$2, p "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
        echo "Not removing \$dir: something is still mounted below it" >&2
    else
        rm -rf "\$dir"
    fi
done
echo "\$created" | sort -r | while read -r dir; do
    if [ -n "\$dir" ]; then rmdir "\$R\$dir" 2>/dev/null || true; fi
done
EOF
}

create_scripts() {
    killall_script >"$TMP_DIR/killall"
    put_file "$TMP_DIR/killall" "$KILLALL_SH" 0755 || true
    uninstall_script >"$TMP_DIR/uninstall"
    put_file "$TMP_DIR/uninstall" "$UNINSTALL_SH" 0755 || true
}

main() {
    [ "$(uname -s)" = Linux ] || fatal "Unsupported system $(uname -s): k3rs runs on Linux"
    setup_root
    set -f
    # shellcheck disable=SC2086 # INSTALL_K3RS_EXEC is split at white space
    set -- ${INSTALL_K3RS_EXEC:-} "$@"
    set +f
    setup_env "$@"
    info "Installing the k3rs $CMD service $NAME ($INSTALL_K3RS_INIT)"
    # Downloads and checks first: nothing is changed before they are verified.
    get_binary
    get_kubectl
    check_prereqs
    mkdir_p /etc/k3rs
    if [ -n "$NEW_BIN" ] && put_file "$NEW_BIN" "$BIN_DIR/k3rs" 0755; then CHANGED=true; fi
    if [ -n "$NEW_KUBECTL" ]; then
        put_file "$NEW_KUBECTL" "$BIN_DIR/$PRIVATE_KUBECTL" 0755 || true
    fi
    create_symlinks
    create_scripts
    create_env_file
    create_service_file
    service_enable_and_start
}

main "$@"
