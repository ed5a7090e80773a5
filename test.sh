#!/usr/bin/env bash
# The project's test command: formatting, vet, staticcheck, the unit tests
# under the race detector, then every test including the end-to-end runs
# that build and measure real targets. Needs only Go and the module proxy.
set -euo pipefail
cd "$(dirname "$0")"
stamp() { echo "== $(date -u +%T) $*"; }

# strace is the syscall tests' oracle (the eBPF tests need root, which CI
# has); Debian's chromium runs the flame graphs' browser tests; valgrind
# runs the instruction counts; qemu-user-static runs linux/arm64 binaries;
# jq evaluates the action's comment filter in its test.
missing=""
command -v strace >/dev/null 2>&1 || missing="$missing strace"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v valgrind >/dev/null 2>&1 || missing="$missing valgrind"
command -v qemu-aarch64-static >/dev/null 2>&1 || missing="$missing qemu-user-static"
command -v jq >/dev/null 2>&1 || missing="$missing jq"
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		stamp "installing$missing"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
	else
		echo "missing and not installable here:$missing; their tests will skip"
	fi
fi

stamp gofmt
unformatted=$(gofmt -s -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt -s clean:"; echo "$unformatted"; exit 1
fi
stamp "go vet"
go vet ./...
stamp "staticcheck"
go tool staticcheck ./...
stamp "cross-builds: everything vetted on darwin/arm64 and linux/arm64, flame and allocdiff built for windows"
# darwin cannot run here: building and vetting it (tests included) keeps
# every Linux-only file behind its build constraint with a counterpart.
# darwin/amd64 adds nothing to darwin/arm64 and linux/amd64: no Go file
# of the module is constrained by architecture (copyspy's per-architecture
# recorders are overlay text, built into targets on Linux only).
# go vet type-checks every package and its tests, built on the
# dependencies' compiled export data: what a build would catch but the
# link.
for p in darwin/arm64 linux/arm64; do
	GOOS=${p%/*} GOARCH=${p#*/} go vet ./...
done
GOOS=windows GOARCH=amd64 go build -o /dev/null ./cmd/flame ./cmd/allocdiff
if command -v qemu-aarch64-static >/dev/null 2>&1; then
	stamp "linux/arm64 under qemu-user: the packages with arm64 assembly or arm64 facts"
	# probe's TestBenchFixtureARM64 (below, natively) measures an arm64
	# test binary under qemu end to end.
	GOARCH=arm64 go test -short -count=1 -exec qemu-aarch64-static ./allocspy ./copyspy ./agent/... ./benchwin ./diff ./flame ./profkey
else
	stamp "linux/arm64: qemu-aarch64-static missing; the arm64 tests do not run"
fi
stamp "unit tests, race detector"
# The short pass runs every test that -short keeps, under the race
# detector; internal/tiers prints its output as go test would and lists,
# per package, the tests that skipped (themselves or a subtest): the full
# pass below runs just those, so nothing runs twice.
long=$(mktemp -d)
trap 'rm -rf "$long"' EXIT
go build -o "$long/tiers" ./internal/tiers
go test -race -short -count=1 -json ./... | "$long/tiers" -long "$long/tests"
stamp "the tests -short skips"
# One package at a time: the end-to-end runs measure, and contention would
# leave their windows generator-bound. The layout tests check every
# overlay against each supported release's GOROOT (fetched through the
# module proxy), and testdata/newgo is measured with the Go 1.27 its
# go.mod asks for, whatever Go runs this script.
failed=""
while read -r pkg run; do
	go test -p 1 -count=1 -timeout 30m -json -run "$run" "$pkg" | "$long/tiers" -times "$long/times" || failed="$failed $pkg"
done < "$long/tests"
# The slowest tests: where the time of this script goes.
stamp "the slowest end-to-end tests (seconds)"
# awk reads the whole list: head would close the pipe early and sort, under
# pipefail, would end the script with SIGPIPE (exit 141) once the list outgrew
# the pipe.
sort -rn "$long/times" | awk 'NR <= 15'
if [ -n "$failed" ]; then
	echo "FAIL:$failed"; exit 1
fi

# The second tier: the end-to-end tests whose figures depend on the Go
# release (the runtime overlays, the request boundaries, the benchmark
# window, the retained window, live mode), run again with the other
# supported release building both perfspy and its targets. What does not
# depend on the release (parsers, flame, allocdiff, the drivers' wire
# formats, the cost commands) runs once, above. docs/design.md, "Supported
# Go releases", says what runs where.
other=go1.27.3
case "$(go env GOVERSION)" in go1.27*) other=go1.26.8 ;; esac
stamp "the release-dependent end-to-end tests under GOTOOLCHAIN=$other"
release_tests='^(TestAllocspyGroundTruth|TestAllocspyAgreesWithHeapProfile|TestCopiesGroundTruth|TestCopiesGroundTruthPs|TestRoutesHTTP2|TestRoutesGRPC|TestOffCPUGroundTruth|TestBenchFixture|TestProbeBuild|TestLive|TestLeakRetained|TestGoroutineLeakProfile|TestTailBill|TestTailBillH2C|TestLiveBills|TestRoutesHandoffs|TestRoutesHandoffsARM64|TestRoutesUnfollowed|TestRoutesHandoffsLost|TestRoutesSampled|TestBenchInstructions|TestTailBillHandoff|TestTailBillUnfollowed|TestReviewChangedLineIsCause|TestReviewModuleBump)$'
GOTOOLCHAIN=$other go test -p 1 -count=1 -timeout 20m -run "$release_tests" ./probe ./targets ./review
