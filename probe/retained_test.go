package probe

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

func parkedHere(ch chan struct{}) { <-ch }

func startParked(ch chan struct{}) { go parkedHere(ch) }

// The goroutine dump of this process, as the agent writes it, parses to
// its goroutines: a parked one with the function it runs, its state and
// where it was created.
func TestParseGoroutines(t *testing.T) {
	parked := make(chan struct{})
	startParked(parked)
	defer close(parked)
	var b bytes.Buffer
	for i := 0; ; i++ { // until the goroutine is parked
		b.Reset()
		pprof.Lookup("goroutine").WriteTo(&b, 2)
		if strings.Contains(b.String(), "[chan receive]:\ngithub.com/perfspy/perfspy/probe.parkedHere") || i == 1000 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	gs, err := parseGoroutines(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, g := range gs {
		if goroutineFunc(g) != "github.com/perfspy/perfspy/probe.parkedHere" {
			continue
		}
		found = true
		if g.state != "chan receive" || g.id <= 0 || !strings.HasPrefix(g.createdBy.fn, "github.com/perfspy/perfspy/probe.startParked") || !strings.HasSuffix(g.createdBy.file, "retained_test.go") || g.createdBy.line == 0 {
			t.Errorf("parked goroutine read as %+v", g)
		}
	}
	if !found || len(gs) < 2 {
		t.Fatalf("%d goroutines, the parked one found: %v\n%s", len(gs), found, b.String())
	}
	p := goroutinesProfile(append(gs, gs...))
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range p.Sample {
		n += s.Value[0]
	}
	if n != int64(2*len(gs)) {
		t.Errorf("the profile counts %d goroutines, want %d", n, 2*len(gs))
	}
	groups := groupGoroutines(gs, int64(len(gs)))
	var sum int
	for _, g := range groups {
		sum += g.Count
	}
	if sum != len(gs) {
		t.Errorf("groups count %d goroutines, want %d", sum, len(gs))
	}
}

func FuzzParseGoroutines(f *testing.F) {
	f.Add([]byte("goroutine 1 [running]:\nmain.main()\n\t/src/main.go:10 +0x1d\n\ngoroutine 7 [chan receive, 2 minutes]:\nmain.stuck(...)\n\t/src/main.go:20\ncreated by main.handle in goroutine 6\n\t/src/main.go:30 +0x66\n"))
	f.Add([]byte("goroutine x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		gs, err := parseGoroutines(b)
		if err != nil {
			return
		}
		p := goroutinesProfile(gs)
		if err := p.CheckValid(); err != nil {
			t.Fatal(err)
		}
	})
}

// A new leak is a regression in probe ab from two rounds, whatever the
// timings: goroutines left and retained bytes are exact counts.
func TestABJudgesLeaks(t *testing.T) {
	for _, m := range abMetrics {
		var before, after []float64
		switch m.name {
		case "goroutines-left/req":
			before, after = []float64{0, 0}, []float64{0.1, 0.1}
		case "retained-B/req":
			before, after = []float64{0, 0}, []float64{256, 256}
		default:
			continue
		}
		if got := compareMetric(before, after, m.judge, m.higherWorse); got.Verdict != "regression" {
			t.Errorf("%s %v -> %v: %s (%s), want a regression", m.name, before, after, got.Verdict, got.Why)
		}
		if got := compareMetric(before, before, m.judge, m.higherWorse); got.Verdict != "no change" {
			t.Errorf("%s unchanged: %s", m.name, got.Verdict)
		}
	}
	s := &schema.Summary{PerRequest: schema.PerRequest{RetainedBytes: f64(256), GoroutinesLeft: f64(0.1)}}
	var b bytes.Buffer
	if err := report.RunBenchText(&b, s, "leak", nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "256 retained-B/req") || !strings.Contains(b.String(), "0.1 goroutines-left/req") || !strings.Contains(b.String(), "Unit goroutines-left/req assume=exact") {
		t.Errorf("bench.txt lacks the retained figures:\n%s", b.String())
	}
}

// TestParseLeakedGoroutines: Go 1.27's goroutine leak profile marks a
// goroutine blocked for good "(leaked)" in its header; the state is read
// without the mark, and groups count them.
func TestParseLeakedGoroutines(t *testing.T) {
	dump := "goroutine 7 [chan receive (leaked)]:\nmain.lost(0xc000012345)\n\t/src/main.go:50 +0x1d\ncreated by main.handleLost in goroutine 6\n\t/src/main.go:58 +0x2f\n\n" +
		"goroutine 8 [chan receive, 2 minutes]:\nmain.lost(0xc000012399)\n\t/src/main.go:50 +0x1d\ncreated by main.handleLost in goroutine 6\n\t/src/main.go:58 +0x2f\n"
	gs, err := parseGoroutines([]byte(dump))
	if err != nil || len(gs) != 2 {
		t.Fatalf("%d goroutines, %v", len(gs), err)
	}
	if !gs[0].leaked || gs[0].state != "chan receive" || gs[1].leaked || gs[1].state != "chan receive" {
		t.Errorf("goroutines %+v", gs)
	}
	g := groupGoroutines(gs, 20)
	if len(g) != 1 || g[0].Count != 2 || g[0].Leaked != 1 || g[0].Func != "main.lost" {
		t.Errorf("groups %+v", g)
	}
}
