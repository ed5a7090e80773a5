package offcpu

import (
	"sort"

	"github.com/perfspy/perfspy/internal/stacks"
	"github.com/perfspy/perfspy/schema"
)

// Group is the mean split of a group of requests, in nanoseconds.
type Group struct {
	Requests int
	Total    float64            // mean server-side duration
	Parts    map[string]float64 // mean of each of schema.RequestParts
	// Remainder is Total minus the parts: time the trace did not place
	// (a goroutine state it had not yet reported).
	Remainder float64
	Top       []Top // the waits with the most time, most first
}

// Top is the time a group's requests waited at one stack, per request of
// the group.
type Top struct {
	Reason, Wait string
	Func         string // the first frame outside the runtime
	WokenBy      string
	Nanos        float64
}

// Mean splits reqs' mean duration into Parts and lists their top n waits.
func Mean(res *Result, reqs []Request, n int) Group {
	g := Group{Requests: len(reqs), Parts: map[string]float64{}}
	for _, p := range schema.RequestParts {
		g.Parts[p] = 0
	}
	if len(reqs) == 0 {
		return g
	}
	k := float64(len(reqs))
	bySample := map[int]int64{}
	for _, r := range reqs {
		g.Total += float64(r.Total) / k
		for i, p := range schema.RequestParts {
			g.Parts[p] += float64(r.Parts[i]) / k
		}
		for _, w := range r.Waits {
			bySample[w.Sample] += w.Nanos
		}
	}
	// In Parts' order: a float sum in map order would move in its last digits.
	g.Remainder = g.Total
	for _, p := range schema.RequestParts {
		g.Remainder -= g.Parts[p]
	}
	g.Top = tops(res, bySample, k, n)
	return g
}

// userFunc is a sample's first frame outside the runtime: where the
// program waited.
func userFunc(s Sample) string {
	for _, f := range s.Stack {
		if !stacks.IsRuntime(f.Func) {
			return f.Func
		}
	}
	if len(s.Stack) > 0 {
		return s.Stack[0].Func
	}
	return "?"
}

// Tail returns the median request's group (the requests ranked from 45%
// to 55% by duration) and the slowest 1%, each with its top n waits.
func Tail(res *Result, n int) (p50, p99 Group) {
	reqs := append([]Request(nil), res.Requests...)
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].Total < reqs[j].Total })
	if len(reqs) == 0 {
		return Mean(res, nil, n), Mean(res, nil, n)
	}
	lo, hi := len(reqs)*45/100, len(reqs)*55/100
	if hi <= lo {
		hi = lo + 1
	}
	slow := (len(reqs) + 99) / 100 // at least one
	return Mean(res, reqs[lo:hi], n), Mean(res, reqs[len(reqs)-slow:], n)
}

// BackgroundTop lists the background's top n waits, in nanoseconds.
func BackgroundTop(res *Result, n int) []Top {
	bySample := map[int]int64{}
	for i, s := range res.Samples {
		if s.Scope == ScopeBackground {
			bySample[i] = s.Nanos
		}
	}
	return tops(res, bySample, 1, n)
}

// tops sums the nanoseconds of samples by (first user frame, reason,
// wait, waker), divides them by div and returns the n largest.
func tops(res *Result, bySample map[int]int64, div float64, n int) []Top {
	type tkey struct{ reason, wait, fn, woken string }
	sum := map[tkey]int64{}
	for i, ns := range bySample {
		s := res.Samples[i]
		sum[tkey{s.Reason, s.Wait, userFunc(s), s.WokenBy}] += ns
	}
	out := []Top{}
	for key, ns := range sum {
		out = append(out, Top{Reason: key.reason, Wait: key.wait, Func: key.fn, WokenBy: key.woken, Nanos: float64(ns) / div})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Nanos != b.Nanos {
			return a.Nanos > b.Nanos
		}
		if a.Func != b.Func {
			return a.Func < b.Func
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		if a.Wait != b.Wait {
			return a.Wait < b.Wait
		}
		return a.WokenBy < b.WokenBy
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
