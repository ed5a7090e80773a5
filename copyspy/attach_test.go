package copyspy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/testtarget"
	"github.com/perfspy/perfspy/load"

	"github.com/perfspy/perfspy/internal/capability"
)

// requireRoot skips, saying why, where uprobes cannot be attached.
func requireRoot(t *testing.T) {
	t.Helper()
	testtarget.RequireRoot(t, "copyspy attach (bpf syscall and uprobes)")
}

func directAndStack(s wire.CopySite) (string, []string) {
	var fns []string
	for _, pf := range s.Stack {
		for _, f := range pf.Frames {
			fns = append(fns, f.Func)
		}
	}
	if len(fns) == 0 {
		return "", nil
	}
	return fns[0], fns
}

// TestAttachGroundTruth attaches to an unmodified probetarget serving /copy
// under GOGC=1 with its CPU profiler on, and checks the known copies.
func TestAttachGroundTruth(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("starts a server; skipped with -short")
	}
	cmd, addr := testtarget.Start(t, []string{"GOGC=1"}, "-cpuprofile")
	s, err := Attach(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	drv, err := load.NewHTTP(load.HTTPOptions{URL: "http://" + addr + "/copy", Conns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	res, err := drv.Run(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Report()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n := uint64(res.OK)
	if n == 0 || res.Errors+res.Non2xx != 0 {
		t.Fatalf("load: %+v", res)
	}
	type tally struct{ calls, bytes uint64 }
	got := map[string]*tally{}
	for _, site := range rep.Sites {
		if site.Kind != "memmove" {
			continue
		}
		direct, stack := directAndStack(site)
		key := ""
		switch {
		case direct == "main.copyN":
			key = "copyN"
		case direct == "runtime.slicebytetostring" && contains(stack, "main.str100"):
			key = "str100"
		case (direct == "bytes.(*Buffer).Write" || direct == "main.bufWrites") && contains(stack, "main.bufWrites"):
			key = "bufWrites"
		case contains(stack, "main.bufWrites"):
			t.Logf("other copy under main.bufWrites: %v %v %v", stack, site.Calls, site.Bytes)
			continue
		default:
			continue
		}
		if got[key] == nil {
			got[key] = &tally{}
		}
		for b := range Buckets {
			got[key].calls += site.Calls[b]
			got[key].bytes += site.Bytes[b]
		}
	}
	for key, want := range map[string]tally{"copyN": {1, 3000}, "str100": {1, 100}, "bufWrites": {2, 400}} {
		g := got[key]
		if g == nil {
			t.Errorf("%s: no copies seen", key)
			continue
		}
		t.Logf("%s: %d calls, %d bytes for %d requests", key, g.calls, g.bytes, n)
		if g.calls != want.calls*n || g.bytes != want.bytes*n {
			t.Errorf("%s: %d calls, %d bytes for %d requests; want exactly %d and %d per request", key, g.calls, g.bytes, n, want.calls, want.bytes)
		}
	}
	// The same format as the overlay's profile.
	if err := Profile(rep).CheckValid(); err != nil {
		t.Error(err)
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func TestAttachErrors(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		if _, err := Attach(os.Getpid()); !errors.Is(err, capability.ErrNotSupported) || !strings.Contains(err.Error(), "amd64 only") {
			t.Errorf("on %s: %v", runtime.GOARCH, err)
		}
		return
	}
	if os.Geteuid() != 0 {
		if _, err := Attach(os.Getpid()); !errors.Is(err, capability.ErrNotSupported) {
			t.Errorf("not root: %v", err)
		}
		return
	}
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	if _, err := Attach(sleep.Process.Pid); err == nil || !strings.Contains(err.Error(), "not a Go program") {
		t.Errorf("attaching to sleep: %v", err)
	}
	if _, err := Attach(1 << 30); err == nil || !strings.Contains(err.Error(), "process") {
		t.Errorf("attaching to a missing pid: %v", err)
	}
}

func TestCommandUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"attach"}, {"attach", "-pid", "1"}, {"attach", "-pid", "1", "-o", "x", "-duration", "0"}, {"attach", "-bogus"}, {"detach"}} {
		var o, e bytes.Buffer
		if code := Command(context.Background(), args, &o, &e); code != 2 || e.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, e.String())
		}
	}
	var o, e bytes.Buffer
	if code := Command(context.Background(), []string{"-h"}, &o, &e); code != 0 || !strings.Contains(o.String(), "microseconds") {
		t.Errorf("-h: exit %d, help must say every hit costs microseconds: %q", code, o.String())
	}
}
