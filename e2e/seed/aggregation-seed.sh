#!/usr/bin/env bash
# Runs the seed aggregated API server, api-aggregation-lib of
# github.com/phosae/x-kubernetes (commit ca21496; not on the Go module proxy,
# so no test can build it), against an API server, registered by its own
# APIService manifests, and walks through it with kubectl: the APIServices
# Available, discovery, Foos created in hello.zeng.dev/v1 and read in v2,
# kubectl explain, a watch (the seed's 405 passed through), a delete. Every check prints what it ran;
# the script stops at the first failure (exit 1) and removes what it
# created.
#
# Usage:
#   SEED_SRC=/path/to/x-kubernetes KUBECONFIG=/path/to/admin.kubeconfig e2e/seed/aggregation-seed.sh
#       against a running cluster (kube-apiserver with its --requestheader-*
#       and --proxy-client-* flags): the APIService's Service is an
#       ExternalName to localhost, as there is no kube-proxy.
#   SEED_SRC=/path/to/x-kubernetes CRDSERVER=/path/to/crdserver e2e/seed/aggregation-seed.sh
#       starts that crdserver on a fresh data dir as an aggregator (a
#       front-proxy CA and client certificate, the service's address in
#       --webhook-service-address) and runs against it.
# SEED_SRC is a checkout of the repository at ca21496 (git worktree or
# archive); the seed is built from SEED_SRC/api-aggregation-lib with its own
# go.mod. SEED_PORT (default 28443) is the port the seed listens on.
# Needs go, openssl, curl and a kubectl (KUBECTL, default kubectl).
#
# Run by hand (CI cannot fetch the seed): it passes against kube-apiserver
# v1.37.2 (../shared/reference, start-kube.sh) and against crdserver, with
# the same output but for ages and the seed's map order.
# e2e/aggregation_test.go is the equivalent CI runs, with
# k8s.io/sample-apiserver.
set -euo pipefail

: "${SEED_SRC:?SEED_SRC must be a checkout of github.com/phosae/x-kubernetes at ca21496}"
KUBECTL="${KUBECTL:-kubectl}"
PORT="${SEED_PORT:-28443}"
WORK="$(mktemp -d /tmp/aggregation-seed.XXXXXX)"
NS=hello
SVC=apiserver
PIDS=()

