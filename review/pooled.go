package review

// A pool's objects that no longer come back: with its Put deleted (or
// given another object), a sync.Pool's New runs at every Get, and what the
// code then does with a new object (a buffer's first growth) allocates
// anew. No diagnostic of the compiler's says so; the stacks do. judge.go
// counts such a New as the code's own once it runs at half the requests
// or more; here each annotation under it is given that reason.

import (
	"fmt"
	"strings"

	"github.com/perfspy/perfspy/schema"
)

// poolGet is the frame through which a pool's New runs.
const poolGet = "sync.(*Pool).Get"

// poolReasons gives each allocation annotation whose stack runs a pool's
// New, and each one of the function that called Get whose line moved
// beside it, the pool's reason, by index in anns.
func poolReasons(anns []schema.Annotation) map[int]string {
	type caller struct{ item, subject, fn string }
	getAt := map[caller]string{} // the function that called Get -> its frame
	out := map[int]string{}
	for i, a := range anns {
		if !strings.HasPrefix(a.Metric, "allocs/") {
			continue
		}
		for j, f := range a.Stack {
			if j == 0 || !strings.HasPrefix(f, poolGet+" ") {
				continue
			}
			fn, pos := splitFrame(a.Stack[j-1])
			getAt[caller{a.Item, a.Subject, fn}] = pos
			if a.Delta > 0 {
				out[i] = fmt.Sprintf("the pool's New runs at %s's Get (%s) at every %s now: the objects Get hands out do not come back (a Put deleted, skipped, or given another object); only the refills after a GC empties a pool follow the GC's cadence", shortFunc(fn), pos, perOf(a.Metric))
			} else {
				out[i] = fmt.Sprintf("the pool's New runs less at %s's Get (%s): its objects come back", shortFunc(fn), pos)
			}
			break
		}
	}
	for i, a := range anns {
		if _, ok := out[i]; ok || !strings.HasPrefix(a.Metric, "allocs/") || a.Delta <= 0 {
			continue
		}
		if pos, ok := getAt[caller{a.Item, a.Subject, a.Func}]; ok {
			out[i] = fmt.Sprintf("the object the pool hands out at %s is a new one at every %s now, so what this line does with it (a buffer's first growth) allocates anew", pos, perOf(a.Metric))
		}
	}
	return out
}

// splitFrame splits a stack's frame, "pkg.F (file.go:12)", into the
// function and its position.
func splitFrame(f string) (fn, pos string) {
	fn, pos, _ = strings.Cut(f, " (")
	return fn, strings.TrimSuffix(pos, ")")
}

// perOf is what a metric is counted per: "op" or "req".
func perOf(metric string) string {
	if _, per, ok := strings.Cut(metric, "/"); ok {
		if per == "req" {
			return "request"
		}
		return per
	}
	return "request"
}
