// The targets' switches change per-request costs by the amounts that
// targets/README.md states; these tests drive each switch through probe
// and hold it to the table.
package targets_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/diff"
	"github.com/perfspy/perfspy/internal/gorelease"
	"github.com/perfspy/perfspy/internal/testtarget"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

func run(t *testing.T, target string, cfg probe.Config) (*schema.Summary, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and measures a target; skipped with -short")
	}
	cfg.Target = target
	cfg.Out = filepath.Join(t.TempDir(), "out")
	if cfg.Warmup == 0 {
		cfg.Warmup = 300 * time.Millisecond
	}
	if cfg.Duration == 0 {
		cfg.Duration = time.Second
	}
	res, err := probe.Run(context.Background(), cfg, nil)
	if err != nil && !errors.Is(err, probe.ErrNotJudged) {
		t.Fatal(err)
	}
	return res.Summary, cfg.Out
}

func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func leaf(s *profile.Sample) string {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
		return ""
	}
	return s.Location[0].Line[0].Function.Name
}

func requireRoot(t *testing.T) {
	t.Helper()
	testtarget.RequireRoot(t, "counting syscalls by name with eBPF")
}

// -parse=copy adds exactly the body size in copied bytes per request, in
// main.decodeCopy; -parse=inplace copies nothing there.
func TestRPCEchoParse(t *testing.T) {
	for _, mode := range []string{"copy", "inplace"} {
		s, out := run(t, "./rpcecho", probe.Config{Spec: load.Spec{BodySize: 1024}, TargetConfig: probe.TargetConfig{Args: []string{"-parse=" + mode}}})
		if s.Window.Errors != 0 || s.Window.Requests == 0 {
			t.Fatalf("%s: window %+v", mode, s.Window)
		}
		p := readProfile(t, filepath.Join(out, "copies.pb.gz"))
		// Only the copies decodeCopy makes itself (via is memmove's caller):
		// under it, the runtime may copy too, e.g. the GC's pacer when mark
		// termination runs on this goroutine in its allocation's assist
		// (24 bytes via runtime.(*gcControllerState).endCycle).
		var calls, bytes int64
		for _, smp := range p.Sample {
			if leaf(smp) == "main.decodeCopy" && smp.Label["kind"][0] == "memmove" && smp.Label["via"][0] == "main.decodeCopy" {
				calls += smp.Value[0]
				bytes += smp.Value[1]
			}
		}
		n := s.AttributionWindow.Requests
		t.Logf("-parse=%s: main.decodeCopy %d copies, %d bytes for %d requests", mode, calls, bytes, n)
		want := int64(0)
		if mode == "copy" {
			want = 1
		}
		if calls != want*n || bytes != want*1024*n {
			t.Errorf("-parse=%s: %d copies and %d bytes in main.decodeCopy for %d requests; want %d and %d per request", mode, calls, bytes, n, want, want*1024)
		}
	}
}

// -writes=2 adds exactly one write per request: writev becomes two writes.
func TestRPCEchoWrites(t *testing.T) {
	requireRoot(t)
	writes := map[string]float64{}
	for _, w := range []string{"1", "2"} {
		s, _ := run(t, "./rpcecho", probe.Config{TargetConfig: probe.TargetConfig{Args: []string{"-writes=" + w}}, CountConfig: probe.CountConfig{Copies: "off"}})
		by := s.PerRequest.SyscallsByName
		writes[w] = by["write"] + by["writev"]
		t.Logf("-writes=%s: write %.4f writev %.4f per request", w, by["write"], by["writev"])
	}
	if d := writes["2"] - writes["1"]; math.Abs(d-1) > 0.001 {
		t.Errorf("-writes=2 adds %.4f write calls per request, want 1", d)
	}
}

