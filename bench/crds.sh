#!/usr/bin/env bash
# Thousands of CRDs: crdbench crds with a real provider's CRDs, on crdserver
# (the whole corpus, CRDS_ROUNDS rounds, a fresh server each) and, side by
# side, on crdserver and the full Kubernetes reference (kube-apiserver + etcd +
# kube-controller-manager, ./start-kube.sh, a fresh one) with the first
# CRDS_KUBE_N of them (the kube side takes long). JSON results go to
# bench/results/crds-*.json, which `crdbench report` turns into the "Thousands of
# CRDs" section of RESULTS.md. bench/run.sh runs it (CRDS=0 skips it); alone:
#
#   bench/crds.sh                 # about 15 minutes on 2 cores
#
# Environment: REF (/work/shared/reference), CORPUS (the corpus .tar.zst),
# CRDS_ROUNDS (3), CRDS_KUBE_N (300; 0 skips the comparison), CRDS_SETTLE (10s),
# CB (a built crdbench), SERVER (a built crdserver), OUT (bench/results).
# Every server listens on 127.0.0.1 only; every one this script starts, it stops.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd -P)"
ROOT="$(dirname "$HERE")"
REF="${REF:-/work/shared/reference}"
CORPUS="${CORPUS:-$(cd "$ROOT/.." && pwd -P)/shared/corpora/provider-upjet-azure-crds.tar.zst}"
CRDS_ROUNDS="${CRDS_ROUNDS:-3}"
CRDS_KUBE_N="${CRDS_KUBE_N:-300}"
CRDS_SETTLE="${CRDS_SETTLE:-10s}"
OUT="${OUT:-$HERE/results}"
WORK="$(mktemp -d /tmp/crdbench-crds.XXXXXX)"
log() { echo "crds.sh: $*" >&2; }

PIDS=()
KUBE_STARTED=0
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  if [[ $KUBE_STARTED == 1 ]]; then "$REF/stop-kube.sh" >&2 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

if [[ ! -f $CORPUS ]]; then
  log "no corpus at $CORPUS (CORPUS=...): skipped"
  exit 0
fi
mkdir -p "$OUT"
rm -f "$OUT"/crds-*.json
CB="${CB:-}"
if [[ -z $CB ]]; then
  CB="$WORK/crdbench"
  (cd "$ROOT" && go build -o "$CB" ./bench/cmd/crdbench) || exit 1
fi
SERVER="${SERVER:-}"
if [[ -z $SERVER ]]; then
  SERVER="$WORK/crdserver"
  (cd "$ROOT" && go build -o "$SERVER" ./cmd/crdserver) || exit 1
fi
KUBECTL="$REF/bin/kubectl"

# crdserver NAME ARGS...: a fresh crdserver on a free port, crdbench crds on it.
crdserver() {
  local name=$1; shift
  local dir="$WORK/$name" port
  port=$("$CB" freeport -n 1)
  mkdir -p "$dir"
  "$SERVER" --data-dir "$dir/data" --port "$port" >"$OUT/crdserver-$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 100); do
    [[ -f $dir/data/admin.kubeconfig ]] && curl -sk "https://127.0.0.1:$port/readyz" >/dev/null && break
    sleep 0.1
  done
  local kc=()
  [[ -x $KUBECTL ]] && kc=(-kubectl "$KUBECTL" -kubeconfig "$dir/data/admin.kubeconfig")
  "$CB" crds -server "https://127.0.0.1:$port" -cacert "$dir/data/pki/ca.crt" -cert "$dir/data/pki/admin.crt" \
    -key "$dir/data/pki/admin.key" -corpus "$CORPUS" -rss-pid "crdserver=$pid" -settle "$CRDS_SETTLE" \
    "${kc[@]}" -json "$OUT/crds-$name.json" "$@" || log "crdserver $name had failures"
  kill "$pid"
  wait "$pid" 2>/dev/null
}

for i in $(seq "$CRDS_ROUNDS"); do
  log "crdserver, the whole corpus, round $i of $CRDS_ROUNDS"
  crdserver "crdserver-$i"
done

if [[ $CRDS_KUBE_N != 0 ]]; then
  log "crdserver, the first $CRDS_KUBE_N CRDs"
  crdserver "crdserver-subset" -limit "$CRDS_KUBE_N"
  if [[ ! -x $REF/bin/kube-apiserver ]]; then
    log "no kube-apiserver in $REF/bin (BUILD_KUBE=1 ./build.sh): the comparison is skipped"
    exit 0
  fi
  if curl -sk --max-time 2 https://127.0.0.1:26443/readyz >/dev/null; then
    log "the kube reference is running: it must be fresh (no CRDs), so stop it first (./stop-kube.sh)"
    exit 1
  fi
  log "kube-apiserver, the first $CRDS_KUBE_N CRDs"
  if URL=$("$REF/start-kube.sh" 2>"$WORK/start-kube.err"); then
    KUBE_STARTED=1
    KPKI="$REF/pki-kube"
    "$CB" crds -server "$URL" -cacert "$KPKI/ca.crt" -cert "$KPKI/admin.crt" -key "$KPKI/admin.key" \
      -corpus "$CORPUS" -limit "$CRDS_KUBE_N" -settle "$CRDS_SETTLE" -timeout 30m \
      -rss-pid "kube-apiserver=$(cat "$REF/run/kube-apiserver.pid")" -rss-pid "etcd=$(cat "$REF/run/kube-etcd.pid")" \
      -rss-pid "kube-controller-manager=$(cat "$REF/run/kube-controller-manager.pid")" \
      -kubectl "$KUBECTL" -kubeconfig "$REF/kube.kubeconfig" \
      -json "$OUT/crds-kube-subset.json" || log "kube reference had failures"
    "$REF/stop-kube.sh" >&2 && KUBE_STARTED=0
  else
    cat "$WORK/start-kube.err" >&2
    log "the kube reference did not start: the comparison is skipped"
  fi
fi
