#!/usr/bin/env bash
# The project's test command: formatting, vet, staticcheck, the unit tests
# under the race detector, then every test including the end-to-end runs
# that build and measure real targets. Needs only Go and the module proxy.
set -euo pipefail
cd "$(dirname "$0")"

# strace is the syscall tests' oracle (the eBPF tests need root, which CI
# has); Debian's chromium runs the flame graphs' browser tests; valgrind
# runs the instruction counts.
missing=""
command -v strace >/dev/null 2>&1 || missing="$missing strace"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v valgrind >/dev/null 2>&1 || missing="$missing valgrind"
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "== installing$missing"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
	else
		echo "missing and not installable here:$missing; their tests will skip"
	fi
fi

echo "== gofmt"
unformatted=$(gofmt -s -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt -s clean:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
go tool staticcheck ./...
echo "== cross-builds: everything on darwin and linux/arm64, flame and allocdiff on windows"
# darwin cannot run here: building and vetting it (tests included) keeps
# every Linux-only file behind its build constraint with a counterpart.
for p in darwin/arm64 darwin/amd64 linux/arm64; do
	GOOS=${p%/*} GOARCH=${p#*/} go build ./...
	GOOS=${p%/*} GOARCH=${p#*/} go vet ./...
done
GOOS=windows GOARCH=amd64 go build -o /dev/null ./cmd/flame ./cmd/allocdiff
echo "== unit tests, race detector"
go test -race -short -count=1 ./...
echo "== all tests"
# One package at a time: the end-to-end runs measure, and contention would
# leave their windows generator-bound.
go test -p 1 -count=1 -timeout 30m ./...
