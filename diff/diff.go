package diff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/pprof/profile"
	"golang.org/x/perf/benchmath"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/profwire"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/profstore"
)

// Side is one build's profiles: one file, or several merged.
type Side struct {
	Files []string
	// Profiles are parsed profiles, one per file, for a side made by
	// hand; Load leaves it empty and keeps its files decoded instead.
	Profiles []*profile.Profile
	Requests []int64 // per file; 0 when a file has no perfspy.requests
	// Ops is set when the counts are a benchmark's ops (a profile of
	// probe run -bench, or SetOps), not requests.
	Ops     bool
	decoded []*profwire.Profile
}

// profiles is the side's files decoded.
func (s *Side) profiles() []*profwire.Profile {
	if len(s.decoded) == 0 {
		for _, p := range s.Profiles {
			s.decoded = append(s.decoded, profwire.FromProfile(p))
		}
	}
	return s.decoded
}

// BenchComment marks the profiles of probe run -bench: their
// perfspy.requests count is the benchmark's op count.
const BenchComment = "perfspy.benchmark="

// SetOps sets every file's op count to n: a plain go test -memprofile
// profile carries none. n must be positive.
func (s *Side) SetOps(n int64) {
	for i := range s.Requests {
		s.Requests[i] = n
	}
	s.Ops = true
}

// LoadOptions bound and route Load's reads; the zero value has the
// defaults.
type LoadOptions struct {
	MaxBytes int64               // a profile inflated; 0 is limits.Profile
	Access   *storeaccess.Access // for pyroscope:// addresses
	// Route keeps one route's samples and its requests
	// (profkey.SelectRoute); "" keeps all.
	Route string
	// Callers makes each sample's leaf the innermost frame outside the
	// standard library (profkey.TrimStd): the module's function that
	// asked the library for the work, not internal/bytealg.MakeNoZero.
	Callers bool
}

// Load reads pprof files (gzipped or not) as one side, on as many cores
// as there are files.
func Load(paths []string, opt LoadOptions) (*Side, error) {
	if len(paths) == 0 {
		return nil, errors.New("no profile files")
	}
	s := &Side{Files: paths, decoded: make([]*profwire.Profile, len(paths))}
	errs := make([]error, len(paths))
	parallel(len(paths), func(i int) {
		s.decoded[i], errs[i] = loadOne(paths[i], opt)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, p := range s.decoded {
		s.Requests = append(s.Requests, profkey.RequestsIn(p.Comments))
		for _, c := range p.Comments {
			s.Ops = s.Ops || strings.HasPrefix(c, BenchComment)
		}
	}
	return s, nil
}

// parallel calls f(0..n-1), at most GOMAXPROCS at a time.
func parallel(n int, f func(i int)) {
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}(i)
	}
	wg.Wait()
}

