package diff_test

import (
	"fmt"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/diff"
	"github.com/perfspy/perfspy/profkey"
)

// build makes a one-sample-per-function allocation profile of a window of
// requests, as probe writes them.
func build(requests int, allocs map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}},
		Comments:   []string{fmt.Sprintf("%s%d", profkey.RequestsComment, requests)},
	}
	for name, n := range allocs {
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
		loc := &profile.Location{ID: fn.ID, Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{n}})
	}
	return p
}

// Compare two builds per request: the closure main.handler.func1 that
// became func2 (a closure was added above it) is the same key, and only
// encode's change shows.
func ExampleCompare() {
	before := &diff.Side{Files: []string{"before"}, Requests: []int64{1000},
		Profiles: []*profile.Profile{build(1000, map[string]int64{"main.handler.func1": 3000, "main.encode": 5000})}}
	after := &diff.Side{Files: []string{"after"}, Requests: []int64{2000},
		Profiles: []*profile.Profile{build(2000, map[string]int64{"main.handler.func2": 6000, "main.encode": 4000})}}
	res, err := diff.Compare(before, after, diff.Options{Folds: profkey.DefaultFolds})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res.Rows {
		fmt.Printf("%-20s %.2f -> %.2f per request\n", r.Key, r.FlatBeforePR, r.FlatAfterPR)
	}
	// Output:
	// main.encode          5.00 -> 2.00 per request
	// main.handler.func*   3.00 -> 3.00 per request
}
