#!/usr/bin/env bash
# Whole-server benchmark: crdserver beside the reference (upstream apiextensions-apiserver).
#
#   bench/run.sh                      # writes bench/RESULTS.md and bench/results/*
#
# Steps (every command run is also written to bench/results/commands.txt):
#   1. builds crdserver and crdbench into a temp dir (nothing outside bench/ is written);
#   2. start-up + idle RSS of crdserver: STARTS launches on fresh data dirs and free loopback ports;
#   3. start-up + idle RSS of the reference: REF_STARTS private instances (fresh etcd + kube-stub +
#      apiextensions-apiserver on free loopback ports, the flags of start-reference.sh), so the
#      shared reference is left alone;
#   4. load on crdserver (fresh data dir): the widget CRD via kubectl, then crdbench load;
#   4b. webhook conversion on crdserver (fresh data dir): crdbench convert serves the
#      example CronTab webhook itself, creates a Webhook CRD and a None CRD, CONV_N objects in
#      v1beta1 in each, and times CONV_LISTS GETs of each collection in v1 and v1beta1;
#   4b'. declarative conversion on crdserver (fresh data dir; RULES=0 skips it): crdbench rules, the
#      same CronTabs converted by ConversionRules, through the example webhook and by None, RULES_ROUNDS
#      rounds of CONV_N objects per CRD in a fresh namespace, one cold GET of each then RULES_WARM warm;
#   4b''. paths of the performance issue on crdserver (fresh data dir; PATHS=0 skips it, here and in
#      step 5): crdbench paths, PATHS_ROUNDS rounds, each on CRDs of its own (deleted again): PATHS_N
#      creates of 1-KiB bodies (the first 5,000 with 16 workers measured) and the RSS after them,
#      1,000 sequential GETs, full lists with gzip, walks by pages of 500, watch fan-out to
#      PATHS_WATCHERS (200,1000) watchers, the first list through the example conversion webhook after
#      a CRD edit and after a flip None -> Webhook, deleting the CRD of PATHS_N objects, and the first
#      create after Established;
#   4c. in-process benchmarks (GOBENCH=0 skips them): from the repo root,
#      go test -run '^$' -bench . -benchmem -count GOBENCH_COUNT -benchtime GOBENCH_TIME ./integration ./internal/schema ./internal/conversion ./internal/filters ./crdtest
#      with its output (server log lines removed) in bench/results/gobench.txt;
#   5. load on the shared reference (./start-reference.sh; stopped again only if this script
#      started it; the CRD is deleted again only if this script created it), then the same
#      webhook conversion run on it (its two CRDs are deleted again afterwards), then the same
#      paths run on it (PATHS=0 skips it; crdbench deletes the CRDs it created, all labelled
#      crdbench-paths-run=<run id>, and run.sh deletes them by that label if interrupted);
#   5b. core types (CORE=0 skips it): crdbench core on a fresh crdserver, then on the full
#      Kubernetes reference (kube-apiserver + etcd + kube-controller-manager, ./start-kube.sh;
#      started only if it is not running, and then stopped again right after): CORE_N sequential
#      ConfigMap creates and gets, LISTS lists of them, then LEASES Leases renewed every
#      LEASE_PERIOD for LEASE_DURATION as client-go's leader election renews them, with the
#      server's CPU time and RSS; on the kube reference its namespace is deleted again;
#   5c. dynamic admission (ADMISSION=0 skips it): crdbench admission on a fresh crdserver, then on the
#      kube reference (used if running, else started and stopped again right after): per round
#      (ADMISSION_ROUNDS), ADMISSION_N creates of a custom resource with CONC workers under each
#      configuration in turn (no admission, 1 and 10 bound ValidatingAdmissionPolicies, one validating
#      webhook served by crdbench on loopback), the objects deleted after each; on the kube reference
#      its policies, bindings, webhook configuration, namespace and CRD are deleted again;
#   5d. thousands of CRDs (CRDS=0 skips it): bench/crds.sh (its own header says what it runs; CRDS_ROUNDS,
#      CRDS_KUBE_N, CORPUS), with results in bench/results/crds-*.json;
#   5e. priority and fairness (APF=0 skips it): crdbench apf, APF_ROUNDS rounds each on a fresh crdserver,
#      then APF_ROUNDS rounds on the kube reference (used if running, else started and stopped right after):
#      200 noisy clients list 5,000 objects for APF_DURATION beside a Lease renewed every 2 s and an admin;
#   6. crdbench report -> bench/RESULTS.md.
#
# Environment: N (1000), LOAD_ROUNDS (3), LIST_N (10000), LISTS (5), CONC (8), STARTS (5), REF_STARTS (3),
# IDLE (5s), REF (/work/shared/reference), CONVERT (1; 0 skips the webhook conversion phases),
# REF_CONVERT (1; 0 skips only the reference's), CONV_N (10000), CONV_LISTS (7),
# GOBENCH (1; 0 skips the in-process go test -bench phase), GOBENCH_COUNT (5), GOBENCH_TIME (1s),
# RULES (1), RULES_ROUNDS (3), RULES_WARM (3),
# CORE (1; 0 skips the core types phase), CORE_N (N), LEASES (1000), LEASE_PERIOD (2s),
# LEASE_DURATION (30s), CORE_IDLE (5s: the servers' idle CPU, measured just before the renewals),
# CORE_SETTLE (5: seconds between a server's start and the core run; a running kube reference gets none),
# ADMISSION (1; 0 skips the admission phase), ADMISSION_N (2000), ADMISSION_ROUNDS (3),
# PATHS (1; 0 skips the paths phase), PATHS_ROUNDS (3), PATHS_N (10000), PATHS_WATCHERS (200,1000),
# APF (1; 0 skips the priority and fairness phase), APF_ROUNDS (3), APF_DURATION (30s).
set -uo pipefail
set +m

HERE="$(cd "$(dirname "$0")" && pwd -P)"
ROOT="$(dirname "$HERE")"
REF="${REF:-/work/shared/reference}"
N="${N:-1000}"
LOAD_ROUNDS="${LOAD_ROUNDS:-3}"
LIST_N="${LIST_N:-10000}"
LISTS="${LISTS:-5}"
CONC="${CONC:-8}"
STARTS="${STARTS:-5}"
REF_STARTS="${REF_STARTS:-3}"
IDLE="${IDLE:-5s}"
CONVERT="${CONVERT:-1}"
REF_CONVERT="${REF_CONVERT:-1}"
CONV_N="${CONV_N:-10000}"
CONV_LISTS="${CONV_LISTS:-7}"
GOBENCH="${GOBENCH:-1}"
GOBENCH_COUNT="${GOBENCH_COUNT:-5}"
GOBENCH_TIME="${GOBENCH_TIME:-1s}"
RULES="${RULES:-1}"
RULES_ROUNDS="${RULES_ROUNDS:-3}"
RULES_WARM="${RULES_WARM:-3}"
CORE="${CORE:-1}"
CORE_N="${CORE_N:-$N}"
LEASES="${LEASES:-1000}"
LEASE_PERIOD="${LEASE_PERIOD:-2s}"
LEASE_DURATION="${LEASE_DURATION:-30s}"
CORE_IDLE="${CORE_IDLE:-5s}"
CORE_SETTLE="${CORE_SETTLE:-5}"
ADMISSION="${ADMISSION:-1}"
ADMISSION_N="${ADMISSION_N:-2000}"
ADMISSION_ROUNDS="${ADMISSION_ROUNDS:-3}"
PATHS="${PATHS:-1}"
CRDS="${CRDS:-1}"
PATHS_ROUNDS="${PATHS_ROUNDS:-3}"
PATHS_N="${PATHS_N:-10000}"
PATHS_WATCHERS="${PATHS_WATCHERS:-200,1000}"
APF="${APF:-1}"
APF_ROUNDS="${APF_ROUNDS:-3}"
APF_DURATION="${APF_DURATION:-30s}"
# The label of the CRDs the paths run creates on the reference (at most 20 lower-case letters and digits).
PATHS_RUN_ID="rs$(date +%s)$$"
KPKI="$REF/pki-kube"
CONV_CRDS=(crontabs.example.com crontabs.none.example.com)
CRD_FILE="$REF/examples/widget-crd.yaml"
CRD_NAME=widgets.peer.example.com
OUT="$HERE/results"
WORK="$(mktemp -d /tmp/crdbench.XXXXXX)"

