package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/schema"
)

// TestWindowStacks: which window records syscall stacks follows its kind
// (and whether the run has an off-CPU window), never its label.
func TestWindowStacks(t *testing.T) {
	t.Parallel()
	withOff := &session{cfg: Config{WindowConfig: WindowConfig{OffCPU: true}}}
	without := &session{cfg: Config{WindowConfig: WindowConfig{OffCPU: false}}}
	for _, c := range []struct {
		s    *session
		spec windowSpec
		want bool
	}{
		{withOff, windowSpec{kind: offCPUKind}, true},
		{withOff, windowSpec{kind: attributionKind}, false},
		{without, windowSpec{kind: attributionKind}, true},
		{without, windowSpec{kind: timingKind}, false},
		{withOff, windowSpec{kind: wallclockKind}, false},
		{without, windowSpec{kind: attributionKind, endpoint: "GET /a"}, false},
	} {
		if got := c.s.stacks(c.spec); got != c.want {
			t.Errorf("%q (off-CPU window %v): stacks %v, want %v", c.spec.label(), c.s.offCPUWindow(), got, c.want)
		}
	}
	if got := (windowSpec{kind: attributionKind, endpoint: "GET /a"}).label(); got != "GET /a: attribution window" {
		t.Errorf("label %q", got)
	}
}

// TestReasonAfterVerdict: a reason added once the verdict is given fails
// the run instead of being lost.
func TestReasonAfterVerdict(t *testing.T) {
	t.Parallel()
	o := &runOutput{s: &schema.Summary{}}
	if err := o.addReason("before"); err != nil {
		t.Fatal(err)
	}
	o.judge()
	if o.s.Verdict != VerdictNotJudged || len(o.s.Reasons) != 1 {
		t.Errorf("verdict %q, reasons %v", o.s.Verdict, o.s.Reasons)
	}
	if err := o.addReason("after"); err == nil {
		t.Error("a reason after the verdict was taken (and lost)")
	}
}

// TestWindowLengths: the timing window takes -warmup and -duration; the
// windows that count take at most -exact-duration after a short warm-up.
func TestWindowLengths(t *testing.T) {
	t.Parallel()
	s := &session{cfg: Config{WindowConfig: WindowConfig{Warmup: time.Second, Duration: 5 * time.Second, ExactDuration: 2 * time.Second}}}
	for _, c := range []struct {
		spec       windowSpec
		warm, load time.Duration
	}{
		{windowSpec{kind: timingKind}, time.Second, 5 * time.Second},
		{windowSpec{kind: attributionKind}, laterWarmup, 2 * time.Second},
		{windowSpec{kind: offCPUKind}, laterWarmup, 2 * time.Second},
		{windowSpec{kind: wallclockKind}, laterWarmup, 2 * time.Second},
		{windowSpec{kind: timingKind, endpoint: "GET /a"}, time.Second, 5 * time.Second},
	} {
		if w, d := s.lengths(c.spec); w != c.warm || d != c.load {
			t.Errorf("%s: %v + %v, want %v + %v", c.spec.label(), w, d, c.warm, c.load)
		}
	}
	s.cfg.ExactDuration = 0 // the API's zero value: -duration throughout
	if _, d := s.lengths(windowSpec{kind: attributionKind}); d != 5*time.Second {
		t.Errorf("ExactDuration 0: %v", d)
	}
}

// TestSiteCallers: a top site names the user's frames that called it.
func TestSiteCallers(t *testing.T) {
	t.Parallel()
	for fn, want := range map[string]bool{"fmt.Sprintf": true, "net/http.(*conn).serve": true, "main.handler": false,
		"github.com/x/y.(*T).F": false, "runtime.mallocgc": true, "golang.org/x/net/http2.(*Framer).ReadFrame": false} {
		if got := wire.StandardLibrary(fn); got != want {
			t.Errorf("wire.StandardLibrary(%s) = %v", fn, got)
		}
	}
	fn := func(id uint64, name string) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: &profile.Function{ID: id, Name: name}}}}
	}
	stack := []*profile.Location{fn(1, "net/textproto.readMIMEHeader"), fn(2, "net/http.readRequest"), fn(3, "github.com/x/router.(*R).Serve"),
		fn(4, "net/http.serverHandler.ServeHTTP"), fn(5, "main.handler"), fn(6, "main.main")}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}},
		Sample: []*profile.Sample{{Location: stack, Value: []int64{5}}}}
	sites := topSites(p, 0)
	if len(sites) != 1 || strings.Join(sites[0].Callers, " ") != "github.com/x/router.(*R).Serve main.handler main.main" {
		t.Errorf("sites %+v", sites)
	}
}
