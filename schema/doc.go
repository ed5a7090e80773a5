// Package schema is the JSON that perfspy writes, as Go types: a run's
// summary.json (Summary, schema perfspy.summary/v1), probe run -bench's
// (BenchSummary), probe ab's ab.json (ABResult, perfspy.ab/v1), probe
// review's review.json (Review, perfspy.review/v1), probe bulk's
// sweep.json (SweepResult) and the build-list check they carry. A
// program that reads perfspy's results decodes them with encoding/json
// into these types, without linking the probe command; probe review and
// perfspy's cost commands do so too.
// The shapes the writers list (copy sites, the parts of a request's time,
// CPU lists) are here too, so that package report reads figures only.
// Figures not measured are null (nil pointers), never zero; each
// figure's meaning, unit and judgement is a row of package metric.
package schema

// Schema names, in each file's "schema" field.
const (
	SummarySchema = "perfspy.summary/v1"
	ABSchema      = "perfspy.ab/v1"
)

// Verdicts of a run (Summary.Verdict).
const (
	VerdictServerBound = "server-bound"
	// VerdictRateHeld is an open-loop run's (-rate): the driver held the
	// rate asked for, whatever the server's cores did.
	VerdictRateHeld  = "rate-held"
	VerdictNotJudged = "not-judged"
)

// ABResult is ab.json: the two builds, the rounds, each metric's
// comparison, the functions that changed most, the control, and whether
// the comparison could be judged.
type ABResult struct {
	Schema    string               `json:"schema"`
	Before    map[string]string    `json:"before"`
	After     map[string]string    `json:"after"`
	Rounds    int                  `json:"rounds"`
	Order     string               `json:"order"`
	Metrics   map[string]*ABMetric `json:"metrics"`
	Functions []ABFunction         `json:"functions"`
	// Scopes is each profile's change per request (or op) by scope
	// (runtime, std, user), every function's, not only the rows listed.
	Scopes  map[string]map[string]float64 `json:"scopes,omitempty"`
	Control map[string]*ABMetric          `json:"control,omitempty"`
	// Tail compares the slowest 1%'s own bills (summary.json
	// bills.groups.p99) round by round: "duration" and each time part
	// (cpu, net, sync, syscall, sched, gc, sleep, other), then each place
	// its own goroutine waited ("wait PART FUNC SITE"), µs per request,
	// judged as timings. It says where a tail that moved spent its time;
	// it adds no verdict of its own and no gate reads it.
	Tail map[string]*ABMetric `json:"tail,omitempty"`
	// Once is, by benchmark, what each arm's first round paid once: not
	// per op, not judged (docs/bench.md, steady.first and startup).
	Once    map[string]*ABOnce `json:"once,omitempty"`
	Judged  bool               `json:"judged"`
	Reasons []string           `json:"reasons,omitempty"`
	Gate    []string           `json:"gate_failed,omitempty"`
}

// ABOnce is a benchmark's paid-once figures in each arm.
type ABOnce struct {
	Before *BenchOnce `json:"before,omitempty"`
	After  *BenchOnce `json:"after,omitempty"`
}

// BenchOnce is what one benchmark result paid besides its ops: its
// process before its first run (init), its first run beyond a steady op
// (the first call), its reported run beyond N steady ops; and the sites
// of the last two, by function, most bytes first.
type BenchOnce struct {
	StartupAllocs int64      `json:"startup_allocs"`
	StartupBytes  int64      `json:"startup_bytes"`
	FirstAllocs   int64      `json:"first_allocs"`
	FirstBytes    int64      `json:"first_bytes"`
	RunAllocs     int64      `json:"run_allocs"`
	RunBytes      int64      `json:"run_bytes"`
	Sites         []OnceSite `json:"sites,omitempty"`
}

// Sources of the figures, as Summary.Sources names them; a source may
// carry a note after a colon.
const (
	SourceAllocsHeap    = "heapprofile-rate1"
	SourceSyscallsIO    = "proc-io-syscr-syscw"
	SourceNone          = "none"
	SourceAllocspy      = "allocspy"
	SourceCopiesOverlay = "copyspy-overlay"
	// SourceRoutes: the request mark (routes overlay) on each allocation and copy.
	SourceRoutes = "request-mark"
	// SourceOffCPU: an execution trace of the off-CPU window, split at
	// the requests' regions.
	SourceOffCPU = "runtime-trace+request-regions"
	// SourceBills: each request's own allocations, by site, on a bill the
	// request mark carries (allocspy's slots; net/http requests).
	SourceBills = "allocspy+request-bills"
)

// Scopes of ABResult.Scopes and ABFunction: whose code changed, apart (a
// toolchain upgrade moves the runtime's and the standard library's, not
// the user's).
const (
	ScopeRuntime = "runtime"
	ScopeStd     = "std"
	ScopeUser    = "user"
)
