package allocspy

import (
	"slices"
	"sort"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/stacks"
	"github.com/perfspy/perfspy/profkey"
)

// SampleTypes are the sample types of allocs.pb.gz written from
// allocspy, in this order. alloc_objects counts objects as the program
// asked for them and alloc_space the bytes they took (size classes);
// heap_blocks counts the objects that took a heap slot of their own (what
// the heap profile counts), requested_space the bytes asked for. Each
// call makes new ones: encoding a profile writes into its sample types,
// so two profiles must not share them.
func SampleTypes() []*profile.ValueType {
	return []*profile.ValueType{
		{Type: "alloc_objects", Unit: "count"},
		{Type: "alloc_space", Unit: "bytes"},
		{Type: "heap_blocks", Unit: "count"},
		{Type: "requested_space", Unit: "bytes"},
	}
}

// ReadReport reads the JSON file the agent's counter wrote.
func ReadReport(path string) (*wire.AllocReport, error) {
	var r wire.AllocReport
	if err := wire.ReadJSON(path, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Profile turns a report into a pprof profile with SampleTypes, one sample
// per stack. As in runtime/pprof's heap profile, the runtime frames above
// the first frame outside the runtime are dropped, so the leaf is the site;
// the function that called mallocgc is the sample label "via", and the
// request's route the label "route" (profkey.RouteLabel) when the target
// marks requests. An
// allocation the runtime made inside another one (a GC assist that ends the
// mark phase takes a sudog; see NestedAlloc) keeps its runtime frames, so
// that the runtime's allocation is not charged to the line that asked for
// the outer one.
func Profile(r *wire.AllocReport) *profile.Profile {
	p := &profile.Profile{
		SampleType:        SampleTypes(),
		DefaultSampleType: "alloc_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
	}
	b := stacks.NewBuilder(p)
	sites := append([]wire.AllocSite(nil), r.Sites...)
	key := func(s wire.AllocSite) string { return s.Route + "\x00" + stacks.Key(s.Stack) }
	sort.Slice(sites, func(i, j int) bool { return key(sites[i]) < key(sites[j]) })
	routed := slices.ContainsFunc(sites, func(s wire.AllocSite) bool { return s.Route != "" })
	for _, s := range sites {
		stack, via := wire.AllocStack(s.Stack)
		labels := map[string][]string{"via": {via}}
		if e := stacks.RuntimeEntry(s.Stack); e != "" && e != via {
			labels[profkey.EntryLabel] = []string{e}
		}
		p.Sample = append(p.Sample, &profile.Sample{
			Location: b.Locations(stack),
			Value:    []int64{int64(s.Objects), int64(s.AllocBytes), int64(s.Blocks), int64(s.ReqBytes)},
			Label:    routeLabel(labels, routed, s.Route),
		})
	}
	return p
}

// Totals sums a report: objects, bytes taken, blocks, bytes asked for.
func Totals(r *wire.AllocReport) (objects, allocBytes, blocks, reqBytes uint64) {
	for _, s := range r.Sites {
		objects += s.Objects
		allocBytes += s.AllocBytes
		blocks += s.Blocks
		reqBytes += s.ReqBytes
	}
	return
}

// NestedAlloc reports whether an allocation's stack passes through
// mallocgc again (wire.NestedAlloc).
var NestedAlloc = wire.NestedAlloc

// routeLabel adds the route label to labels when the report has routes:
// the site's route, or profkey.Background.
func routeLabel(labels map[string][]string, routed bool, route string) map[string][]string {
	if routed {
		if route == "" {
			route = profkey.Background
		}
		labels[profkey.RouteLabel] = []string{route}
	}
	return labels
}

// RetainedProfile is a retained report as a pprof profile: inuse_objects
// and inuse_space per stack, each stack from the frame that asked for the
// memory outward, as in Profile's.
func RetainedProfile(r *wire.RetainedReport) *profile.Profile {
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}},
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
	}
	b := stacks.NewBuilder(p)
	sites := slices.Clone(r.Sites)
	slices.SortFunc(sites, func(x, y wire.RetainedSite) int { return strings.Compare(stacks.Key(x.Stack), stacks.Key(y.Stack)) })
	for _, s := range sites {
		user, via := wire.UserStack(s.Stack)
		sample := &profile.Sample{Location: b.Locations(user), Value: []int64{s.Objects, s.Bytes}}
		if e := stacks.RuntimeEntry(s.Stack); e != "" && e != via {
			sample.Label = map[string][]string{profkey.EntryLabel: {e}}
		}
		p.Sample = append(p.Sample, sample)
	}
	return p
}