log() { echo "run.sh: $*" >&2; }
# logcmd: append a command line to commands.txt, quoted only where the shell needs it.
logcmd() {
  local a line=""
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,@+%-]+$ ]]; then line+="$a "; else line+="'${a//\'/\'\\\'\'}' "; fi
  done
  echo "${line% }${SUFFIX:-}" >>"$OUT/commands.txt"
}
# run: log a command, then run it. run_bg: the same in the background ($! is the command's PID).
run() { logcmd "$@"; "$@"; }
run_bg() { SUFFIX=" &" logcmd "$@"; "$@" & }
note() { echo "$*" >>"$OUT/notes.md"; }
extra() { echo "$*" >>"$OUT/failures-extra.md"; }
# drop_logs: copy go test output, leaving out the server's log lines (slog's text
# format "time=...", or its default "2006/01/02 15:04:05 LEVEL ..."). go test
# prints a benchmark's name before running it, so a log line written during a
# run comes right after the name: the name is kept and joined to its result on
# a later line. The number of lines left out goes to stderr.
drop_logs() {
  awk '
    function islog(s) {
      return s ~ /^time=/ || s ~ /^[0-9][0-9][0-9][0-9]\/[0-9][0-9]\/[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](\.[0-9]+)? (DEBUG|INFO|WARN|ERROR)/ ||
        s ~ /^[IWEF][0-9][0-9][0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]+ /
    }
    {
      line = pending $0; pending = ""
      if (islog(line)) { dropped++; next }
      if (match(line, /^Benchmark[^ \t]*[ \t]+/) && islog(substr(line, RLENGTH + 1))) {
        pending = substr(line, 1, RLENGTH); dropped++; next
      }
      print line
    }
    END { if (pending != "") print pending; print dropped + 0 > "/dev/stderr" }'
}

