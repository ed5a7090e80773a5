package profstore

import (
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func TestParseSelection(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, err := ParseSelection(`pyroscope://127.0.0.1:4040/{service_name="httpjson",commit="abc"}?from=-7d&type=alloc_objects`, now)
	if err != nil {
		t.Fatal(err)
	}
	if s.Base != "http://127.0.0.1:4040" || s.Selector != `{service_name="httpjson",commit="abc"}` || s.Type != "alloc_objects" ||
		!s.From.Equal(now.Add(-7*24*time.Hour)) || !s.Until.Equal(now) {
		t.Errorf("%+v", s)
	}
	s, err = ParseSelection(`pyroscope://h:1/{a="b"}?from=1700000000&until=-2h`, now)
	if err != nil || s.From.Unix() != 1700000000 || !s.Until.Equal(now.Add(-2*time.Hour)) {
		t.Errorf("%+v %v", s, err)
	}
	// The store over TLS.
	s, err = ParseSelection(`pyroscope+https://store.example:443/{a="b"}?type=x`, now)
	if err != nil || s.Base != "https://store.example:443" {
		t.Errorf("pyroscope+https: %+v %v", s, err)
	}
	// A regular expression's '?' stays in the selector.
	s, err = ParseSelection(`pyroscope://h:1/{endpoint=~"BenchmarkX(-[0-9]+)?"}?type=alloc_space`, now)
	if err != nil || s.Selector != `{endpoint=~"BenchmarkX(-[0-9]+)?"}` || s.Type != "alloc_space" {
		t.Errorf("%+v %v", s, err)
	}
	for _, bad := range []string{`pyroscope://h:1/{a="b"}type=x`, "http://h/{a}", `pyroscope://h:1/a="b"?type=x`, `pyroscope:///{a="b"}`, `pyroscope://h:1/{a="b"}?from=7d`, `pyroscope://h:1/{a="b"}?from=-7y`} {
		if _, err := ParseSelection(bad, now); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLabelName(t *testing.T) {
	for in, want := range map[string]string{"commit": "commit", "git-ref": "git_ref", "1x": "_1x", "": "_", "a.b/c": "a_b_c"} {
		if got := LabelName(in); got != want {
			t.Errorf("LabelName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServiceName(t *testing.T) {
	for in, want := range map[string]string{"httpjson": "httpjson", "go-httpbin@v2.26.0": "go-httpbin_v2.26.0", "a b": "a_b", "": "_"} {
		if got := ServiceName(in); got != want {
			t.Errorf("ServiceName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithRequests(t *testing.T) {
	fn := &profile.Function{ID: 1, Name: "main.f"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc-space", Unit: "bytes"}}, Function: []*profile.Function{fn}, Location: []*profile.Location{loc},
		Sample: []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{640}}}}
	q := WithRequests(p, 7)
	if err := q.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if len(q.SampleType) != 2 || q.SampleType[0].Type != "alloc_space" || q.SampleType[1].Type != RequestsType || len(q.Sample) != 2 ||
		q.Sample[0].Value[1] != 0 || q.Sample[1].Value[0] != 0 || q.Sample[1].Value[1] != 7 || q.Sample[1].Location[0].Line[0].Function.Name != RequestsFrame {
		t.Errorf("%v", q)
	}
	if len(p.SampleType) != 1 || len(p.Sample[0].Value) != 1 {
		t.Error("the input was changed")
	}
	if got := dropRequestsFrame(q.Sample); len(got) != 1 || got[0].Value[0] != 640 {
		t.Errorf("dropRequestsFrame kept %v", got)
	}
	// A sample without a stack (the store would drop it) goes under NoStackFrame.
	p.Sample = append(p.Sample, &profile.Sample{Value: []int64{9}})
	q = WithRequests(p, 7)
	if err := q.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if s := q.Sample[1]; len(s.Location) != 1 || s.Location[0].Line[0].Function.Name != NoStackFrame || s.Value[0] != 9 {
		t.Errorf("a sample without a stack pushed as %v", s)
	}
	if len(p.Sample[1].Location) != 0 {
		t.Error("the input was changed")
	}
}

// FuzzParseSelection: any address gives a selection or an error, never
// a panic.
func FuzzParseSelection(f *testing.F) {
	f.Add(`pyroscope://127.0.0.1:4040/{service_name="x"}?from=-7d&type=cpu`)
	f.Add(`pyroscope://h/{}?until=-`)
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelection(s, time.Unix(1_800_000_000, 0))
		if err == nil && (!strings.HasPrefix(sel.Base, "http://") || !strings.HasPrefix(sel.Selector, "{")) {
			t.Errorf("accepted %q as %+v", s, sel)
		}
	})
}

func TestTypeIDs(t *testing.T) {
	types := []string{"block:contentions:count:contentions:count", "block:delay:nanoseconds:contentions:count", "block:requests:count:contentions:count",
		"mutex:delay:nanoseconds:contentions:count", "mutex:requests:count:contentions:count", "memory:alloc_objects:count:space:bytes"}
	id, req, err := typeIDs(types, "alloc_objects")
	if err != nil || id != "memory:alloc_objects:count:space:bytes" || req != "memory:requests:count:space:bytes" {
		t.Errorf("alloc_objects: %q %q %v", id, req, err)
	}
	id, req, err = typeIDs(types, "mutex:delay")
	if err != nil || id != "mutex:delay:nanoseconds:contentions:count" || req != "mutex:requests:count:contentions:count" {
		t.Errorf("mutex:delay: %q %q %v", id, req, err)
	}
	if _, _, err := typeIDs(types, "delay"); err == nil || !strings.Contains(err.Error(), "type=block:delay or type=mutex:delay") {
		t.Errorf("delay in two kinds: %v", err)
	}
	if _, _, err := typeIDs(types, "copied_bytes"); err == nil || !strings.Contains(err.Error(), "block:contentions, block:delay, memory:alloc_objects, mutex:delay") {
		t.Errorf("an unknown type: %v", err)
	}
}

// TestUngroup: a live bill group's profile reads back with the run's
// sample types, so that the two groups compare; other profiles keep
// theirs.
func TestUngroup(t *testing.T) {
	mk := func(types ...string) *profile.Profile {
		p := &profile.Profile{DefaultSampleType: types[0]}
		for _, ty := range types {
			p.SampleType = append(p.SampleType, &profile.ValueType{Type: ty, Unit: "count"})
		}
		return p
	}
	p := mk("tail_alloc_objects", "tail_requested_space", "requests")
	ungroup(p, "perfspy_tail_allocs:tail_alloc_objects:count:space:bytes")
	if p.SampleType[0].Type != "alloc_objects" || p.SampleType[1].Type != "requested_space" || p.SampleType[2].Type != "requests" || p.DefaultSampleType != "alloc_objects" {
		t.Errorf("tail: %v %s", p.SampleType, p.DefaultSampleType)
	}
	p = mk("median_copied_bytes")
	ungroup(p, "perfspy_median_copies:median_copied_bytes:bytes:copy:count")
	if p.SampleType[0].Type != "copied_bytes" {
		t.Errorf("median: %v", p.SampleType)
	}
	p = mk("tail_x")
	ungroup(p, "memory:tail_x:count:space:bytes")
	if p.SampleType[0].Type != "tail_x" {
		t.Errorf("another profile renamed: %v", p.SampleType)
	}
}
