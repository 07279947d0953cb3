#!/usr/bin/env bash
# Other projects' envtest suites, run unchanged against crdserver and against
# kube-apiserver v1.37.2, in the two ways envtest users run them:
#
#   envtest   the server binary is envtest's kube-apiserver (KUBEBUILDER_ASSETS
#             holds it, with the reference's etcd and kubectl beside it)
#   existing  the server is started here with envtest's command line on a fresh
#             etcd, and the suite runs with USE_EXISTING_CLUSTER=true
#
# Each suite's test binaries are compiled once (go test -c) from sources at
# pinned versions, then run ROUNDS times per server and mode; a fresh server
# per run. It prints a Markdown table (tests or specs passed of those run, and
# the median wall time of the rounds) and writes every run to $OUT.
#
# Sources:
#   external-secrets  github.com/external-secrets/external-secrets v0.16.2, from
#                     the Go module proxy
#   kubebuilder       sigs.k8s.io/kubebuilder/v4 v4.16.0 from the module proxy;
#                     its test/testdata/generate.sh scaffolds testdata/project-v4
#                     and project-v4-with-plugins (the projects the kubebuilder
#                     repository keeps, which the module does not carry)
#   fluxcd            notification-controller v1.9.3 and
#                     image-reflector-controller v1.2.0 are not served by the
#                     module proxy this machine reaches: give their source trees
#                     (git archive of the tags) in FLUX_SRC/<name>; skipped
#                     without them
#
# Environment: REF (/work/shared/reference, built with BUILD_KUBE=1: etcd,
# kube-apiserver, kubectl), CRDSERVER (a crdserver binary; built from this
# repository when unset), ROUNDS (3), MODES ("envtest existing"), SERVERS
# ("kube crdserver"), SUITES (all of: es-controllers es-crds es-webhookconfig
# kb-v4 kb-v4-with-plugins flux-notification flux-image-reflector), FLUX_SRC,
# WORK (a temporary dir; kept when given), OUT (bench/results/suites.tsv).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
REF="${REF:-/work/shared/reference}"
ROUNDS="${ROUNDS:-3}"
MODES="${MODES:-envtest existing}"
SERVERS="${SERVERS:-kube crdserver}"
SUITES="${SUITES:-es-controllers es-crds es-webhookconfig kb-v4 kb-v4-with-plugins flux-notification flux-image-reflector}"
FLUX_SRC="${FLUX_SRC:-}"
OUT="${OUT:-$HERE/results/suites.tsv}"
KEEP_WORK=1
if [[ -z "${WORK:-}" ]]; then
  WORK=$(mktemp -d /tmp/crdserver-suites.XXXXXX)
  KEEP_WORK=0
fi
mkdir -p "$WORK/src" "$WORK/bin" "$WORK/logs"

ES_VERSION=v0.16.2
KB_VERSION=v4.16.0

log() { echo "suites: $*" >&2; }

for b in etcd kube-apiserver kubectl; do
  [[ -x "$REF/bin/$b" ]] || { log "$REF/bin/$b missing: build the reference with BUILD_KUBE=1 ./build.sh"; exit 1; }
done
if [[ -z "${CRDSERVER:-}" ]]; then
  CRDSERVER="$WORK/bin/crdserver"
  log "building crdserver"
  (cd "$ROOT" && go build -o "$CRDSERVER" ./cmd/crdserver)
fi

# --- sources and test binaries ------------------------------------------------

# module_src copies a module from the module proxy into $WORK/src/$2 (writable).
module_src() {
  local mod=$1 name=$2 dir
  [[ -d "$WORK/src/$name" ]] && return
  dir=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" ]] || { log "go mod download $mod gave no directory"; exit 1; }
  cp -r "$dir" "$WORK/src/$name"
  chmod -R u+w "$WORK/src/$name"
}

# kubebuilder_projects scaffolds project-v4 and project-v4-with-plugins with
# kubebuilder's own generate.sh (its multigroup project left out).
kubebuilder_projects() {
  local kb="$WORK/src/kubebuilder"
  [[ -d "$kb/testdata/project-v4-with-plugins/internal/controller" ]] && return
  module_src "sigs.k8s.io/kubebuilder/v4@$KB_VERSION" kubebuilder
  sed -i 's/^scaffold_test_project project-v4-multigroup/# &/' "$kb/test/testdata/generate.sh"
  log "scaffolding kubebuilder's testdata projects (minutes)"
  (cd "$kb" && bash test/testdata/generate.sh >"$WORK/logs/kubebuilder-generate.log" 2>&1) ||
    { log "kubebuilder's generate.sh failed: $WORK/logs/kubebuilder-generate.log"; exit 1; }
}

