package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/benchwin"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
	"github.com/perfspy/perfspy/syscalls"
)

// benchOutput assembles a benchmark run's results folder.
type benchOutput struct {
	cfg      BenchConfig
	tgt      *withagent.Binary
	commit   string
	dir      string
	plain    map[string][]plainResult
	cuts     []string // the extra runs cut short, and why
	win      *benchWindow
	files    map[string][]byte
	s        *schema.BenchSummary
	mismatch []string
	top      map[string][]report.TopTable // by benchmark folder, for report.md
	// beside are the counted run's allocations in the timed region that
	// no op made (not under testing's runN), by benchmark folder.
	beside map[string]besideOps
	// traced are the traced run's results by name (occurrences).
	traced map[string][]int
	// streamed are the results' counted figures made while the counted
	// run went on, by event index (figureStream); written are the files
	// the stream wrote then, which finish does not write again.
	streamed []streamed
	written  map[string]bool
}

// countedNote says how long the counted run's benchmarks ran when it
// was not the timing run's -benchtime.
func countedNote(cfg BenchConfig) string {
	if cfg.BenchTime == "" {
		return ", -benchtime " + countedBenchTime
	}
	return ""
}

func (o *benchOutput) write() error {
	o.s = &schema.BenchSummary{
		Schema: SummarySchema, Kind: "benchmarks", Target: o.cfg.Target, Commit: o.commit, Go: o.tgt.GoVersion, GOARCH: o.tgt.GOARCH, Exec: strings.Join(o.cfg.Exec, " "),
		Bench: o.cfg.Bench, Benchtime: o.cfg.BenchTime, Count: o.cfg.Count, Build: o.tgt.BuildCheck,
		Sources: map[string]string{
			"allocs": "allocspy+benchwin", "benchmem": "testing -benchmem (the counted run" + countedNote(o.cfg) + ")",
			"ns": "plain test binary", "copies": "none", "syscalls": "none",
		},
		Files: map[string]string{"plain_output": "bench-plain.txt", "counted_output": "bench-window.txt"},
	}
	if o.tgt.Copies {
		o.s.Sources["copies"] = "copyspy-overlay+benchwin"
	}
	if o.win.offcpu != nil {
		o.s.Sources["offcpu"] = "runtime-trace+benchwin-marks (a run of its own)"
		o.s.Blind = append(o.s.Blind, "off-CPU: waits that end in the timed region, from its start, per op of the b.N of the run under the tracer (offcpu_n: a quarter of -benchtime Nx, or for a long op the ops that fit in 100 ms); syscalls outside entersyscall (the runtime's futex, epoll) are not seen")
	}
	if o.win.counted {
		o.s.Sources["syscalls"] = syscalls.Source + "+benchwin-gate"
		o.s.Blind = append(o.s.Blind, "syscalls: every thread's in the timed region, the runtime's own (sysmon, GC) included")
	} else {
		o.s.Blind = append(o.s.Blind, "syscalls not counted: "+o.win.sysReason)
	}
	if o.cfg.Retained {
		o.s.Sources["retained"] = "allocspy-live+benchwin (the counted run: the heap blocks its timed region made, each tracked by address from its allocation, still in use at the run's end after what two GCs free: the pools emptied, one GC, a second when blocks are left)"
		o.s.Sources["goroutines_left"] = "goroutine-dump+benchwin (the counted run: goroutines alive at its end that were not at its start)"
		o.s.Blind = append(o.s.Blind, "retained: the blocks made in the timed region (StopTimer's pauses left out, as the counts leave them); a value a global keeps from the last op shows as 1/N; an object packed into a tiny block is the block's first object's; goroutines left: from the start or the last ResetTimer to the benchmark function's return")
	}
	if o.cfg.Instructions {
		o.s.Sources["instructions"] = "callgrind: the plain test binary, its runtime's random choices taken out, at -benchtime 2x and (2+K)x, the difference per op (K in instructions_ops)"
		o.s.Blind = append(o.s.Blind, "instructions/op: the ops of the difference, at GOGC=off (a GC's instructions are not in it) and without asynchronous preemption; what a benchmark function pays once per call cancels; ns/op was timed by the same repeatable build (map seeds fixed, sysmon not woken by a system call)")
		o.s.Sources["compiler_copies"] = "the compiled code's own copies (16- and 32-byte vector stores, REP; MOVS), by their executions in the instructions' difference"
		o.s.Blind = append(o.s.Blind, "compiler-copied-B/op: the compiler's own copies of 16 bytes or more in code compiled from Go (a struct or array assigned by value, a 16-byte header moved through a vector register); smaller moves (a pointer, an int) and assembly (memmove's own, copied-B/op's) are not counted, and clears (stores of X15, always zero) are no copies")
		for _, name := range slices.Sorted(maps.Keys(o.win.instructions)) {
			if why := o.win.instructions[name].unstable; why != "" {
				o.s.Blind = append(o.s.Blind, "instructions/op of "+name+" refused: "+why)
			}
		}
	}
	o.s.Blind = append(o.s.Blind, "allocations, copies: every goroutine's in the timed region, as -benchmem counts them; copies the compiler emits itself (a struct or array assigned by value) never reach memmove: with -instructions they are compiler-copied-B/op")
	if len(o.cfg.Exec) > 0 {
		o.s.Sources["ns"] = "plain test binary under " + o.cfg.Exec[0]
		o.s.Blind = append(o.s.Blind, "ns/op: the binary ran under -exec "+o.cfg.Exec[0]+" (an emulator's time, not the machine's); counts are the program's own")
	}
	o.s.Cut = o.cuts
	o.top = map[string][]report.TopTable{}
	// Each run's results are matched by name and occurrence, never by
	// position: sub-benchmarks named from a map come in another order in
	// each run.
	o.traced = occurrences(o.win.offcpu, func(w benchWaits) string { return w.name })
	counted := occurrences(o.win.events, func(e benchwin.Event) string { return e.Name })
	o.s.Blind = append(o.s.Blind, unmatched("the traced run", counted, o.traced, len(o.win.offcpu) > 0)...)
	figs, err := o.allFigures()
	if err != nil {
		return err
	}
	o.s.Benchmarks = append(o.s.Benchmarks, figs...)
	return o.finish()
}

