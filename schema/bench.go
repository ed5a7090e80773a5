package schema

// BenchSummary is summary.json of a benchmark run (probe run -bench).
type BenchSummary struct {
	Schema string `json:"schema"`
	Kind   string `json:"kind"` // "benchmarks"
	Target string `json:"target"`
	Commit string `json:"commit"`
	Go     string `json:"go"`
	// GOARCH is the architecture measured (the test binaries'), and Exec
	// what ran them when not this machine directly (-exec).
	GOARCH    string `json:"goarch,omitempty"`
	Exec      string `json:"exec,omitempty"`
	Bench     string `json:"bench"`
	Benchtime string `json:"benchtime,omitempty"`
	Count     int    `json:"count"`
	// Build compares the counted test binary's build list with the plain
	// test binary's: nothing may differ.
	Build   *BuildCheck       `json:"build,omitempty"`
	Sources map[string]string `json:"sources"`
	Blind   []string          `json:"blind_spots,omitempty"`
	// Cut names the runs (traced, retained) that were cut at their
	// bound or interrupted: the results they finished are kept, the rest
	// have none of their figures (blind_spots names them).
	Cut        []string          `json:"cut,omitempty"`
	Benchmarks []BenchFigures    `json:"benchmarks"`
	Files      map[string]string `json:"files"`
}

// BenchFigures are one benchmark result's figures: the run testing
// reported, divided by its op count N; allocations and what the ops leave
// live are per op in steady state (Steady) when it was measured.
type BenchFigures struct {
	Name string `json:"name"` // as testing prints it, with the -cpu suffix
	// InstructionsOps is the ops whose instructions per_op.instructions
	// divides (-instructions: the difference of two runs).
	InstructionsOps int        `json:"instructions_ops,omitempty"`
	N               int        `json:"n"`
	PerOp           BenchPerOp `json:"per_op"`
	Benchmem        BenchMem   `json:"benchmem"`
	// GoTest is what go test -bench -benchmem printed for the same result
	// at the user's -benchtime (the timing run); CountsDiffer names the
	// difference when its whole allocs/op or B/op are not the counted
	// run's.
	GoTest       *BenchGoTest      `json:"go_test,omitempty"`
	CountsDiffer string            `json:"counts_differ,omitempty"`
	Files        map[string]string `json:"files"`
	// RetainedSites are the sites whose objects the ops left live, per
	// op, most bytes first; GoroutinesLeft the goroutines they left
	// running (the retained run).
	RetainedSites  []RetainedSite   `json:"retained_sites,omitempty"`
	GoroutinesLeft []GoroutinesLeft `json:"goroutines_left,omitempty"`
	// Steady is the cost per op once warm, and what the counted run paid
	// once besides (docs/bench.md, "Steady state").
	Steady *BenchSteady `json:"steady,omitempty"`
	// Startup is what the benchmark's process allocated before its first
	// run (runtime.MemStats Mallocs and TotalAlloc): package init,
	// TestMain, testing's own setup; the same for every benchmark of one
	// process. A dependency that moves a cache from init to its first
	// call moves it from here to steady.first.
	Startup *BenchStartup `json:"startup,omitempty"`
	// SteadyNote says why per_op's allocations are the reported run's,
	// divided by N, when the steady state was not measured.
	SteadyNote string `json:"steady_note,omitempty"`
	// OffCPUN is the traced run's b.N, which per_op.offcpu_ns divides by
	// and offcpu.pb.gz's perfspy.requests comment names: a quarter of a
	// -benchtime of Nx (for an op whose quarter would take more than
	// 100 ms at the timing run's ns/op, the ops that fit, 1 at least),
	// and at a benchtime of time what testing scaled b.N to under the
	// tracer.
	OffCPUN int `json:"offcpu_n,omitempty"`
}

