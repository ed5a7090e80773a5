package probe

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/bills"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/stacks"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/syscalls"
)

// bills: each request's own allocations and copies in the attribution
// window, the slowest 1%'s mean bill against the median group's, and each
// group as an allocation profile (tail_allocs.pb.gz, median_allocs.pb.gz),
// a copy profile (tail_copies.pb.gz, median_copies.pb.gz) and a profile of
// its waits (tail_waits.pb.gz, median_waits.pb.gz).
func (o *runOutput) bills() error {
	if o.raw.bills == "" || o.allocRep == nil {
		return nil
	}
	var rep wire.BillReport
	if err := wire.ReadJSON(o.raw.bills, &rep); err != nil {
		return fmt.Errorf("bills: %w", err)
	}
	arch := cmp.Or(o.s.GOARCH, runtime.GOARCH)
	t, err := bills.Explain(&rep, bills.Window{Allocs: o.allocRep, Copies: o.copyRep, Driver: driverLatencies(o.win.attr.tags),
		SysName: func(nr int) string { return syscalls.NameOn(arch, nr) }})
	if err != nil {
		return err
	}
	o.s.Bills = t.Summary
	o.s.Sources["bills"] = t.Summary.Source
	if t.SlowCopies != nil {
		// The bills' copies are copyspy's recorder's, on each request.
		o.s.Sources["bill_copies"] = SourceCopiesOverlay + "+request-bills"
	}
	for name, g := range t.Summary.Groups {
		if tg := o.s.Tail[name]; tg != nil {
			tg.Bill = g
		}
	}
	if t.N == 0 {
		return nil
	}
	secs := o.win.attr.load.Elapsed.Seconds()
	for _, f := range []struct {
		name, file string
		rep        *wire.AllocReport
	}{{"tail_allocs", "tail_allocs.pb.gz", t.Slow}, {"median_allocs", "median_allocs.pb.gz", t.Median}} {
		p := billProfile(f.rep)
		p.Comments = windowComments(int64(t.N), secs, o.ses.cfg.Target, o.ses.commit)
		if err := o.addProfile(f.file, p); err != nil {
			return err
		}
		o.s.Files[f.name] = f.file
	}
	for _, f := range []struct {
		name, file string
		rep        *wire.CopyReport
	}{{"tail_copies", "tail_copies.pb.gz", t.SlowCopies}, {"median_copies", "median_copies.pb.gz", t.MedianCopies}} {
		if f.rep == nil {
			continue
		}
		p := billCopyProfile(f.rep)
		p.Comments = append(windowComments(int64(t.N), secs, o.ses.cfg.Target, o.ses.commit), p.Comments...)
		if err := o.addProfile(f.file, p); err != nil {
			return err
		}
		o.s.Files[f.name] = f.file
	}
	for _, f := range []struct {
		name, file string
		group      []wire.Bill
	}{{"tail_waits", "tail_waits.pb.gz", t.SlowBills}, {"median_waits", "median_waits.pb.gz", t.MedianBills}} {
		p := billWaitProfile(f.group, rep.WaitStacks)
		p.Comments = append(windowComments(int64(t.N), secs, o.ses.cfg.Target, o.ses.commit), p.Comments...)
		if err := o.addProfile(f.file, p); err != nil {
			return err
		}
		o.s.Files[f.name] = f.file
	}
	return nil
}

// billWaitProfile is a group's waits on its own goroutine, summed by
// stack: sample type delay (nanoseconds) with the part as label "part".
// A bill keeps a wait's 8 innermost return PCs (from the function that
// parked): a stack of 8 ends in a [truncated] frame.
func billWaitProfile(group []wire.Bill, waits []wire.BillWaitStack) *profile.Profile {
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "delay", Unit: "nanoseconds"}},
		PeriodType:        &profile.ValueType{Type: "delay", Unit: "nanoseconds"},
		Period:            1,
		DefaultSampleType: "delay",
		Comments:          []string{"perfspy.waits_profile=v1"},
	}
	ns := map[uint64]int64{}
	for _, b := range group {
		for _, w := range b.Waits {
			ns[w.Key] += int64(w.NS)
		}
	}
	bld := stacks.NewBuilder(p)
	for _, w := range waits {
		if ns[w.Key] == 0 {
			continue
		}
		part := "other"
		if w.Part >= 0 && w.Part < len(wire.BillParts) {
			part = wire.BillParts[w.Part]
		}
		p.Sample = append(p.Sample, &profile.Sample{
			Location: bld.Locations(wire.MarkTruncated(w.Stack, len(w.Stack) >= billWaitDepth)),
			Value:    []int64{ns[w.Key]},
			Label:    map[string][]string{"part": {part}},
		})
	}
	return p
}

// billWaitDepth is the return PCs a bill keeps of a wait's stack.
const billWaitDepth = 8

// billCopyProfile is a group's copy profile: the copies profile's sample
// types, without its size buckets, which a bill does not keep.
func billCopyProfile(rep *wire.CopyReport) *profile.Profile {
	p := copyspy.Profile(rep)
	for _, s := range p.Sample {
		delete(s.Label, "bucket")
	}
	return p
}

// driverLatencies are the driver's keyed latencies by peer; a peer seen
// twice (a port reused within the window) joins neither.
func driverLatencies(tags []load.Tag) map[uint64]int64 {
	if len(tags) == 0 {
		return nil
	}
	out := make(map[uint64]int64, len(tags))
	for _, t := range tags {
		if _, dup := out[t.Peer]; dup {
			out[t.Peer] = -1
			continue
		}
		out[t.Peer] = t.US
	}
	return out
}

// billsKept is the most bills a window keeps (the runtime's table), and
// billsAim the share of it a window aims to fill: the timing window's
// rate is a guess at the attribution window's.
const (
	billsKept = 4095
	billsAim  = 0.7
)

// billEvery is how many requests apart the bills are taken, so that a
// window of dur at rps requests a second fills about billsAim of the
// table, spread over the whole window rather than its first moments.
func billEvery(rps float64, dur time.Duration) int {
	return max(1, int(math.Ceil(rps*dur.Seconds()/(billsKept*billsAim))))
}

// billProfile is a group's allocation profile: objects and bytes asked
// for, the two figures a bill keeps.
func billProfile(rep *wire.AllocReport) *profile.Profile {
	p := allocspy.Profile(rep)
	p.SampleType = []*profile.ValueType{p.SampleType[0], p.SampleType[3]}
	p.DefaultSampleType = p.SampleType[1].Type
	for _, s := range p.Sample {
		s.Value = []int64{s.Value[0], s.Value[3]}
	}
	return p
}