// -precompressed=1 removes the compression allocations per request.
func TestStaticPrecompressed(t *testing.T) {
	compress := map[string]float64{}
	total := map[string]float64{}
	for _, pre := range []string{"0", "1"} {
		s, out := run(t, "./static", probe.Config{Spec: load.Spec{Path: "/data.json", Headers: map[string]string{"Accept-Encoding": "gzip"}}, TargetConfig: probe.TargetConfig{Args: []string{"-precompressed=" + pre}}, CountConfig: probe.CountConfig{Copies: "off"}})
		p := readProfile(t, filepath.Join(out, "allocs.pb.gz"))
		var b int64
		for _, smp := range p.Sample {
			for _, loc := range smp.Location {
				if fn := loc.Line[len(loc.Line)-1].Function.Name; strings.HasPrefix(fn, "compress/") || fn == "main.gzipOnTheFly" {
					b += smp.Value[1]
					break
				}
			}
		}
		compress[pre] = float64(b) / float64(s.AttributionWindow.Requests)
		total[pre] = *s.PerRequest.AllocBytes
		t.Logf("-precompressed=%s: %.0f B/req allocated, %.0f of them for compression", pre, total[pre], compress[pre])
	}
	if compress["1"] != 0 || compress["0"] < 1000 {
		t.Errorf("compression allocations per request: %.0f B on the fly, %.0f B precompressed; want many, then 0", compress["0"], compress["1"])
	}
}

// -encoder=append lowers allocations per request.
func TestHTTPJSONEncoder(t *testing.T) {
	allocs := map[string]float64{}
	for _, enc := range []string{"std", "append"} {
		s, _ := run(t, "./httpjson", probe.Config{Spec: load.Spec{Path: "/json"}, TargetConfig: probe.TargetConfig{Args: []string{"-encoder=" + enc}}, CountConfig: probe.CountConfig{Copies: "off"}})
		allocs[enc] = *s.PerRequest.Allocs
		t.Logf("-encoder=%s: %.2f allocs/req, %.0f B/req", enc, allocs[enc], *s.PerRequest.AllocBytes)
	}
	if allocs["append"] >= allocs["std"] {
		t.Errorf("-encoder=append: %.2f allocs/req, std %.2f; want fewer", allocs["append"], allocs["std"])
	}
}

// -accesslog adds exactly one write per request (the log line) and the
// allocations of fmt.
func TestHTTPJSONAccessLog(t *testing.T) {
	requireRoot(t)
	writes := map[bool]float64{}
	for _, on := range []bool{false, true} {
		args := []string{}
		if on {
			args = append(args, "-accesslog")
		}
		s, _ := run(t, "./httpjson", probe.Config{Spec: load.Spec{Path: "/text"}, TargetConfig: probe.TargetConfig{Args: args}, CountConfig: probe.CountConfig{Copies: "off"}})
		writes[on] = s.PerRequest.SyscallsByName["write"]
		t.Logf("-accesslog=%v: write %.4f per request", on, writes[on])
	}
	if d := writes[true] - writes[false]; math.Abs(d-1) > 0.001 {
		t.Errorf("-accesslog adds %.4f writes per request, want 1", d)
	}
}

// bulk measures targets/quicecho with 256 KiB transfers unless cfg says
// otherwise.
func bulk(t *testing.T, cfg probe.Config) *schema.Summary {
	t.Helper()
	requireRoot(t)
	cfg.Copies = "off"
	s, out := run(t, "./quicecho", cfg)
	if b, err := os.ReadFile(filepath.Join(out, "bench.txt")); err != nil || !strings.Contains(string(b), " datagrams/req") {
		t.Errorf("bench.txt lacks datagrams/req: %s %v", b, err)
	}
	if s.Window.Errors != 0 || s.Window.Requests < 20 || s.Transfer == nil || s.DatagramsPerRequest == nil || s.PerDatagram == nil {
		t.Fatalf("quicecho %v: window %+v, transfer %+v", cfg.Args, s.Window, s.Transfer)
	}
	return s
}

func sends(s *schema.Summary) float64 {
	by := s.PerRequest.SyscallsByName
	return by["sendmsg"] + by["sendmmsg"] + by["sendto"] + by["write"]
}

