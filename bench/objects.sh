#!/usr/bin/env bash
# bench/objects.sh: many objects on one server, for the issue "A million objects: memory close
# to what they weigh, lists and watches that stay fast".
#
#   bench/objects.sh                                  # SIZES="10000 100000": about 15 minutes on 2 cores
#   SIZES=10000 REF=0 RESOURCES="crd configmaps" bench/objects.sh
#
# It builds crdserver and crdbench into a temp dir. For each resource of RESOURCES ("crd
# configmaps") and each size of SIZES, on crdserver: a fresh data dir and a free loopback port;
# `crdbench objects` (the Releases' CRD, the RSS idle, the fill, the RSS filled, full lists, a
# paged walk, a watch-list, watch latency); then the server stopped (SIGTERM), started again on
# the same data dir (t0 = date +%s%N just before the launch) and `crdbench objects -serving -t0`
# (t0 → a list, a GET and a watch answered; the first full list; the RSS SETTLE seconds later).
#
# With REF=1 (the default when $REFDIR/bin/apiextensions-apiserver exists) the same for the crd
# resource against the reference apiextensions-apiserver + etcd (start-reference.sh, a fresh
# etcd each size, stop-reference.sh after; the RSS of both processes summed), for the sizes of
# REF_SIZES (default SIZES); its restart relaunches only the apiextensions-apiserver, with the
# command line it ran (/proc/PID/cmdline), and writes its new PID to run/ for stop-reference.sh.
# With KUBE=1 (the default when $REFDIR/bin/kube-apiserver exists) the same for configmaps
# against the full kube reference (start-kube.sh, https://127.0.0.1:26443, kube-apiserver + its
# etcd). A reference that is already running (someone else's) is left alone and skipped. A
# reference that dies (out of memory at a large size) is recorded as "did not survive" and the
# script goes on.
#
# Results: bench/results/objects-<server>-<resource>-<n>.json and …-restart.json, and the
# summary bench/results/objects.md. Environment: SIZES, RESOURCES, REF, REF_SIZES, KUBE, REFDIR
# (/work/shared/reference), CONC (16), SETTLE (5, seconds), LIMIT (30m, each phase of crdbench),
# RUN_TIMEOUT (7200, seconds, each crdbench run), OUT (bench/results: where the results go), REV (empty: crdserver built from the working
# tree; a commit: built at that commit in a temporary git worktree). Every server listens on
# 127.0.0.1 only.
set -euo pipefail
set +m # no job control: setsid does not fork, so $! is the relaunched server's own PID
cd "$(dirname "$0")/.."
ROOT=$PWD
REFDIR=${REFDIR:-/work/shared/reference}
SIZES=${SIZES:-"10000 100000"}
RESOURCES=${RESOURCES:-"crd configmaps"}
REF=${REF:-$([ -x "$REFDIR/bin/apiextensions-apiserver" ] && echo 1 || echo 0)}
REF_SIZES=${REF_SIZES:-$SIZES}
KUBE=${KUBE:-$([ -x "$REFDIR/bin/kube-apiserver" ] && echo 1 || echo 0)}
CONC=${CONC:-16}
SETTLE=${SETTLE:-5}
LIMIT=${LIMIT:-30m}
RUN_TIMEOUT=${RUN_TIMEOUT:-7200}
REV=${REV:-}
OUT=${OUT:-$ROOT/bench/results}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/crdbench-objects.XXXXXX)
PID=         # the crdserver this script runs
REF_STOP=    # the stop script of a reference this script started
FAILED=0
cleanup() {
  if [ -n "$PID" ]; then stop_child "$PID"; fi
  if [ -n "$REF_STOP" ]; then "$REF_STOP" >>"$WORK/ref-stop.log" 2>&1 || true; fi
  if [ -n "$REV" ]; then git -C "$ROOT" worktree remove --force "$WORK/src" 2>/dev/null || true; fi
  rm -rf -- "$WORK"/data-*
  if [ "$FAILED" = 0 ]; then rm -rf -- "$WORK"; else echo "logs kept in $WORK" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

note() { echo "$*" | tee -a "$WORK/notes.txt" >&2; }
# alive PID: the process still exists.
alive() { [ -n "$1" ] && [ -d "/proc/$1" ]; }
# stop_child PID: SIGTERM to a server this shell started, SIGKILL after 60 s.
stop_child() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 1 600); do alive "$1" || break; sleep 0.1; done
  if alive "$1"; then kill -KILL "$1" 2>/dev/null || true; fi
  wait "$1" 2>/dev/null || true
}
# stop_other PID: the same for a process this shell did not start (no wait).
stop_other() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 1 600); do alive "$1" || break; sleep 0.1; done
  if alive "$1"; then kill -KILL "$1" 2>/dev/null || true; sleep 0.5; fi
}
# objects ARGS…: crdbench objects bounded by RUN_TIMEOUT; its output into $TXT.
objects() { timeout --signal=TERM --kill-after=30 "$RUN_TIMEOUT" "$CB" objects "$@" >"$TXT" 2>&1; }
# failed WHAT LOG: a run that failed, with the tails of its output and of the server's log.
failed() {
  FAILED=1
  note "FAILED: $1 (see $TXT)"
  tail -n 15 "$TXT" >&2 || true
  echo "--- the server's log ($2):" >&2
  tail -n 25 "$2" >&2 || true
}

