#!/usr/bin/env bash
# The project's test command: formatting, vet, staticcheck, the unit tests
# under the race detector, then every test including the end-to-end runs
# that build and measure real targets. Needs only Go and the module proxy.
set -euo pipefail
cd "$(dirname "$0")"

echo "== gofmt"
unformatted=$(gofmt -s -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt -s clean:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
go tool staticcheck ./...
echo "== unit tests, race detector"
go test -race -short -count=1 ./...
echo "== all tests"
go test -count=1 -timeout 20m ./...
