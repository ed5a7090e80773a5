// Package bills reads the requests' own bills: each request's allocations
// and copies by site, which allocspy's and copyspy's recorders add to the
// bill the request mark carries, its time by part and its server-side
// duration. It ranks the bills by duration and says what the slowest 1%
// did that the median requests did not: mean bills per group, the sites
// where they differ, the slowest requests as exemplars, and each group as
// allocation and copy profiles for allocdiff and flame -diff.
package bills

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/schema"
)

// Exemplars is how many of the slowest requests' bills are given whole.
const Exemplars = 5

// Tail is what the bills say of the tail: the summary's figures, and the
// allocations of each group summed over its requests by site (an
// AllocReport, as the window's, for a profile).
type Tail struct {
	Summary      *schema.Bills
	Slow, Median *wire.AllocReport
	// SlowCopies and MedianCopies are each group's copies summed by slot,
	// as a CopyReport (every call in the first size bucket: a bill keeps
	// no sizes); nil when the window counted no copies.
	SlowCopies, MedianCopies *wire.CopyReport
	// SlowBills and MedianBills are the two groups' own bills.
	SlowBills, MedianBills []wire.Bill
	// N is how many requests each group holds.
	N int
}

// site is a slot's allocation site: its leaf line.
type site struct {
	fn, line string
	stack    []wire.PCFrames
	route    string
}

// Window is what else the bills' window gave, which the bills name.
type Window struct {
	// Allocs is the window's allocation report, whose slots the bills
	// name.
	Allocs *wire.AllocReport
	// Copies is its copy report, whose slots the bills' copies name (nil
	// when copyspy's recorder was not on: the bills then say nothing of
	// copies).
	Copies *wire.CopyReport
	// Driver is the load driver's latency (µs) of the window's requests
	// by peer (wire.Bill.Peer; nil when the driver does not key them):
	// each bill whose peer is in it once is joined to it.
	Driver map[uint64]int64
	// SysName names a syscall number of the target's architecture.
	SysName func(int) string
}

// copySite is a copy slot's site: its first line outside the runtime.
type copySite struct {
	fn, line, via, kind string
	stack               []wire.PCFrames
	route               string
}

// Explain ranks rep's bills and compares the slowest 1% with the median
// group. A bill naming a slot the window's allocation or copy report
// lacks is an error: the reports are not of one window.
func Explain(rep *wire.BillReport, win Window) (*Tail, error) {
	allocs, driver, sysName := win.Allocs, win.Driver, win.SysName
	if allocs == nil {
		allocs = &wire.AllocReport{}
	}
	if sysName == nil {
		sysName = func(nr int) string { return fmt.Sprintf("syscall %d", nr) }
	}
	copies, err := copySites(rep, win.Copies)
	if err != nil {
		return nil, err
	}
	sites := map[uint64]site{}
	for _, s := range allocs.Sites {
		if s.Slot == 0 {
			continue
		}
		stack, _ := wire.AllocStack(s.Stack)
		st := site{stack: s.Stack, route: s.Route}
		st.fn, st.line = leafLine(stack)
		sites[s.Slot] = st
	}
	for _, b := range rep.Bills {
		for _, a := range b.Allocs {
			if _, ok := sites[a.Slot]; !ok {
				return nil, fmt.Errorf("bills: a bill names allocation slot %d, which the window's allocation report lacks", a.Slot-1)
			}
		}
	}
	out := &schema.Bills{Source: schema.SourceBills, Kept: len(rep.Bills), Began: rep.Began, Every: max(rep.Every, 1), Cap: rep.Cap, Open: rep.Open, Groups: map[string]*schema.Bill{}}
	t := &Tail{Summary: out}
	if len(rep.Bills) == 0 {
		return t, nil
	}
	order, slow, median := wire.RankBills(rep.Bills)
	n := len(slow)
	t.N = n
	t.SlowBills, t.MedianBills = slow, median
	waits := waitSites(rep.WaitStacks)
	lat := func(b wire.Bill) (int64, bool) {
		us, ok := driver[b.Peer]
		return us, ok && b.Peer != 0 && us > 0
	}
	out.Groups["p99"] = mean(slow, sites, lat)
	out.Groups["p50"] = mean(median, sites, lat)
	out.Groups["p99"].Waits, out.Groups["p50"].Waits = meanWaits(slow, waits), meanWaits(median, waits)
	out.DifferWaits = differWaits(out.Groups["p99"], out.Groups["p50"])
	out.Groups["p99"].SyscallsByName, out.Groups["p50"].SyscallsByName = bySyscall(slow, sysName), bySyscall(median, sysName)
	out.DifferSyscallsByName = differSyscalls(out.Groups["p99"].SyscallsByName, out.Groups["p50"].SyscallsByName)
	out.Joined, out.TailOverlap = joined(order, n, lat)
	out.Differ = differ(out.Groups["p99"], out.Groups["p50"])
	out.DifferTime = differTime(out.Groups["p99"], out.Groups["p50"])
	out.DifferSyscalls = round(out.Groups["p99"].Syscalls - out.Groups["p50"].Syscalls)
	if copies != nil {
		out.Groups["p99"].Copies, out.Groups["p50"].Copies = meanCopies(slow, copies), meanCopies(median, copies)
		out.DifferCopies = differCopies(out.Groups["p99"].Copies, out.Groups["p50"].Copies)
		t.SlowCopies, t.MedianCopies = summedCopies(slow, copies), summedCopies(median, copies)
	}
	for _, b := range order[:min(Exemplars, len(order))] {
		e := mean([]wire.Bill{b}, sites, lat)
		e.Waits = meanWaits([]wire.Bill{b}, waits)
		e.SyscallsByName = bySyscall([]wire.Bill{b}, sysName)
		e.Route = b.Route
		if copies != nil {
			e.Copies = meanCopies([]wire.Bill{b}, copies)
		}
		out.Exemplars = append(out.Exemplars, *e)
	}
	t.Slow, t.Median = summed(slow, sites), summed(median, sites)
	return t, nil
}