echo "building crdserver and crdbench into $WORK" >&2
if [ -n "$REV" ]; then
  git worktree add --detach "$WORK/src" "$REV" >/dev/null 2>&1
  (cd "$WORK/src" && go build -o "$WORK/crdserver" ./cmd/crdserver)
  HEAD="$(git rev-parse --short "$REV") (REV=$REV)"
else
  go build -o "$WORK/crdserver" ./cmd/crdserver
  HEAD=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench' || echo ' + uncommitted changes (the working tree)')
fi
go build -o "$WORK/crdbench" ./bench/cmd/crdbench
CB=$WORK/crdbench
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
: >"$WORK/runs.txt"

# start_crdserver DATA PORT LOG: launches crdserver in the background (PID), appending to LOG.
start_crdserver() {
  "$WORK/crdserver" --data-dir "$1" --bind-address 127.0.0.1 --port "$2" </dev/null >>"$3" 2>&1 &
  PID=$!
}

# crdserver_run RESOURCE N
crdserver_run() {
  local res=$1 n=$2 port data log json t0
  local -a tls
  port=$("$CB" freeport)
  data=$WORK/data-crdserver-$res-$n
  log=$WORK/crdserver-$res-$n.log
  json=$OUT/objects-crdserver-$res-$n
  rm -rf -- "$data" "$json.json" "$json-restart.json"
  echo "== crdserver, $res, $n objects (port $port)" >&2
  start_crdserver "$data" "$port" "$log"
  for _ in $(seq 1 1200); do
    grep -q "crdserver is serving" "$log" 2>/dev/null && break
    alive "$PID" || break
    sleep 0.1
  done
  if ! grep -q "crdserver is serving" "$log"; then
    TXT=$log failed "crdserver did not start ($res, $n)" "$log"
    stop_child "$PID"; PID=
    return 0
  fi
  tls=(-cacert "$data/pki/ca.crt" -cert "$data/pki/admin.crt" -key "$data/pki/admin.key")
  TXT=$WORK/crdserver-$res-$n.txt
  if ! objects -server "https://127.0.0.1:$port" "${tls[@]}" -name crdserver -resource "$res" -n "$n" \
    -concurrency "$CONC" -settle "${SETTLE}s" -limit "$LIMIT" -rss-pid "crdserver=$PID" -json "$json.json"; then
    failed "crdserver $res $n" "$log"
  fi
  echo "crdserver $res $n" >>"$WORK/runs.txt"
  grep -E '^(phase|fill|pages|watch-open) ' "$TXT" >&2 || true
  stop_child "$PID"; PID=
  if [ ! -s "$json.json" ] || ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d.get("fill") and not d["fill"].get("aborted") else 1)' "$json.json"; then
    note "crdserver $res $n: no restart (the objects were not all created)"
    return 0
  fi
  echo "   restart on the same data dir" >&2
  t0=$(date +%s%N)
  start_crdserver "$data" "$port" "$log"
  TXT=$WORK/crdserver-$res-$n-restart.txt
  if ! objects -server "https://127.0.0.1:$port" "${tls[@]}" -name crdserver -resource "$res" -n "$n" \
    -serving -t0 "$t0" -settle "${SETTLE}s" -limit 10m -rss-pid "crdserver=$PID" -json "$json-restart.json"; then
    failed "crdserver $res $n restart" "$log"
  fi
  stop_child "$PID"; PID=
}

