package bills

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/schema"
)

// copyFixture is a copy slot whose stack is fns, innermost (memmove's or
// memclr's caller) first, each at line 40 of x.go.
func copyFixture(slot uint64, kind string, fns ...string) wire.CopySite {
	s := wire.CopySite{Slot: slot, Kind: kind}
	for i, fn := range fns {
		s.Stack = append(s.Stack, wire.PCFrames{PC: slot*100 + uint64(i), Frames: []wire.Frame{{Func: fn, File: "/src/x.go", Line: 40}}})
	}
	return s
}

func allocSite(slot uint64, fn string, line int) wire.AllocSite {
	return wire.AllocSite{Slot: slot, Objects: 1, Stack: []wire.PCFrames{{PC: slot, Frames: []wire.Frame{{Func: fn, File: "/src/x.go", Line: line}}}}}
}

// TestExplain: 300 bills, three of them slow with 4 more objects at a
// line of their own: the slowest 1% are those three, +4 there exactly;
// the median group is three bills from the middle, without it.
func TestExplain(t *testing.T) {
	allocs := &wire.AllocReport{Sites: []wire.AllocSite{allocSite(1, "main.common", 10), allocSite(2, "main.rare", 20), allocSite(3, "main.common", 10)}}
	// Copies: every request copies 100 B in bytes.(*Buffer).Write and
	// clears 64 in main.common (via mallocgc); the slow ones also copy 64 KiB
	// in main.rare, and one copy of theirs found no room in the bill.
	copies := &wire.CopyReport{Sites: []wire.CopySite{copyFixture(1, "memmove", "bytes.(*Buffer).Write", "main.common"),
		copyFixture(2, "memmove", "main.rare"), copyFixture(3, "memclr", "runtime.mallocgc", "main.common")}}
	rep := &wire.BillReport{Began: 900, Every: 3, Cap: 4095}
	driver := map[uint64]int64{}
	for i := range 300 {
		// 600 ns of CPU and the rest of the duration in sync; the slow
		// ones sleep a millisecond and make two more syscalls.
		parts := make([]uint64, len(wire.BillParts))
		parts[0], parts[2] = 600, uint64(400+i)
		b := wire.Bill{DurationNS: uint64(1000 + i), Route: "GET /x", Allocs: []wire.BillSite{{Slot: 1, Objects: 2, Bytes: 32}, {Slot: 3, Objects: 1, Bytes: 16}}, PartsNS: parts, Syscalls: 1, SyscallNrs: []wire.BillSyscall{{Nr: 1, Count: 1}},
			Copies: []wire.BillCopy{{Slot: 1, Calls: 2, Bytes: 100}, {Slot: 3, Calls: 1, Bytes: 64}}}
		if i%100 == 7 {
			b.DurationNS = 1e6 + uint64(i)
			b.PartsNS[6] = 1e6 - 1000
			b.Waits = []wire.BillWait{{Key: 7, NS: 1e6 - 1000}}
			b.Syscalls = 3
			b.SyscallNrs = append(b.SyscallNrs, wire.BillSyscall{Nr: 24, Count: 2})
			b.Allocs = append(b.Allocs, wire.BillSite{Slot: 2, Objects: 4, Bytes: 4096})
			b.OverObjects, b.OverBytes = 1, 8
			b.Copies = append(b.Copies, wire.BillCopy{Slot: 2, Calls: 1, Bytes: 65536})
			b.OverCopies[0] = wire.BillCopy{Calls: 1, Bytes: 10}
		}
		// Each request joins the driver's latency: its duration and 10
		// µs, but for one the client saw wait 5 ms (before the server
		// had it); one has no peer.
		b.Peer = 5000<<48 | uint64(i+1)
		driver[b.Peer] = int64(b.DurationNS/1000) + 10
		if i == 50 {
			driver[b.Peer] = 5000
		}
		if i == 60 {
			b.Peer = 0
		}
		rep.Bills = append(rep.Bills, b)
	}
	rep.WaitStacks = []wire.BillWaitStack{{Key: 7, Part: 6, Stack: []wire.PCFrames{{PC: 1, Frames: []wire.Frame{{Func: "time.Sleep", File: "/go/time.go", Line: 5}, {Func: "main.nap", File: "/src/x.go", Line: 30}}}}}}
	tail, err := Explain(rep, Window{Allocs: allocs, Copies: copies, Driver: driver, SysName: func(nr int) string { return fmt.Sprintf("sys%d", nr) }})
	if err != nil {
		t.Fatal(err)
	}
	s := tail.Summary
	slow, med := s.Groups["p99"], s.Groups["p50"]
	if tail.N != 3 || slow.Requests != 3 || med.Requests != 3 || s.Kept != 300 || s.Every != 3 {
		t.Fatalf("groups of %d: slow %d, median %d; kept %d every %d", tail.N, slow.Requests, med.Requests, s.Kept, s.Every)
	}
	// Two slots at one line are one row.
	if len(med.Sites) != 1 || med.Sites[0].Allocs != 3 || med.Allocs != 3 || med.AllocBytes != 48 {
		t.Errorf("median %+v", med)
	}
	if slow.Allocs != 8 || slow.RemainderAllocs != 1 || slow.AllocBytes != 48+4096+8 {
		t.Errorf("slowest %+v", slow)
	}
	if len(s.Differ) != 1 || s.Differ[0].Func != "main.rare" || s.Differ[0].Allocs != 4 || s.Differ[0].Bytes != 4096 || s.Differ[0].Site != "/src/x.go:20" {
		t.Errorf("differ %+v", s.Differ)
	}
	// Time: the slowest sleep 999 µs more, the same CPU; sync is within
	// a microsecond (the groups' 0.4 µs apart), so not named.
	if slow.TimeUS["sleep"] != 999 || slow.TimeUS["cpu"] != 0.6 || med.TimeUS["sleep"] != 0 || med.TimeUS["sync"] != 0.551 || slow.Syscalls != 3 || med.Syscalls != 1 {
		t.Errorf("time: slowest %v %v syscalls, median %v %v", slow.TimeUS, slow.Syscalls, med.TimeUS, med.Syscalls)
	}
	if len(s.DifferTime) != 1 || s.DifferTime[0] != (schema.BillPartDiff{Part: "sleep", US: 999}) || s.DifferSyscalls != 2 {
		t.Errorf("differ in time %+v, syscalls %v", s.DifferTime, s.DifferSyscalls)
	}
	if want := (schema.BillWaitSite{Part: "sleep", Func: "time.Sleep", Site: "/src/x.go:30", US: 999}); len(s.DifferWaits) != 1 || s.DifferWaits[0] != want || len(med.Waits) != 0 || len(s.Exemplars[0].Waits) != 1 {
		t.Errorf("waits: differ %+v, median %+v, exemplar %+v", s.DifferWaits, med.Waits, s.Exemplars[0].Waits)
	}
	if d := s.DifferSyscallsByName; len(d) != 1 || d["sys24"] != 2 || slow.SyscallsByName["sys1"] != 1 || med.SyscallsByName["sys1"] != 1 {
		t.Errorf("syscalls by name: differ %v, slowest %v, median %v", d, slow.SyscallsByName, med.SyscallsByName)
	}
	// Copies: the slowest copy 64 KiB more in main.rare, with the one
	// copy that found no room; clears the same. Rows and remainder add up.
	sc, mc := slow.Copies, med.Copies
	if sc == nil || mc == nil || sc.CopyCalls != 4 || sc.CopiedBytes != 100+65536+10 || sc.RemainderCopyCalls != 1 || sc.ClearCalls != 1 || sc.ClearedBytes != 64 ||
		mc.CopyCalls != 2 || mc.CopiedBytes != 100 || len(mc.Sites) != 2 || mc.Sites[0] != (schema.BillCopySite{Func: "bytes.(*Buffer).Write", Site: "/src/x.go:40", Via: "bytes.(*Buffer).Write", Kind: "memmove", Calls: 2, Bytes: 100}) {
		t.Errorf("copies: slowest %+v, median %+v", sc, mc)
	}
	if want := (schema.BillCopySite{Func: "main.rare", Site: "/src/x.go:40", Via: "main.rare", Kind: "memmove", Calls: 1, Bytes: 65536}); len(s.DifferCopies) != 1 || s.DifferCopies[0] != want {
		t.Errorf("differ in copies %+v, want %+v", s.DifferCopies, want)
	}
	if e := s.Exemplars[0].Copies; e == nil || e.CopiedBytes != 100+65536+10 {
		t.Errorf("exemplar's copies %+v", e)
	}
	if r := tail.SlowCopies; r == nil || len(r.Sites) != 3 || r.Sites[1].Calls[0] != 3 || r.Sites[1].Bytes[0] != 3*65536 {
		t.Errorf("slow group's copy report %+v", r)
	}
	// The join: 299 bills; the slowest 1% by the driver's latency (2) are the
	// one the client saw wait and one of the server's slowest.
	if s.Joined != 299 || s.TailOverlap == nil || *s.TailOverlap != 0.5 || slow.Joined != 3 || slow.DriverUS != 1010 || med.DriverUS != 11 {
		t.Errorf("join: %d bills, overlap %v; slowest %d joined, %v µs; median %v µs", s.Joined, *s.TailOverlap, slow.Joined, slow.DriverUS, med.DriverUS)
	}
	if len(s.Exemplars) != Exemplars || s.Exemplars[0].DurationUS != 1000.207 || s.Exemplars[3].DurationUS > 2 {
		t.Errorf("exemplars %+v", s.Exemplars)
	}
	var objs uint64
	for _, st := range tail.Slow.Sites {
		objs += st.Objects
	}
	if objs != 3*7 || len(tail.Median.Sites) != 2 {
		t.Errorf("slow group's report: %d objects (want 21), median's %d slots", objs, len(tail.Median.Sites))
	}

	// A bill naming a slot the window's report lacks: not one window.
	rep.Bills[0].Allocs = append(rep.Bills[0].Allocs, wire.BillSite{Slot: 9, Objects: 1})
	if _, err := Explain(rep, Window{Allocs: allocs}); err == nil || !strings.Contains(err.Error(), "slot 8") {
		t.Errorf("unknown slot: %v", err)
	}
	rep.Bills[0].Allocs = rep.Bills[0].Allocs[:len(rep.Bills[0].Allocs)-1]
	rep.Bills[0].Copies = append(rep.Bills[0].Copies, wire.BillCopy{Slot: 9, Calls: 1})
	if _, err := Explain(rep, Window{Allocs: allocs, Copies: copies}); err == nil || !strings.Contains(err.Error(), "copy slot 8") {
		t.Errorf("unknown copy slot: %v", err)
	}
	// No bills: no groups, no error.
	if tail, err := Explain(&wire.BillReport{}, Window{Allocs: allocs}); err != nil || tail.N != 0 || len(tail.Summary.Groups) != 0 {
		t.Errorf("no bills: %+v, %v", tail, err)
	}
}