// copySites names the copy report's slots by their line (nil when there
// is no report), and checks that every slot a bill names is among them.
func copySites(rep *wire.BillReport, copies *wire.CopyReport) (map[uint64]copySite, error) {
	if copies == nil {
		return nil, nil
	}
	out := map[uint64]copySite{}
	for _, s := range copies.Sites {
		if s.Slot == 0 {
			continue
		}
		user, via := wire.UserStack(s.Stack)
		st := copySite{via: via, kind: s.Kind, stack: s.Stack, route: s.Route}
		st.fn, st.line = leafLine(user)
		out[s.Slot] = st
	}
	for _, b := range rep.Bills {
		for _, c := range b.Copies {
			if _, ok := out[c.Slot]; !ok {
				return nil, fmt.Errorf("bills: a bill names copy slot %d, which the window's copy report lacks", c.Slot-1)
			}
		}
	}
	return out, nil
}

// leafLine names a stack's innermost frame: its function and file:line
// ("(unknown)" and "?" for an empty stack).
func leafLine(stack []wire.PCFrames) (fn, line string) {
	if len(stack) == 0 || len(stack[0].Frames) == 0 {
		return "(unknown)", "?"
	}
	f := stack[0].Frames[0]
	return f.Func, fmt.Sprintf("%s:%d", f.File, f.Line)
}

// meanCopies is a group's mean copies, by line.
func meanCopies(group []wire.Bill, sites map[uint64]copySite) *schema.BillCopies {
	n := float64(len(group))
	by := map[[4]string]*schema.BillCopySite{}
	c := &schema.BillCopies{Sites: []schema.BillCopySite{}}
	for _, b := range group {
		c.RemainderCopyCalls += float64(b.OverCopies[0].Calls)
		c.RemainderCopiedBytes += float64(b.OverCopies[0].Bytes)
		c.RemainderClearCalls += float64(b.OverCopies[1].Calls)
		c.RemainderClearedBytes += float64(b.OverCopies[1].Bytes)
		for _, e := range b.Copies {
			st := sites[e.Slot]
			k := [4]string{st.fn, st.line, st.via, st.kind}
			row := by[k]
			if row == nil {
				row = &schema.BillCopySite{Func: st.fn, Site: st.line, Via: st.via, Kind: st.kind}
				by[k] = row
			}
			row.Calls += float64(e.Calls)
			row.Bytes += float64(e.Bytes)
		}
	}
	c.CopyCalls, c.CopiedBytes = c.RemainderCopyCalls, c.RemainderCopiedBytes
	c.ClearCalls, c.ClearedBytes = c.RemainderClearCalls, c.RemainderClearedBytes
	for _, row := range by {
		if row.Kind == "memclr" {
			c.ClearCalls += row.Calls
			c.ClearedBytes += row.Bytes
		} else {
			c.CopyCalls += row.Calls
			c.CopiedBytes += row.Bytes
		}
		row.Calls, row.Bytes = round(row.Calls/n), round(row.Bytes/n)
		c.Sites = append(c.Sites, *row)
	}
	c.CopyCalls, c.CopiedBytes = round(c.CopyCalls/n), round(c.CopiedBytes/n)
	c.ClearCalls, c.ClearedBytes = round(c.ClearCalls/n), round(c.ClearedBytes/n)
	c.RemainderCopyCalls, c.RemainderCopiedBytes = round(c.RemainderCopyCalls/n), round(c.RemainderCopiedBytes/n)
	c.RemainderClearCalls, c.RemainderClearedBytes = round(c.RemainderClearCalls/n), round(c.RemainderClearedBytes/n)
	sortCopies(c.Sites)
	return c
}