# ref_run KIND RESOURCE N: KIND ref (apiextensions-apiserver) or kube (kube-apiserver).
ref_run() {
  local kind=$1 res=$2 n=$3 start stop api etcd apipid etcdpid url pki name json log t0 newpid
  local -a cmd tls
  if [ "$kind" = ref ]; then
    start=$REFDIR/start-reference.sh stop=$REFDIR/stop-reference.sh api=apiextensions-apiserver etcd=etcd
    url=https://127.0.0.1:${REF_API_PORT:-16443} pki=$REFDIR/pki name=reference
  else
    start=$REFDIR/start-kube.sh stop=$REFDIR/stop-kube.sh api=kube-apiserver etcd=kube-etcd
    url=https://127.0.0.1:${KREF_API_PORT:-26443} pki=$REFDIR/pki-kube name=kube
  fi
  json=$OUT/objects-$name-$res-$n
  rm -f -- "$json.json" "$json-restart.json"
  log=$WORK/$name-$res-$n.log
  echo "== $name, $res, $n objects ($url)" >&2
  if alive "$(cat "$REFDIR/run/$api.pid" 2>/dev/null)"; then
    note "$name $res $n: skipped, $api is already running (pid $(cat "$REFDIR/run/$api.pid")): not ours to fill and restart"
    return 0
  fi
  REF_STOP=$stop
  if ! timeout 300 "$start" >"$WORK/$name-start.out" 2>"$log"; then
    TXT=$WORK/$name-start.out failed "$name did not start ($res, $n)" "$log"
    "$stop" >>"$log" 2>&1 || true; REF_STOP=
    return 0
  fi
  apipid=$(cat "$REFDIR/run/$api.pid")
  etcdpid=$(cat "$REFDIR/run/$etcd.pid")
  tls=(-cacert "$pki/ca.crt" -cert "$pki/admin.crt" -key "$pki/admin.key")
  TXT=$WORK/$name-$res-$n.txt
  echo "$name $res $n" >>"$WORK/runs.txt"
  if ! objects -server "$url" "${tls[@]}" -name "$name" -resource "$res" -n "$n" -concurrency "$CONC" \
    -settle "${SETTLE}s" -limit "$LIMIT" -rss-pid "$api=$apipid" -rss-pid "etcd=$etcdpid" -json "$json.json"; then
    if ! alive "$apipid" || ! alive "$etcdpid"; then
      note "$name $res $n: did not survive ($api alive: $(alive "$apipid" && echo yes || echo no), etcd alive: $(alive "$etcdpid" && echo yes || echo no))"
      echo "$name $res $n" >>"$WORK/survival.txt"
      FAILED=1
      tail -n 25 "$REFDIR/run/$api.log" >&2 || true
    else
      failed "$name $res $n" "$REFDIR/run/$api.log"
    fi
    "$stop" >>"$log" 2>&1 || true; REF_STOP=
    return 0
  fi
  grep -E '^(phase|fill|pages|watch-open) ' "$TXT" >&2 || true
  # Restart the API server alone (etcd keeps the objects), with the command line it runs.
  echo "   restart of $api alone" >&2
  mapfile -d '' -t cmd <"/proc/$apipid/cmdline"
  stop_other "$apipid"
  t0=$(date +%s%N)
  setsid "${cmd[@]}" </dev/null >>"$WORK/$name-$res-$n-restart.log" 2>&1 &
  newpid=$!
  echo "$newpid" >"$REFDIR/run/$api.pid"
  TXT=$WORK/$name-$res-$n-restart.txt
  if ! objects -server "$url" "${tls[@]}" -name "$name" -resource "$res" -n "$n" -serving -t0 "$t0" \
    -settle "${SETTLE}s" -limit 10m -rss-pid "$api=$newpid" -rss-pid "etcd=$etcdpid" -json "$json-restart.json"; then
    failed "$name $res $n restart" "$WORK/$name-$res-$n-restart.log"
  fi
  "$stop" >>"$log" 2>&1 || true; REF_STOP=
}

for res in $RESOURCES; do
  for n in $SIZES; do
    crdserver_run "$res" "$n"
    if [ "$res" = crd ] && [ "$REF" = 1 ] && [[ " $REF_SIZES " == *" $n "* ]]; then ref_run ref "$res" "$n"; fi
    if [ "$res" = configmaps ] && [ "$KUBE" = 1 ] && [[ " $REF_SIZES " == *" $n "* ]]; then ref_run kube "$res" "$n"; fi
  done
done