// A push transfer of 1 MiB (probe run's default for quicecho): every
// datagram the driver counts is one the kernel delivered (the machine's
// InDatagrams, every socket's, agree), at least the transfer's bytes over
// the largest datagram go to the server, and the per-datagram figures are
// the per-transfer ones over the datagrams. An echo brings as many back.
// -floor measures targets/udpfloor with the same transfers.
func TestQUICEchoTransfers(t *testing.T) {
	push := bulk(t, probe.Config{WindowConfig: probe.WindowConfig{Floor: true}})
	tr := push.Transfer
	dpr := *push.DatagramsPerRequest
	t.Logf("push: %.2f datagrams per transfer of %d B (kernel InDatagrams %.2f), largest %d B, %.4f syscalls and %.3f µs per datagram; floor ratios %v",
		dpr, tr.Bytes, tr.KernelUDP["InDatagrams"], tr.LargestDatagram, push.PerDatagram.Syscalls, push.PerDatagram.CPUUS, push.FloorRatio)
	if tr.Bytes != 1<<20 {
		t.Errorf("default transfer %d B, want 1 MiB", tr.Bytes)
	}
	if in := tr.KernelUDP["InDatagrams"]; math.Abs(in-dpr) > 0.005*dpr {
		t.Errorf("driver counts %.2f datagrams per transfer, the kernel delivered %.2f", dpr, in)
	}
	if minData := float64(tr.Bytes) / float64(tr.LargestDatagram); dpr < minData || tr.LargestDatagram > 1500 {
		t.Errorf("%.2f datagrams per transfer of %d B, largest %d B: fewer than the data needs (%.1f)", dpr, tr.Bytes, tr.LargestDatagram, minData)
	}
	if got := *push.PerRequest.Syscalls / dpr; math.Abs(got-push.PerDatagram.Syscalls) > 0.0002 {
		t.Errorf("per-datagram syscalls %.4f, per transfer over datagrams %.4f", push.PerDatagram.Syscalls, got)
	}
	if push.Floor == nil || push.Floor.Target != "targets/udpfloor" || push.FloorRatio["datagrams"] <= 0 || push.FloorRatio["cpu_us"] <= 0 {
		t.Errorf("floor %+v, ratios %v", push.Floor, push.FloorRatio)
	}

	echo := bulk(t, probe.Config{Spec: load.Spec{Size: 256 << 10}, TargetConfig: probe.TargetConfig{Args: []string{"-mode=echo"}}})
	t.Logf("echo: %.2f datagrams per transfer of %d B", *echo.DatagramsPerRequest, echo.Transfer.Bytes)
	if e, p := *echo.DatagramsPerRequest/float64(echo.Transfer.Bytes), dpr/float64(tr.Bytes); e < 1.8*p {
		t.Errorf("echo: %.5f datagrams per transfer byte, push %.5f: want about twice", e, p)
	}
}

// Without UDP segmentation offload (quic-go's QUIC_GO_DISABLE_GSO) the
// server sends each datagram with a syscall of its own: an echo's
// send-class syscalls per transfer rise several times.
func TestQUICEchoGSO(t *testing.T) {
	on := bulk(t, probe.Config{Spec: load.Spec{Size: 256 << 10}, TargetConfig: probe.TargetConfig{Args: []string{"-mode=echo"}}})
	off := bulk(t, probe.Config{Spec: load.Spec{Size: 256 << 10}, TargetConfig: probe.TargetConfig{Args: []string{"-mode=echo"}, Env: []string{"QUIC_GO_DISABLE_GSO=1"}}})
	t.Logf("send syscalls per transfer: GSO %.2f, no GSO %.2f; datagrams %.1f and %.1f", sends(on), sends(off), *on.DatagramsPerRequest, *off.DatagramsPerRequest)
	if sends(off) < 3*sends(on) {
		t.Errorf("without GSO %.2f send syscalls per transfer, with %.2f: want several times more", sends(off), sends(on))
	}
	// Without GSO, about one send per datagram the server sends (half an
	// echo's datagrams).
	if half := *off.DatagramsPerRequest / 2; sends(off) < 0.8*half {
		t.Errorf("without GSO %.2f sends for about %.0f datagrams sent", sends(off), half)
	}
}