// BenchSteady is how a result's steady state was measured: two warm runs
// after the one testing reported, of 1 and M+1 ops (M is N/4 when 4
// divides N, N/2 when 2 does, N otherwise); the second's counts minus the
// first's are M ops in
// steady state, times N/M N ops, which per_op's allocations, bytes and
// retained figures are. What the reported run counted beyond
// them it paid once (a cache its first op built, work beside the loop, a
// buffer a global keeps): go test -benchmem spreads that over b.N.
type BenchSteady struct {
	// Runs are the ops of the two warm runs, [1, N/4+1] when 4 divides
	// N, [1, N/2+1] for another even N, [1, N+1] for an odd one; [1,
	// M+1] for a long op, M the largest divisor of N whose ops fit in
	// 100 ms at the counted run's time per op; with Linear, the
	// runs compared, [1, N]: the benchmark's first run and the reported.
	Runs [2]int `json:"runs_n"`
	// Linear: the reported run counted exactly N times the benchmark's
	// first op, site by site (allocations, copies, what was left live):
	// it is the steady state, nothing was paid once, and the warm runs
	// were not needed.
	Linear     bool  `json:"linear,omitempty"`
	OnceAllocs int64 `json:"once_allocs"`
	OnceBytes  int64 `json:"once_bytes"`
	// OnceSites are the sites of what was paid once, most bytes first;
	// the last row, "(other sites)", holds the rest.
	OnceSites []OnceSite `json:"once_sites,omitempty"`
	// OnceRetainedObjects and OnceRetainedBytes are what the retained
	// run's reported run left live beyond N ops at the steady cost.
	OnceRetainedObjects *int64 `json:"once_retained_objects,omitempty"`
	OnceRetainedBytes   *int64 `json:"once_retained_bytes,omitempty"`
	// First is what the benchmark's first run paid beyond one op once
	// warm, when that run is not the reported one.
	First *BenchFirst `json:"first,omitempty"`
}

// BenchStartup is what a benchmark process allocated before its first
// run.
type BenchStartup struct {
	Allocs uint64 `json:"allocs"`
	Bytes  uint64 `json:"bytes"`
}

// BenchFirst is what a benchmark's first run, of 1 op (testing's run1,
// before the reported run), paid beyond one op once warm: its first
// call's caches and lazy setup. With b.Loop the first op is in the
// reported run, and in what it paid once.
type BenchFirst struct {
	Allocs int64 `json:"allocs"`
	Bytes  int64 `json:"bytes"`
	// Sites are its sites, most bytes first, as once_sites.
	Sites []OnceSite `json:"sites,omitempty"`
}

// OnceSite is a function's part of what a run paid once.
type OnceSite struct {
	Func   string `json:"func"`
	Allocs int64  `json:"allocs"`
	Bytes  int64  `json:"bytes"`
}

// BenchPerOp are the figures per op. Those not measured are null.
type BenchPerOp struct {
	Allocs         float64            `json:"allocs"`
	AllocBytes     float64            `json:"alloc_bytes"`
	CopiedBytes    *float64           `json:"copied_bytes"`  // memmove
	ClearedBytes   *float64           `json:"cleared_bytes"` // memclr
	Syscalls       *float64           `json:"syscalls"`
	SyscallsByName map[string]float64 `json:"syscalls_by_name,omitempty"`
	NS             *float64           `json:"ns"` // the plain test binary's
	// Instructions is the instructions an op runs under callgrind
	// (-instructions): the plain test binary at two op counts, the
	// difference per op; null when not counted.
	Instructions *float64 `json:"instructions"`
	// CompilerCopiedBytes are the bytes an op copies by the compiler's
	// own moves (a struct or array assigned by value: vector stores,
	// REP; MOVSQ), which never reach memmove and so are not in
	// CopiedBytes: read from the instructions' executions, null when
	// they were not counted (-instructions) or the binary is not amd64.
	CompilerCopiedBytes *float64 `json:"compiler_copied_bytes,omitempty"`
	// OffCPUNS is the time goroutines waited in the timed region, by
	// reason, in ns per op (a run of its own, under the tracer, of
	// BenchFigures.OffCPUN ops).
	OffCPUNS map[string]float64 `json:"offcpu_ns"`
	// What the ops left, per op (a run of its own, MemProfileRate=1):
	// objects and bytes live after two GCs, goroutines still running.
	RetainedObjects *float64 `json:"retained_objects"`
	RetainedBytes   *float64 `json:"retained_bytes"`
	GoroutinesLeft  *float64 `json:"goroutines_left"`
}

// BenchMem is testing's own -benchmem count of the same run, per op and
// in total: allocspy's must equal it.
type BenchMem struct {
	Allocs      float64 `json:"allocs"`
	Bytes       float64 `json:"bytes"`
	AllocsTotal uint64  `json:"allocs_total"`
	BytesTotal  uint64  `json:"bytes_total"`
}

// BenchGoTest is go test -bench -benchmem's line for a result: its b.N
// and whole allocations and bytes per op.
type BenchGoTest struct {
	N      int     `json:"n"`
	Allocs float64 `json:"allocs"`
	Bytes  float64 `json:"bytes"`
}
