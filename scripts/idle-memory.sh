#!/bin/bash
# The server's memory at rest with its embedded agent (docs/scale.md "# Memory at rest"):
#   scripts/idle-memory.sh [K3RS_BINARY] [WRAPPER...]
# starts `k3rs server` with the embedded agent (containerd, images of scripts/build-images.sh)
# in a network namespace of its own (loopback only), waits for the node's Ready condition,
# lets it settle SETTLE seconds (60) and prints the server process's memory lines of
# /proc/<pid>/status; saves its smaps in the scratch dir. WRAPPER (e.g. `env
# MALLOC_ARENA_MAX=1`, `heaptrack -o FILE`) runs in front of the binary. As root; stops by
# PID what it started and removes the namespace, cgroups and scratch dir (KEEP=1 keeps it).
set -u
BIN=$(readlink -f "${1:-target/release/k3rs}")
shift || true
WRAP=("$@")
SETTLE=${SETTLE:-60}
NS=k3rs-idle-$$
D=$(mktemp -d /tmp/k3rs-idle-XXXX)
KC=$D/kubeconfig.yaml
mkdir -p "$D/data/agent/images"
bash "$(dirname "$0")/build-images.sh" "$D/data/agent/images" >/dev/null 2>&1 ||
  { echo "scripts/build-images.sh failed" >&2; exit 1; }
ip netns add $NS
ip -n $NS link set lo up
inside() { nsenter --net=/run/netns/$NS "$@"; }
cleanup() {
  for p in $(ip netns pids $NS 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
  sleep 5
  for _ in 1 2 3; do
    for p in $(ip netns pids $NS 2>/dev/null) \
      $(find /sys/fs/cgroup/$NS -name cgroup.procs -exec cat {} + 2>/dev/null); do
      kill -KILL "$p" 2>/dev/null
    done
    sleep 1
  done
  grep " $D" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done
  find /sys/fs/cgroup/$NS -depth -type d -exec rmdir {} \; 2>/dev/null
  ip netns del $NS 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$D"
}
trap cleanup EXIT
inside env K3RS_CONFIG_FILE=/dev/null "${WRAP[@]}" "$BIN" server --data-dir "$D/data" \
  --etcd-client-address 127.0.0.1 --bind-address 127.0.0.1 --node-ip 127.0.0.1 \
  --node-name idle --kubelet-arg "cgroup-root=/$NS" --write-kubeconfig "$KC" \
  --kubelet-arg 'eviction-hard=memory.available<100Mi' \
  --kubelet-arg image-gc-high-threshold=100 >"$D/server.log" 2>&1 &
PID=
for _ in $(seq 300); do
  [ -z "$PID" ] && PID=$(for p in $(ip netns pids $NS); do
    [ "$(readlink /proc/"$p"/exe)" = "$BIN" ] && echo "$p"; done | head -1)
  [ -n "$PID" ] && [ -s "$KC" ] && inside kubectl --kubeconfig "$KC" get node idle \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True &&
    break
  sleep 1
done
[ -n "$PID" ] || { echo "the server did not start: $D/server.log" >&2; KEEP=1; exit 1; }
echo "node Ready; settling ${SETTLE} s"
sleep "$SETTLE"
grep -E "VmRSS|RssAnon|RssFile|Threads" /proc/"$PID"/status
cp /proc/"$PID"/smaps "$D/smaps"