// differCopies are the lines where slow's mean copies differ from
// median's, the largest change in bytes first (then in calls).
func differCopies(slow, median *schema.BillCopies) []schema.BillCopySite {
	by := map[[4]string]*schema.BillCopySite{}
	add := func(c *schema.BillCopies, sign float64) {
		for _, s := range c.Sites {
			k := [4]string{s.Func, s.Site, s.Via, s.Kind}
			d := by[k]
			if d == nil {
				d = &schema.BillCopySite{Func: s.Func, Site: s.Site, Via: s.Via, Kind: s.Kind}
				by[k] = d
			}
			d.Calls += sign * s.Calls
			d.Bytes += sign * s.Bytes
		}
	}
	add(slow, 1)
	add(median, -1)
	out := []schema.BillCopySite{}
	for _, d := range by {
		d.Calls, d.Bytes = round(d.Calls), round(d.Bytes)
		if d.Calls != 0 || d.Bytes != 0 {
			out = append(out, *d)
		}
	}
	sortCopies(out)
	return out
}

// sortCopies orders copy rows by bytes, then calls, the largest (in
// size) first, then by name.
func sortCopies(rows []schema.BillCopySite) {
	slices.SortFunc(rows, func(a, b schema.BillCopySite) int {
		return cmp.Or(cmp.Compare(math.Abs(b.Bytes), math.Abs(a.Bytes)), cmp.Compare(math.Abs(b.Calls), math.Abs(a.Calls)),
			cmp.Compare(a.Func, b.Func), cmp.Compare(a.Site, b.Site), cmp.Compare(a.Via, b.Via), cmp.Compare(a.Kind, b.Kind))
	})
}

// summedCopies is a group's copies summed by slot, as a copy report: each
// site's calls and bytes in the first size bucket (a bill keeps no sizes;
// the group's profile drops the bucket label).
func summedCopies(group []wire.Bill, sites map[uint64]copySite) *wire.CopyReport {
	by := map[uint64]*wire.CopySite{}
	for _, b := range group {
		for _, e := range b.Copies {
			s := by[e.Slot]
			if s == nil {
				st := sites[e.Slot]
				s = &wire.CopySite{Kind: st.kind, Route: st.route, Stack: st.stack, Slot: e.Slot}
				by[e.Slot] = s
			}
			s.Calls[0] += e.Calls
			s.Bytes[0] += e.Bytes
		}
	}
	rep := &wire.CopyReport{}
	for _, k := range slices.Sorted(maps.Keys(by)) {
		rep.Sites = append(rep.Sites, *by[k])
	}
	return rep
}

// waitSites names each wait stack of the report by where it waited.
func waitSites(stacks []wire.BillWaitStack) map[uint64]schema.BillWaitSite {
	out := map[uint64]schema.BillWaitSite{}
	for _, w := range stacks {
		part := "other"
		if w.Part >= 0 && w.Part < len(wire.BillParts) {
			part = wire.BillParts[w.Part]
		}
		fn, line := waitSite(w.Stack)
		out[w.Key] = schema.BillWaitSite{Part: part, Func: fn, Site: line}
	}
	return out
}

// waitSite says where a stack waited: the first function outside the
// runtime and the standard library's internals and shims
// (sync.(*Mutex).Lock, main.tailWait, net.(*netFD).Read), and the first
// line of the program's own code under it (file:line; that function's
// line when none).
func waitSite(stack []wire.PCFrames) (fn, line string) {
	fn, line = "(unknown)", "?"
	found := false
	for _, pf := range wire.Logical(stack) {
		for _, f := range pf.Frames {
			if !found && !wire.IsRuntime(f.Func) && !strings.HasPrefix(f.Func, "internal/") && !strings.Contains(f.Func, ".runtime_") {
				fn, line, found = f.Func, fmt.Sprintf("%s:%d", f.File, f.Line), true
			}
			if found && !wire.StandardLibrary(f.Func) && !wire.IsRuntime(f.Func) {
				return fn, fmt.Sprintf("%s:%d", f.File, f.Line)
			}
		}
	}
	return fn, line
}