step() { printf '\n### %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
die() { echo "FAIL: $*" >&2; exit 1; }

cleanup() {
  set +e
  if [[ -n "${KUBECONFIG:-}" ]]; then
    "$KUBECTL" delete apiservice v1.hello.zeng.dev v2.hello.zeng.dev --ignore-not-found
    "$KUBECTL" delete -f "$SEED_SRC/api/artifacts/apiserver/rbac.yaml" --ignore-not-found
    "$KUBECTL" delete namespace "$NS" --ignore-not-found --wait=false
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

step "build the seed from $SEED_SRC/api-aggregation-lib"
(cd "$SEED_SRC/api-aggregation-lib" && run go build -o "$WORK/seed" .)

step "PKI: a serving CA and the seed's certificate for $SVC.$NS.svc"
cd "$WORK"
openssl req -x509 -newkey rsa:2048 -nodes -keyout serving-ca.key -out serving-ca.crt -days 1 -subj /CN=seed-serving-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout serving.key -out serving.csr -subj "/CN=$SVC.$NS.svc" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s.%s.svc,DNS:localhost,IP:127.0.0.1\n' "$SVC" "$NS" > serving.ext
openssl x509 -req -in serving.csr -CA serving-ca.crt -CAkey serving-ca.key -CAcreateserial -out serving.crt -days 1 -extfile serving.ext 2>/dev/null

if [[ -n "${CRDSERVER:-}" ]]; then
  step "start crdserver as an aggregator"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout fp-ca.key -out fp-ca.crt -days 1 -subj /CN=front-proxy-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout fp.key -out fp.csr -subj /CN=front-proxy-client 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > client.ext
  openssl x509 -req -in fp.csr -CA fp-ca.crt -CAkey fp-ca.key -CAcreateserial -out fp.crt -days 1 -extfile client.ext 2>/dev/null
  "$CRDSERVER" --data-dir "$WORK/crdserver" --bind-address 127.0.0.1 --port 0 \
    --requestheader-client-ca-file fp-ca.crt --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file fp.crt --proxy-client-key-file fp.key \
    --webhook-service-address "$NS/$SVC:$PORT=127.0.0.1:$PORT" >"$WORK/crdserver.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 600); do
    grep -q 'crdserver is serving' "$WORK/crdserver.log" && break
    sleep 0.1
  done
  grep -q 'crdserver is serving' "$WORK/crdserver.log" || { cat "$WORK/crdserver.log"; die "crdserver did not start"; }
  export KUBECONFIG="$WORK/crdserver/admin.kubeconfig"
fi
: "${KUBECONFIG:?KUBECONFIG (a cluster admin) or CRDSERVER must be set}"
export KUBECONFIG

step "the seed's namespace, ServiceAccount and RBAC (its manifests)"
run "$KUBECTL" create namespace "$NS"
run "$KUBECTL" create serviceaccount "$SVC" -n "$NS"
run "$KUBECTL" apply -f "$SEED_SRC/api/artifacts/apiserver/rbac.yaml"
if "$KUBECTL" api-resources --api-group= -o name | grep -x services >/dev/null; then
  # No kube-proxy, no Pods: the Service names the seed's host instead.
  step "an ExternalName Service $NS/$SVC to localhost"
  "$KUBECTL" create service externalname "$SVC" -n "$NS" --external-name localhost
fi

step "a kubeconfig with the ServiceAccount's token; start the seed on 127.0.0.1:$PORT"
TOKEN=$("$KUBECTL" create token "$SVC" -n "$NS" --duration 2h)
SERVER=$("$KUBECTL" config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
"$KUBECTL" config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > api-ca.crt 2>/dev/null || true
if [[ ! -s api-ca.crt ]]; then
  cp "$("$KUBECTL" config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')" api-ca.crt
fi
KUBECONFIG= "$KUBECTL" config --kubeconfig seed.kubeconfig set-cluster c --server "$SERVER" --certificate-authority api-ca.crt --embed-certs >/dev/null
KUBECONFIG= "$KUBECTL" config --kubeconfig seed.kubeconfig set-credentials u --token "$TOKEN" >/dev/null
KUBECONFIG= "$KUBECTL" config --kubeconfig seed.kubeconfig set-context c --cluster c --user u >/dev/null
KUBECONFIG= "$KUBECTL" config --kubeconfig seed.kubeconfig use-context c >/dev/null
"$WORK/seed" --bind-address 127.0.0.1 --secure-port "$PORT" \
  --tls-cert-file serving.crt --tls-private-key-file serving.key \
  --enable-auth --kubeconfig seed.kubeconfig \
  --authentication-kubeconfig seed.kubeconfig --authorization-kubeconfig seed.kubeconfig >"$WORK/seed.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 300); do
  curl -sk -o /dev/null "https://127.0.0.1:$PORT/healthz" && break
  sleep 0.1
done

step "its APIService manifests, verified with the serving CA on port $PORT"
run "$KUBECTL" apply -f "$SEED_SRC/api/artifacts/apiserver/apiservice.yaml" -f "$SEED_SRC/api-aggregation-lib/apiservicev2.yaml"
CA=$(base64 -w0 < serving-ca.crt)
for v in v1 v2; do
  run "$KUBECTL" patch apiservice "$v.hello.zeng.dev" --type json -p \
    "[{\"op\":\"remove\",\"path\":\"/spec/insecureSkipTLSVerify\"},{\"op\":\"add\",\"path\":\"/spec/caBundle\",\"value\":\"$CA\"},{\"op\":\"add\",\"path\":\"/spec/service/port\",\"value\":$PORT}]"
done
run "$KUBECTL" wait --for=condition=Available --timeout=90s apiservice/v1.hello.zeng.dev apiservice/v2.hello.zeng.dev ||
  { "$KUBECTL" get apiservice v1.hello.zeng.dev -o yaml; cat "$WORK/seed.log"; die "the APIServices are not Available"; }
step "kubectl get apiservices"
run "$KUBECTL" get apiservices v1.hello.zeng.dev v2.hello.zeng.dev
"$KUBECTL" get apiservices v1.hello.zeng.dev --no-headers | grep -E "^v1.hello.zeng.dev +$NS/$SVC +True " >/dev/null || die "v1.hello.zeng.dev is not $NS/$SVC True"

step "discovery"
run "$KUBECTL" api-resources --api-group hello.zeng.dev
"$KUBECTL" api-resources --api-group hello.zeng.dev --no-headers | grep -E '^foos +fo +hello.zeng.dev/v2 +true +Foo$' >/dev/null || die "no foos in api-resources"

step "Foos created in v1 (the repository's sample), read in v2"
run "$KUBECTL" get foos.v1.hello.zeng.dev -A
run "$KUBECTL" apply -f "$SEED_SRC/api/artifacts/samples/hello-foo.yml"
run "$KUBECTL" get foos.v1.hello.zeng.dev myfoo -o yaml
run "$KUBECTL" get foos.v2.hello.zeng.dev myfoo -o yaml
[[ "$("$KUBECTL" get foos.v2.hello.zeng.dev myfoo -o jsonpath='{.apiVersion} {.spec.config.msg}')" == "hello.zeng.dev/v2 my first foo" ]] ||
  die "myfoo in v2 is not hello.zeng.dev/v2 with spec.config.msg 'my first foo'"
run "$KUBECTL" get fo -A
# The seed starts with a Foo of its own, default/bar; the sample adds three.
[[ "$("$KUBECTL" get fo -A --no-headers -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name | sort | tr -s ' ' | paste -sd,)" == "default bar,default myfoo,default test,kube-public myfoo" ]] ||
  die "kubectl get fo -A does not list bar and the sample's three Foos"

step "kubectl explain (OpenAPI v3 of the group)"
run "$KUBECTL" explain foos.spec
"$KUBECTL" explain foos | grep -E '^KIND: +Foo$' >/dev/null || die "kubectl explain foos"

step "a watch reaches the seed (whose store lists but cannot watch), a delete removes"
# The seed's in-memory store serves no watches: kubectl lists, then shows the
# seed's own 405, which must come through the aggregator unchanged.
OUT=$("$KUBECTL" get fo -w --output-watch-events --request-timeout=20s 2>&1) && die "the watch did not end with the seed's 405: $OUT"
echo "$OUT"
grep -q '^ADDED *test' <<<"$OUT" || die "the watch's list has no test"
grep -qF 'Error from server (MethodNotAllowed): watch is not supported on resources of kind "foos.hello.zeng.dev"' <<<"$OUT" ||
  die "the watch did not end with the seed's 405"
run "$KUBECTL" delete fo test
"$KUBECTL" get fo --no-headers -o name | grep -x 'foo.hello.zeng.dev/test' >/dev/null && die "test is still listed"

step "a user without RBAC on foos is refused"
"$KUBECTL" create serviceaccount nobody -n "$NS" >/dev/null
OUT=$("$KUBECTL" get fo --token "$("$KUBECTL" create token nobody -n "$NS")" --kubeconfig seed.kubeconfig 2>&1) && die "nobody listed foos: $OUT"
echo "$OUT"
[[ "$OUT" == 'Error from server (Forbidden): foos.hello.zeng.dev is forbidden: User "system:serviceaccount:hello:nobody" cannot list resource "foos" in API group "hello.zeng.dev" in the namespace "default"' ]] ||
  die "unexpected refusal"

step "delete the Foos"
run "$KUBECTL" delete -f "$SEED_SRC/api/artifacts/samples/hello-foo.yml" --ignore-not-found
echo
echo "PASS: the seed served through $SERVER"
