#!/usr/bin/env bash
# bench/usage.sh: what recording who calls each API version costs
# (internal/usage, VersionReports), crdserver against the binary before it,
# in one run.
#
#   bench/usage.sh            # about 6 minutes on 2 cores
#
# Builds crdserver at BASE (default: the commit before the usage recorder)
# and at the working tree. ROUNDS (5) rounds, the two binaries alternating,
# each on a fresh data dir: `crdbench paths` (CREATES creates by 16 clients,
# GETS sequential GETs) and `crdbench load` (N sequential creates). Then, on
# the working tree's binary, REPORT_N (100,000) objects of one CRD and
# REPORT_READS reads of that CRD's VersionReports, timed; and a CPU
# profile of one more round, for the share of recording who called.
# Prints the medians and writes them to bench/results/usage.md (which
# crdbench report puts in RESULTS.md); the raw JSON is in
# bench/results/usage-*. Only 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE=${BASE:-ae0350e^}
ROUNDS=${ROUNDS:-5}
CREATES=${CREATES:-3000}
GETS=${GETS:-3000}
N=${N:-1000}
REPORT_N=${REPORT_N:-100000}
REPORT_READS=${REPORT_READS:-5}
CRD_FILE=${CRD_FILE:-/work/shared/reference/examples/widget-crd.yaml}
OUT=$ROOT/bench/results
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/crdbench-usage.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  git -C "$ROOT" worktree remove --force "$WORK/base-src" 2>/dev/null || true
  rm -rf -- "$WORK"
}
trap cleanup EXIT

git worktree add --detach "$WORK/base-src" "$BASE" >/dev/null 2>&1
(cd "$WORK/base-src" && go build -o "$WORK/crdserver-base" ./cmd/crdserver)
go build -o "$WORK/crdserver-new" ./cmd/crdserver
go build -o "$WORK/crdbench" ./bench/cmd/crdbench
CB=$WORK/crdbench
MD=$OUT/usage.md
exec > >(tee "$MD.tmp")
echo "## Who calls each version: what it costs (bench/usage.sh)"
echo
echo "crdserver at $(git rev-parse --short "$BASE") (before the usage recorder) and at $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes'), $ROUNDS rounds alternating, each on a fresh data dir; load before: $(cut -d' ' -f1-3 /proc/loadavg)."
echo

# start BIN NAME: a fresh server; sets URL, DATA, PID.
start() {
  local port
  port=$("$CB" freeport)
  DATA=$WORK/data-$2
  rm -rf -- "$DATA"
  URL=https://127.0.0.1:$port
  "$1" --data-dir "$DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$WORK/$2.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 1 600); do
    if curl -sk --max-time 2 "$URL/readyz" 2>/dev/null | grep -qx ok; then return 0; fi
    sleep 0.1
  done
  echo "$2 did not become ready" >&2
  exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; }
# cpu: the CPU seconds (user + system) the server has used so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$PID/stat"; }
# createCRD: the widget CRD (crdbench load waits until it is Established).
createCRD() {
  curl -sf -o /dev/null --cacert "$DATA/pki/ca.crt" --cert "$DATA/pki/admin.crt" --key "$DATA/pki/admin.key" \
    -H 'Content-Type: application/yaml' --data-binary @"$CRD_FILE" "$URL/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
}
TLS() { echo -cacert "$DATA/pki/ca.crt" -cert "$DATA/pki/admin.crt" -key "$DATA/pki/admin.key"; }

rm -f "$OUT/usage-cpu.txt"
for r in $(seq 1 "$ROUNDS"); do
  order=(base new)
  if ((r % 2 == 0)); then order=(new base); fi
  for who in "${order[@]}"; do
    start "$WORK/crdserver-$who" "$who"
    # shellcheck disable=SC2046
    "$CB" paths -server "$URL" $(TLS) -name "$who" -n "$CREATES" -creates "$CREATES" -gets "$GETS" -rounds 1 -lists 1 -walks 1 \
      -watchers 10 -watch-updates 10 -fresh-crds 0 -conversion=false -json "$OUT/usage-paths-$who-$r.json" >/dev/null
    createCRD
    # shellcheck disable=SC2046
    "$CB" load -server "$URL" $(TLS) -n "$N" -list-n 0 -json "$OUT/usage-load-$who-$r.json" >/dev/null
    echo "$who $r $(cpu)" >>"$OUT/usage-cpu.txt"
    stop
  done
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(who, f):
    return statistics.median(f(who, r) for r in range(1, rounds + 1))
