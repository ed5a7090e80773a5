package probe

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/benchwin"
	"github.com/perfspy/perfspy/schema"
)

// steadyAllocs gives the result its steady state from the counted run's
// two warm runs: the (M+1)-op run's sites minus the 1-op run's are M ops
// once warm, times N/M (steadyScale) N ops
// (allocs-steady.pb.gz); the reported run's sites minus those are what it
// paid once (allocs-once.pb.gz). p is the reported run's profile. Counts
// are exact, so the two warm runs need no repeats; each is checked
// against testing's -benchmem count of the same run.
func (o *benchOutput) steadyAllocs(f *schema.BenchFigures, e benchwin.Event, p *profile.Profile, folder string, comments []string) error {
	st := e.Steady
	switch {
	case st == nil:
		return nil
	case st.Error != "":
		f.SteadyNote = "steady state not measured: " + st.Error
		return nil
	case st.Linear:
		return o.linearAllocs(f, e, p, folder, comments)
	}
	scale, err := steadyScale(e)
	if err != nil {
		return err
	}
	if len(st.Allocs) != 2 {
		return fmt.Errorf("%s: the steady-state runs: %d reports, want 2", e.Name, len(st.Allocs))
	}
	var warm [2]*profile.Profile
	for i, name := range st.Allocs {
		rep, err := o.win.reports.Allocs(name)
		if err != nil {
			return err
		}
		objects, allocBytes, _, _ := allocspy.Totals(rep)
		if rep.Dropped > 0 || objects != st.BenchmemAllocs[i] || allocBytes != st.BenchmemBytes[i] {
			o.mismatch = append(o.mismatch, fmt.Sprintf("%s: the %d-op steady-state run: allocspy counted %d allocations, %d B (%d dropped); -benchmem counted %d, %d B",
				e.Name, st.N[i], objects, allocBytes, rep.Dropped, st.BenchmemAllocs[i], st.BenchmemBytes[i]))
		}
		warm[i] = allocspy.Profile(rep)
	}
	steady, err := diffProfiles(warm[1], warm[0])
	if err != nil {
		return fmt.Errorf("%s: the steady state: %w", e.Name, err)
	}
	// What the runtime allocates on its own stack (a thread it starts
	// when a timer call restarts the world) falls in one warm run or the
	// other by chance: not an op's cost. It stays in what was paid once.
	steady.Sample = slices.DeleteFunc(steady.Sample, runtimeOnly)
	steady.Scale(float64(scale))
	once, err := diffProfiles(p, steady)
	if err != nil {
		return fmt.Errorf("%s: what was paid once: %w", e.Name, err)
	}
	// A run pays no less than its ops' steady cost: a stack the warm
	// runs counted more of than the reported run (a pool's refills after
	// each collection, which another run has in another amount; regexp's
	// backtracking states, validator's email check) was paid at its ops,
	// not once. Such a stack is the reported run's in the steady figures
	// (the warm runs' scaled difference multiplies that noise by N/M); a
	// "paid once" below 0 is never reported.
	once.Sample = slices.DeleteFunc(once.Sample, func(s *profile.Sample) bool {
		return s.Value[0] < 0 || s.Value[1] < 0 || s.Value[0] == 0 && s.Value[1] == 0
	})
	if steady, err = diffProfiles(p, once); err != nil {
		return fmt.Errorf("%s: the steady state: %w", e.Name, err)
	}
	ts, to := totals(steady), totals(once)
	n := float64(e.N)
	f.PerOp.Allocs, f.PerOp.AllocBytes = round(float64(ts[0])/n, 4), round(float64(ts[1])/n, 4)
	f.Steady = &schema.BenchSteady{Runs: st.N, OnceAllocs: to[0], OnceBytes: to[1], OnceSites: onceSites(once)}
	if err := o.firstOp(f, e, steady); err != nil {
		return err
	}
	o.addTop(folder, "allocations once warm", "allocs", steady, 0, e.N)
	if err := o.profile(f, folder, "allocs_steady", steady, comments); err != nil {
		return err
	}
	return o.profile(f, folder, "allocs_once", once, comments)
}