# suite_packages prints "<module dir> <package dir>..." of a suite, after
# fetching its sources; nothing when its sources are not available.
suite_packages() {
  case $1 in
  es-controllers)
    module_src "github.com/external-secrets/external-secrets@$ES_VERSION" external-secrets
    echo "$WORK/src/external-secrets pkg/controllers/externalsecret pkg/controllers/clusterexternalsecret pkg/controllers/pushsecret pkg/controllers/clusterpushsecret pkg/controllers/secretstore" ;;
  es-crds)
    module_src "github.com/external-secrets/external-secrets@$ES_VERSION" external-secrets
    echo "$WORK/src/external-secrets pkg/controllers/crds" ;;
  es-webhookconfig)
    module_src "github.com/external-secrets/external-secrets@$ES_VERSION" external-secrets
    echo "$WORK/src/external-secrets pkg/controllers/webhookconfig" ;;
  kb-v4)
    kubebuilder_projects
    echo "$WORK/src/kubebuilder/testdata/project-v4 internal/controller" ;;
  kb-v4-with-plugins)
    kubebuilder_projects
    echo "$WORK/src/kubebuilder/testdata/project-v4-with-plugins internal/controller" ;;
  flux-notification)
    [[ -n "$FLUX_SRC" && -d "$FLUX_SRC/notification-controller" ]] && echo "$FLUX_SRC/notification-controller internal/controller" ;;
  flux-image-reflector)
    [[ -n "$FLUX_SRC" && -d "$FLUX_SRC/image-reflector-controller" ]] && echo "$FLUX_SRC/image-reflector-controller internal/controller" ;;
  *)
    log "unknown suite $1"; exit 1 ;;
  esac
  return 0
}

# Tests of a suite that need the internet (they scan public registries; they
# time out on both servers on a machine without it):
# skipped for both servers alike.
suite_skip() {
  case $1 in
  flux-image-reflector) echo "${FLUX_IMAGE_REFLECTOR_SKIP:-^(TestImagePolicyReconciler_ignoresImageRepoNotReadyEvent|TestImagePolicyReconciler_imageRepoRevisionLifeCycle|TestImagePolicyReconciler_intervalBasedReconciliation|TestImagePolicyReconciler_reconcileRequestStatus|TestImageRepositoryReconciler_reconcileRequestStatus|TestImageRepositoryReconciler_canonicalImageName|TestImageRepositoryReconciler_ScanPublicRepos)$}" ;;
  esac
}

# --- servers --------------------------------------------------------------------

