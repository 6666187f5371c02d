#!/usr/bin/env bash
# Runs the fault-injection test (tests/ha/ha_faults.rs) with many rounds: three k3rs servers in
# network namespaces under concurrent clients, while the leader is killed, a follower killed,
# the leader partitioned and paused, and every server restarted, round after round. The
# recorded history is checked for linearizability and the watches for completeness.
#
# Needs root (network namespaces), like the test itself in CI.
#
# Usage: scripts/fault-rounds.sh [rounds] [repeats]   (default: 100 rounds, once)
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${1:-100}"
repeats="${2:-1}"
for i in $(seq 1 "$repeats"); do
    echo "fault-rounds: run $i of $repeats, $rounds rounds" >&2
    K3RS_FAULT_ROUNDS="$rounds" cargo test --test ha \
        ha_faults::history_stays_linearizable_and_watches_complete_under_faults -- --nocapture
done