// TestWaitSite: a wait is placed at the first function outside the
// runtime and the standard library's internals and shims, and at the
// first line of the program's own code under it.
func TestWaitSite(t *testing.T) {
	stack := func(fns ...string) []wire.PCFrames {
		var out []wire.PCFrames
		for i, fn := range fns {
			out = append(out, wire.PCFrames{PC: uint64(i + 1), Frames: []wire.Frame{{Func: fn, File: "/src/" + fn + ".go", Line: 10 + i}}})
		}
		return out
	}
	for _, c := range []struct {
		stack      []wire.PCFrames
		fn, siteAt string
	}{
		{stack("runtime.semacquire1", "sync.runtime_SemacquireMutex", "internal/sync.(*Mutex).lockSlow", "internal/sync.(*Mutex).Lock", "sync.(*Mutex).Lock", "example.com/cache.(*Cache).Get", "main.handler"),
			"sync.(*Mutex).Lock", "/src/example.com/cache.(*Cache).Get.go:15"},
		{stack("runtime.chanrecv", "runtime.chanrecv1", "main.tailWait", "main.handler"), "main.tailWait", "/src/main.tailWait.go:12"},
		{stack("runtime.netpollblock", "internal/poll.runtime_pollWait", "internal/poll.(*pollDesc).wait", "internal/poll.(*FD).Read", "net.(*netFD).Read", "net.(*conn).Read"),
			"net.(*netFD).Read", "/src/net.(*netFD).Read.go:14"},
		{stack("runtime.gopark"), "(unknown)", "?"},
	} {
		if fn, site := waitSite(c.stack); fn != c.fn || site != c.siteAt {
			t.Errorf("%s...: %s at %s, want %s at %s", c.stack[0].Frames[0].Func, fn, site, c.fn, c.siteAt)
		}
	}
}