// allFigures makes every result's figures, profiles and flame graphs, a
// result on each core at once (hundreds of profiles to encode and draw),
// each into forks of o that are merged back in the results' order: the
// output is what one at a time makes. A result's counted and retained
// figures come from the stream when it made them. The first error in
// that order is returned.
func (o *benchOutput) allFigures() ([]schema.BenchFigures, error) {
	events := o.win.events
	res := make([]streamed, len(events))
	ks := make([]int, len(events))
	seen := map[string]int{}
	for i, e := range events {
		ks[i] = seen[e.Name]
		seen[e.Name]++
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(events)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(events); i = int(next.Add(1) - 1) {
				if i < len(o.streamed) && o.streamed[i].ok && o.streamed[i].k == ks[i] && sameEvent(o.streamed[i].e, events[i]) {
					res[i] = o.streamed[i]
				} else {
					res[i] = o.runFigures(events[i], ks[i])
				}
				r := &res[i]
				if r.err != nil {
					continue
				}
				r.later, r.last = o.fork(), o.fork()
				r.later.beside, r.last.beside = r.counts.beside, r.counts.beside
				r.err = r.later.laterFigures(&r.f, events[i], ks[i])
				if r.err == nil {
					r.err = r.last.lastFigures(&r.f, events[i], ks[i])
				}
			}
		}()
	}
	wg.Wait()
	var figs []schema.BenchFigures
	for _, r := range res {
		if r.err != nil {
			return nil, r.err
		}
		// The order figures (one at a time) makes them in: counted,
		// syscalls and off-CPU, retained, instructions and go test's.
		for _, c := range []*benchOutput{r.counts, r.later, r.retained, r.last} {
			maps.Copy(o.files, c.files)
			for folder, tops := range c.top {
				o.top[folder] = append(o.top[folder], tops...)
			}
			o.mismatch = append(o.mismatch, c.mismatch...)
			o.s.Blind = append(o.s.Blind, c.s.Blind...)
		}
		for name := range r.written {
			if o.written == nil {
				o.written = map[string]bool{}
			}
			o.written[name] = true
		}
		figs = append(figs, r.f)
	}
	return figs, nil
}