// firstOp is what the benchmark's first run (1 op, before the reported
// run) paid beyond one op once warm: its sites less steady's (N ops)
// divided by N, stack by stack, none below 0.
func (o *benchOutput) firstOp(f *schema.BenchFigures, e benchwin.Event, steady *profile.Profile) error {
	if e.First == nil || e.First.Allocs == "" || e.First.N != 1 {
		return nil
	}
	rep, err := o.win.reports.Allocs(e.First.Allocs)
	if err != nil {
		return err
	}
	objects, allocBytes, _, _ := allocspy.Totals(rep)
	if rep.Dropped > 0 || objects != e.First.BenchmemAllocs || allocBytes != e.First.BenchmemBytes {
		o.mismatch = append(o.mismatch, fmt.Sprintf("%s: the first run: allocspy counted %d allocations, %d B (%d dropped); -benchmem counted %d, %d B",
			e.Name, objects, allocBytes, rep.Dropped, e.First.BenchmemAllocs, e.First.BenchmemBytes))
	}
	op := sampleCopy(steady)
	op.Scale(1 / float64(e.N))
	first, err := diffProfiles(allocspy.Profile(rep), op)
	if err != nil {
		return fmt.Errorf("%s: the first run: %w", e.Name, err)
	}
	first.Sample = slices.DeleteFunc(first.Sample, func(s *profile.Sample) bool {
		return s.Value[0] < 0 || s.Value[1] < 0 || s.Value[0] == 0 && s.Value[1] == 0
	})
	t := totals(first)
	f.Steady.First = &schema.BenchFirst{Allocs: t[0], Bytes: t[1], Sites: onceSites(first)}
	return nil
}

// steadyScale is N/M for a result whose warm runs were of 1 and M+1 ops:
// the recorder measures M = N/4 ops when 4 divides N, N/2 when 2 does, N
// otherwise (the warm runs then cost a quarter of the reported run's
// ops), or, for an op whose M ops would take more than extraBudget, a
// smaller divisor of N (benchwin.BudgetEnv). M always divides N: a whole
// scale keeps what was paid once a whole count.
func steadyScale(e benchwin.Event) (int64, error) {
	want := e.N
	switch {
	case e.N%4 == 0:
		want = e.N / 4
	case e.N%2 == 0:
		want = e.N / 2
	}
	m := e.Steady.N[1] - 1
	if e.Steady.N[0] != 1 || want < 1 || m < 1 || m > want || e.N%m != 0 {
		return 0, fmt.Errorf("%s: the steady-state runs were of %v ops, want [1 %d] at N = %d (or a divisor of N below %d, plus 1, for a long op)", e.Name, e.Steady.N, want+1, e.N, want)
	}
	return int64(e.N / m), nil
}

// linearAllocs is the steady state of a result whose reported run counted
// N times its first op (benchwin.Steady.Linear): the reported run itself,
// nothing paid once.
func (o *benchOutput) linearAllocs(f *schema.BenchFigures, e benchwin.Event, p *profile.Profile, folder string, comments []string) error {
	if e.Steady.N != [2]int{1, e.N} {
		return fmt.Errorf("%s: the steady state's shortcut compares runs of %v ops, want [1 %d]", e.Name, e.Steady.N, e.N)
	}
	once, err := diffProfiles(p, p)
	if err != nil {
		return fmt.Errorf("%s: the steady state: %w", e.Name, err)
	}
	steady, err := diffProfiles(p, once)
	if err != nil {
		return fmt.Errorf("%s: the steady state: %w", e.Name, err)
	}
	f.Steady = &schema.BenchSteady{Runs: e.Steady.N, Linear: true}
	if err := o.firstOp(f, e, steady); err != nil {
		return err
	}
	o.addTop(folder, "allocations once warm", "allocs", steady, 0, e.N)
	if err := o.profile(f, folder, "allocs_steady", steady, comments); err != nil {
		return err
	}
	return o.profile(f, folder, "allocs_once", once, comments)
}