paths = lambda who, r: json.load(open(f"{out}/usage-paths-{who}-{r}.json"))["rounds_data"][0]
load = lambda who, r: json.load(open(f"{out}/usage-load-{who}-{r}.json"))
rows = [
    ("creates, 16 clients (req/s)", lambda w, r: paths(w, r)["creates"]["requests_per_second"]),
    ("sequential GETs (req/s)", lambda w, r: paths(w, r)["gets"]["requests_per_second"]),
    ("sequential creates (req/s)", lambda w, r: next(p for p in load(w, r)["phases"] if p["name"] == "create")["requests_per_second"]),
]
print(f"| median of {rounds} rounds | before | with usage | change |")
print("| --- | --- | --- | --- |")
for name, f in rows:
    b, n = med("base", f), med("new", f)
    print(f"| {name} | {b:.0f} | {n:.0f} | {100 * (n - b) / b:+.1f}% |")
# The server's CPU over a round (its start, the paths round and the
# sequential creates): the same work on both, so its cost is the difference.
cpu = {}
for line in open(f"{out}/usage-cpu.txt"):
    who, _, sec = line.split()
    cpu.setdefault(who, []).append(float(sec))
b, n = statistics.median(cpu["base"]), statistics.median(cpu["new"])
print(f"| server CPU seconds per round (start, paths round, sequential creates) | {b:.2f} | {n:.2f} | {100 * (n - b) / b:+.1f}% |")
EOF

# Where a request's time goes: a CPU profile of the new binary over the
# creates and GETs of one paths round, and the share of recording who
# called (server.(*Server).recordUsage, usage.(*Recorder).Record).
start "$WORK/crdserver-new" profile
curl -sf -o "$WORK/usage.cpu" --cacert "$DATA/pki/ca.crt" --cert "$DATA/pki/admin.crt" --key "$DATA/pki/admin.key" \
  "$URL/debug/pprof/profile?seconds=${PROFILE_SECONDS:-12}" &
CPU_PID=$!
# shellcheck disable=SC2046
"$CB" paths -server "$URL" $(TLS) -name profile -n "$CREATES" -creates "$CREATES" -gets "$GETS" -rounds 1 -lists 1 -walks 1 \
  -watchers 10 -watch-updates 10 -fresh-crds 0 -conversion=false >/dev/null
wait "$CPU_PID"
stop
echo
echo "| CPU profile of a round of the new binary (${PROFILE_SECONDS:-12} s) | share of the samples |"
echo "| --- | --- |"
for focus in 'recordUsage' 'resource\.versionsOf'; do
  line=$(go tool pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 -focus="$focus" "$WORK/crdserver-new" "$WORK/usage.cpu" 2>/dev/null | grep '^Showing nodes' || true)
  echo "| \`$focus\` | $(echo "$line" | sed -E 's/.*, ([0-9.]+%) of ([0-9.]+m?s) total.*/\1 of \2/') |"
done
echo

# The report of a CRD with REPORT_N objects.
start "$WORK/crdserver-new" report
createCRD
# shellcheck disable=SC2046
"$CB" load -server "$URL" $(TLS) -n 1 -list-n "$REPORT_N" -lists 1 -concurrency 16 -json "$OUT/usage-report-load.json" >/dev/null
crd=$(awk '/^  name:/ {print $2; exit}' "$CRD_FILE")
times=()
for _ in $(seq 1 "$REPORT_READS"); do
  times+=("$(curl -s -o "$WORK/report.json" -w '%{time_total}' --cacert "$DATA/pki/ca.crt" --cert "$DATA/pki/admin.crt" --key "$DATA/pki/admin.key" \
    "$URL/apis/crdserver.io/v1alpha1/versionreports?labelSelector=crdserver.io/crd%3D$crd")")
done
objects=$(python3 -c 'import json,sys; print(sum(i["status"]["objects"] for i in json.load(open(sys.argv[1]))["items"]))' "$WORK/report.json")
printf '%s\n' "${times[@]}" | sort -n | awk -v n="$objects" -v c="$crd" '{a[NR]=$1} END {printf "The VersionReports of %s with %d objects stored, read %d times: median %.0f ms, slowest %.0f ms (target: under 100 ms).\n", c, n, NR, a[int((NR+1)/2)]*1000, a[NR]*1000}'
stop
echo
echo "Load after: $(cut -d' ' -f1-3 /proc/loadavg). Whole-server rounds on this machine move by several per cent between runs of the same binary (BASE=HEAD runs the same binary on both sides; on 2026-12-07 that gave +5.6%, -1.3% and -7.2% on the three throughput rows): the profile's share is the cost's bound."
mv "$MD.tmp" "$MD"