// A small socket receive buffer (-sockbuf) makes the kernel drop
// datagrams (the machine's RcvbufErrors), and the retransmissions raise
// datagrams per transfer.
func TestQUICEchoSockbuf(t *testing.T) {
	big := bulk(t, probe.Config{})
	// With 16 KiB a transfer waits for retransmissions (about 75 ms on
	// this machine): a longer window keeps twenty of them in it.
	small := bulk(t, probe.Config{TargetConfig: probe.TargetConfig{Args: []string{"-sockbuf=16384"}}, WindowConfig: probe.WindowConfig{Duration: 3 * time.Second}})
	t.Logf("kernel drops per transfer: quic-go's buffer %.2f, 16 KiB %.2f; datagrams %.2f and %.2f",
		big.Transfer.KernelUDP["RcvbufErrors"], small.Transfer.KernelUDP["RcvbufErrors"], *big.DatagramsPerRequest, *small.DatagramsPerRequest)
	if big.Transfer.KernelUDP["RcvbufErrors"] > 0.5 || small.Transfer.KernelUDP["RcvbufErrors"] < 1 {
		t.Errorf("drops per transfer: %.2f with quic-go's buffer, %.2f with 16 KiB; want none, then some",
			big.Transfer.KernelUDP["RcvbufErrors"], small.Transfer.KernelUDP["RcvbufErrors"])
	}
	if *small.DatagramsPerRequest <= *big.DatagramsPerRequest {
		t.Errorf("datagrams per transfer: %.2f with 16 KiB, %.2f with quic-go's buffer; want more", *small.DatagramsPerRequest, *big.DatagramsPerRequest)
	}
}