// meanWaits is a group's mean wait time (µs) by where it waited, the
// longest first.
func meanWaits(group []wire.Bill, sites map[uint64]schema.BillWaitSite) []schema.BillWaitSite {
	by := map[schema.BillWaitSite]float64{}
	for _, b := range group {
		for _, w := range b.Waits {
			if st, ok := sites[w.Key]; ok {
				by[st] += float64(w.NS) / 1e3
			}
		}
	}
	var out []schema.BillWaitSite
	for st, us := range by {
		st.US = round(us / float64(len(group)))
		out = append(out, st)
	}
	sortWaits(out)
	return out
}

// differWaits are the places where slow's mean wait differs from
// median's by a microsecond or more, the largest change first.
func differWaits(slow, median *schema.Bill) []schema.BillWaitSite {
	by := map[schema.BillWaitSite]float64{}
	for _, w := range slow.Waits {
		k := w
		k.US = 0
		by[k] += w.US
	}
	for _, w := range median.Waits {
		k := w
		k.US = 0
		by[k] -= w.US
	}
	var out []schema.BillWaitSite
	for k, us := range by {
		if math.Abs(us) >= 1 {
			k.US = round(us)
			out = append(out, k)
		}
	}
	sortWaits(out)
	return out
}

func sortWaits(w []schema.BillWaitSite) {
	slices.SortFunc(w, func(a, b schema.BillWaitSite) int {
		return cmp.Or(cmp.Compare(math.Abs(b.US), math.Abs(a.US)), cmp.Compare(a.Part, b.Part), cmp.Compare(a.Func, b.Func), cmp.Compare(a.Site, b.Site))
	})
}

// bySyscall is a group's mean syscalls per request by name (those package
// syscall made; nil when none).
func bySyscall(group []wire.Bill, name func(int) string) map[string]float64 {
	var out map[string]float64
	for _, b := range group {
		for _, s := range b.SyscallNrs {
			if out == nil {
				out = map[string]float64{}
			}
			out[name(s.Nr)] += float64(s.Count)
		}
	}
	for k, v := range out {
		out[k] = round(v / float64(len(group)))
	}
	return out
}

// differSyscalls are slow's syscalls per request by name less median's,
// where they differ.
func differSyscalls(slow, median map[string]float64) map[string]float64 {
	var out map[string]float64
	names := maps.Clone(slow)
	maps.Copy(names, median)
	for k := range names {
		if d := round(slow[k] - median[k]); d != 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[k] = d
		}
	}
	return out
}

// joined counts the bills joined to the driver's latency and, when any
// are, says how much of the slowest 1% by the driver's latency (of those
// joined) the slowest 1% by server-side duration holds (order is slowest
// first by duration, n the group's size).
func joined(order []wire.Bill, n int, lat func(wire.Bill) (int64, bool)) (int, *float64) {
	type j struct {
		rank int
		us   int64
	}
	var js []j
	for i, b := range order {
		if us, ok := lat(b); ok {
			js = append(js, j{i, us})
		}
	}
	if len(js) == 0 {
		return 0, nil
	}
	slices.SortStableFunc(js, func(a, b j) int { return cmp.Compare(b.us, a.us) })
	k := max(1, len(js)/100)
	in := 0
	for _, x := range js[:k] {
		if x.rank < n {
			in++
		}
	}
	share := round(float64(in) / float64(k))
	return len(js), &share
}

