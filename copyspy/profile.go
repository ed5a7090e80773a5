package copyspy

import (
	"github.com/perfspy/perfspy/schema"
	"slices"
	"sort"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/stacks"
	"github.com/perfspy/perfspy/profkey"
)

// Buckets names the size buckets, as the sample label "bucket" spells them.
var Buckets = [4]string{"<64", "<1K", "<16K", ">=16K"}

// ReadReport reads the JSON file the agent's counter wrote.
func ReadReport(path string) (*wire.CopyReport, error) {
	var r wire.CopyReport
	if err := wire.ReadJSON(path, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ProfileVersion names the copies profile's contract. v2: copies
// (memmove) and clears (memclr) are sample types of their own
// (copy_calls, copied_bytes, clear_calls, cleared_bytes); v1 had one pair,
// copy_calls and copied_bytes, for both, told apart by the "kind" label.
const ProfileVersion = "perfspy.copies_profile=v2"

// Profile turns a report into a pprof profile: sample types
// copy_calls/count, copied_bytes/bytes (memmove), clear_calls/count and
// cleared_bytes/bytes (memclr), one sample per stack, kind and size bucket
// (the other kind's pair is 0), with labels "bucket", "kind" and "via"
// (the function that called memmove or memclr), "entry" (the runtime
// function the code called, profkey.EntryLabel), and "route" when the
// target marks requests (profkey.RouteLabel). Runtime frames above the
// first frame outside the runtime are dropped, so the leaf is the site.
func Profile(r *wire.CopyReport) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "copy_calls", Unit: "count"}, {Type: "copied_bytes", Unit: "bytes"},
			{Type: "clear_calls", Unit: "count"}, {Type: "cleared_bytes", Unit: "bytes"}},
		PeriodType:        &profile.ValueType{Type: "copy", Unit: "count"},
		Period:            1,
		DefaultSampleType: "copied_bytes",
		Comments:          []string{ProfileVersion},
	}
	b := stacks.NewBuilder(p)
	routed := slices.ContainsFunc(r.Sites, func(s wire.CopySite) bool { return s.Route != "" })
	for _, s := range sortedSites(r.Sites) {
		user, via := stacks.UserStack(s.Stack)
		stack := b.Locations(user)
		entry := stacks.RuntimeEntry(s.Stack)
		for bk := range Buckets {
			if s.Calls[bk] == 0 {
				continue
			}
			v := []int64{int64(s.Calls[bk]), int64(s.Bytes[bk]), 0, 0}
			if s.Kind == "memclr" {
				v = []int64{0, 0, int64(s.Calls[bk]), int64(s.Bytes[bk])}
			}
			p.Sample = append(p.Sample, &profile.Sample{
				Location: stack,
				Value:    v,
				Label:    map[string][]string{"bucket": {Buckets[bk]}, "kind": {s.Kind}, "via": {via}},
			})
			if entry != "" && entry != via {
				p.Sample[len(p.Sample)-1].Label[profkey.EntryLabel] = []string{entry}
			}
			if routed {
				route := s.Route
				if route == "" {
					route = profkey.Background
				}
				p.Sample[len(p.Sample)-1].Label[profkey.RouteLabel] = []string{route}
			}
		}
	}
	return p
}

// sortedSites orders sites by their stacks, so output is deterministic.
func sortedSites(sites []wire.CopySite) []wire.CopySite {
	out := append([]wire.CopySite(nil), sites...)
	key := func(s wire.CopySite) string { return s.Kind + ";" + s.Route + ";" + stacks.Key(s.Stack) }
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// Sites groups a report by (user frame, direct caller, kind), sorted by
// bytes, then calls, then name.
func Sites(r *wire.CopyReport) []schema.CopySite {
	m := map[[3]string]*schema.CopySite{}
	for _, s := range r.Sites {
		direct, user := stacks.Sites(s.Stack)
		k := [3]string{user, direct, s.Kind}
		st := m[k]
		if st == nil {
			st = &schema.CopySite{User: user, Direct: direct, Kind: s.Kind}
			m[k] = st
		}
		for b := range Buckets {
			st.Calls[b] += int64(s.Calls[b])
			st.Bytes[b] += int64(s.Bytes[b])
		}
	}
	out := make([]schema.CopySite, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		if a.TotalBytes() != b.TotalBytes() {
			return a.TotalBytes() > b.TotalBytes()
		}
		if a.TotalCalls() != b.TotalCalls() {
			return a.TotalCalls() > b.TotalCalls()
		}
		if a.User != b.User {
			return a.User < b.User
		}
		if a.Direct != b.Direct {
			return a.Direct < b.Direct
		}
		return a.Kind < b.Kind
	})
	return out
}