# pki makes what envtest makes: a CA, an admin client certificate in
# system:masters, and a service-account key.
pki() {
  local d=$WORK/pki
  [[ -f "$d/admin.crt" ]] && return
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 2 -subj /CN=suites-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$d/admin.key" -out "$d/admin.csr" -subj "/O=system:masters/CN=admin" 2>/dev/null
  openssl x509 -req -in "$d/admin.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -out "$d/admin.crt" -days 2 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

SERVER_PIDS=()
# start_existing starts etcd and the server binary $1 with envtest's command
# line, waits for /readyz, and writes $WORK/existing.kubeconfig.
start_existing() {
  local bin=$1 d etcd_port peer_port api_port i
  pki
  d=$(mktemp -d "$WORK/server.XXXXXX")
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  "$REF/bin/etcd" --data-dir "$d/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" --initial-cluster "default=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync >"$d/etcd.log" 2>&1 &
  SERVER_PIDS+=($!)
  "$bin" --allow-privileged=true --authorization-mode=RBAC --bind-address=127.0.0.1 --cert-dir="$d/certs" \
    --client-ca-file="$WORK/pki/ca.crt" --disable-admission-plugins=ServiceAccount \
    --etcd-servers="http://127.0.0.1:$etcd_port" --secure-port="$api_port" \
    --service-account-issuer=https://127.0.0.1:"$api_port"/ --service-account-key-file="$WORK/pki/sa.key" \
    --service-account-signing-key-file="$WORK/pki/sa.key" --service-cluster-ip-range=10.0.0.0/24 >"$d/apiserver.log" 2>&1 &
  SERVER_PIDS+=($!)
  cat >"$WORK/existing.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: s, cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {client-certificate: "$WORK/pki/admin.crt", client-key: "$WORK/pki/admin.key"}}]
contexts: [{name: s, context: {cluster: s, user: admin}}]
current-context: s
EOF
  for ((i = 0; i < 600; i++)); do
    if curl -sk --max-time 2 --cert "$WORK/pki/admin.crt" --key "$WORK/pki/admin.key" \
      "https://127.0.0.1:$api_port/readyz" 2>/dev/null | grep -qx ok; then
      return 0
    fi
    sleep 0.1
  done
  log "server $bin not ready: $d/apiserver.log"; tail -5 "$d/apiserver.log" >&2
  return 1
}

# stop_existing stops the server, then its etcd (each given 15 s to exit).
stop_existing() {
  local i p
  for ((i = ${#SERVER_PIDS[@]} - 1; i >= 0; i--)); do
    p=${SERVER_PIDS[i]}
    kill "$p" 2>/dev/null || continue
    timeout 15 tail --pid="$p" -f /dev/null || kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  SERVER_PIDS=()
}

cleanup() {
  stop_existing
  [[ $KEEP_WORK == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

server_bin() { if [[ $1 == kube ]]; then echo "$REF/bin/kube-apiserver"; else echo "$CRDSERVER"; fi; }

assets() {
  local dir="$WORK/assets-$1"
  mkdir -p "$dir"
  ln -sf "$(server_bin "$1")" "$dir/kube-apiserver"
  ln -sf "$REF/bin/etcd" "$dir/etcd"
  ln -sf "$REF/bin/kubectl" "$dir/kubectl"
  echo "$dir"
}

# --- runs -----------------------------------------------------------------------

# counts prints "<passed> <run>" of a test log: the Ginkgo specs when the log
# has a Ginkgo summary, the Go tests (subtests included) otherwise.
counts() {
  local clean passed failed
  clean=$(sed 's/\x1b\[[0-9;]*m//g' "$1")
  if grep -q 'Ran [0-9]* of [0-9]* Specs' <<<"$clean"; then
    passed=$(grep -o '[0-9]* Passed' <<<"$clean" | awk '{s+=$1} END {print s+0}')
    failed=$(grep -o '[0-9]* Failed' <<<"$clean" | awk '{s+=$1} END {print s+0}')
  else
    passed=$(grep -c -- '--- PASS:' <<<"$clean" || true)
    failed=$(grep -c -- '--- FAIL:' <<<"$clean" || true)
  fi
  echo "$passed $((passed + failed))"
}

# run_suite runs every test binary of a suite once; prints "<passed> <run> <seconds>".
run_suite() {
  local suite=$1 server=$2 mode=$3 round=$4 mdir pkgs pkg bin logf start end skip
  read -r mdir pkgs <<<"$(suite_packages "$suite")"
  logf="$WORK/logs/$suite-$server-$mode-$round.log"
  : >"$logf"
  skip=$(suite_skip "$suite")
  start=$(date +%s.%N)
  for pkg in $pkgs; do
    bin="$WORK/bin/$suite-$(echo "$pkg" | tr / _).test"
    if [[ $mode == existing ]]; then
      start_existing "$(server_bin "$server")" >>"$logf" 2>&1 || { stop_existing; continue; }
      (cd "$mdir/$pkg" && USE_EXISTING_CLUSTER=true KUBECONFIG="$WORK/existing.kubeconfig" \
        timeout 1200 "$bin" -test.v -test.count=1 ${skip:+-test.skip "$skip"} >>"$logf" 2>&1) || true
      stop_existing
    else
      (cd "$mdir/$pkg" && KUBEBUILDER_ASSETS="$(assets "$server")" \
        timeout 1200 "$bin" -test.v -test.count=1 ${skip:+-test.skip "$skip"} >>"$logf" 2>&1) || true
    fi
  done
  end=$(date +%s.%N)
  echo "$(counts "$logf") $(echo "$end - $start" | bc)"
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

mkdir -p "$(dirname "$OUT")"
printf 'suite\tserver\tmode\tround\tpassed\trun\tseconds\n' >"$OUT"
echo "| suite | mode | kube-apiserver passed | crdserver passed | kube-apiserver s | crdserver s |"
echo "| --- | --- | --- | --- | --- | --- |"
for suite in $SUITES; do
  read -r mdir pkgs <<<"$(suite_packages "$suite")"
  if [[ -z "${mdir:-}" ]]; then
    log "$suite: no sources (see FLUX_SRC); skipped"
    continue
  fi
  for pkg in $pkgs; do
    bin="$WORK/bin/$suite-$(echo "$pkg" | tr / _).test"
    [[ -x "$bin" ]] && continue
    log "$suite: compiling $pkg"
    (cd "$mdir" && go test -c -o "$bin" "./$pkg") >"$WORK/logs/$suite-compile.log" 2>&1 ||
      { log "$suite: $pkg does not compile: $WORK/logs/$suite-compile.log"; exit 1; }
  done
  for mode in $MODES; do
    declare -A res=() secs=()
    for server in $SERVERS; do
      times=()
      for ((r = 1; r <= ROUNDS; r++)); do
        read -r passed run seconds <<<"$(run_suite "$suite" "$server" "$mode" "$r")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%.1f\n' "$suite" "$server" "$mode" "$r" "$passed" "$run" "$seconds" >>"$OUT"
        log "$suite $server $mode round $r: $passed/$run in ${seconds}s"
        res[$server]="${res[$server]:+${res[$server]}, }$passed/$run"
        times+=("$seconds")
      done
      secs[$server]=$(printf '%s\n' "${times[@]}" | median)
    done
    printf '| %s | %s | %s | %s | %.1f | %.1f |\n' "$suite" "$mode" "${res[kube]:--}" "${res[crdserver]:--}" \
      "${secs[kube]:-0}" "${secs[crdserver]:-0}"
    unset res secs
  done
done
