#!/usr/bin/env bash
# Profiles of crdserver behind the performance issue's rows it does not meet:
#
#   bench/profile.sh          # writes bench/PROFILES.md (about 2 minutes)
#
# It builds crdserver and crdbench into a temp dir, starts crdserver on a fresh data dir
# and a free loopback port, and reads its profiles from /debug/pprof/ (--profiling, on by
# default) with the admin client certificate:
#   1. idle, 5 s after ready: /proc/PID/smaps_rollup, the resident pages of the binary's own
#      mappings (/proc/PID/smaps), and the Go heap (inuse_space);
#   2. N (6000) sequential creates (crdbench load, one connection, HTTPS + HTTP/2): a CPU
#      profile of the server over PROFILE_SECONDS (5) of them, and its shares by part;
#   3. LIST_N (10000) objects of 1,024-byte create bodies created by 16 workers, then 3 s: smaps_rollup
#      and the Go heap again;
#   4. a watch fan-out to 200 watchers (crdbench paths), a patch every 20 ms: a CPU profile over 3 s;
#   5. a crdtest server's whole life, 40 in a row (go test -bench BenchmarkServer of package crdtest,
#      -cpuprofile), and the shares of its CPU.
# Environment: REF (/work/shared/reference: its kubectl and widget CRD), N, LIST_N,
# PROFILE_SECONDS. Every server listens on 127.0.0.1 only.
set -euo pipefail
set +m

REPO=$(cd "$(dirname "$0")/.." && pwd)
REF=${REF:-/work/shared/reference}
N=${N:-6000}
LIST_N=${LIST_N:-10000}
PROFILE_SECONDS=${PROFILE_SECONDS:-5}
OUT="$REPO/bench/PROFILES.md"
WORK=$(mktemp -d /tmp/crdprofile.XXXXXX)
PID=
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

cd "$REPO"
go build -o "$WORK/crdserver" ./cmd/crdserver
go build -o "$WORK/crdbench" ./bench/cmd/crdbench
CB="$WORK/crdbench"
PORT=$("$CB" freeport)
DATA="$WORK/data"
"$WORK/crdserver" --data-dir "$DATA" --port "$PORT" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do
  grep -q "crdserver is serving" "$WORK/server.log" 2>/dev/null && break
  sleep 0.05
done
grep -q "crdserver is serving" "$WORK/server.log" || { cat "$WORK/server.log"; echo "crdserver did not start" >&2; exit 1; }
URL="https://127.0.0.1:$PORT"
TLS=(--cacert "$DATA/pki/ca.crt" --cert "$DATA/pki/admin.crt" --key "$DATA/pki/admin.key")
pprof() { curl -sf "${TLS[@]}" "$URL/debug/pprof/$1"; }