# Processes this script started, stopped on exit by PID only.
OUR_PIDS=()
REF_STARTED=0
REF_CRD_CREATED=0
REF_CONV_RUNNING=0
REF_PATHS_RUNNING=0
KUBE_STARTED=0
KUBE_CORE_RUNNING=0
KUBE_CORE_NS=""
KUBE_ADM_RUNNING=0
KUBE_ADM_NS=""
KUBE_URL=""
cleanup() {
  for pid in "${OUR_PIDS[@]+"${OUR_PIDS[@]}"}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  if [[ $REF_CRD_CREATED == 1 && $REF_STARTED == 0 ]]; then
    "$REF/bin/kubectl" --kubeconfig "$REF/reference.kubeconfig" --cache-dir "$WORK/kubectl-cache-reference" \
      delete crd "$CRD_NAME" --ignore-not-found --timeout=180s >&2 || log "could not delete $CRD_NAME from the reference"
  fi
  if [[ $REF_CONV_RUNNING == 1 && $REF_STARTED == 0 ]]; then
    # Interrupted during the reference's conversion run: its CRDs did not exist before it.
    "$REF/bin/kubectl" --kubeconfig "$REF/reference.kubeconfig" --cache-dir "$WORK/kubectl-cache-reference" \
      delete crd "${CONV_CRDS[@]}" --ignore-not-found --timeout=300s >&2 || log "could not delete ${CONV_CRDS[*]} from the reference"
  fi
  if [[ $REF_PATHS_RUNNING == 1 && $REF_STARTED == 0 ]]; then
    # Interrupted during the reference's paths run (crdbench deletes its CRDs itself when
    # signalled; this is for a crdbench that could not): all of them carry the run's label.
    "$REF/bin/kubectl" --kubeconfig "$REF/reference.kubeconfig" --cache-dir "$WORK/kubectl-cache-reference" \
      delete crd -l "crdbench-paths-run=$PATHS_RUN_ID" --ignore-not-found --timeout=300s >&2 || log "could not delete the paths CRDs (label crdbench-paths-run=$PATHS_RUN_ID) from the reference"
  fi
  if [[ $REF_STARTED == 1 ]]; then
    "$REF/stop-reference.sh" >&2 || true
  fi
  if [[ $KUBE_CORE_RUNNING == 1 && $KUBE_STARTED == 0 && -n $KUBE_CORE_NS ]]; then
    # Interrupted during the kube reference's core run: its namespace did not exist before it.
    curl -s -o /dev/null --max-time 30 --cacert "$KPKI/ca.crt" --cert "$KPKI/admin.crt" --key "$KPKI/admin.key" \
      -X DELETE "$KUBE_URL/api/v1/namespaces/$KUBE_CORE_NS" || log "could not delete namespace $KUBE_CORE_NS from the kube reference"
  fi
  if [[ $KUBE_ADM_RUNNING == 1 && $KUBE_STARTED == 0 && -n $KUBE_ADM_NS ]]; then
    # Interrupted during the kube reference's admission run (crdbench removes these itself when
    # signalled; this is for a crdbench that could not): none of them existed before it.
    for obj in admissionregistration.k8s.io/v1/validatingwebhookconfigurations/crdbench-admission-webhook \
        $(for i in $(seq -w 0 50) probe; do
            echo "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/crdbench-admission-$i"
            echo "admissionregistration.k8s.io/v1/validatingadmissionpolicies/crdbench-admission-$i"
          done) \
        apiextensions.k8s.io/v1/customresourcedefinitions/widgets.admission.crdbench.example.com; do
      curl -s -o /dev/null --max-time 30 --cacert "$KPKI/ca.crt" --cert "$KPKI/admin.crt" --key "$KPKI/admin.key" \
        -X DELETE "$KUBE_URL/apis/$obj" || log "could not delete $obj from the kube reference"
    done
    curl -s -o /dev/null --max-time 30 --cacert "$KPKI/ca.crt" --cert "$KPKI/admin.crt" --key "$KPKI/admin.key" \
      -X DELETE "$KUBE_URL/api/v1/namespaces/$KUBE_ADM_NS" || log "could not delete namespace $KUBE_ADM_NS from the kube reference"
  fi
  if [[ $KUBE_STARTED == 1 ]]; then
    "$REF/stop-kube.sh" >&2 || true
  fi
  rm -rf -- "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# stop_pid: SIGTERM one of our PIDs, wait for it, and forget it.
stop_pid() {
  kill -TERM "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  local keep=() p
  for p in "${OUR_PIDS[@]+"${OUR_PIDS[@]}"}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  OUR_PIDS=("${keep[@]}")
}
wait_ok() { # url seconds [curl args]
  local url=$1 deadline=$((SECONDS + $2)); shift 2
  until [[ "$(curl -s --max-time 2 "$@" "$url")" == ok ]]; do
    (( SECONDS < deadline )) || return 1
    sleep 0.05
  done
}
wait_200() { # url seconds
  local deadline=$((SECONDS + $2))
  until curl -sf -o /dev/null --max-time 2 "$1"; do
    (( SECONDS < deadline )) || return 1
    sleep 0.05
  done
}

for b in kubectl etcd kube-stub apiextensions-apiserver; do
  [[ -x "$REF/bin/$b" ]] || { log "missing $REF/bin/$b (run $REF/build.sh)"; exit 1; }
done
[[ -s "$REF/pki/admin.crt" ]] || { log "missing $REF/pki (run $REF/start-reference.sh once)"; exit 1; }

# The last run's results go, but bench/suites.sh's (suites.tsv), which this
# script does not make.
mkdir -p "$OUT"
find "$OUT" -mindepth 1 -maxdepth 1 ! -name suites.tsv -exec rm -rf -- {} +
echo "# WORK=$WORK: a temporary folder, removed at the end" >"$OUT/commands.txt"

# 0. Machine.
{
  echo "date:      $(date -u +%FT%TZ)"
  echo "cpu:       $(nproc) cores ($(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo))"
  echo "memory:    $(free -m | awk '/^Mem/{printf "%.1f GiB", $2/1024}')"
  echo "kernel:    $(uname -sr)"
  echo "go:        $(go version)"
  echo "crdserver: commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD -- . ':!bench/results' ':!bench/RESULTS.md' 2>/dev/null || echo ' + uncommitted changes')"
  echo "reference: apiextensions-apiserver v1.37.2, etcd v3.7.3, kubectl v1.37.2 ($REF/bin)"
  if [[ $CORE != 0 ]]; then
    echo "kube:      kube-apiserver $("$REF/bin/kube-apiserver" --version 2>/dev/null | awk '{print $2}'), etcd v3.7.3, kube-controller-manager ($REF/start-kube.sh; core types, admission, thousands of CRDs)"
  fi
  echo "load avg:  $(cut -d' ' -f1-3 /proc/loadavg) at the start (1/5/15 min; the machine is shared)"
  echo "params:    N=$N LOAD_ROUNDS=$LOAD_ROUNDS LIST_N=$LIST_N LISTS=$LISTS CONC=$CONC STARTS=$STARTS REF_STARTS=$REF_STARTS IDLE=$IDLE"
  echo "           CONVERT=$CONVERT REF_CONVERT=$REF_CONVERT CONV_N=$CONV_N CONV_LISTS=$CONV_LISTS"
  echo "           GOBENCH=$GOBENCH GOBENCH_COUNT=$GOBENCH_COUNT GOBENCH_TIME=$GOBENCH_TIME"
  echo "           CORE=$CORE CORE_N=$CORE_N LEASES=$LEASES LEASE_PERIOD=$LEASE_PERIOD LEASE_DURATION=$LEASE_DURATION CORE_IDLE=$CORE_IDLE CORE_SETTLE=$CORE_SETTLE"
  echo "           ADMISSION=$ADMISSION ADMISSION_N=$ADMISSION_N ADMISSION_ROUNDS=$ADMISSION_ROUNDS"
  echo "           PATHS=$PATHS PATHS_ROUNDS=$PATHS_ROUNDS PATHS_N=$PATHS_N PATHS_WATCHERS=$PATHS_WATCHERS"
  echo "           APF=$APF APF_ROUNDS=$APF_ROUNDS APF_DURATION=$APF_DURATION"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

# 1. Build.
log "building crdserver and crdbench"
cd "$ROOT" || exit 1
echo "# build (from $ROOT)" >>"$OUT/commands.txt"
run go build -o "$WORK/crdserver" ./cmd/crdserver || { log "crdserver does not build"; exit 1; }
run go build -o "$WORK/crdbench" ./bench/cmd/crdbench || exit 1
CB="$WORK/crdbench"

# 2. crdserver start-up and idle RSS.
echo "# crdserver start-up and idle RSS: $STARTS starts, each on a fresh data dir and a free port" >>"$OUT/commands.txt"
for i in $(seq 1 "$STARTS"); do
  port=$("$CB" freeport)
  data="$WORK/crdserver-start-$i"
  run "$CB" start -name crdserver -readyz "https://127.0.0.1:$port/readyz" -insecure -idle "$IDLE" \
    -log "$OUT/crdserver-start-$i.log" -json "$OUT/start-crdserver-$i.json" -- \
    "$WORK/crdserver" --data-dir "$data" --bind-address 127.0.0.1 --port "$port" || log "crdserver start $i failed"
  rm -rf -- "$data"
done

# 3. Reference start-up and idle RSS, on private instances.
echo "# reference start-up and idle RSS: $REF_STARTS private instances (fresh etcd, kube-stub, apiserver on free ports)" >>"$OUT/commands.txt"
for i in $(seq 1 "$REF_STARTS"); do
  read -r ETCD_PORT ETCD_PEER STUB_PORT API_PORT < <("$CB" freeport -n 4 | tr '\n' ' ')
  d="$WORK/ref-start-$i"
  mkdir -p "$d/etcd"
  cat >"$d/stub.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube-stub
  cluster:
    server: http://127.0.0.1:${STUB_PORT}
contexts:
- name: kube-stub
  context:
    cluster: kube-stub
    user: apiextensions-apiserver
current-context: kube-stub
users:
- name: apiextensions-apiserver
  user: {}
EOF
  T0=$(date +%s%N)
  run_bg "$REF/bin/etcd" --name reference --data-dir "$d/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-cluster "reference=http://127.0.0.1:$ETCD_PEER" --initial-cluster-state new \
    </dev/null >"$d/etcd.log" 2>&1
  ETCD_PID=$!
  OUR_PIDS+=("$ETCD_PID")
  run_bg "$REF/bin/kube-stub" --listen "127.0.0.1:$STUB_PORT" </dev/null >"$d/kube-stub.log" 2>&1
  STUB_PID=$!
  OUR_PIDS+=("$STUB_PID")
  if wait_200 "http://127.0.0.1:$ETCD_PORT/health" 30 && wait_200 "http://127.0.0.1:$STUB_PORT/healthz" 10; then
    run "$CB" start -name apiextensions-apiserver -readyz "https://127.0.0.1:$API_PORT/readyz" -cacert "$REF/pki/ca.crt" \
      -t0-unix-ns "$T0" -rss-pid "etcd=$ETCD_PID" -idle "$IDLE" \
      -log "$d/apiserver.log" -json "$OUT/start-reference-$i.json" -- \
      "$REF/bin/apiextensions-apiserver" \
      --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
      --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
      --tls-cert-file "$REF/pki/server.crt" --tls-private-key-file "$REF/pki/server.key" \
      --client-ca-file "$REF/pki/ca.crt" \
      --authentication-skip-lookup \
      --authentication-kubeconfig "$d/stub.kubeconfig" --authorization-kubeconfig "$d/stub.kubeconfig" --kubeconfig "$d/stub.kubeconfig" \
      --enable-priority-and-fairness=false \
      --disable-admission-plugins NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy \
      || { log "reference start $i failed"; tail -n 20 "$d/apiserver.log" >&2; }
  else
    log "reference start $i: etcd or kube-stub not healthy"
    tail -n 20 "$d/etcd.log" >&2
  fi
  stop_pid "$STUB_PID"
  stop_pid "$ETCD_PID"
  rm -rf -- "$d"
done

# 4. Load on crdserver.
echo "# load on crdserver (fresh data dir)" >>"$OUT/commands.txt"
port=$("$CB" freeport)
CS_DATA="$WORK/crdserver-load"
CS_URL="https://127.0.0.1:$port"
run_bg "$WORK/crdserver" --data-dir "$CS_DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$OUT/crdserver-load.log" 2>&1
CS_PID=$!
OUR_PIDS+=("$CS_PID")
if wait_ok "$CS_URL/readyz" 60 -k; then
  for _ in $(seq 1 100); do [[ -s "$CS_DATA/admin.kubeconfig" ]] && break; sleep 0.05; done
  if ! run "$REF/bin/kubectl" --kubeconfig "$CS_DATA/admin.kubeconfig" --cache-dir "$WORK/kubectl-cache-crdserver" \
      create --validate=false -f "$CRD_FILE" >"$WORK/crd-crdserver.out" 2>&1; then
    extra "- crdserver: \`kubectl create --validate=false -f widget-crd.yaml\` failed: $(tr '\n' ' ' <"$WORK/crd-crdserver.out")"
  fi
  cat "$WORK/crd-crdserver.out" >&2
  run "$CB" load -server "$CS_URL" -cacert "$CS_DATA/pki/ca.crt" -cert "$CS_DATA/pki/admin.crt" -key "$CS_DATA/pki/admin.key" -crd "$CRD_NAME" -n "$N" -rounds "$LOAD_ROUNDS" -list-n "$LIST_N" -lists "$LISTS" -concurrency "$CONC" \
    -rss-pid "crdserver=$CS_PID" -json "$OUT/load-crdserver.json" || log "crdserver load had failures"
  # What the server said while the CRD was not Established, if anything.
  if grep -q "level=WARN\|level=ERROR" "$OUT/crdserver-load.log"; then
    extra "- crdserver log during the load (first warnings/errors; full log in \`bench/results/crdserver-load.log\`):"
    extra ""
    extra '  ```'
    grep "level=WARN\|level=ERROR" "$OUT/crdserver-load.log" | head -n 3 | sed 's/^/  /' >>"$OUT/failures-extra.md"
    extra "  ($(grep -c "level=WARN\|level=ERROR" "$OUT/crdserver-load.log") warning/error lines in all)"
    extra '  ```'
  fi
else
  log "crdserver did not become ready"
  extra "- crdserver (load run) did not become ready within 60 s"
fi
stop_pid "$CS_PID"
rm -rf -- "$CS_DATA"
# Keep the log small.
if [[ $(stat -c %s "$OUT/crdserver-load.log") -gt 200000 ]]; then
  { head -n 200 "$OUT/crdserver-load.log"; echo "[... cut by run.sh ...]"; tail -n 200 "$OUT/crdserver-load.log"; } >"$WORK/l" && mv "$WORK/l" "$OUT/crdserver-load.log"
fi

# 4b. Webhook conversion on crdserver.
if [[ $CONVERT != 0 ]]; then
  echo "# webhook conversion on crdserver (fresh data dir; the webhook is served by crdbench itself)" >>"$OUT/commands.txt"
  port=$("$CB" freeport)
  CS_DATA="$WORK/crdserver-convert"
  CS_URL="https://127.0.0.1:$port"
  run_bg "$WORK/crdserver" --data-dir "$CS_DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$OUT/crdserver-convert.log" 2>&1
  CS_PID=$!
  OUR_PIDS+=("$CS_PID")
  if wait_ok "$CS_URL/readyz" 60 -k; then
    run "$CB" convert -server "$CS_URL" -cacert "$CS_DATA/pki/ca.crt" -cert "$CS_DATA/pki/admin.crt" -key "$CS_DATA/pki/admin.key" -n "$CONV_N" -lists "$CONV_LISTS" -concurrency "$CONC" \
      -rss-pid "crdserver=$CS_PID" -json "$OUT/convert-crdserver.json" || log "crdserver webhook conversion had failures"
    if grep -q "level=WARN\|level=ERROR" "$OUT/crdserver-convert.log"; then
      extra "- crdserver log during the webhook conversion run (first warnings/errors; full log in \`bench/results/crdserver-convert.log\`):"
      extra ""
      extra '  ```'
      grep "level=WARN\|level=ERROR" "$OUT/crdserver-convert.log" | head -n 3 | sed 's/^/  /' >>"$OUT/failures-extra.md"
      extra "  ($(grep -c "level=WARN\|level=ERROR" "$OUT/crdserver-convert.log") warning/error lines in all)"
      extra '  ```'
    fi
  else
    log "crdserver (conversion run) did not become ready"
    extra "- crdserver (webhook conversion run) did not become ready within 60 s"
  fi
  stop_pid "$CS_PID"
  rm -rf -- "$CS_DATA"
  if [[ $(stat -c %s "$OUT/crdserver-convert.log") -gt 200000 ]]; then
    { head -n 200 "$OUT/crdserver-convert.log"; echo "[... cut by run.sh ...]"; tail -n 200 "$OUT/crdserver-convert.log"; } >"$WORK/l" && mv "$WORK/l" "$OUT/crdserver-convert.log"
  fi
fi

# 4b'. Declarative conversion on crdserver.
if [[ $RULES != 0 ]]; then
  echo "# declarative conversion on crdserver (fresh data dir; the webhook is served by crdbench itself)" >>"$OUT/commands.txt"
  port=$("$CB" freeport)
  CS_DATA="$WORK/crdserver-rules"
  CS_URL="https://127.0.0.1:$port"
  run_bg "$WORK/crdserver" --data-dir "$CS_DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$OUT/crdserver-rules.log" 2>&1
  CS_PID=$!
  OUR_PIDS+=("$CS_PID")
  if wait_ok "$CS_URL/readyz" 60 -k; then
    run "$CB" rules -server "$CS_URL" -cacert "$CS_DATA/pki/ca.crt" -cert "$CS_DATA/pki/admin.crt" -key "$CS_DATA/pki/admin.key" \
      -n "$CONV_N" -rounds "$RULES_ROUNDS" -warm "$RULES_WARM" -concurrency "$CONC" \
      -json "$OUT/rules-crdserver.json" || log "crdserver declarative conversion had failures"
  else
    log "crdserver (declarative conversion run) did not become ready"
    extra "- crdserver (declarative conversion run) did not become ready within 60 s"
  fi
  stop_pid "$CS_PID"
  rm -rf -- "$CS_DATA"
  if [[ $(stat -c %s "$OUT/crdserver-rules.log") -gt 200000 ]]; then
    { head -n 200 "$OUT/crdserver-rules.log"; echo "[... cut by run.sh ...]"; tail -n 200 "$OUT/crdserver-rules.log"; } >"$WORK/l" && mv "$WORK/l" "$OUT/crdserver-rules.log"
  fi
fi

# 4b''. Paths of the performance issue on crdserver.
PATHS_ARGS=(-n "$PATHS_N" -rounds "$PATHS_ROUNDS" -watchers "$PATHS_WATCHERS")
if [[ $PATHS != 0 ]]; then
  echo "# paths of the performance issue on crdserver (fresh data dir; the conversion webhook is served by crdbench itself)" >>"$OUT/commands.txt"
  port=$("$CB" freeport)
  CS_DATA="$WORK/crdserver-paths"
  CS_URL="https://127.0.0.1:$port"
  run_bg "$WORK/crdserver" --data-dir "$CS_DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$OUT/crdserver-paths.log" 2>&1
  CS_PID=$!
  OUR_PIDS+=("$CS_PID")
  if wait_ok "$CS_URL/readyz" 60 -k; then
    run "$CB" paths -server "$CS_URL" -cacert "$CS_DATA/pki/ca.crt" -cert "$CS_DATA/pki/admin.crt" -key "$CS_DATA/pki/admin.key" \
      -name crdserver "${PATHS_ARGS[@]}" -rss-pid "crdserver=$CS_PID" \
      -json "$OUT/paths-crdserver.json" || log "crdserver paths had failures"
    if grep -q "level=WARN\|level=ERROR" "$OUT/crdserver-paths.log"; then
      extra "- crdserver log during the paths run (first warnings/errors; full log in \`bench/results/crdserver-paths.log\`):"
      extra ""
      extra '  ```'
      grep "level=WARN\|level=ERROR" "$OUT/crdserver-paths.log" | head -n 3 | sed 's/^/  /' >>"$OUT/failures-extra.md"
      extra "  ($(grep -c "level=WARN\|level=ERROR" "$OUT/crdserver-paths.log") warning/error lines in all)"
      extra '  ```'
    fi
  else
    log "crdserver (paths run) did not become ready"
    extra "- crdserver (paths run) did not become ready within 60 s"
  fi
  stop_pid "$CS_PID"
  rm -rf -- "$CS_DATA"
  if [[ $(stat -c %s "$OUT/crdserver-paths.log") -gt 200000 ]]; then
    { head -n 200 "$OUT/crdserver-paths.log"; echo "[... cut by run.sh ...]"; tail -n 200 "$OUT/crdserver-paths.log"; } >"$WORK/l" && mv "$WORK/l" "$OUT/crdserver-paths.log"
  fi
fi

# 4c. In-process benchmarks (go test -bench), with none of our servers running.
if [[ $GOBENCH != 0 ]]; then
  echo "# in-process benchmarks (go test -bench, from $ROOT); its output without server log lines goes to gobench.txt" >>"$OUT/commands.txt"
  log "go test -bench (about a minute)"
  SUFFIX=" 2>&1 | drop_logs >$OUT/gobench.txt" logcmd go test -run '^$' -bench . -benchmem -count "$GOBENCH_COUNT" -benchtime "$GOBENCH_TIME" ./integration ./internal/schema ./internal/conversion ./internal/filters ./crdtest
  go test -run '^$' -bench . -benchmem -count "$GOBENCH_COUNT" -benchtime "$GOBENCH_TIME" ./integration ./internal/schema ./internal/conversion ./internal/filters ./crdtest 2>&1 \
    | drop_logs >"$OUT/gobench.txt" 2>"$WORK/gobench-dropped"
  rc=${PIPESTATUS[0]}
  dropped=$(cat "$WORK/gobench-dropped" 2>/dev/null)
  grep '^Benchmark' "$OUT/gobench.txt" >&2
  if [[ $rc != 0 ]]; then
    log "go test -bench failed (exit $rc)"
    extra "- in-process benchmarks: \`go test -bench\` exited with $rc; its output is in \`bench/results/gobench.txt\`"
  fi
  GOBENCH_TMP="${TMPDIR:-/tmp}"
  # Written to notes.md after the other notes (step 6).
  cat >"$WORK/notes-gobench.md" <<EOF
- **In-process benchmarks** are \`go test -run '^\$' -bench . -benchmem -count $GOBENCH_COUNT -benchtime $GOBENCH_TIME ./integration ./internal/schema\`,
  run from the repo root while none of this script's servers runs (the shared reference may be running, idle). The
  integration benchmarks start a server in-process (embedded etcd, data in the benchmark's \`b.TempDir()\` under
  \`$GOBENCH_TMP\`, $(findmnt -no FSTYPE,SOURCE -T "$GOBENCH_TMP" 2>/dev/null | tr -s ' ' | sed 's/ / on /'); its setup is not timed) and send requests straight to its
  handler with no network; so the ns/op of the two writes includes etcd's commit (a WAL fsync) on that disk. The
  \`internal/schema\` ones run the schema pipeline alone. Each benchmark runs $GOBENCH_COUNT times; the report gives the
  median ns/op with the fastest and slowest run, and the median B/op and allocs/op. ${dropped:-0} server log lines were
  left out of \`gobench.txt\`.
EOF
fi

# 5. Load on the shared reference.
echo "# load on the shared reference" >>"$OUT/commands.txt"
if REF_URL=$(run "$REF/start-reference.sh" 2>"$WORK/start-reference.err"); then
  cat "$WORK/start-reference.err" >&2
  if grep -q "already running" "$WORK/start-reference.err"; then
    REF_STATE="was already running (left running)"
  else
    REF_STARTED=1
    REF_STATE="was started by this run (./start-reference.sh: $(tr '\n' ' ' <"$REF/run/startup.txt"); stopped afterwards)"
  fi
  K=("$REF/bin/kubectl" --kubeconfig "$REF/reference.kubeconfig" --cache-dir "$WORK/kubectl-cache-reference")
  if run "${K[@]}" create --validate=false -f "$CRD_FILE" >"$WORK/crd-reference.out" 2>&1; then
    REF_CRD_CREATED=1
  elif grep -q AlreadyExists "$WORK/crd-reference.out"; then
    REF_STATE="$REF_STATE; the CRD $CRD_NAME already existed and was kept"
  else
    extra "- reference: kubectl create of the CRD failed: $(tr '\n' ' ' <"$WORK/crd-reference.out")"
  fi
  cat "$WORK/crd-reference.out" >&2
  REF_API_PID=$(cat "$REF/run/apiextensions-apiserver.pid")
  REF_ETCD_PID=$(cat "$REF/run/etcd.pid")
  run "$CB" load -server "$REF_URL" -cacert "$REF/pki/ca.crt" -cert "$REF/pki/admin.crt" -key "$REF/pki/admin.key" \
    -crd "$CRD_NAME" -settle 2s -n "$N" -rounds "$LOAD_ROUNDS" -list-n "$LIST_N" -lists "$LISTS" -concurrency "$CONC" -cleanup \
    -rss-pid "apiextensions-apiserver=$REF_API_PID" -rss-pid "etcd=$REF_ETCD_PID" \
    -json "$OUT/load-reference.json" || log "reference load had failures"
  if [[ $REF_CRD_CREATED == 1 ]]; then
    run "${K[@]}" delete crd "$CRD_NAME" --timeout=180s >&2 && REF_CRD_CREATED=0
  fi
  # The same webhook conversion run, on the reference. Its two CRDs must not exist already
  # (they could be someone else's); crdbench deletes them again (-cleanup).
  if [[ $CONVERT != 0 && $REF_CONVERT != 0 ]]; then
    echo "# webhook conversion on the shared reference" >>"$OUT/commands.txt"
    if existing=$(run "${K[@]}" get crd "${CONV_CRDS[@]}" --ignore-not-found -o name 2>&1) && [[ -z $existing ]]; then
      REF_CONV_RUNNING=1
      run "$CB" convert -server "$REF_URL" -cacert "$REF/pki/ca.crt" -cert "$REF/pki/admin.crt" -key "$REF/pki/admin.key" \
        -settle 2s -n "$CONV_N" -lists "$CONV_LISTS" -concurrency "$CONC" -cleanup \
        -rss-pid "apiextensions-apiserver=$REF_API_PID" -rss-pid "etcd=$REF_ETCD_PID" \
        -json "$OUT/convert-reference.json" || log "reference webhook conversion had failures"
      REF_CONV_RUNNING=0
    else
      extra "- reference webhook conversion not run: ${CONV_CRDS[*]} already on the reference, or kubectl failed: $(echo "$existing" | tr '\n' ' ')"
    fi
  fi
  # The same paths run, on the reference. Its CRDs are of fresh groups of this run, labelled
  # crdbench-paths-run=$PATHS_RUN_ID, and crontabs.example.com, which it leaves alone if it exists
  # (then that row fails); crdbench deletes each again at the end of its round.
  if [[ $PATHS != 0 ]]; then
    echo "# paths of the performance issue on the shared reference" >>"$OUT/commands.txt"
    REF_PATHS_RUNNING=1
    run "$CB" paths -server "$REF_URL" -cacert "$REF/pki/ca.crt" -cert "$REF/pki/admin.crt" -key "$REF/pki/admin.key" \
      -name reference "${PATHS_ARGS[@]}" -settle 2s -run-id "$PATHS_RUN_ID" \
      -rss-pid "apiextensions-apiserver=$REF_API_PID" -rss-pid "etcd=$REF_ETCD_PID" \
      -json "$OUT/paths-reference.json" || log "reference paths had failures"
    REF_PATHS_RUNNING=0
  fi
else
  cat "$WORK/start-reference.err" >&2
  REF_STATE="could not be started: $(tail -n 3 "$WORK/start-reference.err" | tr '\n' ' ')"
  extra "- reference: ./start-reference.sh failed: $(tail -n 3 "$WORK/start-reference.err" | tr '\n' ' ')"
fi

# 5b. Core types: a fresh crdserver, then the full Kubernetes reference.
if [[ $CORE != 0 ]]; then
  CORE_ARGS=(-n "$CORE_N" -lists "$LISTS" -leases "$LEASES" -lease-period "$LEASE_PERIOD" -lease-duration "$LEASE_DURATION"
    -idle "$CORE_IDLE" -concurrency "$CONC")
  echo "# core types on crdserver (fresh data dir)" >>"$OUT/commands.txt"
  port=$("$CB" freeport)
  CS_DATA="$WORK/crdserver-core"
  CS_URL="https://127.0.0.1:$port"
  run_bg "$WORK/crdserver" --data-dir "$CS_DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$OUT/crdserver-core.log" 2>&1
  CS_PID=$!
  OUR_PIDS+=("$CS_PID")
  if wait_ok "$CS_URL/readyz" 60 -k; then
    sleep "$CORE_SETTLE"
    run "$CB" core -server "$CS_URL" -cacert "$CS_DATA/pki/ca.crt" -cert "$CS_DATA/pki/admin.crt" -key "$CS_DATA/pki/admin.key" \
      -name crdserver -namespace crdbench-core "${CORE_ARGS[@]}" -pid "crdserver=$CS_PID" \
      -json "$OUT/core-crdserver.json" || log "crdserver core types had failures"
    if grep -q "level=WARN\|level=ERROR" "$OUT/crdserver-core.log"; then
      extra "- crdserver log during the core types run (first warnings/errors; full log in \`bench/results/crdserver-core.log\`):"
      extra ""
      extra '  ```'
      grep "level=WARN\|level=ERROR" "$OUT/crdserver-core.log" | head -n 3 | sed 's/^/  /' >>"$OUT/failures-extra.md"
      extra "  ($(grep -c "level=WARN\|level=ERROR" "$OUT/crdserver-core.log") warning/error lines in all)"
      extra '  ```'
    fi
  else
    log "crdserver (core types run) did not become ready"
    extra "- crdserver (core types run) did not become ready within 60 s"
  fi
  stop_pid "$CS_PID"
  rm -rf -- "$CS_DATA"
  if [[ $(stat -c %s "$OUT/crdserver-core.log") -gt 200000 ]]; then
    { head -n 200 "$OUT/crdserver-core.log"; echo "[... cut by run.sh ...]"; tail -n 200 "$OUT/crdserver-core.log"; } >"$WORK/l" && mv "$WORK/l" "$OUT/crdserver-core.log"
  fi

  # The kube reference: used if running, else started (and stopped right after).
  echo "# core types on the kube reference (kube-apiserver + etcd + kube-controller-manager)" >>"$OUT/commands.txt"
  if KUBE_URL=$(run "$REF/start-kube.sh" 2>"$WORK/start-kube.err"); then
    cat "$WORK/start-kube.err" >&2
    if grep -q "already running" "$WORK/start-kube.err"; then
      KUBE_STATE="was already running (left running)"
    else
      KUBE_STARTED=1
      KUBE_STATE="was started by this run (./start-kube.sh: $(tr '\n' ' ' <"$REF/run/kube-startup.txt"); stopped right after this phase)"
      sleep "$CORE_SETTLE"
    fi
    KUBE_PIDS=(-pid "kube-apiserver=$(cat "$REF/run/kube-apiserver.pid")" -pid "etcd=$(cat "$REF/run/kube-etcd.pid")")
    if [[ -s $REF/run/kube-controller-manager.pid ]]; then
      KUBE_PIDS+=(-side-pid "kube-controller-manager=$(cat "$REF/run/kube-controller-manager.pid")")
    fi
    # A namespace of its own (crdbench refuses one that exists), deleted again at the end.
    KUBE_CORE_NS="crdbench-core-$(date +%s)-$$"
    KUBE_CORE_RUNNING=1
    run "$CB" core -server "$KUBE_URL" -cacert "$KPKI/ca.crt" -cert "$KPKI/admin.crt" -key "$KPKI/admin.key" \
      -name kube -namespace "$KUBE_CORE_NS" "${CORE_ARGS[@]}" "${KUBE_PIDS[@]}" -cleanup \
      -json "$OUT/core-kube.json" || log "kube reference core types had failures"
    KUBE_CORE_RUNNING=0
    if [[ $KUBE_STARTED == 1 ]]; then
      run "$REF/stop-kube.sh" >&2 && KUBE_STARTED=0
    fi
  else
    cat "$WORK/start-kube.err" >&2
    KUBE_STATE="could not be started: $(tail -n 3 "$WORK/start-kube.err" | tr '\n' ' ')"
    extra "- kube reference: ./start-kube.sh failed: $(tail -n 3 "$WORK/start-kube.err" | tr '\n' ' ')"
  fi
fi

# 5c. Dynamic admission: a fresh crdserver, then the kube reference.
if [[ $ADMISSION != 0 ]]; then
  ADM_ARGS=(-n "$ADMISSION_N" -rounds "$ADMISSION_ROUNDS" -concurrency "$CONC")
  echo "# dynamic admission on crdserver (fresh data dir; the webhook is served by crdbench itself)" >>"$OUT/commands.txt"
  port=$("$CB" freeport)
  CS_DATA="$WORK/crdserver-admission"
  CS_URL="https://127.0.0.1:$port"
  run_bg "$WORK/crdserver" --data-dir "$CS_DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$OUT/crdserver-admission.log" 2>&1
  CS_PID=$!
  OUR_PIDS+=("$CS_PID")
  if wait_ok "$CS_URL/readyz" 60 -k; then
    run "$CB" admission -server "$CS_URL" -cacert "$CS_DATA/pki/ca.crt" -cert "$CS_DATA/pki/admin.crt" -key "$CS_DATA/pki/admin.key" \
      -name crdserver "${ADM_ARGS[@]}" -pid "crdserver=$CS_PID" \
      -json "$OUT/admission-crdserver.json" || log "crdserver admission had failures"
  else
    log "crdserver (admission run) did not become ready"
    extra "- crdserver (admission run) did not become ready within 60 s"
  fi
  stop_pid "$CS_PID"
  rm -rf -- "$CS_DATA"
  if [[ $(stat -c %s "$OUT/crdserver-admission.log") -gt 200000 ]]; then
    { head -n 200 "$OUT/crdserver-admission.log"; echo "[... cut by run.sh ...]"; tail -n 200 "$OUT/crdserver-admission.log"; } >"$WORK/l" && mv "$WORK/l" "$OUT/crdserver-admission.log"
  fi

  # The kube reference: used if running, else started (and stopped right after).
  echo "# dynamic admission on the kube reference (kube-apiserver + etcd + kube-controller-manager)" >>"$OUT/commands.txt"
  if KUBE_URL=$(run "$REF/start-kube.sh" 2>"$WORK/start-kube.err"); then
    cat "$WORK/start-kube.err" >&2
    if grep -q "already running" "$WORK/start-kube.err"; then
      KUBE_ADM_STATE="was already running (left running)"
    else
      KUBE_STARTED=1
      KUBE_ADM_STATE="was started by this run (stopped right after this phase)"
      sleep "$CORE_SETTLE"
    fi
    # A namespace of its own (crdbench refuses one that exists, and a CRD, policy, binding or
    # webhook configuration of its names that exists), all deleted again at the end.
    KUBE_ADM_NS="crdbench-admission-$(date +%s)-$$"
    KUBE_ADM_RUNNING=1
    run "$CB" admission -server "$KUBE_URL" -cacert "$KPKI/ca.crt" -cert "$KPKI/admin.crt" -key "$KPKI/admin.key" \
      -name kube -namespace "$KUBE_ADM_NS" "${ADM_ARGS[@]}" -cleanup \
      -pid "kube-apiserver=$(cat "$REF/run/kube-apiserver.pid")" -pid "etcd=$(cat "$REF/run/kube-etcd.pid")" \
      -json "$OUT/admission-kube.json" || log "kube reference admission had failures"
    KUBE_ADM_RUNNING=0
    if [[ $KUBE_STARTED == 1 ]]; then
      run "$REF/stop-kube.sh" >&2 && KUBE_STARTED=0
    fi
  else
    cat "$WORK/start-kube.err" >&2
    KUBE_ADM_STATE="could not be started: $(tail -n 3 "$WORK/start-kube.err" | tr '\n' ' ')"
    extra "- kube reference (admission): ./start-kube.sh failed: $(tail -n 3 "$WORK/start-kube.err" | tr '\n' ' ')"
  fi
fi

# 5d. Thousands of CRDs (CRDS=0 skips it): bench/crds.sh, crdbench crds with a real
#     provider's CRDs on crdserver and, for the first CRDS_KUBE_N, on the kube reference.
if [[ $CRDS != 0 ]]; then
  log "thousands of CRDs (bench/crds.sh)"
  REF="$REF" OUT="$OUT" CB="$CB" SERVER="$WORK/crdserver" run "$HERE/crds.sh" || log "bench/crds.sh had failures"
fi

# 5e. Priority and fairness: fresh crdservers, then the kube reference.
if [[ $APF != 0 ]]; then
  echo "# priority and fairness on crdserver (a fresh data dir each round)" >>"$OUT/commands.txt"
  for r in $(seq "$APF_ROUNDS"); do
    port=$("$CB" freeport)
    CS_DATA="$WORK/crdserver-apf"
    CS_URL="https://127.0.0.1:$port"
    run_bg "$WORK/crdserver" --data-dir "$CS_DATA" --bind-address 127.0.0.1 --port "$port" </dev/null >"$WORK/crdserver-apf.log" 2>&1
    CS_PID=$!
    OUR_PIDS+=("$CS_PID")
    if wait_ok "$CS_URL/readyz" 60 -k; then
      run "$CB" apf -server "$CS_URL" -cacert "$CS_DATA/pki/ca.crt" -cert "$CS_DATA/pki/admin.crt" -key "$CS_DATA/pki/admin.key" \
        -duration "$APF_DURATION" -rss-pid "crdserver=$CS_PID" -json "$OUT/apf-crdserver-$r.json" || log "crdserver apf round $r had failures"
    else
      extra "- crdserver (apf round $r) did not become ready within 60 s"
    fi
    stop_pid "$CS_PID"
    rm -rf -- "$CS_DATA"
  done
  echo "# priority and fairness on the kube reference" >>"$OUT/commands.txt"
  if KUBE_URL=$(run "$REF/start-kube.sh" 2>"$WORK/start-kube.err"); then
    grep -q "already running" "$WORK/start-kube.err" || KUBE_STARTED=1
    for r in $(seq "$APF_ROUNDS"); do
      run "$CB" apf -server "$KUBE_URL" -cacert "$KPKI/ca.crt" -cert "$KPKI/admin.crt" -key "$KPKI/admin.key" \
        -duration "$APF_DURATION" -rss-pid "kube-apiserver=$(cat "$REF/run/kube-apiserver.pid")" \
        -json "$OUT/apf-kube-$r.json" || log "kube reference apf round $r had failures"
    done
    if [[ $KUBE_STARTED == 1 ]]; then
      run "$REF/stop-kube.sh" >&2 && KUBE_STARTED=0
    fi
  else
    extra "- kube reference (apf): ./start-kube.sh failed: $(tail -n 3 "$WORK/start-kube.err" | tr '\n' ' ')"
  fi
fi

# 6. Notes and report.
echo "load avg:  $(cut -d' ' -f1-3 /proc/loadavg) at the end" >>"$OUT/machine.txt"
cat >>"$OUT/notes.md" <<EOF
- **Start-up** is timed by \`crdbench start\` from just before it launches the server process (fork/exec)
  to the first \`GET /readyz\` that answers 200 \`ok\`, polling every 5 ms (so up to ~5 ms of
  granularity). crdserver: $STARTS launches, each on a fresh \`--data-dir\` and a free loopback port;
  its etcd is embedded, so launch → ready includes etcd's start. Reference: $REF_STARTS private
  instances started by run.sh itself with the exact flags of \`start-reference.sh\` (same PKI, free
  loopback ports, fresh etcd data dir each time), so the shared reference is not disturbed.
  The reference's etcd is a **separate process**: "launch → ready" counts only the
  apiextensions-apiserver, launched once etcd (and kube-stub) already answer their health checks;
  the "incl. etcd" row counts from etcd's launch, which is the fair comparison with crdserver.
- **Idle RSS** is VmRSS from /proc/PID/status, $IDLE after ready, no CRDs, read in each start-up
  run (median reported). crdserver is one process with its embedded etcd. The reference is
  apiextensions-apiserver + etcd (kube-stub, the stand-in for the core API, ~8 MiB, is not counted).
- **Load** is \`crdbench load\`: wait until the CRD is Established (polling GET of the CRD), then
  $N sequential creates (one connection; body like the reference crbench's: a Widget in
  \`default\`, v1, labels and spec, about 170 bytes), the same $N deleted sequentially, in
  $LOAD_ROUNDS rounds (the creates and the deletes reported are each the round with the median
  req/s, its p50 and p99 with it; every round is in the JSON as create-K and delete-K), then
  $LIST_N more created with $CONC workers (setup), then $LISTS plain GETs of the whole collection
  (no limit, no selector, \`Accept: application/json\`; timing includes reading the whole body;
  median reported). Percentiles are nearest-rank.
- **Same protocol**: both servers are measured over HTTPS + HTTP/2 with their admin client
  certificate (as kubectl/client-go talk to them); crdserver's are the ones it makes in its data
  dir on first start.
- The reference waits 2 s after Established before the creates (its create handler sleeps 2 s in
  a create that comes less than 2 s after the Established transition). crdserver gets no pause.
- The CRD is \`$CRD_FILE\` ($CRD_NAME), created on both with
  \`kubectl create --validate=false -f\` (reference kubectl v1.37.2, private discovery caches).
- The shared reference at ${REF_URL:-https://127.0.0.1:16443} $REF_STATE. Its load ran against that
  instance, which may hold other CRDs and may be used by others at the same time. The
  $LIST_N listed objects were deleted afterwards (\`cleanup\` phase), and the CRD too if run.sh created it.
- The machine is shared with other work (builds, tests), so expect some noise; rerun to compare.
- Raw JSON of every measurement and the crdserver logs are in \`bench/results/\`.
EOF
if [[ $CONVERT != 0 ]]; then
  cat >>"$OUT/notes.md" <<EOF
- **Webhook conversion** is \`crdbench convert\`, on a second fresh crdserver (and, unless
  REF_CONVERT=0, on the shared reference the same way). The webhook is the example's handler,
  \`crontab.NewScheme()\` from \`examples/crontab-conversion/crontab\`, served by crdbench itself on a
  free loopback port over TLS (net/http, HTTP/2; a self-signed certificate for 127.0.0.1, given as
  the CRD's \`caBundle\`), so it shares the machine's $(nproc) cores with the server. It is wrapped
  by a counter: every POST is one webhook call; its objects are counted in one pass over the
  body without decoding it, and that counter time is measured apart (its own row in the table). The
  handler time is from after the body is read to the handler's return (the example decodes the
  ConversionReview, converts each object through its hub and encodes the answer).
  Two CRDs with the CronTab schemas of the Kubernetes documentation (v1beta1 storage with
  \`hostPort\`; v1 served with \`host\`, \`port\`): \`crontabs.example.com\` with Webhook conversion
  (\`clientConfig.url\` + \`caBundle\`, \`conversionReviewVersions: [v1]\`) and
  \`crontabs.none.example.com\` with None. After both are Established (the reference gets 2 s more),
  $CONV_N objects are created in v1beta1 in each with $CONC workers (body size in the table; webhook
  calls counted meanwhile), then one unmeasured warm-up GET of each of the four collections (each
  CRD in v1 and in v1beta1), then $CONV_LISTS rounds of one GET of each, in turn, plain (no limit,
  \`Accept: application/json\`, timed until the whole body is read). Every answer is checked
  afterwards: all $CONV_N items, in the version asked, and through the webhook each object's
  \`host\`/\`port\` equal to its \`hostPort\`. crdserver sends at most 1000 objects per
  ConversionReview (its default), so a list of 10,000 objects needs at least 10 calls.
EOF
fi
if [[ $CORE != 0 ]]; then
  cat >>"$OUT/notes.md" <<EOF
- **Core types** is \`crdbench core\`, on a third fresh crdserver ($CORE_SETTLE s after ready) and on the full Kubernetes reference
  (\`start-kube.sh\`: kube-apiserver with its own etcd and kube-controller-manager; RBAC, default admission
  and priority and fairness on, the admin client certificate is in \`system:masters\`, which APF exempts),
  which ${KUBE_STATE:-was not reached}. The kube reference may be used by others at the same time.
  Each run first creates a namespace of its own (on Kubernetes \`${KUBE_CORE_NS:-crdbench-core-…}\`, deleted
  again at the end and waited for). ConfigMaps: $CORE_N sequential creates (one HTTP/2 connection; 10 keys,
  200 bytes of data), the same $CORE_N sequential GETs, then $LISTS plain GETs of the namespace's ConfigMaps
  (no limit, \`Accept: application/json\`, timed until the whole body is read; median reported; the
  collection also holds \`kube-root-ca.crt\`, which both publish into every namespace). Leases (setup:
  $LEASES creates with $CONC workers): each renewed every $LEASE_PERIOD for $LEASE_DURATION, lease i's renewals
  due i/$LEASES of a period after the start, so the server sees a steady rate; all over the same HTTP/2
  connection. A renewal is client-go's leader election renewing a \`resourcelock.LeaseLock\` it holds
  (tryAcquireOrRenew's fast path): a PUT of the lease as the server returned it from the previous write
  (its resourceVersion, managedFields and all) with \`spec.renewTime\` now and \`spec.holderIdentity\` set;
  only if that PUT fails, a GET and a PUT of what the GET returned (the slow path, counted apart). A
  renewal has 10 s (client-go's RenewDeadline); a failed one is counted, not retried; a tick that comes
  while the same lease's previous renewal still runs a whole period later is skipped and counted.
  **Server CPU time** is utime + stime of \`/proc/PID/stat\` (all threads; ticks of 10 ms) before and
  after each phase: crdserver's one process (its etcd and controllers in it); kube-apiserver + its etcd
  for Kubernetes, kube-controller-manager shown apart and not counted. The same processes' idle CPU is
  read over $CORE_IDLE just before the renewals, with all the objects created. RSS is VmRSS right after
  the renewals. crdbench runs on the same $(nproc) cores, so its own work (TLS, JSON) competes with the server's.
EOF
fi
if [[ $ADMISSION != 0 ]]; then
  cat >>"$OUT/notes.md" <<EOF
- **Dynamic admission** is \`crdbench admission\` (section "Admission"), on another fresh crdserver and on the kube
  reference, which ${KUBE_ADM_STATE:-was not reached}. Each run creates its own namespace and the CRD
  \`widgets.admission.crdbench.example.com\`; the policies, bindings and webhook configuration it creates are deleted
  at the end (on the kube reference also the namespace and the CRD). The webhook is served by crdbench on a free
  loopback port, so it shares the machine's $(nproc) cores with the server, as does crdbench's client.
EOF
fi
if [[ $PATHS != 0 ]]; then
  cat >>"$OUT/notes.md" <<EOF
- **Paths of the performance issue** is \`crdbench paths\` (section "Paths of the performance issue", which says how
  each row was measured), on another fresh crdserver and on the shared reference (${REF_URL:-https://127.0.0.1:16443},
  which ${REF_STATE:-was not reached}): $PATHS_ROUNDS rounds of $PATHS_N objects each, watch fan-out to $PATHS_WATCHERS
  watchers. Every CRD it creates carries the label \`crdbench-paths-run\` (\`$PATHS_RUN_ID\` on the reference) and is
  deleted again at the end of its round; on the reference each CRD gets 2 s after Established before its objects
  are created (but not in the first-create row, which measures exactly that wait). The conversion webhook is served
  by crdbench, on the same $(nproc) cores, as are the watchers' decoding and the 16 creating workers.
EOF
fi
[[ -s $WORK/notes-gobench.md ]] && cat "$WORK/notes-gobench.md" >>"$OUT/notes.md"
run "$CB" report -dir "$OUT" -out "$HERE/RESULTS.md"
log "wrote $HERE/RESULTS.md"
