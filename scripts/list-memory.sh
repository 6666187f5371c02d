#!/bin/bash
# The server's memory across one unpaged LIST of many pods (docs/scale.md):
#   scripts/list-memory.sh [K3RS_BINARY] [PODS]
# starts `k3rs server` on loopback (no agent, no scheduler: the pods stay Pending), creates
# PODS bare pods through the API (16 clients at once), then for each kind of list prints the
# server's RSS before, its peak during the list (VmHWM, reset before each list through
# /proc/PID/clear_refs) and its RSS after, with the bytes received. Lists: JSON
# (`/api/v1/pods`), JSON with a label selector, protobuf, and a Table (kubectl's Accept).
# Needs python3 and kubectl; runs as root (clear_refs); leaves nothing running.
set -u
BIN=${1:-target/debug/k3rs} PODS=${2:-5000}
D=$(mktemp -d /tmp/k3rs-listmem-XXXX)
P1=$((20000 + RANDOM % 10000)) P2=$((30000 + RANDOM % 10000))
KC=$D/kubeconfig.yaml
K3RS_CONFIG_FILE=/dev/null K3RS_LOG=warn $BIN server --data-dir "$D/data" \
  --etcd-client-port $P1 --etcd-client-address 127.0.0.1 --https-listen-port $P2 \
  --bind-address 127.0.0.1 --node-ip 127.0.0.1 --disable-agent --disable-scheduler \
  --kube-controller-manager-arg=controllers=serviceaccount,root-ca-cert-publisher,namespace \
  --etcd-auto-compaction-retention 0 --write-kubeconfig "$KC" >"$D/server.log" 2>&1 &
SERVER=$!
cleanup() { kill -INT $SERVER 2>/dev/null; wait; rm -rf "$D"; }
trap cleanup EXIT
mib() { awk -v k="$1" '$1 == k":" {printf "%d", $2/1024}' /proc/$SERVER/status; }
k() { kubectl --kubeconfig "$KC" "$@"; }
for _ in $(seq 300); do [ -s "$KC" ] && k get --raw /readyz >/dev/null 2>&1 && break; sleep 1; done
until k get serviceaccount default >/dev/null 2>&1; do sleep 1; done
echo "server ready: $(mib VmRSS) MiB"
python3 - "$KC" "$PODS" "$D" <<'PY'
import base64, concurrent.futures, http.client, json, ssl, sys, yaml
kc, n, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cfg = yaml.safe_load(open(kc))
cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
for name, field in [("ca.crt", cluster["certificate-authority-data"]),
                    ("c.crt", user["client-certificate-data"]), ("c.key", user["client-key-data"])]:
    open(f"{d}/{name}", "wb").write(base64.b64decode(field))
host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
def pod(i):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:06}", "namespace": "default",
                         "labels": {"app": "list", "shard": str(i % 10)}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                     "env": [{"name": f"VAR_{j}", "value": "x" * 20} for j in range(5)],
                     "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}
def worker(ids):
    ctx = ssl.create_default_context(cafile=f"{d}/ca.crt")
    ctx.load_cert_chain(f"{d}/c.crt", f"{d}/c.key")
    ctx.check_hostname = False
    c = http.client.HTTPSConnection(host, int(port), context=ctx)
    for i in ids:
        c.request("POST", "/api/v1/namespaces/default/pods", json.dumps(pod(i)),
                  {"Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        if r.status not in (201, 409):
            raise SystemExit(f"create pod {i}: {r.status}")
with concurrent.futures.ThreadPoolExecutor(16) as ex:
    list(ex.map(worker, [range(w, n, 16) for w in range(16)]))
PY
sleep 10
echo "$PODS pods created: $(mib VmRSS) MiB"
CURL="curl -sS --cacert $D/ca.crt --cert $D/c.crt --key $D/c.key"
URL=$(awk '/server:/{print $2; exit}' "$KC")
list() {  # NAME ACCEPT QUERY
  sleep 5
  local before; before=$(mib VmRSS)
  echo 5 > /proc/$SERVER/clear_refs
  local bytes; bytes=$($CURL -H "Accept: $2" -o /dev/null -w '%{size_download}' "$URL/api/v1/pods$3")
  printf '%-22s RSS before %5s MiB, peak %5s MiB (+%s), after %5s MiB, %s bytes\n' \
    "$1" "$before" "$(mib VmHWM)" "$(( $(mib VmHWM) - before ))" "$(mib VmRSS)" "$bytes"
}
for round in 1 2; do
  list "json" "application/json" ""
  list "json labelSelector" "application/json" "?labelSelector=shard%3D3"
  list "protobuf" "application/vnd.kubernetes.protobuf" ""
  list "table" "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" ""
done