# rollup prints the resident memory of the server: all, anonymous, file-backed, and the
# file-backed pages of the binary itself.
rollup() {
  local rss anon bin
  rss=$(awk '/^Rss:/ {print $2}' "/proc/$PID/smaps_rollup")
  anon=$(awk '/^Anonymous:/ {print $2}' "/proc/$PID/smaps_rollup")
  bin=$(awk -v exe="$(readlink "/proc/$PID/exe")" '
    /^[0-9a-f]+-[0-9a-f]+ / { mine = ($6 == exe) }
    mine && /^Rss:/ { s += $2 }
    END { print s + 0 }' "/proc/$PID/smaps")
  printf '| %s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |\n' "$1" "$(echo "$rss/1024" | bc -l)" \
    "$(echo "$anon/1024" | bc -l)" "$(echo "($rss-$anon)/1024" | bc -l)" "$(echo "$bin/1024" | bc -l)"
}

# heaptop prints the Go runtime's memory statistics (live objects, the spans that hold them,
# what was given back to the system) and the top of the heap profile.
heaptop() {
  pprof heap >"$WORK/$1.heap"
  pprof 'heap?debug=1' | grep -E '^# (HeapAlloc|HeapInuse|HeapIdle|HeapReleased|Stack|GCSys|NextGC) =' |
    sed -E 's/^# ([A-Za-z]+) = ([0-9]+).*/\1 \2/' | awk '{ printf "%s %.1f MiB\n", $1, $2/1048576 }'
  echo
  go tool pprof -sample_index=inuse_space -top -nodecount=15 "$WORK/crdserver" "$WORK/$1.heap" 2>/dev/null |
    sed -n '/^Showing nodes/,$p'
}

# share prints the part of the CPU profile's samples under the functions that match $2
# (the profile $PROF of the binary $BIN).
PROF=; BIN=
share() {
  local line
  # With every node shown, the nodes' flat times add up to the focused samples.
  line=$(go tool pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 -focus="$2" "$BIN" "$PROF" 2>/dev/null | grep '^Showing nodes' || true)
  printf '| %s | `%s` | %s |\n' "$1" "$2" "$(echo "$line" | sed -E 's/.*, ([0-9.]+%) of ([0-9.]+m?s) total.*/\1/')"
}

# samples prints the profile's duration and total samples.
samples() { go tool pprof -top -nodecount=1 "$BIN" "$PROF" 2>/dev/null | grep '^Duration' || true; }

sleep 5
{
  echo "# crdserver profiles"
  echo
  echo "Written by \`bench/profile.sh\` at $(git -C "$REPO" rev-parse --short HEAD) on $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg) at the start, $(nproc) CPUs."
  echo "They show what bounds the performance issue's rows that crdserver does not meet (see RESULTS.md for the rows)."
  echo "Resident memory is from /proc/PID/smaps_rollup; \"the binary\" is the resident pages of crdserver's own executable mappings (code, read-only data, pclntab); how many of them are resident depends on the page cache."
  echo
  echo "## Resident memory"
  echo
  echo "| when | resident | anonymous | file-backed | of which the binary |"
  echo "|---|---|---|---|---|"
  rollup "idle, 5 s after ready"
} >"$WORK/out.md"
heaptop idle >"$WORK/idle.top"

kubectl() { "$REF/bin/kubectl" --kubeconfig "$DATA/admin.kubeconfig" "$@"; }
kubectl create --validate=false -f "$REF/examples/widget-crd.yaml" >/dev/null
"$CB" load -server "$URL" -cacert "$DATA/pki/ca.crt" -cert "$DATA/pki/admin.crt" -key "$DATA/pki/admin.key" \
  -n 200 -list-n 0 -json "$WORK/warm.json" >/dev/null 2>&1
(sleep 0.3; pprof "profile?seconds=$PROFILE_SECONDS" >"$WORK/creates.cpu") &
PROFILING=$!
"$CB" load -server "$URL" -cacert "$DATA/pki/ca.crt" -cert "$DATA/pki/admin.crt" -key "$DATA/pki/admin.key" \
  -n "$N" -list-n 0 -json "$WORK/creates.json" >"$WORK/creates.txt" 2>&1
wait "$PROFILING"

"$CB" load -server "$URL" -cacert "$DATA/pki/ca.crt" -cert "$DATA/pki/admin.crt" -key "$DATA/pki/admin.key" \
  -n 1 -list-n "$LIST_N" -lists 1 -concurrency 16 -body-bytes 1024 -prefix big- -json "$WORK/big.json" >"$WORK/big.txt" 2>&1
sleep 3
rollup "$LIST_N objects stored (1,024-byte create bodies), 3 s after their creates" >>"$WORK/out.md"
heaptop big >"$WORK/big.top"

# 4. Watch fan-out: 200 watchers of a fresh CRD (crdbench paths, one round of few objects),
# a patch every 20 ms; the CPU profile covers the patches.
"$CB" paths -server "$URL" -cacert "$DATA/pki/ca.crt" -cert "$DATA/pki/admin.crt" -key "$DATA/pki/admin.key" \
  -n 200 -rounds 1 -creates 200 -gets 10 -lists 1 -walks 1 -watchers 200 -watch-updates 200 -watch-interval 20ms \
  -conversion=false -fresh-crds 0 -json "$WORK/watch.json" >"$WORK/watch.txt" 2>&1 &
PATHS=$!
for _ in $(seq 1 600); do
  grep -q "watches open" "$WORK/watch.txt" 2>/dev/null && break
  sleep 0.05
done
pprof "profile?seconds=3" >"$WORK/watch.cpu"
wait "$PATHS"

# 5. A crdtest server's whole life, 40 times in a row (go test -bench), with a CPU profile.
go test -run '^$' -bench 'BenchmarkServer$' -benchtime 40x -cpuprofile "$WORK/crdtest.cpu" \
  -o "$WORK/crdtest.test" ./crdtest >"$WORK/crdtest.txt" 2>&1

{
  echo
  echo "## Go heap, idle"
  echo
  echo "The runtime's statistics (HeapAlloc: live objects; HeapInuse: the spans that hold them, so HeapInuse − HeapAlloc is fragmentation; HeapReleased: given back to the system), then the heap profile (inuse_space):"
  echo
  echo '```'
  cat "$WORK/idle.top"
  echo '```'
  echo
  echo "## Go heap with $LIST_N objects stored"
  echo
  echo '```'
  cat "$WORK/big.top"
  echo '```'
  echo
  echo "## CPU of sequential creates"
  echo
  echo "$PROFILE_SECONDS s of the server's CPU profile during $N sequential creates (one HTTPS + HTTP/2 connection, crdbench on the same CPUs). crdbench's figures for them, taken while profiling (so a little slower):"
  echo
  echo '```'
  grep -E '^(phase|create|delete) ' "$WORK/creates.txt" | head -3 || true
  echo '```'
  echo
  echo "Shares of the profile's samples (a function's share includes what it calls; the parts overlap where one calls another):"
  echo
  PROF="$WORK/creates.cpu" BIN="$WORK/crdserver"
  echo "| part | functions (pprof -focus) | share |"
  echo "|---|---|---|"
  share "the create handler, etcd call included" 'resource\.\(\*call\)\.create$'
  share "… managed fields" 'managedfields/internal\.\(\*FieldManager\)\.Update'
  share "… the etcd transaction, as the handler waits for it" 'store\.\(\*Store\)\.attempts'
  share "etcd raft: WAL write and fdatasync" 'wal\.\(\*WAL\)\.Save'
  share "etcd apply (bbolt, index, watchers)" 'etcdserver\.\(\*EtcdServer\)\.applyAll'
  share "HTTP/2 frame writes and TLS" 'http2serverConn\)\.writeFrameAsync'
  share "HTTP/2 reads and TLS" 'http2serverConn\)\.readFrames|http2Framer\)\.ReadFrame'
  share "garbage collection" 'runtime\.gcBgMarkWorker|runtime\.gcAssistAlloc'
  share "scheduler wake-ups and idle" 'runtime\.findRunnable|runtime\.wakep|runtime\.stopm'
  share "system calls (all)" 'syscall\.Syscall|syscall\.RawSyscall6|linux\.Syscall6'
  echo
  echo "The top of the profile by cumulative time:"
  echo
  echo '```'
  go tool pprof -top -cum -nodecount=40 "$WORK/crdserver" "$WORK/creates.cpu" 2>/dev/null | sed -n '/^Duration/,$p'
  echo '```'

  echo
  echo "## CPU of a watch fan-out to 200 watchers"
  echo
  echo "3 s of the server's CPU profile while 200 watchers (2 HTTP/2 connections, crdbench) watch a fresh CRD and an object of it is patched every 20 ms; crdbench's figures for the fan-out (the delay counts from just before each patch is sent):"
  echo
  echo '```'
  grep -E "deliveries" "$WORK/watch.txt" | tail -1 | sed -E 's/^[0-9/]+ [0-9:]+ +//'
  PROF="$WORK/watch.cpu" BIN="$WORK/crdserver"
  samples
  echo '```'
  echo
  echo "| part | functions (pprof -focus) | share |"
  echo "|---|---|---|"
  share "the watches' handlers (events converted, written, flushed)" 'resource\.\(\*stream\)\.follow'
  share "… of which flushes (each event its own HTTP/2 DATA frame)" 'resource\.\(\*stream\)\.send'
  share "the patches' handlers" 'resource\.\(\*call\)\.patch$'
  share "HTTP/2 frame writes and TLS (the connections' writers)" 'http2serverConn\)\.writeFrameAsync'
  share "the watch caches (events from etcd, sent to the watchers)" 'store\.\(\*Cache\)\.'
  share "etcd (raft, WAL, apply)" 'etcdserver\.\(\*raftNode\)|etcdserver\.\(\*EtcdServer\)\.applyAll'
  share "garbage collection" 'runtime\.gcBgMarkWorker|runtime\.gcAssistAlloc'
  share "scheduler wake-ups and idle" 'runtime\.findRunnable|runtime\.wakep|runtime\.stopm'
  share "system calls (all)" 'syscall\.Syscall|syscall\.RawSyscall6|linux\.Syscall6'

  echo
  echo "## CPU of a crdtest server's life"
  echo
  echo "\`go test -bench 'BenchmarkServer\$' -benchtime 40x -cpuprofile\` of package crdtest: 40 servers one after another, each started (embedded etcd without fsync), ready, given a CRD, a create and a list through client-go, and closed. Eight such servers at once on two CPUs take at least 8 × the CPU of one ÷ 2:"
  echo
  echo '```'
  grep -E '^BenchmarkServer' "$WORK/crdtest.txt" || true
  PROF="$WORK/crdtest.cpu" BIN="$WORK/crdtest.test"
  samples
  echo '```'
  echo
  # go test runs a benchmark once with b.N = 1, then with b.N = 40: 41 servers.
  samples | sed -E 's/.*Total samples = ([0-9.]+)(m?s).*/\1 \2/' |
    awk '{ ms = ($2 == "s") ? $1 * 1000 : $1; printf "CPU per server: %.0f ms (the samples over the 41 servers go test ran: one with b.N = 1, then 40).\n", ms / 41 }'
  echo
  echo "| part | functions (pprof -focus) | share |"
  echo "|---|---|---|"
  share "requests served (the test's, the controllers' and the bootstrap's)" 'resource\.\(\*Handler\)\.Serve$'
  share "… managed fields" 'managedfields/internal\.\(\*FieldManager\)\.Update'
  share "default RBAC: bootstrap and aggregation (their side of the requests)" 'clusterroles\.'
  share "embedded etcd: start" 'embed\.StartEtcd'
  share "embedded etcd: raft, WAL, apply" 'etcdserver\.\(\*raftNode\)|etcdserver\.\(\*EtcdServer\)\.applyAll'
  share "TLS handshakes" 'crypto/tls\.\(\*Conn\)\.(clientHandshake|serverHandshake)'
  share "certificates made (CA, serving, admin)" 'internal/pki\.'
  share "Close" 'server\.\(\*Server\)\.Close'
  share "garbage collection" 'runtime\.gcBgMarkWorker|runtime\.gcAssistAlloc'
  echo
  echo "The top of the profile by cumulative time:"
  echo
  echo '```'
  go tool pprof -top -cum -nodecount=30 "$WORK/crdtest.test" "$WORK/crdtest.cpu" 2>/dev/null | sed -n '/^Showing nodes/,$p'
  echo '```'
} >>"$WORK/out.md"
cp "$WORK/out.md" "$OUT"
echo "wrote $OUT"
