package probe

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/stacks"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/syscalls"

	"github.com/perfspy/perfspy/internal/withagent"
)

// Comments that every profile of a window carries, beside
// profkey.RequestsComment, by which later tools divide.
const (
	CommentSeconds = "perfspy.window_seconds="
	CommentTarget  = "perfspy.target="
	CommentCommit  = "perfspy.commit="
)

// windowComments are the profile comments for one window.
func windowComments(requests int64, seconds float64, target, commit string) []string {
	return []string{
		fmt.Sprintf("%s%d", profkey.RequestsComment, requests),
		fmt.Sprintf("%s%.3f", CommentSeconds, seconds),
		CommentTarget + target,
		CommentCommit + commit,
	}
}

func readProfile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return p, nil
}

// heapProfileDelta reads the two allocation profiles the agent wrote at
// path and path+".end" and returns the window's allocations.
func heapProfileDelta(path string) (*profile.Profile, error) {
	before, after, err := profilePair(path)
	if err != nil {
		return nil, err
	}
	return heapDelta(before, after)
}

// profilePair reads the profiles the agent wrote at a window's begin
// (path) and end (path+".end").
func profilePair(path string) (before, after *profile.Profile, err error) {
	if before, err = profileFromFile(path); err != nil {
		return nil, nil, err
	}
	if after, err = profileFromFile(path + ".end"); err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

// instrumentPrefixes mark the frames of perfspy's own instruments in the
// target: the agent, the wall-clock profiler and the execution tracer's
// goroutines. Samples, waits and syscalls through them are not the
// target's and are dropped.
var instrumentPrefixes = []string{
	withagent.SelfModule + "/agent.",
	withagent.SelfModule + "/agent/",
	"github.com/felixge/fgprof.",
	"runtime/trace.",
	"runtime.traceAdvance",
	"runtime.(*traceAdvancerState)",
}

// isInstrument reports whether fn belongs to one of perfspy's instruments.
func isInstrument(fn string) bool {
	for _, p := range instrumentPrefixes {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// heapDelta returns the allocations made between two allocation profiles of
// one process: after minus before, per stack, keeping alloc_objects and
// alloc_space; profileDelta drops the samples through perfspy's instruments.
func heapDelta(before, after *profile.Profile) (*profile.Profile, error) {
	if len(before.SampleType) < 2 || before.SampleType[0].Type != "alloc_objects" || before.SampleType[1].Type != "alloc_space" {
		return nil, fmt.Errorf("not an allocation profile (sample types %v)", sampleTypeNames(before))
	}
	d, err := profileDelta(before, after)
	if err != nil {
		return nil, err
	}
	d.SampleType = d.SampleType[:2]
	d.DefaultSampleType = "alloc_space"
	kept := d.Sample[:0]
	for _, s := range d.Sample {
		s.Value = s.Value[:2]
		if s.Value[0] == 0 && s.Value[1] == 0 {
			continue
		}
		if s.Value[0] < 0 || s.Value[1] < 0 {
			return nil, fmt.Errorf("allocation counts went down between snapshots at %s", leafName(s))
		}
		kept = append(kept, s)
	}
	d.Sample = kept
	return d.Compact(), nil
}

// profileDelta returns after minus before, per stack, for cumulative
// profiles of one process (allocs, block, mutex): zero samples and samples
// through perfspy's instruments are dropped.
func profileDelta(before, after *profile.Profile) (*profile.Profile, error) {
	d, err := subtract(after, before, throughInstruments)
	if err != nil {
		return nil, err
	}
	d.TimeNanos = after.TimeNanos
	d.DurationNanos = after.TimeNanos - before.TimeNanos
	return d, nil
}

// subtract is a minus b, sample by sample (the same stack and labels are
// one sample), without the samples that cancel and those drop says are
// not the program's (nil: none). Neither argument changes: profile.Merge
// reads its inputs and returns a profile of its own, so only b's values
// are copied, to be negated.
func subtract(a, b *profile.Profile, drop func(*profile.Sample) bool) (*profile.Profile, error) {
	neg := sampleCopy(b)
	neg.Scale(-1)
	d, err := profile.Merge([]*profile.Profile{a, neg})
	if err != nil {
		return nil, fmt.Errorf("subtracting profiles: %w", err)
	}
	// Merge leaves out the samples that cancelled; what drop removes
	// leaves locations no sample names, which Compact takes out.
	kept := d.Sample[:0]
	for _, s := range d.Sample {
		zero := true
		for _, v := range s.Value {
			zero = zero && v == 0
		}
		if !zero && (drop == nil || !drop(s)) {
			kept = append(kept, s)
		}
	}
	if len(kept) == len(d.Sample) {
		return d, nil
	}
	d.Sample = kept
	return d.Compact(), nil
}

// sampleCopy is p with samples of its own: each sample's fields and
// values copied, its locations and labels shared. What changes a
// sample's values or cuts its stack (Scale, endAtRunN) then leaves p as
// it was, where p.Copy encoded and decoded the whole profile.
func sampleCopy(p *profile.Profile) *profile.Profile {
	c := &profile.Profile{
		SampleType: p.SampleType, DefaultSampleType: p.DefaultSampleType, Mapping: p.Mapping, Location: p.Location, Function: p.Function,
		Comments: p.Comments, DocURL: p.DocURL, DropFrames: p.DropFrames, KeepFrames: p.KeepFrames,
		TimeNanos: p.TimeNanos, DurationNanos: p.DurationNanos, PeriodType: p.PeriodType, Period: p.Period,
		Sample: make([]*profile.Sample, len(p.Sample)),
	}
	for i, s := range p.Sample {
		cs := *s
		cs.Value = slices.Clone(s.Value)
		c.Sample[i] = &cs
	}
	return c
}

func sampleTypeNames(p *profile.Profile) []string {
	var n []string
	for _, st := range p.SampleType {
		n = append(n, st.Type+"/"+st.Unit)
	}
	return n
}

// throughInstruments reports whether a sample's stack passes through one
// of perfspy's instruments.
func throughInstruments(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && isInstrument(ln.Function.Name) {
				return true
			}
		}
	}
	return false
}

// leafName is the innermost function of a sample: the call site.
func leafName(s *profile.Sample) string {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
		return "(unknown)"
	}
	return s.Location[0].Line[0].Function.Name
}

