package probe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/synthprof"
	"github.com/perfspy/perfspy/syscalls"

	"github.com/perfspy/perfspy/internal/withagent"
)

// allocProfile makes an allocation profile with one sample per stack; each
// stack is a list of function names, leaf first.
func allocProfile(stacks [][]string, values [][2]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}},
		PeriodType: &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:     1,
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	for i, st := range stacks {
		s := &profile.Sample{Value: []int64{values[i][0], values[i][1], 0, 0}}
		for _, name := range st {
			loc := locs[name]
			if loc == nil {
				fn := &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = fn
				p.Function = append(p.Function, fn)
				loc = &profile.Location{ID: uint64(len(locs) + 1), Address: uint64(0x1000 * (len(locs) + 1)), Line: []profile.Line{{Function: fn}}}
				locs[name] = loc
				p.Location = append(p.Location, loc)
			}
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

func TestHeapDelta(t *testing.T) {
	stacks := [][]string{
		{"main.allocK", "main.handler", "net/http.(*conn).serve"},
		{"encoding/json.Marshal", withagent.SelfModule + "/agent.(*window).do", withagent.SelfModule + "/agent.serve"},
		{"main.idle", "main.main"},
		{"runtime.selectgo", "github.com/felixge/fgprof.Start.func1"},
	}
	before := allocProfile(stacks, [][2]int64{{100, 6400}, {5, 500}, {3, 30}, {1, 8}})
	after := allocProfile(stacks, [][2]int64{{170, 10880}, {9, 900}, {3, 30}, {4, 32}})
	d, err := heapDelta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if len(d.SampleType) != 2 || d.SampleType[0].Type != "alloc_objects" || d.SampleType[1].Type != "alloc_space" {
		t.Fatalf("sample types %v", sampleTypeNames(d))
	}
	if len(d.Sample) != 1 {
		t.Fatalf("got %d samples, want 1 (agent, profiler and unchanged stacks dropped)", len(d.Sample))
	}
	s := d.Sample[0]
	if leafName(s) != "main.allocK" || s.Value[0] != 70 || s.Value[1] != 4480 {
		t.Errorf("sample %s = %v, want main.allocK [70 4480]", leafName(s), s.Value)
	}
	sites := topSites(d, 0)
	if len(sites) != 1 || sites[0].Func != "main.allocK" {
		t.Errorf("topSites = %+v", sites)
	}
	if tot := totals(d); tot[0] != 70 || tot[1] != 4480 {
		t.Errorf("totals = %v", tot)
	}
}

func TestHeapDeltaErrors(t *testing.T) {
	stacks := [][]string{{"main.f"}}
	if _, err := heapDelta(allocProfile(stacks, [][2]int64{{10, 10}}), allocProfile(stacks, [][2]int64{{5, 5}})); err == nil || !strings.Contains(err.Error(), "went down") {
		t.Errorf("decreasing counts: %v", err)
	}
	cpu := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	if _, err := heapDelta(cpu, cpu); err == nil || !strings.Contains(err.Error(), "not an allocation profile") {
		t.Errorf("cpu profile: %v", err)
	}
}

func TestTopSitesOrder(t *testing.T) {
	p := allocProfile([][]string{{"b.f"}, {"a.f"}, {"c.f", "x"}, {"c.f", "y"}}, [][2]int64{{5, 1}, {5, 1}, {2, 1}, {4, 1}})
	got := topSites(p, 0)
	var names []string
	for _, s := range got {
		names = append(names, s.Func)
	}
	if strings.Join(names, " ") != "c.f a.f b.f" {
		t.Errorf("order = %v, want c.f (6) then a.f, b.f (5, by name)", names)
	}
}

// The syscalls of perfspy's own goroutines (the tracer writing its
// buffers) are not the target's.
func TestTargetSites(t *testing.T) {
	fr := func(fns ...string) []wire.PCFrames {
		var out []wire.PCFrames
		for i, f := range fns {
			out = append(out, wire.PCFrames{PC: uint64(i + 1), Frames: []wire.Frame{{Func: f}}})
		}
		return out
	}
	sites := []syscalls.Site{
		{Name: "write", Stack: fr("syscall.write", "os.(*File).Write", "runtime/trace.(*traceMultiplexer).startLocked.func1"), Count: 9},
		{Name: "getppid", Stack: fr("syscall.rawSyscallNoError", "main.main.func7"), Count: 5},
	}
	got := targetSites(sites)
	if len(got) != 1 || got[0].Name != "getppid" {
		t.Errorf("targetSites = %+v", got)
	}
}

// TestEncodeProfile: encodeProfile's bytes parse to what profile.Write's
// do, each time the pooled writer is reused.
func TestEncodeProfile(t *testing.T) {
	for i, p := range []*profile.Profile{synthprof.Synthetic(3, 200, []string{"alloc_objects/count", "alloc_space/bytes"}), synthprof.Synthetic(5, 50, []string{"ns/nanoseconds"}), synthprof.Synthetic(3, 200, []string{"alloc_objects/count", "alloc_space/bytes"})} {
		var want bytes.Buffer
		if err := p.Write(&want); err != nil {
			t.Fatal(err)
		}
		got, err := encodeProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		a, err := profile.ParseData(want.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		b, err := profile.ParseData(got)
		if err != nil {
			t.Fatalf("profile %d: %v", i, err)
		}
		if a.String() != b.String() {
			t.Errorf("profile %d: encodeProfile parses to another profile than profile.Write", i)
		}
	}
}
