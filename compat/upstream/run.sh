#!/usr/bin/env bash
# Runs Kubernetes' own CRD integration tests, the test/integration packages of
# k8s.io/apiextensions-apiserver (unmodified, from the Go module cache), against
# crdserver: only the fixtures' server start (test/integration/fixtures/server.go)
# is replaced, through `go test -overlay`, by testdata/fixtures/server.go here.
# See README.md.
#
#   compat/upstream/run.sh [go test flags...]
#       go test over k8s.io/apiextensions-apiserver/test/integration/...
#       (default flags: -count=1 -timeout 30m, and -skip of the tests that do
#       not apply to another server; later flags win, e.g. -run TestX -v).
#   compat/upstream/run.sh --each [go test -run regexp]
#       builds the test binaries once, then runs every top-level test (or
#       those matching the regexp) in its own process (a panic in one test
#       does not stop the others), and prints a table: test, result, seconds.
#       Logs go to $WORK/logs/<package>.<Test>.log, the table to
#       $WORK/results.txt.
#   compat/upstream/run.sh --lint
#       gofmt, go vet and golangci-lint (crdserver's bin/golangci-lint and
#       .golangci.yml) of the fixtures package with testdata/fixtures/server.go
#       in place (a second mirror in which server.go is a link to it: linters
#       take no overlays); fails on findings in server.go only (the upstream
#       files of the package have two revive findings of their own).
#   compat/upstream/run.sh --upstream [go test flags...]
#       the same packages without the overlay: against the real
#       apiextensions-apiserver their fixtures start in process, on the etcd
#       at KUBE_INTEGRATION_ETCD_URL (default http://127.0.0.1:2379), to check
#       that a test crdserver fails passes on Kubernetes.
#
# Environment:
#   CRDSERVER_DIR          crdserver source tree to test (default: this repository)
#   CRDSERVER_UPSTREAM_WORK
#                          scratch directory (default ${TMPDIR:-/tmp}/crdserver-upstream)
#   CRDSERVER_UPSTREAM_SKIP
#                          the -skip regexp (default: the tests that do not apply
#                          to another server; with --upstream: none)
#   CRDSERVER_LOG_LEVEL    crdserver's log level in the test logs (default warn)
#   CRDSERVER_UPSTREAM_CREATE_NAMESPACES=0
#                          do not create namespaces before writes (see README.md)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
crdserver=$(cd "${CRDSERVER_DIR:-$here/../..}" && pwd)
work=${CRDSERVER_UPSTREAM_WORK:-${TMPDIR:-/tmp}/crdserver-upstream}
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH=/usr/local/go/bin:$PATH
fi

# Tests that flip feature gates inside the test process or start the server at
# an emulated older version: they test the apiextensions-apiserver library
# running in the test process, not a server on the other end of a connection.
not_applicable='^(TestCBORStorageEnablement|TestCBORServingEnablement|TestFieldSelectorDropFields|TestFieldSelectorDisablement|TestRatchetingDropFields)$'
skip=${CRDSERVER_UPSTREAM_SKIP-$not_applicable}

pkg=k8s.io/apiextensions-apiserver
cd "$crdserver"
version=$(go list -m -f '{{.Version}}' "$pkg")
go mod download "$pkg@$version"
src=$(go list -m -f '{{.Dir}}' "$pkg")

# The go command refuses overlays of files in the module cache. So the module
# is mirrored, as symbolic links to the module cache (nothing is copied), in the
# scratch directory, a workspace replaces the module by that mirror, and the
# overlay replaces the mirror's fixtures/server.go. The workspace's only module
# is crdserver's: the build list is crdserver's go.mod (go.work.sum, written in
# the scratch directory, takes the checksums go.sum lacks for the test-only
# packages); crdserver's go.mod and go.sum are not touched.
mkdir -p "$work"
if [ -d "$work/apiextensions-apiserver" ]; then
	chmod -R u+w "$work/apiextensions-apiserver"
	rm -rf "$work/apiextensions-apiserver"