// What a request leaves behind: /leak keeps exactly one 256-byte object
// per request at main.keep and leaves 0.1 goroutines per request
// running main.stuck, started by main.handleLeak; /clean allocates the
// same garbage and leaves nothing. Garbage never counts as retained.
func TestLeakRetained(t *testing.T) {
	outs := map[string]string{}
	for _, path := range []string{"/leak", "/clean"} {
		s, out := run(t, "./leak", probe.Config{Spec: load.Spec{Path: path}, WindowConfig: probe.WindowConfig{Retained: true, OffCPU: false}})
		if s.RetainedWindow == nil || s.PerRequest.RetainedObjects == nil || s.PerRequest.GoroutinesLeft == nil {
			t.Fatalf("%s: no retained window in the summary", path)
		}
		n := s.RetainedWindow.Requests
		p := readProfile(t, filepath.Join(out, "retained.pb.gz"))
		var objs, bytes int64
		for _, smp := range p.Sample {
			if leaf(smp) == "main.keep" || leaf(smp) == "main.garbage" {
				objs += smp.Value[0]
				bytes += smp.Value[1]
			}
		}
		g := readProfile(t, filepath.Join(out, "goroutines_left.pb.gz"))
		var stuck int64
		for _, smp := range g.Sample {
			fn := smp.Location[len(smp.Location)-1].Line[0].Function.Name
			if fn == "main.stuck" && strings.HasPrefix(smp.Label["created_by"][0], "main.handleLeak") {
				stuck += smp.Value[0]
			}
		}
		t.Logf("%s: %d requests; at the site %d objects, %d B; %d goroutines in main.stuck; per request %v objects, %v B, %v goroutines",
			path, n, objs, bytes, stuck, *s.PerRequest.RetainedObjects, *s.PerRequest.RetainedBytes, *s.PerRequest.GoroutinesLeft)
		want := int64(0)
		if path == "/leak" {
			want = 1
		}
		if objs != want*n || bytes != 256*want*n {
			t.Errorf("%s: %d objects and %d B retained at the site for %d requests; want %d and %d per request", path, objs, bytes, n, want, 256*want)
		}
		// Every 10th request of the whole run: the window's own, within one.
		if wantG := want * n / 10; stuck < wantG-1 || stuck > wantG+1 {
			t.Errorf("%s: %d goroutines left in main.stuck for %d requests; want %d", path, stuck, n, wantG)
		}
		if path == "/clean" && (*s.PerRequest.GoroutinesLeft != 0 || *s.PerRequest.RetainedObjects != 0) {
			t.Errorf("/clean: %v objects and %v goroutines left per request; want 0", *s.PerRequest.RetainedObjects, *s.PerRequest.GoroutinesLeft)
		}
		if path == "/clean" {
			// The garbage is real: one 256-byte allocation a request.
			var garbage int64
			for _, smp := range readProfile(t, filepath.Join(out, "allocs.pb.gz")).Sample {
				if leaf(smp) == "main.garbage" {
					garbage += smp.Value[0]
				}
			}
			if garbage != s.AttributionWindow.Requests {
				t.Errorf("/clean: %d allocations in main.garbage for %d requests; want one each", garbage, s.AttributionWindow.Requests)
			}
		}
		outs[path] = filepath.Join(out, "retained.pb.gz")
	}
	// allocdiff reads retained.pb.gz as any profile: main.keep, +1
	// object per request from /clean to /leak.
	b, err := diff.Load([]string{outs["/clean"]}, diff.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := diff.Load([]string{outs["/leak"]}, diff.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := diff.Compare(b, a, diff.Options{Sample: "inuse_objects", Folds: profkey.DefaultFolds})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, row := range r.Rows {
		if row.Key == "main.keep" {
			found = true
			if row.FlatBeforePR != 0 || row.FlatAfterPR != 1 {
				t.Errorf("allocdiff: main.keep %v -> %v objects per request, want 0 -> 1", row.FlatBeforePR, row.FlatAfterPR)
			}
		}
	}
	if !found {
		t.Error("allocdiff: no row for main.keep")
	}
}

// TestGoroutineLeakProfile: on a runtime with the goroutine leak profile
// (Go 1.27 on), the retained window's goroutines left are split: /lost's
// goroutines (each waiting on a channel only it holds) are all leaked for
// good, /leak's (waiting on a global channel) none; on Go 1.26 the split
// is absent, not 0.
func TestGoroutineLeakProfile(t *testing.T) {
	for _, path := range []string{"/lost", "/leak"} {
		s, _ := run(t, "./leak", probe.Config{Spec: load.Spec{Path: path}, WindowConfig: probe.WindowConfig{Retained: true, OffCPU: false}})
		if s.RetainedWindow == nil || s.PerRequest.GoroutinesLeft == nil {
			t.Fatalf("%s: no retained window in the summary", path)
		}
		n := s.RetainedWindow.Requests
		var left, leaked int
		for _, g := range s.GoroutinesLeft {
			if g.Func == "main.lost" || g.Func == "main.stuck" {
				left += g.Count
				leaked += g.Leaked
			}
		}
		t.Logf("%s (%s): %d requests, %d goroutines left, %d leaked; per request %v left", path, s.Go, n, left, leaked, *s.PerRequest.GoroutinesLeft)
		if want := n / 10; int64(left) < want-1 || int64(left) > want+1 {
			t.Errorf("%s: %d goroutines left for %d requests; want %d", path, left, n, want)
		}
		if gorelease.Release(s.Go) == "go1.26" {
			if s.PerRequest.GoroutinesLeaked != nil {
				t.Errorf("%s on %s: goroutines_leaked %v; want absent", path, s.Go, *s.PerRequest.GoroutinesLeaked)
			}
			continue
		}
		want := 0
		if path == "/lost" {
			want = left
		}
		if leaked != want || s.PerRequest.GoroutinesLeaked == nil {
			t.Errorf("%s on %s: %d of %d goroutines leaked; want %d", path, s.Go, leaked, left, want)
		}
	}
}