// runFigures makes a result's figures that the counted run alone gives:
// its counted figures and what its ops left, each on a fork of o.
func (o *benchOutput) runFigures(e benchwin.Event, k int) streamed {
	r := streamed{e: e, k: k, ok: true, counts: o.fork(), retained: o.fork()}
	r.f, r.err = r.counts.countedFigures(e, k)
	if r.err == nil {
		folder, comments := o.resultFolder(e, k)
		r.err = r.retained.retainedFigures(&r.f, e, folder, comments)
	}
	return r
}

// sameEvent reports whether two reads of the events file gave the same
// result at one place (the stream's, while the run went on, and the
// whole file's after it).
func sameEvent(a, b benchwin.Event) bool {
	return a.Name == b.Name && a.Seq == b.Seq && a.N == b.N && a.Allocs == b.Allocs && a.Copies == b.Copies && a.Retained == b.Retained
}

// fork is o with the outputs a result's figures add (files, top tables,
// mismatches, blind spots) its own; the rest is read only.
func (o *benchOutput) fork() *benchOutput {
	c := *o
	c.files, c.top, c.mismatch, c.beside = map[string][]byte{}, map[string][]report.TopTable{}, nil, nil
	c.s = &schema.BenchSummary{}
	return &c
}

// occurrences indexes a run's results by name: the positions of each
// name's results, in the run's order.
func occurrences[T any](rs []T, name func(T) string) map[string][]int {
	out := map[string][]int{}
	for i, r := range rs {
		out[name(r)] = append(out[name(r)], i)
	}
	return out
}

