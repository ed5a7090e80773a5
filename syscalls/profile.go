package syscalls

import (
	"sort"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/stacks"
)

// Profile writes sites as a pprof profile: sample type syscalls/count, the
// syscall name as the label "syscall", full stacks.
func Profile(sites []Site) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "syscalls", Unit: "count"}},
		PeriodType: &profile.ValueType{Type: "syscalls", Unit: "count"},
		Period:     1,
	}
	sorted := append([]Site(nil), sites...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i].Name+";"+stacks.Key(sorted[i].Stack), sorted[j].Name+";"+stacks.Key(sorted[j].Stack)
		return a < b
	})
	b := stacks.NewBuilder(p)
	for _, s := range sorted {
		p.Sample = append(p.Sample, &profile.Sample{
			Location: b.Locations(s.Stack),
			Value:    []int64{int64(s.Count)},
			Label:    map[string][]string{"syscall": {s.Name}},
		})
	}
	return p
}
