#!/usr/bin/env bash
# Runs every test of crdserver, as CI does: formatting, vet and the linter,
# unit and integration tests under the race detector, a short run of each
# fuzz target, and the end-to-end tests that drive the built binary with a
# real kubectl, client-go, controller-runtime and Helm. Needs only Go (and
# the Go module proxy): the linter's version is pinned in tools/go.mod.
#
#   ./test.sh            everything
#   ./test.sh quick      the inner loop: gofmt, vet, lint, unit tests
#   FUZZTIME=200000x ./test.sh   more fuzzing (inputs per target)
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH=/usr/local/go/bin:$PATH
fi
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
# Fuzzing runs a fixed number of inputs per target, never a duration: with
# a duration, Go's fuzz coordinator can time out before its workers have
# run the seed corpus on a starved machine ("context deadline exceeded",
# 0 execs/sec), which fails for no fault of the code.
fuzztime="${FUZZTIME:-}"
mode="${1:-all}"
case "$mode" in all|quick) ;; *) echo "usage: $0 [quick]" >&2; exit 2 ;; esac

step() { printf '\n== %s\n' "$*"; }

step "go version"
go version

step "gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go.mod files tidy (the main module, e2e, examples/embed)"
go mod tidy -diff
(cd e2e && go mod tidy -diff)
(cd examples/embed && go mod tidy -diff)

step "go vet"
go vet ./...
(cd e2e && go vet ./...)

step "golangci-lint (version pinned in tools/go.mod)"
(cd tools && go build -o ../bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
./bin/golangci-lint run ./...
(cd e2e && ../bin/golangci-lint run --config ../.golangci.yml ./...)
(cd examples/embed && go vet ./... && ../../bin/golangci-lint run --config ../../.golangci.yml ./...)

if [ "$mode" = quick ]; then
  step "unit tests"
  go test -count=1 $(go list ./... | grep -v -e /integration -e /bench/)
  (cd e2e && go test -count=1 ./robustness/check/)
  step "quick checks passed"
  exit 0
fi

step "unit and integration tests (race detector)"
go test -race -count=1 ./...

step "the embedding example, a module of its own (examples/embed)"
(cd examples/embed && go test -count=1 ./...)

step "fuzzing, a fixed number of inputs per target"
# package:target:inputs (a few seconds each on 2 cores)
for target in \
  ./internal/request:FuzzDecodeObject:30000x \
  ./internal/request:FuzzParse:30000x \
  ./internal/jsonraw:FuzzSetResourceVersion:30000x \
  ./internal/jsonraw:FuzzDecode:30000x \
  ./internal/resource:FuzzDecodeContinue:30000x \
  ./integration:FuzzPatch:3000x \
  ./integration:FuzzListQuery:3000x; do
  IFS=: read -r pkg fn n <<<"$target"
  go test -run '^$' -fuzz "^${fn}\$" -fuzztime "${fuzztime:-$n}" "$pkg"
done

step "end-to-end tests (built binary, kubectl, client-go, controller-runtime)"
(cd e2e && go test -count=1 -timeout 30m $(go list ./... | grep -v '/robustness$'))

# Alone, after the others: its faults and traffic take the machine.
step "robustness: traffic under one fault per run, every history checked against etcd's (3 runs; e2e/robustness/run.sh for long runs)"
(cd e2e && go test -count=1 -timeout 15m -run '^TestRobustness$' ./robustness/)

step "all tests passed"