# The summary: one table per resource, a row per size and server.
python3 - "$OUT" "$WORK/runs.txt" "$WORK/notes.txt" "$WORK/survival.txt" >"$OUT/objects.md.tmp" <<EOF
import json, os, sys
out, runs, notes, survival = sys.argv[1:5]
dead = set(open(survival).read().split("\n")) if os.path.exists(survival) else set()
print("## Many objects: memory, lists, watches, restart (bench/objects.sh)")
print()
print("crdserver at $HEAD, $DATE; $(nproc) CPUs; load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end.")
print("Settings: SIZES=\"$SIZES\", RESOURCES=\"$RESOURCES\", REF=$REF, KUBE=$KUBE, CONC=$CONC, SETTLE=${SETTLE}s.")
print()
print("Objects are built from their index alone, like Flux Kustomizations: \`crd\` Releases of \`releases.scale.example.com\` (spec and status, no status subresource), "
      "\`configmaps\` ConfigMaps with a kustomization.yaml; both with the same labels, a checksum annotation and a revision. "
      "RSS is VmRSS summed over the server's processes (crdserver; the reference's API server and etcd), idle after the CRD is Established and before the fill, "
      "filled ${SETTLE} s after it; bytes/object = (filled − idle) ÷ objects; object size = the mean bytes of an item in the first full list (as served, JSON); "
      "ratio = bytes/object ÷ object size. Full list: median of 3 GETs as client-go sends them (JSON, gzip), time to the body's first byte and to its last; "
      "pages: a walk by pages of 500, median of its first 10 and last 10 pages; watch-list: sendInitialEvents until the initial-events-end bookmark; "
      "watch: 10 watches from a recent resourceVersion, 200 patches 20 ms apart, delay to each watcher (p50/p99); restart: t0 (launch) until a list, "
      "a GET and a watch are all answered, polled every 20 ms by a crdbench started just after the launch (≤: already answered at its first poll, so the figure is "
      "crdbench's own start), then the first full list and the RSS ${SETTLE} s later.")
def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None
def f(v, fmt="{:.0f}"):
    return "–" if v in (None, 0) else fmt.format(v)
rows = {}
for line in open(runs):
    server, res, n = line.split()
    rows.setdefault(res, []).append((int(n), server))
for res in rows:
    print()
    print(f"### {res}")
    print()
    print("| objects | server | fill creates/s | RSS idle MiB | RSS filled MiB | bytes/object | object size B | ratio | full list first byte ms | full list ms | first 10 pages ms | last 10 pages ms | watch-list ms | watch p50 / p99 ms | restart → serving ms | first list after restart ms | RSS after restart MiB | failures |")
    print("|" + "---|" * 18)
    for n, server in sorted(rows[res]):
        base = f"{out}/objects-{server}-{res}-{n}"
        d, r = load(base + ".json"), load(base + "-restart.json")
        if f"{server} {res} {n}" in dead:
            print(f"| {n:,} | {server} | did not survive |" + " |" * 15)
            continue
        if d is None:
            print(f"| {n:,} | {server} | no result |" + " |" * 15)
            continue
        fill, lists, paged, wl, w = d.get("fill") or {}, d.get("full_lists") or {}, d.get("paged") or {}, d.get("watch_list") or {}, d.get("watch") or {}
        idle, filled = (d.get("rss_idle") or {}).get("total_vmrss_mib"), (d.get("rss_filled") or {}).get("total_vmrss_mib")
        s = (r or {}).get("serving") or {}
        fails = len(d.get("failures") or []) + len((r or {}).get("failures") or [])
        wlv = f(wl.get("initial_events_end_ms"), "{:.0f}") if not wl.get("unsupported") else "not served"
        wv = "–" if not w.get("deliveries") else f"{w['p50_ms']:.1f} / {w['p99_ms']:.1f} ({w['deliveries']}/{w['deliveries_expected']})"
        # Served at the first poll: the figure is crdbench's own start after the launch, a bound.
        sv = f(s.get("all_ms")) if s.get("polls", 0) > 1 or not s.get("all_ms") else "≤ " + f(s.get("all_ms"))
        print(f"| {n:,} | {server} | {f(fill.get('requests_per_second'))} | {f(idle, '{:.1f}')} | {f(filled, '{:.1f}')} | {f(d.get('rss_bytes_per_object'))} "
              f"| {f(d.get('served_object_mean_bytes'))} | {f(d.get('rss_per_served_byte'), '{:.2f}')} | {f(lists.get('median_first_byte_ms'), '{:.1f}')} "
              f"| {f(lists.get('median_ms'), '{:.1f}')} | {f(paged.get('first_10_pages_median_ms'), '{:.1f}')} | {f(paged.get('last_10_pages_median_ms'), '{:.1f}')} "
              f"| {wlv} | {wv} | {sv} | {f((s.get('first_full_list') or {}).get('ms'), '{:.1f}')} "
              f"| {f((s.get('rss') or {}).get('total_vmrss_mib'), '{:.1f}')} | {fails or ''} |")
if os.path.exists(notes) and os.path.getsize(notes) > 0:
    print()
    print("Notes:")
    print()
    for line in open(notes):
        print("- " + line.strip())
EOF
mv "$OUT/objects.md.tmp" "$OUT/objects.md"
cat "$OUT/objects.md"
exit "$FAILED"
