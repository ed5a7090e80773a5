package probe

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/profkey"
)

// TestCheckAddr: -addr takes HOST:PORT, :PORT, PORT and flag:NAME; a bad
// one is refused naming the flag; flag:NAME gives the target's flag a free
// loopback port, before its own arguments, and loads that port.
func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"", "127.0.0.1:8080", ":8080", "8080", "[::1]:80", "flag:admin", "flag:--metrics-addr"} {
		if err := checkAddr(ok); err != nil {
			t.Errorf("-addr %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"x", "0", "70000", "flag:", "flag:--", "flag:a b", "host:port"} {
		if err := checkAddr(bad); err == nil || !strings.Contains(err.Error(), "-addr") {
			t.Errorf("-addr %q: %v, want an error naming -addr", bad, err)
		}
	}
	if addr, args, _ := listenAddr("8080", []string{"-v"}); addr != "127.0.0.1:8080" || !slices.Equal(args, []string{"-v"}) {
		t.Errorf("-addr 8080: %s %q", addr, args)
	}
	addr, args, err := listenAddr("flag:admin", []string{"-v"})
	if err != nil || len(args) != 2 || args[0] != "-admin="+addr || args[1] != "-v" || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("-addr flag:admin: %s %q %v", addr, args, err)
	}
	if _, args, _ := listenAddr("flag:--admin", nil); !strings.HasPrefix(args[0], "--admin=127.0.0.1:") {
		t.Errorf("-addr flag:--admin: %q, want the dashes as given", args)
	}
	if a := addrAdvice([]string{"addr=127.0.0.1:0", "upstream=127.0.0.1:0"}); !strings.Contains(a, "-addr flag:addr (its -addr, now 127.0.0.1:0)") || !strings.Contains(a, "-addr flag:upstream") {
		t.Errorf("advice: %s", a)
	}
	if a := addrAdvice([]string{"x\x1b]0;owned\x07=127.0.0.1:0"}); strings.ContainsAny(a, "\x1b\x07") {
		t.Errorf("advice carries the target's escape sequence: %q", a)
	}
}

// TestTwoListeners: a server with an upstream in the same process listens
// twice on ports it chooses. The refusal names the target's own flags
// that will hold on the next run; -addr flag:addr runs it. The upstream's
// requests, which the process sends itself, are shown on "(self) GET /up"
// with their work (main.upWork's 3 objects each), apart from the load's:
// the request marks close on the driver's successes, never "a path
// missed", and GET /proxy's rows hold none of the upstream's work.
func TestTwoListeners(t *testing.T) {
	skipShort(t)
	code, stdout, stderr := probeRun(t, "-path", "/proxy", "-args", "-upstream 127.0.0.1:0", "./testdata/probetarget")
	if code != ExitFailed || !strings.Contains(stderr, "listens on 2 addresses") || !strings.Contains(stderr, "-addr flag:addr") || !strings.Contains(stderr, "-addr flag:upstream") {
		t.Fatalf("two listeners, no -addr: exit %d, want %d naming -addr flag:addr and flag:upstream\n%s%s", code, ExitFailed, stdout, stderr)
	}
	m := runTarget(t, "/proxy", "-addr", "flag:addr", "-args", "-upstream 127.0.0.1:0", "-offcpu=false", "-retained=false")
	s, _ := summaryAndCopies(t, m)
	c := s.Closure.Requests
	if c == nil || !c.Closed || c.Self != c.Marked || c.Marked == 0 {
		t.Fatalf("requests closure %+v: want closed, one self request per marked one", c)
	}
	for _, r := range s.Reasons {
		if strings.Contains(r, "miss a path") {
			t.Errorf("reason %q: the process's own requests are no miss", r)
		}
	}
	self := profkey.SelfPrefix + "GET /up"
	reqs := map[string]uint64{}
	for _, r := range s.Routes {
		reqs[r.Route] = r.Requests
	}
	if reqs[self] != uint64(c.Self) || reqs["GET /proxy"] != uint64(c.Marked) {
		t.Errorf("routes %v: want %s with the %d self requests and GET /proxy with the %d marked", reqs, self, c.Self, c.Marked)
	}
	if n := routeCount(m.allocs, self, "main.upWork", 0); n != 3*int64(reqs[self]) {
		t.Errorf("main.upWork under %s: %d objects, want 3 a request (%d)", self, n, 3*reqs[self])
	}
	if n := routeCount(m.allocs, "GET /proxy", "main.upWork", 0); n != 0 {
		t.Errorf("main.upWork under GET /proxy: %d objects, want 0 (the upstream's own route has them)", n)
	}
	if !strings.Contains(readFile(t, filepath.Join(m.dir, "report.md")), self) {
		t.Errorf("report.md does not show %s", self)
	}
	// The self route's profile per request, read by go tool pprof as
	// it is: main.upWork's 3 objects a request.
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{"pprof", "-route", self, m.dir}, &o, &e); code != ExitOK {
		t.Fatalf("probe pprof: exit %d\n%s%s", code, o.String(), e.String())
	}
	file := strings.Fields(o.String())[0]
	top, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=alloc_objects", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, top)
	}
	if !regexp.MustCompile(`(?m)^\s+3\s.*main\.upWork$`).Match(top) {
		t.Errorf("go tool pprof -top of %s: no main.upWork at 3 a request\n%s", file, top)
	}
}