// mean is a group's mean bill, by line.
func mean(group []wire.Bill, sites map[uint64]site, lat func(wire.Bill) (int64, bool)) *schema.Bill {
	n := float64(len(group))
	by := map[[2]string]*schema.BillSite{}
	var dur, objs, bytes, rObjs, rBytes float64
	for _, b := range group {
		dur += float64(b.DurationNS) / 1e3
		rObjs += float64(b.OverObjects)
		rBytes += float64(b.OverBytes)
		for _, a := range b.Allocs {
			st := sites[a.Slot]
			k := [2]string{st.fn, st.line}
			row := by[k]
			if row == nil {
				row = &schema.BillSite{Func: st.fn, Site: st.line}
				by[k] = row
			}
			row.Allocs += float64(a.Objects)
			row.Bytes += float64(a.Bytes)
			objs += float64(a.Objects)
			bytes += float64(a.Bytes)
		}
	}
	g := &schema.Bill{Requests: len(group), DurationUS: round(dur / n), Allocs: round((objs + rObjs) / n), AllocBytes: round((bytes + rBytes) / n), RemainderAllocs: round(rObjs / n), RemainderBytes: round(rBytes / n)}
	g.TimeUS, g.Syscalls = meanTime(group)
	var drv float64
	for _, b := range group {
		if us, ok := lat(b); ok {
			drv += float64(us)
			g.Joined++
		}
	}
	if g.Joined > 0 {
		g.DriverUS = round(drv / float64(g.Joined))
	}
	for _, row := range by {
		row.Allocs, row.Bytes = round(row.Allocs/n), round(row.Bytes/n)
		g.Sites = append(g.Sites, *row)
	}
	slices.SortFunc(g.Sites, func(a, b schema.BillSite) int {
		return cmp.Or(cmp.Compare(b.Allocs, a.Allocs), cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Func, b.Func), cmp.Compare(a.Site, b.Site))
	})
	return g
}

// meanTime is a group's mean time by part (µs) and syscalls.
func meanTime(group []wire.Bill) (map[string]float64, float64) {
	parts := map[string]float64{}
	var sys float64
	for _, b := range group {
		for i, ns := range b.PartsNS {
			if i < len(wire.BillParts) {
				parts[wire.BillParts[i]] += float64(ns) / 1e3
			}
		}
		sys += float64(b.Syscalls)
	}
	n := float64(len(group))
	for _, p := range wire.BillParts {
		parts[p] = round(parts[p] / n)
	}
	return parts, round(sys / n)
}

// differTime are the parts where slow's mean time differs from median's
// by a microsecond or more, the largest change first.
func differTime(slow, median *schema.Bill) []schema.BillPartDiff {
	var out []schema.BillPartDiff
	for _, p := range wire.BillParts {
		if d := round(slow.TimeUS[p] - median.TimeUS[p]); math.Abs(d) >= 1 {
			out = append(out, schema.BillPartDiff{Part: p, US: d})
		}
	}
	slices.SortStableFunc(out, func(a, b schema.BillPartDiff) int { return cmp.Compare(math.Abs(b.US), math.Abs(a.US)) })
	return out
}

// differ are the lines where slow's mean differs from median's, the
// largest change in objects first (then in bytes).
func differ(slow, median *schema.Bill) []schema.BillDiff {
	by := map[[2]string]*schema.BillDiff{}
	add := func(g *schema.Bill, sign float64) {
		for _, s := range g.Sites {
			k := [2]string{s.Func, s.Site}
			d := by[k]
			if d == nil {
				d = &schema.BillDiff{Func: s.Func, Site: s.Site}
				by[k] = d
			}
			d.Allocs += sign * s.Allocs
			d.Bytes += sign * s.Bytes
		}
	}
	add(slow, 1)
	add(median, -1)
	var out []schema.BillDiff
	for _, d := range by {
		d.Allocs, d.Bytes = round(d.Allocs), round(d.Bytes)
		if d.Allocs != 0 || d.Bytes != 0 {
			out = append(out, *d)
		}
	}
	slices.SortFunc(out, func(a, b schema.BillDiff) int {
		return cmp.Or(cmp.Compare(math.Abs(b.Allocs), math.Abs(a.Allocs)), cmp.Compare(math.Abs(b.Bytes), math.Abs(a.Bytes)), cmp.Compare(a.Func, b.Func), cmp.Compare(a.Site, b.Site))
	})
	return out
}

// summed is a group's allocations summed by slot, as an allocation report
// (objects and bytes asked for; the bills do not keep size classes).
func summed(group []wire.Bill, sites map[uint64]site) *wire.AllocReport {
	by := map[uint64]*wire.AllocSite{}
	for _, b := range group {
		for _, a := range b.Allocs {
			s := by[a.Slot]
			if s == nil {
				st := sites[a.Slot]
				s = &wire.AllocSite{Stack: st.stack, Route: st.route, Slot: a.Slot}
				by[a.Slot] = s
			}
			s.Objects += a.Objects
			s.ReqBytes += a.Bytes
		}
	}
	rep := &wire.AllocReport{}
	for _, k := range slices.Sorted(maps.Keys(by)) {
		rep.Sites = append(rep.Sites, *by[k])
	}
	return rep
}

func round(v float64) float64 { return math.Round(v*1e4) / 1e4 }