// onceSitesShown is how many sites of what was paid once summary.json
// lists before its "(other sites)" row.
const onceSitesShown = 10

// onceSites are p's sites by bytes, the first onceSitesShown and then the
// rest in one row: the rows add up to p's totals.
func onceSites(p *profile.Profile) []schema.OnceSite {
	var out []schema.OnceSite
	var rest schema.OnceSite
	for _, site := range topSites(p, 1) {
		if site.Values[0] == 0 && site.Values[1] == 0 {
			continue
		}
		if len(out) < onceSitesShown {
			out = append(out, schema.OnceSite{Func: site.Func, Allocs: site.Values[0], Bytes: site.Values[1]})
			continue
		}
		rest.Allocs, rest.Bytes = rest.Allocs+site.Values[0], rest.Bytes+site.Values[1]
	}
	if rest != (schema.OnceSite{}) {
		rest.Func = "(other sites)"
		out = append(out, rest)
	}
	return out
}

// diffProfiles is a minus b (subtract), its stacks ending at
// testing's runN: the warm runs are started by the recorder, the reported
// one by testing, and the frames beyond runN are not the op's.
func diffProfiles(a, b *profile.Profile) (*profile.Profile, error) {
	a, b = sampleCopy(a), sampleCopy(b)
	endAtRunN(a)
	endAtRunN(b)
	d, err := subtract(a, b, nil)
	if err != nil {
		return nil, err
	}
	d.Comments = nil
	return d, nil
}

// steadyRetained makes the retained figures per op once warm, from the
// counted run's two warm runs: the (M+1)-op run's stacks left live minus
// the 1-op run's, times N/M, are what N ops leave; what the reported run left beyond
// that is a fixed amount (one buffer a global keeps), not a cost per op.
// It returns the profile the per-op figures come from: rp when the steady
// state was not measured.
func (o *benchOutput) steadyRetained(f *schema.BenchFigures, e benchwin.Event, rp *profile.Profile) (*profile.Profile, error) {
	st := e.Steady
	if st == nil || st.Error != "" || f.Steady == nil {
		return rp, nil
	}
	if st.Linear {
		var zero int64
		f.Steady.OnceRetainedObjects, f.Steady.OnceRetainedBytes = &zero, &zero
		return rp, nil
	}
	scale, err := steadyScale(e)
	if err != nil {
		return nil, err
	}
	if len(st.Retained) != 2 {
		return nil, fmt.Errorf("%s: what the steady-state runs left: %d reports, want 2", e.Name, len(st.Retained))
	}
	var warm [2]*profile.Profile
	for i, name := range st.Retained {
		rep, err := o.win.reports.Retained(name)
		if err != nil {
			return nil, err
		}
		warm[i] = allocspy.RetainedProfile(rep)
	}
	steady, err := diffProfiles(warm[1], warm[0])
	if err != nil {
		return nil, fmt.Errorf("%s: the retained steady state: %w", e.Name, err)
	}
	steady.Scale(float64(scale))
	ts, tr := totals(steady), totals(rp)
	objects, bytes := tr[0]-ts[0], tr[1]-ts[1]
	f.Steady.OnceRetainedObjects, f.Steady.OnceRetainedBytes = &objects, &bytes
	return steady, nil
}

// runtimeOnly reports whether every frame of s is the runtime's: an
// allocation the runtime made for itself on the system stack.
func runtimeOnly(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function == nil || !strings.HasPrefix(l.Function.Name, "runtime.") && !strings.HasPrefix(l.Function.Name, "internal/runtime/") {
				return false
			}
		}
	}
	return len(s.Location) > 0
}

// runN is the function of package testing that calls the benchmark.
const runN = "testing.(*B).runN"

// endAtRunN cuts each of p's stacks after the frame of runN.
func endAtRunN(p *profile.Profile) {
	for _, s := range p.Sample {
		for i, loc := range s.Location {
			if slices.ContainsFunc(loc.Line, func(l profile.Line) bool { return l.Function != nil && l.Function.Name == runN }) {
				s.Location = s.Location[:i+1]
				break
			}
		}
	}
}