// TestSentencesAgreeWithDocs: what a run prints of the request boundaries
// says what docs/routes.md says: gRPC calls are marked by route, and have
// no off-CPU region; the process's own requests are told apart.
func TestSentencesAgreeWithDocs(t *testing.T) {
	// The docs' words as a reader reads them: a line break and the
	// next line's indentation are one space.
	routes := strings.Join(strings.Fields(readFile(t, "../docs/routes.md")), " ")
	for _, claim := range []struct{ printed, doc string }{
		{"gRPC calls served by grpc-go are marked by route", "is marked through grpc-go's own goroutine labels"},
		{"so they have no off-CPU region", "a call has no off-CPU region"},
	} {
		if !strings.Contains(NoRequestRegions, claim.printed) {
			t.Errorf("the off-CPU source's reason no longer says %q", claim.printed)
		}
		if !strings.Contains(routes, claim.doc) {
			t.Errorf("docs/routes.md no longer says %q, which the off-CPU source's reason prints", claim.doc)
		}
	}
	if !strings.Contains(routes, "## The process's requests to itself") || !strings.Contains(routes, strings.Join(strings.Fields(profkey.SelfPrefix+"GET /up"), " ")) {
		t.Error("docs/routes.md does not describe the self routes a run prints")
	}
}

// TestPprofInputs: probe pprof refuses what is not a regular file before
// opening it (a FIFO's open would wait for a writer, deaf to Ctrl-C), a
// file that is not a profile, the background and an existing -o, naming
// the file or the flag; it writes nothing then.
func TestPprofInputs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.pb.gz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	junk := filepath.Join(dir, "junk.pb.gz")
	os.WriteFile(junk, []byte("not a profile"), 0o600)
	exists := filepath.Join(dir, "exists.pb.gz")
	os.WriteFile(exists, nil, 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{fifo}, "not a regular file"},
		{[]string{junk}, "parsing " + junk},
		{[]string{"-route", profkey.Background, junk}, "per second"},
		{[]string{"-per", "0", junk}, "-per 0"},
	} {
		var o, e bytes.Buffer
		done := make(chan int, 1)
		go func() { done <- Main(context.Background(), append([]string{"pprof"}, tc.args...), &o, &e) }()
		select {
		case code := <-done:
			if code == ExitOK || !strings.Contains(e.String(), tc.want) {
				t.Errorf("probe pprof %q: exit %d, %q; want a failure saying %q", tc.args, code, e.String(), tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("probe pprof %q: still running after 10 s", tc.args)
		}
	}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}}, Sample: []*profile.Sample{{Value: []int64{20}}},
		Comments: []string{profkey.RequestsComment + "10"}}
	good := filepath.Join(dir, "good.pb.gz")
	f, _ := os.Create(good)
	p.Write(f)
	f.Close()
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{"pprof", "-o", exists, good}, &o, &e); code == ExitOK || !strings.Contains(e.String(), "already exists") {
		t.Errorf("-o over a file: exit %d, %q", code, e.String())
	}
	if b, _ := os.ReadFile(exists); len(b) != 0 {
		t.Error("the existing -o file was written")
	}
}