// siteName is the first function of a sample outside the runtime: the
// site a reviewer changes. The heap profile already hides runtime frames;
// allocspy's stacks start at mallocgc's caller.
func siteName(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && !stacks.IsRuntime(ln.Function.Name) {
				return ln.Function.Name
			}
		}
	}
	return leafName(s)
}

// topSites sums the profile by site (siteName), sorted by the value at
// index vi, largest first, name to break ties.
func topSites(p *profile.Profile, vi int) []report.Site {
	sum := map[string][]int64{}
	heaviest := map[string]*profile.Sample{}
	for _, s := range p.Sample {
		k := siteName(s)
		v := sum[k]
		if v == nil {
			v = make([]int64, len(s.Value))
			sum[k] = v
		}
		for i := range s.Value {
			v[i] += s.Value[i]
		}
		if h := heaviest[k]; h == nil || s.Value[vi] > h.Value[vi] {
			heaviest[k] = s
		}
	}
	out := make([]report.Site, 0, len(sum))
	for k, v := range sum {
		out = append(out, report.Site{Func: k, Values: v, Callers: userCallers(heaviest[k], k, 3)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Values[vi] != out[j].Values[vi] {
			return out[i].Values[vi] > out[j].Values[vi]
		}
		return out[i].Func < out[j].Func
	})
	return out
}

// userCallers are up to n frames of s above site (nearest first) outside
// the standard library: a standard-library path has no dot in its first
// element; main is the user's.
func userCallers(s *profile.Sample, site string, n int) []string {
	var out []string
	above := false
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			name := ln.Function.Name
			if !above {
				above = name == site
				continue
			}
			if len(out) < n && !wire.StandardLibrary(name) && (len(out) == 0 || out[len(out)-1] != name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// totals sums each sample value over the profile.
func totals(p *profile.Profile) []int64 {
	t := make([]int64, len(p.SampleType))
	for _, s := range p.Sample {
		for i, v := range s.Value {
			t[i] += v
		}
	}
	return t
}

// targetSites drops the syscalls made through perfspy's instruments (the
// tracer's and profilers' goroutines run in the off-CPU window).
func targetSites(sites []syscalls.Site) []syscalls.Site {
	var out []syscalls.Site
	for _, s := range sites {
		mine := false
		for _, pf := range s.Stack {
			for _, f := range pf.Frames {
				mine = mine || isInstrument(f.Func)
			}
		}
		if !mine {
			out = append(out, s)
		}
	}
	return out
}

// gzipWriters are reused by encodeProfile: profile.Write makes a gzip
// writer for each profile, and a new writer's compressor (its hash
// tables) cost more than compressing the kilobyte a result's profile
// usually is.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// encodeProfile is p as profile.Write encodes it: protobuf, gzipped.
func encodeProfile(p *profile.Profile) ([]byte, error) {
	var raw, out bytes.Buffer
	if err := p.WriteUncompressed(&raw); err != nil {
		return nil, err
	}
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&out)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
