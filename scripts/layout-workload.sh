#!/bin/bash
# The run whose executed functions scripts/order-link.sh links first:
#   scripts/layout-workload.sh SERVER_BIN AGENT_BIN CLIENT_BIN OUT_DIR
# starts `k3rs server` (SERVER_BIN, embedded agent, node lay-a) in one network namespace and
# `k3rs agent` (AGENT_BIN, node lay-b) joined by token in a second one, over a veth (no route
# out), as benches/agent.rs does (the server restarted once after SIGKILL, on its data dir,
# before the agent joins, then an etcd snapshot through the etcd API, by CLIENT_BIN); once
# both nodes are Ready and SETTLE seconds (20) have
# passed, writes the page-cache residency of each binary file (scripts/layout-order.py
# resident) to OUT_DIR/{server,agent}-idle.pages; then runs a Deployment of 4 busybox pods
# behind a Service, scales it to 0, deletes it, waits SETTLE again and writes
# OUT_DIR/{server,agent}-pods.pages. SERVER_BIN, AGENT_BIN and CLIENT_BIN are copies of one
# binary, so each file's cached pages are one process's.
# As root, with containerd, runc, CNI plugins and busybox-static (scripts/prereqs.sh test);
# stops by PID what it started and removes the namespaces, cgroups and scratch dir.
set -u
SERVER_BIN=$(readlink -f "$1")
AGENT_BIN=$(readlink -f "$2")
CLIENT_BIN=$(readlink -f "$3")
OUT=$(readlink -f "$4")
SETTLE=${SETTLE:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
TAG=k3rs-lay-$$
A_IP=10.99.1.1
B_IP=10.99.1.2
D=$(mktemp -d /tmp/k3rs-layout-XXXX)
KC=$D/kubeconfig.yaml
mkdir -p "$OUT" "$D/a/agent/images" "$D/b/agent/images"
for dir in "$D/a/agent/images" "$D/b/agent/images"; do
  bash "$HERE/build-images.sh" "$dir" >/dev/null 2>&1 ||
    { echo "layout-workload: scripts/build-images.sh failed" >&2; exit 1; }
done

cleanup() {
  for ns in $TAG-a $TAG-b; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
  done
  sleep 5
  for _ in 1 2 3; do
    for ns in $TAG-a $TAG-b; do
      for p in $(ip netns pids "$ns" 2>/dev/null) \
        $(find "/sys/fs/cgroup/$ns" -name cgroup.procs -exec cat {} + 2>/dev/null); do
        kill -KILL "$p" 2>/dev/null
      done
    done
    sleep 1
  done
  grep " $D" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done
  for ns in $TAG-a $TAG-b; do
    find "/sys/fs/cgroup/$ns" -depth -type d -exec rmdir {} \; 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  [ -n "${KEEP:-}" ] || rm -rf "$D"
}
trap cleanup EXIT

ip netns add $TAG-a && ip netns add $TAG-b || exit 1
ip link add lya$$ netns $TAG-a type veth peer name lyb$$ netns $TAG-b || exit 1
for side in a b; do
  ip=$A_IP; [ $side = b ] && ip=$B_IP
  ip -n $TAG-$side link set lo up
  ip -n $TAG-$side addr add $ip/24 dev ly$side$$
  ip -n $TAG-$side link set ly$side$$ up
done
in_a() { nsenter --net=/run/netns/$TAG-a "$@"; }
in_b() { nsenter --net=/run/netns/$TAG-b "$@"; }
k() { in_a kubectl --kubeconfig "$KC" "$@"; }
ready() {
  k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null |
    grep -q True
}
wait_for() {
  local what=$1
  shift
  for _ in $(seq 180); do
    "$@" && return 0
    sleep 1
  done
  echo "layout-workload: $what did not happen within 180 s (logs in $D)" >&2
  KEEP=1
  exit 1
}
NODE_ARGS=(--kubelet-arg 'eviction-hard=memory.available<100Mi'
  --kubelet-arg image-gc-high-threshold=100)

server() {
  # nsenter execs env, which execs k3rs: $! is the server's PID.
  nsenter --net=/run/netns/$TAG-a env K3RS_CONFIG_FILE=/dev/null "$SERVER_BIN" server \
    --data-dir "$D/a" \
    --node-name lay-a --node-ip $A_IP --write-kubeconfig "$KC" \
    --kubelet-arg "cgroup-root=/$TAG-a" "${NODE_ARGS[@]}" >>"$D/server.log" 2>&1 &
  SERVER_PID=$!
}
# A fresh start, then a restart on the same data dir after SIGKILL (a reboot, a crash):
# both paths run on users' machines.
server
wait_for "node lay-a Ready" ready lay-a
kill -KILL $SERVER_PID
wait $SERVER_PID 2>/dev/null
rm -f "$KC"
server
wait_for "node lay-a Ready after a restart" ready lay-a
# A client of the etcd API (what etcdctl and `k3rs etcd-snapshot` users do), from a third
# copy of the binary so that its client-side code counts for neither process.
in_a "$CLIENT_BIN" etcd-snapshot save --data-dir "$D/a" --config /dev/null >/dev/null 2>&1 ||
  { echo "layout-workload: etcd-snapshot save failed" >&2; exit 1; }
in_b env K3RS_CONFIG_FILE=/dev/null "$AGENT_BIN" agent --server "https://$A_IP:6443" \
  --token "$(cat "$D/a/server/agent-token")" --data-dir "$D/b" \
  --node-name lay-b --node-ip $B_IP \
  --kubelet-arg "cgroup-root=/$TAG-b" "${NODE_ARGS[@]}" >"$D/agent.log" 2>&1 &
wait_for "node lay-b Ready" ready lay-b
# A client watching nodes while the cluster idles, as benches/agent.rs's does.
timeout "$SETTLE" nsenter --net=/run/netns/$TAG-a kubectl --kubeconfig "$KC" get nodes \
  --watch >/dev/null 2>&1
python3 "$HERE/layout-order.py" resident "$SERVER_BIN" >"$OUT/server-idle.pages" &&
  python3 "$HERE/layout-order.py" resident "$AGENT_BIN" >"$OUT/agent-idle.pages" || exit 1

# What users do next: a Deployment (scheduled by the scheduler, its ReplicaSet's controllers
# at work) behind a Service (endpoints, the proxy's rules), a container's logs, scaled to 0
# and removed.
k apply -f - >/dev/null <<EOF || exit 1
apiVersion: apps/v1
kind: Deployment
metadata: {name: lay}
spec:
  replicas: 4
  selector: {matchLabels: {app: lay}}
  template:
    metadata: {labels: {app: lay}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: docker.io/library/busybox:1.35
        command: [sh, -c, "echo started && exec sleep 3600"]
---
apiVersion: v1
kind: Service
metadata: {name: lay}
spec:
  selector: {app: lay}
  ports: [{port: 80}]
EOF
pods_ready() {
  [ "$(k get deployment lay -o jsonpath='{.status.availableReplicas}' 2>/dev/null)" = 4 ]
}
wait_for "the Deployment's 4 pods available" pods_ready
pod=$(k get pods -l app=lay -o jsonpath='{.items[0].metadata.name}')
k logs "$pod" >/dev/null || exit 1
k scale deployment lay --replicas 0 >/dev/null || exit 1
k delete deployment,service lay --wait=true --timeout=120s >/dev/null || exit 1
sleep "$SETTLE"
python3 "$HERE/layout-order.py" resident "$SERVER_BIN" >"$OUT/server-pods.pages" &&
  python3 "$HERE/layout-order.py" resident "$AGENT_BIN" >"$OUT/agent-pods.pages" || exit 1
echo "layout-workload: $(wc -l <"$OUT/server-pods.pages") server and" \
  "$(wc -l <"$OUT/agent-pods.pages") agent pages ran" >&2
