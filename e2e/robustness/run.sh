#!/usr/bin/env bash
# Long runs of the robustness suite: every (setup, fault) pair in turn,
# each run a fresh cluster (or embedded store) with traffic, one fault, and
# every recorded history checked against etcd's.
#
#   e2e/robustness/run.sh [RUNS [OUT]]      default: 150 runs, into ./robustness-out
#   ROBUSTNESS_FAULTS=partition-etcd,kill-etcd-leader e2e/robustness/run.sh 20
#   ROBUSTNESS_SEED=1234 ROBUSTNESS_FAULTS=edit-crd ROBUSTNESS_SETUPS=cluster e2e/robustness/run.sh 1   (one run again)
#
# OUT/summary.txt is the table of faults × runs × violations; OUT/results.json
# has each run's traffic; a run that failed keeps its history, etcd's truth,
# the report, porcupine's visualization and every process's log in its folder.
set -euo pipefail
runs="${1:-150}"
out="$(realpath -m "${2:-robustness-out}")"
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH=/usr/local/go/bin:$PATH
fi
mkdir -p "$out"
export ROBUSTNESS_RUNS="$runs" ROBUSTNESS_OUT="$out"
status=0
go test -count=1 -timeout 0 -v -run '^TestRobustness$' ./robustness/ >"$out/test.log" 2>&1 || status=$?
grep -E '^\s+--- (PASS|FAIL)|violation:|refused:|requests in' "$out/test.log" || true
echo
cat "$out/summary.txt" 2>/dev/null || tail -30 "$out/test.log"
exit "$status"