// loadOne reads a profile file, or a profile store's selection
// (pyroscope://...: the merged profile of the selection, with its merged
// request count), and selects opt's route.
func loadOne(path string, opt LoadOptions) (*profwire.Profile, error) {
	var p *profile.Profile
	if profstore.IsSelection(path) {
		var err error
		if p, err = profstore.FetchAddress(context.Background(), opt.Access, path); err != nil {
			return nil, err
		}
	} else {
		limit := opt.MaxBytes
		if limit <= 0 {
			limit = limits.Profile
		}
		raw, err := limits.ReadFile(path, limit, "-max-profile-size")
		if err != nil {
			return nil, err
		}
		b, err := limits.Inflate(raw, limit, "-max-profile-size")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if opt.Route == "" && !opt.Callers {
			d, err := decode(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return d, nil
		}
		if p, err = Parse(b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if opt.Route != "" {
		if err := profkey.SelectRoute(p, opt.Route); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if opt.Callers {
		profkey.TrimStd(p)
	}
	return profwire.FromProfile(p), nil
}

// decode reads an encoded profile in one pass; one it cannot read (a
// legacy text profile, or no profile: profile.Parse says why) goes to
// the general parser.
func decode(b []byte) (*profwire.Profile, error) {
	if len(b) == 0 {
		return nil, errors.New("empty file, not a profile")
	}
	d, err := profwire.Decode(b)
	if err != nil {
		p, err := Parse(b)
		if err != nil {
			return nil, err
		}
		return profwire.FromProfile(p), nil
	}
	if len(d.Types) == 0 {
		return nil, errors.New("profile has no sample types")
	}
	return d, nil
}

// Parse decodes one profile and checks it is usable.
func Parse(b []byte) (*profile.Profile, error) {
	if len(b) == 0 {
		return nil, errors.New("empty file, not a profile")
	}
	p, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not a pprof profile: %w", err)
	}
	if len(p.SampleType) == 0 {
		return nil, errors.New("profile has no sample types")
	}
	for _, s := range p.Sample {
		if len(s.Value) != len(p.SampleType) {
			return nil, errors.New("corrupt profile: a sample's values do not match the sample types")
		}
	}
	return p, nil
}

// totalRequests is the side's requests, or 0 when a file has none.
func (s *Side) totalRequests() int64 {
	var t int64
	for _, r := range s.Requests {
		if r == 0 {
			return 0
		}
		t += r
	}
	return t
}

// Options configure Compare. Zero fields get defaults.
type Options struct {
	Sample string // sample type; default alloc_space when all have it, else the profiles' default, else the last type
	Folds  profkey.Folds
	// Stacks keeps every stack's values, which DiffProfile needs.
	Stacks bool
}

// Row is one key's values.
type Row struct {
	Key                   string
	FlatBefore, FlatAfter int64
	CumBefore, CumAfter   int64
	// Per request, when both sides carry perfspy.requests.
	FlatBeforePR, FlatAfterPR float64
	// P is the Mann-Whitney U p-value of the flat values per file, when
	// both sides have at least two files; -1 otherwise.
	P float64
}

// FlatDelta is after minus before.
func (r *Row) FlatDelta() int64 { return r.FlatAfter - r.FlatBefore }

// CumDelta is after minus before.
func (r *Row) CumDelta() int64 { return r.CumAfter - r.CumBefore }

// Result is a comparison. Rows add up: the sum of every row's flat delta is
// TotalAfter - TotalBefore.
type Result struct {
	Sample, Unit string
	PerRequest   bool
	// Per names what the counts divide by: "req" (requests) or "op" (a
	// benchmark's ops).
	Per                     string
	ReqBefore, ReqAfter     int64
	TotalBefore, TotalAfter int64
	Rows                    []Row // sorted by |flat delta| (per request when known), |cum delta|, key
	before, after           *agg
	keys                    *interner
}

// interner gives keys small IDs.
type interner struct {
	ids   map[string]int
	names []string
}

func (in *interner) id(s string) int {
	if id, ok := in.ids[s]; ok {
		return id
	}
	id := len(in.names)
	in.ids[s] = id
	in.names = append(in.names, s)
	return id
}

// agg is one side's values by key, per file.
type agg struct {
	flat, cum [][]int64 // [file][key]
	total     []int64   // per file
	stacks    map[string]int64
}

// sampleIndex picks the sample type.
func sampleIndex(p *profwire.Profile, name string) int { return p.TypeIndex(name) }

func chooseSample(before, after *Side, want string) (string, string, error) {
	all := append(append([]*profwire.Profile{}, before.profiles()...), after.profiles()...)
	files := append(append([]string{}, before.Files...), after.Files...)
	has := func(name string) error {
		for i, p := range all {
			if sampleIndex(p, name) < 0 {
				return fmt.Errorf("%s has no sample type %q (it has %s)", files[i], name, typeNames(p))
			}
		}
		return nil
	}
	if want != "" {
		if err := has(want); err != nil {
			return "", "", err
		}
	} else if has("alloc_space") == nil {
		want = "alloc_space"
	} else if d := all[0].DefaultType; d != "" && has(d) == nil {
		want = d // copies.pb.gz: copied_bytes, not the cleared bytes after it
	} else {
		// The last type of the first profile, else the one type all
		// have (a store's selection holds one).
		want = all[0].Types[len(all[0].Types)-1].Type
		if err := has(want); err != nil {
			common := ""
			for _, st := range all[0].Types {
				if has(st.Type) == nil {
					common = st.Type
				}
			}
			if common == "" {
				return "", "", fmt.Errorf("no common sample type: %s has %s, %v", files[0], typeNames(all[0]), err)
			}
			want = common
		}
	}
	unit := all[0].Types[sampleIndex(all[0], want)].Unit
	for i, p := range all {
		if u := p.Types[sampleIndex(p, want)].Unit; u != unit {
			return "", "", fmt.Errorf("%s measures %s in %s, %s in %s: profiles of different kinds", files[i], want, u, files[0], unit)
		}
		if p.Overflow[sampleIndex(p, want)] {
			return "", "", fmt.Errorf("%s: its %s values add up to more than 2^63: they overflow", files[i], want)
		}
	}
	return want, unit, nil
}

func typeNames(p *profwire.Profile) string {
	var n []string
	for _, st := range p.Types {
		n = append(n, st.Type+"/"+st.Unit)
	}
	return "[" + strings.Join(n, " ") + "]"
}

// Compare aggregates both sides by key and returns the rows.
func Compare(before, after *Side, opt Options) (*Result, error) {
	sample, unit, err := chooseSample(before, after, opt.Sample)
	if err != nil {
		return nil, err
	}
	r := &Result{Sample: sample, Unit: unit, keys: &interner{ids: map[string]int{}}}
	r.before, r.after = aggregate(before, after, sample, opt.Folds, r.keys, opt.Stacks)
	r.ReqBefore, r.ReqAfter = before.totalRequests(), after.totalRequests()
	r.PerRequest = r.ReqBefore > 0 && r.ReqAfter > 0
	r.Per = "req"
	if before.Ops || after.Ops {
		r.Per = "op"
	}
	nk := len(r.keys.names)
	sum := func(a *agg, m [][]int64) []int64 {
		out := make([]int64, nk)
		for _, f := range m {
			for k, v := range f {
				out[k] += v
			}
		}
		return out
	}
	fb, fa := sum(r.before, r.before.flat), sum(r.after, r.after.flat)
	cb, ca := sum(r.before, r.before.cum), sum(r.after, r.after.cum)
	for _, side := range []struct {
		name   string
		totals []int64
		sum    *int64
	}{{"before", r.before.total, &r.TotalBefore}, {"after", r.after.total, &r.TotalAfter}} {
		for _, t := range side.totals {
			if t > 0 && *side.sum > math.MaxInt64-t || t < 0 && *side.sum < math.MinInt64-t {
				return nil, fmt.Errorf("the %s profiles' %s values add up to more than 2^63: they overflow", side.name, sample)
			}
			*side.sum += t
		}
	}
	pvals := len(before.Files) >= 2 && len(after.Files) >= 2
	for k := 0; k < nk; k++ {
		if fb[k] == 0 && fa[k] == 0 && cb[k] == 0 && ca[k] == 0 {
			continue
		}
		row := Row{Key: r.keys.names[k], FlatBefore: fb[k], FlatAfter: fa[k], CumBefore: cb[k], CumAfter: ca[k], P: -1}
		if r.PerRequest {
			row.FlatBeforePR = float64(fb[k]) / float64(r.ReqBefore)
			row.FlatAfterPR = float64(fa[k]) / float64(r.ReqAfter)
		}
		if pvals {
			row.P = pValue(perFile(r.before, before, k), perFile(r.after, after, k))
		}
		r.Rows = append(r.Rows, row)
	}
	sort.Slice(r.Rows, func(i, j int) bool {
		a, b := &r.Rows[i], &r.Rows[j]
		// Per request when both sides have requests: the windows differ in length.
		if r.PerRequest {
			x, y := math.Abs(a.FlatAfterPR-a.FlatBeforePR), math.Abs(b.FlatAfterPR-b.FlatBeforePR)
			if x != y {
				return x > y
			}
		}
		if x, y := abs(a.FlatDelta()), abs(b.FlatDelta()); x != y {
			return x > y
		}
		if x, y := abs(a.CumDelta()), abs(b.CumDelta()); x != y {
			return x > y
		}
		return a.Key < b.Key
	})
	return r, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// perFile returns key k's flat value in each file, per request when known.
func perFile(a *agg, s *Side, k int) []float64 {
	out := make([]float64, len(a.flat))
	for f := range a.flat {
		v := float64(0)
		if k < len(a.flat[f]) {
			v = float64(a.flat[f][k])
		}
		if s.Requests[f] > 0 {
			v /= float64(s.Requests[f])
		}
		out[f] = v
	}
	return out
}

func pValue(x, y []float64) float64 {
	th := benchmath.DefaultThresholds
	c := benchmath.AssumeNothing.Compare(benchmath.NewSample(x, &th), benchmath.NewSample(y, &th))
	if math.IsNaN(c.P) {
		return 1
	}
	return c.P
}

// Remainder is the change that rows[:n] do not account for: the change of
// the total minus their flat deltas.
func (r *Result) Remainder(n int) int64 {
	d := r.TotalAfter - r.TotalBefore
	for i := 0; i < n && i < len(r.Rows); i++ {
		d -= r.Rows[i].FlatDelta()
	}
	return d
}

// DiffProfile is a pprof profile of the change: the after side's stacks
// with positive values, the before side's with negative ones, functions
// named by their keys, so that go tool pprof shows the delta per key.
func (r *Result) DiffProfile() *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: r.Sample, Unit: r.Unit}},
		PeriodType: &profile.ValueType{Type: r.Sample, Unit: r.Unit},
		Period:     1,
	}
	locs := map[int]*profile.Location{}
	loc := func(k int) *profile.Location {
		if l := locs[k]; l != nil {
			return l
		}
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: r.keys.names[k], SystemName: r.keys.names[k]}
		p.Function = append(p.Function, fn)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
		p.Location = append(p.Location, l)
		locs[k] = l
		return l
	}
	add := func(stacks map[string]int64, sign int64) {
		keys := make([]string, 0, len(stacks))
		for s := range stacks {
			keys = append(keys, s)
		}
		sort.Strings(keys)
		for _, s := range keys {
			v := stacks[s] * sign
			if v == 0 {
				continue
			}
			smp := &profile.Sample{Value: []int64{v}}
			for _, f := range strings.Split(strings.TrimSuffix(s, ";"), ";") {
				k, _ := strconv.Atoi(f)
				smp.Location = append(smp.Location, loc(k))
			}
			p.Sample = append(p.Sample, smp)
		}
	}
	add(r.before.stacks, -1)
	add(r.after.stacks, 1)
	p.Comments = []string{fmt.Sprintf("perfspy.diff: after minus before, %s", r.Sample)}
	return p
}
