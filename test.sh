#!/usr/bin/env bash
# Runs every test of crdserver, as CI does: formatting and vet, unit and
# integration tests under the race detector, a short run of each fuzz
# target, and the end-to-end tests that drive the built binary with a real
# kubectl and client-go. Needs only Go (and the Go module proxy).
#
#   ./test.sh            everything
#   FUZZTIME=30s ./test.sh
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH=/usr/local/go/bin:$PATH
fi
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
fuzztime="${FUZZTIME:-10s}"

step() { printf '\n== %s\n' "$*"; }

step "go version"
go version

step "gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...
(cd e2e && go vet ./...)

step "unit and integration tests (race detector)"
go test -race -count=1 ./...

step "fuzzing, ${fuzztime} per target"
for target in \
  ./internal/request:FuzzDecodeObject \
  ./internal/request:FuzzParse \
  ./internal/jsonraw:FuzzSetResourceVersion \
  ./internal/jsonraw:FuzzDecode \
  ./internal/resource:FuzzDecodeContinue \
  ./integration:FuzzPatch \
  ./integration:FuzzListQuery; do
  pkg=${target%%:*}; fn=${target##*:}
  go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "$pkg"
done

step "end-to-end tests (built binary, kubectl, client-go)"
(cd e2e && go test -count=1 -timeout 30m ./...)

step "all tests passed"