// unmatched says which results one run had and the other did not, when
// that run ran: the counted run's results it lacks have no figures of it.
func unmatched(run string, counted, other map[string][]int, ran bool) []string {
	if !ran {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(counted)) {
		if n, m := len(counted[name]), len(other[name]); m < n {
			out = append(out, fmt.Sprintf("%s: %d of its %d results are not in %s, which has no figures for them", name, n-m, n, run))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(other)) {
		if n, m := len(counted[name]), len(other[name]); m > n {
			out = append(out, fmt.Sprintf("%s: %s has %d results of it, the counted run %d; the rest are left out", name, run, m, n))
		}
	}
	return out
}

// finish writes summary.json, bench.txt and report.md beside the profiles.
func (o *benchOutput) finish() error {
	o.s.Files["summary"], o.s.Files["bench"], o.s.Files["report"] = "summary.json", "bench.txt", "report.md"
	sb, err := json.MarshalIndent(o.s, "", "  ")
	if err != nil {
		return err
	}
	o.files["summary.json"] = append(sb, '\n')
	var bb, rb bytes.Buffer
	if err := report.BenchText(&bb, o.s); err != nil {
		return err
	}
	o.files["bench.txt"] = bb.Bytes()
	(&report.Bench{Summary: o.s, Dir: o.dir, Top: o.top}).Markdown(&rb)
	o.files["report.md"] = rb.Bytes()
	left := map[string][]byte{}
	for name, b := range o.files {
		if !o.written[name] {
			left[name] = b
		}
	}
	return writeFiles(o.dir, left)
}

// countedFigures are the figures of a result that its counted run's
// reports alone give (allocations, copies), checked against -benchmem:
// figureStream makes them while the run goes on. laterFigures and
// lastFigures add the others.
func (o *benchOutput) countedFigures(e benchwin.Event, k int) (schema.BenchFigures, error) {
	f := schema.BenchFigures{Name: e.Name, N: e.N, Files: map[string]string{}}
	if e.Error != "" {
		return f, fmt.Errorf("%s: the benchmark window: %s", e.Name, e.Error)
	}
	if e.N <= 0 {
		return f, fmt.Errorf("%s: testing reported %d ops", e.Name, e.N)
	}
	folder, comments := o.resultFolder(e, k)
	n := float64(e.N)
	f.Benchmem = schema.BenchMem{Allocs: round(float64(e.BenchmemAllocs)/n, 4), Bytes: round(float64(e.BenchmemBytes)/n, 4), AllocsTotal: e.BenchmemAllocs, BytesTotal: e.BenchmemBytes}
	if e.StartupAllocs > 0 {
		f.Startup = &schema.BenchStartup{Allocs: e.StartupAllocs, Bytes: e.StartupBytes}
	}
	if err := o.allocFigures(&f, e, folder, comments); err != nil {
		return f, err
	}
	if e.Copies != "" {
		if err := o.copyFigures(&f, e, folder, comments); err != nil {
			return f, err
		}
	}
	return f, nil
}

// resultFolder is the k-th result of e's name's folder, and the comments
// its profiles carry.
func (o *benchOutput) resultFolder(e benchwin.Event, k int) (string, []string) {
	return report.BenchFolder(e.Name, k), []string{profkey.RequestsComment + strconv.Itoa(e.N), CommentTarget + o.cfg.Target, CommentCommit + o.commit, "perfspy.benchmark=" + e.Name}
}

// laterFigures adds to f, the result's counted figures, what the runs
// after the counted one give: the syscall counter's reading at its end,
// the traced run's waits.
func (o *benchOutput) laterFigures(f *schema.BenchFigures, e benchwin.Event, k int) error {
	folder, comments := o.resultFolder(e, k)
	if o.win.counted {
		if err := o.syscallFigures(f, e, folder, comments); err != nil {
			return err
		}
	}
	return o.offCPUFigures(f, e, k, folder, comments)
}

// lastFigures adds callgrind's instructions and the plain run's figures.
func (o *benchOutput) lastFigures(f *schema.BenchFigures, e benchwin.Event, k int) error {
	folder, comments := o.resultFolder(e, k)
	if err := o.instructionFigures(f, folder, comments); err != nil {
		return err
	}
	if ps := o.plain[e.Name]; k < len(ps) {
		v := round(ps[k].ns, 2)
		f.PerOp.NS = &v
		o.goTest(f, e, ps[k], o.beside[folder])
	}
	return nil
}

func (o *benchOutput) allocFigures(f *schema.BenchFigures, e benchwin.Event, folder string, comments []string) error {
	rep, err := o.win.reports.Allocs(e.Allocs)
	if err != nil {
		return err
	}
	objects, allocBytes, _, _ := allocspy.Totals(rep)
	n := float64(e.N)
	f.PerOp.Allocs, f.PerOp.AllocBytes = round(float64(objects)/n, 4), round(float64(allocBytes)/n, 4)
	switch {
	case rep.Dropped > 0:
		o.mismatch = append(o.mismatch, fmt.Sprintf("%s: %d allocations found no free slot in allocspy's table", e.Name, rep.Dropped))
	case objects != e.BenchmemAllocs || allocBytes != e.BenchmemBytes:
		o.mismatch = append(o.mismatch, fmt.Sprintf("%s: allocspy counted %d allocations, %d B; -benchmem counted %d, %d B", e.Name, objects, allocBytes, e.BenchmemAllocs, e.BenchmemBytes))
	}
	p := allocspy.Profile(rep)
	if o.beside == nil {
		o.beside = map[string]besideOps{}
	}
	o.beside[folder] = besideOf(p)
	if err := o.steadyAllocs(f, e, p, folder, comments); err != nil {
		return err
	}
	if f.Steady == nil {
		o.addTop(folder, "allocations", "allocs", p, 0, e.N)
	}
	return o.profile(f, folder, "allocs", p, comments)
}

func (o *benchOutput) copyFigures(f *schema.BenchFigures, e benchwin.Event, folder string, comments []string) error {
	rep, err := o.win.reports.Copies(e.Copies)
	if err != nil {
		return err
	}
	if rep.Dropped > 0 {
		o.mismatch = append(o.mismatch, fmt.Sprintf("%s: %d copies found no free slot in copyspy's table", e.Name, rep.Dropped))
	}
	var moved, cleared uint64
	for _, s := range rep.Sites {
		sum := s.Bytes[0] + s.Bytes[1] + s.Bytes[2] + s.Bytes[3]
		if s.Kind == "memclr" {
			cleared += sum
		} else {
			moved += sum
		}
	}
	mv, cl := round(float64(moved)/float64(e.N), 2), round(float64(cleared)/float64(e.N), 2)
	f.PerOp.CopiedBytes, f.PerOp.ClearedBytes = &mv, &cl
	p := copyspy.Profile(rep)
	o.addTop(folder, "bytes copied", "B", p, 1, e.N) // copied_bytes: memmove's alone
	return o.profile(f, folder, "copies", p, comments)
}

func (o *benchOutput) syscallFigures(f *schema.BenchFigures, e benchwin.Event, folder string, comments []string) error {
	sites := o.win.sites[e.Seq]
	var total uint64
	by := map[string]uint64{}
	for _, s := range sites {
		total += s.Count
		by[s.Name] += s.Count
	}
	n := float64(e.N)
	v := round(float64(total)/n, 4)
	f.PerOp.Syscalls, f.PerOp.SyscallsByName = &v, map[string]float64{}
	for name, c := range by {
		f.PerOp.SyscallsByName[name] = round(float64(c)/n, 4)
	}
	p := syscalls.Profile(sites)
	o.addTop(folder, "syscalls", "", p, 0, e.N)
	return o.profile(f, folder, "syscalls", p, comments)
}

// offCPUFigures gives the result its waits from the traced run: the
// k-th result of its name there.
func (o *benchOutput) offCPUFigures(f *schema.BenchFigures, e benchwin.Event, k int, folder string, comments []string) error {
	at := o.traced[e.Name]
	if k >= len(at) {
		return nil // not in the traced run (summary.json's blind says so)
	}
	w := o.win.offcpu[at[k]]
	if w.n <= 0 {
		return fmt.Errorf("%s: the traced run reported %d ops", e.Name, w.n)
	}
	// Per op of the traced run's own N, which is not the counted run's
	// (a quarter of -benchtime Nx; at a benchtime of time, what testing
	// scaled it to under the tracer).
	f.PerOp.OffCPUNS = map[string]float64{}
	for reason, ns := range w.nanos {
		f.PerOp.OffCPUNS[reason] = round(float64(ns)/float64(w.n), 2)
	}
	f.OffCPUN = w.n
	o.addTop(folder, "off-CPU time", "ns", w.profile, 0, w.n)
	own := append([]string{profkey.RequestsComment + strconv.Itoa(w.n)}, comments[1:]...)
	return o.profile(f, folder, "offcpu", w.profile, own)
}

// retainedFigures gives the result what its ops left, measured in the
// counted run beside its counts, divided by its N.
func (o *benchOutput) retainedFigures(f *schema.BenchFigures, e benchwin.Event, folder string, comments []string) error {
	if !o.cfg.Retained {
		return nil
	}
	switch {
	case e.Error != "":
		return fmt.Errorf("%s: what the ops left: %s", e.Name, e.Error)
	case e.N <= 0 || e.Retained == "":
		return fmt.Errorf("%s: the counted run reported %d ops and no report of what they left", e.Name, e.N)
	}
	rep, err := o.win.reports.Retained(e.Retained)
	if err != nil {
		return err
	}
	if rep.Untracked > 0 {
		o.s.Blind = append(o.s.Blind, fmt.Sprintf("%s: no retained figures: %d blocks of its timed region found no room in allocspy's live table", e.Name, rep.Untracked))
		return nil
	}
	begin, end, err := o.win.reports.Goroutines(e.Retained)
	if err != nil {
		return fmt.Errorf("%s: goroutines left: %w", e.Name, err)
	}
	left, err := goroutinesLeftOf(begin, end)
	if err != nil {
		return fmt.Errorf("%s: goroutines left: %w", e.Name, err)
	}
	n := float64(e.N)
	rp := allocspy.RetainedProfile(rep)
	if rp, err = o.steadyRetained(f, e, rp); err != nil {
		return err
	}
	t := totals(rp)
	f.PerOp.RetainedObjects = f64(round(float64(t[0])/n, 4))
	f.PerOp.RetainedBytes = f64(round(float64(t[1])/n, 2))
	f.PerOp.GoroutinesLeft = f64(round(float64(len(left))/n, 4))
	for _, site := range topSites(rp, 1) {
		f.RetainedSites = append(f.RetainedSites, schema.RetainedSite{Func: site.Func, Objects: round(float64(site.Values[0])/n, 4), Bytes: round(float64(site.Values[1])/n, 2)})
	}
	f.GoroutinesLeft = groupGoroutines(left, int64(e.N))
	o.addTop(folder, "bytes left live", "B", rp, 1, e.N)
	if err := o.profile(f, folder, "retained", rp, comments); err != nil {
		return err
	}
	gp := goroutinesProfile(left)
	o.addTop(folder, "goroutines left", "", gp, 0, e.N)
	return o.profile(f, folder, "goroutines_left", gp, comments)
}

// profile adds p to the results as folder/name.pb.gz, with its flame graph.
func (o *benchOutput) profile(f *schema.BenchFigures, folder, name string, p *profile.Profile, comments []string) error {
	p.Comments = append(slices.Clone(comments), p.Comments...)
	b, err := encodeProfile(p)
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	file := folder + "/" + name + ".pb.gz"
	o.files[file] = b
	f.Files[name] = file
	page, err := flamePageOf(p, f.Name+": "+name)
	if err != nil || page == nil {
		return err
	}
	o.files[folder+"/flame-"+name+".html"] = page
	f.Files["flame_"+name] = folder + "/flame-" + name + ".html"
	return nil
}

// addTop keeps the largest sites of p by value vi for report.md, and what
// the rows shown leave out.
func (o *benchOutput) addTop(folder, what, unit string, p *profile.Profile, vi, n int) {
	rows := topSites(p, vi)
	var total, shown int64
	for i, r := range rows {
		total += r.Values[vi]
		if i < 8 {
			shown += r.Values[vi]
		}
	}
	rows = rows[:min(len(rows), 8)]
	o.top[folder] = append(o.top[folder], report.TopTable{What: what, Unit: unit, Rows: rows, Value: vi, Total: total, Remainder: total - shown, N: n})
}

// goTest sets beside a result what go test -bench -benchmem printed for
// it at the user's -benchtime (the plain run), and names the difference
// when the counted run gave other whole allocations or bytes per op,
// compared as testing prints them (total / N, rounded down): an op whose
// cost depends on b.N (a setup amortized over it), or work beside the ops.
func (o *benchOutput) goTest(f *schema.BenchFigures, e benchwin.Event, p plainResult, beside besideOps) {
	if !p.mem {
		return
	}
	f.GoTest = &schema.BenchGoTest{N: p.n, Allocs: p.allocs, Bytes: p.bytes}
	ca, cb := float64(e.BenchmemAllocs/uint64(e.N)), float64(e.BenchmemBytes/uint64(e.N))
	if ca == p.allocs && cb == p.bytes {
		return
	}
	bt := o.cfg.BenchTime
	if bt == "" {
		bt = "1s"
	}
	f.CountsDiffer = fmt.Sprintf("go test -benchmem: %.0f allocs/op, %.0f B/op at b.N=%d (-benchtime %s); counted: %.0f, %.0f at b.N=%d (%s)",
		p.allocs, p.bytes, p.n, bt, ca, cb, e.N, countsDifferWhy(f, p.n, e.N, beside))
}

// besideOps is what a run's timed region allocated beside its ops: on
// stacks that testing's runN is not on (other goroutines', the runtime's
// own), with the function that allocated the most bytes of it.
type besideOps struct {
	allocs, bytes int64
	top           string
}

func besideOf(p *profile.Profile) besideOps {
	var b besideOps
	byFunc := map[string]int64{}
	for _, s := range p.Sample {
		if slices.ContainsFunc(s.Location, func(l *profile.Location) bool {
			return slices.ContainsFunc(l.Line, func(ln profile.Line) bool { return ln.Function != nil && ln.Function.Name == runN })
		}) {
			continue
		}
		b.allocs += s.Value[0]
		b.bytes += s.Value[1]
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 && s.Location[0].Line[0].Function != nil {
			byFunc[s.Location[0].Line[0].Function.Name] += s.Value[1]
		}
	}
	for fn, v := range byFunc {
		if v > byFunc[b.top] || v == byFunc[b.top] && fn < b.top {
			b.top = fn
		}
	}
	return b
}

// countsDifferWhy says why go test's whole allocations per op are not the
// counted run's: what a run pays once is spread over another b.N, or, at
// the same b.N, the two runs did different work beside their ops.
func countsDifferWhy(f *schema.BenchFigures, goTestN, n int, beside besideOps) string {
	st := f.Steady
	switch {
	case st != nil && goTestN != n && (st.OnceAllocs != 0 || st.OnceBytes != 0):
		return fmt.Sprintf("what the run paid once, %d allocs and %d B, is spread over each run's b.N; once warm an op costs %s allocs, %s B", st.OnceAllocs, st.OnceBytes,
			strconv.FormatFloat(f.PerOp.Allocs, 'f', -1, 64), strconv.FormatFloat(f.PerOp.AllocBytes, 'f', -1, 64))
	case st != nil && goTestN == n && len(st.OnceSites) > 0:
		// The same b.N: the ops' whole counts are the same in both runs;
		// what is not a whole count per op moved.
		why := fmt.Sprintf("the same b.N: what a run pays beside its ops' steady cost, %d allocs and %d B in the counted run, most at %s (paid once, or at the GC's cadence: a pool refilled after each collection), comes in another amount in another run",
			st.OnceAllocs, st.OnceBytes, st.OnceSites[0].Func)
		if beside.allocs > 0 {
			why += fmt.Sprintf("; %d allocs, %d B of the counted run's were beside its ops (not under %s)", beside.allocs, beside.bytes, runN)
		}
		return why
	case beside.allocs > 0:
		why := fmt.Sprintf("the counted run's timed region held %d allocs, %d B beside its ops (not under %s: other goroutines' and the runtime's, most in %s), %s B an op, which another run has in another amount",
			beside.allocs, beside.bytes, runN, beside.top, strconv.FormatFloat(round(float64(beside.bytes)/float64(n), 2), 'f', -1, 64))
		if goTestN != n {
			why += "; the rest, if any, is an op whose cost depends on b.N"
		}
		return why
	case goTestN == n:
		return "the same b.N and nothing beside the ops in the counted run: go test's run did work beside its ops in its timed region (other goroutines', the runtime's)"
	}
	return "the op's cost depends on b.N, or the run did work beside its ops"
}
