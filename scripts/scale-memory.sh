#!/bin/bash
# The server's memory under a Deployment on hollow nodes (docs/scale.md):
#   scripts/scale-memory.sh [K3RS_BINARY] [NODES] [PODS]
# starts `k3rs server` (no embedded agent) and `k3rs agent --hollow NODES` on loopback,
# creates one Deployment of PODS pause pods (100m CPU, 100 MiB each), waits until all are
# available, and prints the server's RSS at each step, with the watches the API server has
# opened so far (its `apiserver_request_total{verb="WATCH"}`; a watch ends and is opened
# again every few minutes, so compare runs of similar length). Needs kubectl; leaves nothing
# running.
set -u
BIN=${1:-target/release/k3rs} NODES=${2:-300} PODS=${3:-3000}
SETTLE=${SETTLE:-30}
D=$(mktemp -d /tmp/k3rs-scale-XXXX)
P1=$((20000 + RANDOM % 10000)) P2=$((30000 + RANDOM % 10000))
KC=$D/kubeconfig.yaml
K3RS_CONFIG_FILE=/dev/null K3RS_LOG=warn $BIN server --data-dir "$D/data" \
  --etcd-client-port $P1 --etcd-client-address 127.0.0.1 --https-listen-port $P2 \
  --bind-address 127.0.0.1 --node-ip 127.0.0.1 --disable-agent --write-kubeconfig "$KC" \
  >"$D/server.log" 2>&1 &
SERVER=$!
AGENT=
cleanup() { [ -n "$AGENT" ] && kill $AGENT 2>/dev/null; kill -INT $SERVER 2>/dev/null; wait; rm -rf "$D"; }
trap cleanup EXIT
rss() { awk '/VmRSS/{printf "%d MiB", $2/1024}' /proc/$SERVER/status; }
k() { kubectl --kubeconfig "$KC" "$@"; }
watches() {
  k get --raw /metrics | awk '/^apiserver_request_total\{/ && /verb="WATCH"/ {n += $NF} END {print n + 0}'
}
watches_by_resource() {
  k get --raw /metrics | awk '/^apiserver_request_total\{/ && /verb="WATCH"/ {
    match($0, /resource="[^"]*"/); r = substr($0, RSTART + 10, RLENGTH - 11); n[r] += $NF }
    END { for (r in n) printf "%s=%d ", r, n[r]; print "" }' | tr ' ' '\n' | sort | tr '\n' ' '
}
for _ in $(seq 300); do [ -s "$KC" ] && k get --raw /readyz >/dev/null 2>&1 && break; sleep 1; done
echo "server ready: $(rss)"
sleep 20
echo "server idle 20 s later: $(rss), $(watches) watches opened"
echo "  by resource: $(watches_by_resource)"
K3RS_LOG=warn $BIN agent --kubeconfig "$KC" --hollow "$NODES" --hollow-name-prefix scale- \
  >"$D/agent.log" 2>&1 &
AGENT=$!
for _ in $(seq 600); do
  [ "$(k get nodes --no-headers 2>/dev/null | grep -c ' Ready')" -ge "$NODES" ] && break; sleep 2
done
sleep 20
echo "$NODES nodes Ready: $(rss), $(watches) watches opened"
BASE=$(awk '/VmRSS/{print $2}' /proc/$SERVER/status)
k apply -f - >/dev/null <<Y
apiVersion: apps/v1
kind: Deployment
metadata: {name: scale, namespace: default}
spec:
  replicas: $PODS
  selector: {matchLabels: {app: scale}}
  template:
    metadata: {labels: {app: scale}}
    spec:
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 100m, memory: 100Mi}}
Y
T0=$(date +%s)
for _ in $(seq 1800); do
  A=$(k get deploy scale -o jsonpath='{.status.availableReplicas}' 2>/dev/null)
  [ "${A:-0}" -ge "$PODS" ] && break; sleep 2
done
echo "${A:-0} of $PODS pods available after $(( $(date +%s) - T0 )) s: $(rss)"
sleep "$SETTLE"
END=$(awk '/VmRSS/{print $2}' /proc/$SERVER/status)
echo "after ${SETTLE} s more: $(rss); $(( (END - BASE) / PODS )) KiB per pod above the nodes-Ready RSS; $(watches) watches opened"
