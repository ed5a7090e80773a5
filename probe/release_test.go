package probe

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/load"

	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/schema"
)

// runNewGo measures testdata/newgo, a module whose toolchain line asks
// for go1.27.3, with GOTOOLCHAIN=auto (as Go's own downloads set it): from
// a Go 1.26 install the go command switches to a toolchain it fetches
// into the module cache, which probe builds from a private GOROOT.
func runNewGo(t *testing.T, s seams) (*schema.Summary, string, error) {
	t.Helper()
	skipShort(t)
	t.Setenv("GOTOOLCHAIN", "auto")
	out := filepath.Join(t.TempDir(), "out")
	_, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/newgo"}, Spec: load.Spec{Path: "/"}, WindowConfig: WindowConfig{Warmup: 300 * time.Millisecond, Duration: time.Second}, OutputConfig: OutputConfig{Out: out}}, internals{seams: s}, nil)
	checkNoOrphans(t)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	var sum schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &sum); err != nil {
		t.Fatal(err)
	}
	return &sum, out, err
}

// TestToolchainOfGoMod: the toolchain go build would use is the one
// measured, named in summary.json, and every overlay builds on it: each of
// Go 1.27's allocation entries counted exactly, and both windows close on
// the runtime's and the driver's counts.
func TestToolchainOfGoMod(t *testing.T) {
	s, out, _ := runNewGo(t, seams{})
	if s.Go != "go1.27.3" {
		t.Fatalf("summary go = %q, want go1.27.3 (the module's toolchain line)", s.Go)
	}
	if s.Sources["allocs"] != SourceAllocspy || s.Sources["copies"] != SourceCopiesOverlay {
		t.Fatalf("sources %v: every overlay must build from the private GOROOT", s.Sources)
	}
	c := s.Closure
	if c == nil || c.Allocs == nil || !c.Allocs.Closed || c.Requests == nil || !c.Requests.Closed {
		t.Fatalf("closure %+v: want allocs and requests closed", c)
	}
	t.Logf("closure: allocs %+v, requests %+v", *c.Allocs, *c.Requests)
	p, err := readProfile(filepath.Join(out, "allocs.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	n := requestsComment(t, p)
	for fn, want := range map[string][2]int64{"main.pairs": {2, 32}, "main.tiny": {1, 12}, "main.buf": {1, 112}} {
		objs, bytes := siteCount(p, fn)
		t.Logf("%s: %d objects, %d bytes in %d requests", fn, objs, bytes, n)
		if objs != want[0]*n {
			t.Errorf("%s: %d objects in %d requests, want %d per request", fn, objs, n, want[0])
		}
	}
}

// recorderCall is the recorder's call the allocspy overlay puts where an
// allocation entry returns.
var recorderCall = regexp.MustCompile(`if perfspyGate != 0 [^\n]*?allocspyRecord\(x, size, elemsize, 0\) \}; `)

// TestClosureGuard takes the recorder out of one of Go 1.27's entries
// (the tiny allocator's, which the compiler calls directly): the window
// no longer closes, and the run says which figure missed how much, not
// judged, rather than a smaller count presented as exact.
func TestClosureGuard(t *testing.T) {
	unpatch := func(goroot, goarch, goexp, dir string) (map[string]string, error) {
		ov, err := allocspy.Overlay(goroot, goarch, goexp, dir)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "malloc_generated.go")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		src := string(b)
		i := strings.Index(src, "\nfunc mallocgcTinySC2(")
		j := i + 1 + strings.Index(src[i+1:], "\nfunc ")
		if i < 0 || j <= i || !recorderCall.MatchString(src[i:j]) {
			t.Fatal("no recorder call in mallocgcTinySC2")
		}
		src = src[:i] + recorderCall.ReplaceAllString(src[i:j], "") + src[j:]
		return ov, os.WriteFile(path, []byte(src), 0o644)
	}
	s, _, err := runNewGo(t, seams{allocOverlay: unpatch})
	if !errors.Is(err, ErrNotJudged) || s.Verdict != VerdictNotJudged {
		t.Fatalf("err %v, verdict %s: want not judged", err, s.Verdict)
	}
	c := s.Closure
	if c == nil || c.Allocs == nil || c.Allocs.Closed {
		t.Fatalf("closure %+v: want allocs missed", c)
	}
	// At least main.tiny's object per request is missed.
	if c.Allocs.MissedObjects < s.AttributionWindow.Requests {
		t.Errorf("missed %d objects in %d requests, want at least one per request", c.Allocs.MissedObjects, s.AttributionWindow.Requests)
	}
	reason := strings.Join(s.Reasons, "\n")
	if !strings.Contains(reason, "allocations do not close") || !strings.Contains(reason, "missed") || !strings.Contains(s.Sources["allocs"], "not exact") {
		t.Errorf("reasons %q, source %q: want the miss named", reason, s.Sources["allocs"])
	}
	t.Logf("guard: %s", reason)
}