fi
cp -rs "$src" "$work/apiextensions-apiserver"
chmod -R u+w "$work/apiextensions-apiserver"
upstream_server=$work/apiextensions-apiserver/test/integration/fixtures/server.go
[ -e "$upstream_server" ] || { echo "run.sh: $upstream_server is missing" >&2; exit 1; }
goversion=$(go list -m -f '{{.GoVersion}}')
cat >"$work/go.work" <<EOF
go $goversion

use $crdserver

replace $pkg $version => $work/apiextensions-apiserver
EOF
cat >"$work/overlay.json" <<EOF
{"Replace": {"$upstream_server": "$here/testdata/fixtures/server.go"}}
EOF
export GOWORK=$work/go.work
# The servers' data and etcd directories are removed at tear-down; those of a
# test binary that died (a panic) are removed by the next run.
rm -rf "$work/tmp"
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp
overlay=-overlay=$work/overlay.json
packages="$pkg/test/integration/..."

case "${1:-}" in
--each) ;;
--lint)
	lint=$work/lint
	if [ -d "$lint" ]; then
		chmod -R u+w "$lint"
		rm -rf "$lint"
	fi
	mkdir -p "$lint"
	cp -rs "$src" "$lint/apiextensions-apiserver"
	chmod -R u+w "$lint/apiextensions-apiserver"
	ln -sf "$here/testdata/fixtures/server.go" "$lint/apiextensions-apiserver/test/integration/fixtures/server.go"
	printf 'go %s\n\nuse %s\nuse %s\n' "$goversion" "$crdserver" "$lint/apiextensions-apiserver" >"$lint/go.work"
	if [ -n "$(gofmt -l "$here/testdata/fixtures/server.go")" ]; then
		echo "run.sh: testdata/fixtures/server.go is not gofmt'd" >&2
		exit 1
	fi
	cd "$lint/apiextensions-apiserver"
	export GOWORK=$lint/go.work
	go vet ./test/integration/fixtures/
	rc=0
	out=$("$crdserver/bin/golangci-lint" run --allow-parallel-runners --config "$crdserver/.golangci.yml" ./test/integration/fixtures/ 2>&1) || rc=$?
	echo "$out"
	# golangci-lint exits with 1 when it finds issues, other codes on errors.
	if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
		exit $rc
	fi
	if echo "$out" | grep -q 'fixtures/server.go:'; then
		exit 1
	fi
	echo "run.sh: no findings in testdata/fixtures/server.go"
	exit 0
	;;
--upstream)
	shift
	skip=${CRDSERVER_UPSTREAM_SKIP-}
	exec go test -count=1 -timeout 30m ${skip:+-skip "$skip"} "$@" $packages
	;;
*)
	exec go test "$overlay" -count=1 -timeout 30m ${skip:+-skip "$skip"} "$@" $packages
	;;
esac

run=${2:-.}
mkdir -p "$work/bin" "$work/logs"
rm -f "$work/logs"/*.log
results=$work/results.txt
: >"$results"
start=$(date +%s)
for dir in test/integration test/integration/conversion; do
	name=$(basename "$dir")
	bin=$work/bin/$name.test
	go test "$overlay" -c -o "$bin" "$pkg/$dir"
	tests=$(cd "$work/apiextensions-apiserver/$dir" && "$bin" -test.list "$run" | grep '^Test' || true)
	for t in $tests; do
		log=$work/logs/$name.$t.log
		if [ -n "$skip" ] && [[ $t =~ $skip ]]; then
			printf '%-70s %-5s %s\n' "$name.$t" "N/A" "-" | tee -a "$results"
			continue
		fi
		t0=$(date +%s%N)
		status=PASS
		(cd "$work/apiextensions-apiserver/$dir" && "$bin" -test.run "^$t\$" -test.v -test.count=1 -test.timeout 15m) >"$log" 2>&1 || status=FAIL
		if [ $status = PASS ] && grep -q "^--- SKIP: $t " "$log"; then
			status=SKIP
		fi
		printf '%-70s %-5s %.1f\n' "$name.$t" "$status" "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')" | tee -a "$results"
	done
done
echo "total: $(($(date +%s) - start)) s; $(grep -c ' PASS ' "$results") pass, $(grep -c ' FAIL ' "$results") fail, $(grep -c ' SKIP ' "$results") skip, $(grep -c ' N/A ' "$results") not applicable; logs in $work/logs"
