package schema

// ReviewSchema is the schema name of review.json.
const ReviewSchema = "perfspy.review/v1"

// Review is probe review's review.json: the two revisions, each server's
// and benchmark package's comparison, the lines annotated, the gates that
// failed and the verdict.
type Review struct {
	Schema      string            `json:"schema"`
	Base        map[string]string `json:"base"`
	Head        map[string]string `json:"head"`
	Verdict     string            `json:"verdict"` // pass, fail, incomplete or not judged
	Items       []*ReviewItem     `json:"items"`
	Annotations []Annotation      `json:"annotations"`
	// Modules are the lines of go.mod (and go.sum files) that differ
	// between the revisions: a dependency or toolchain bump.
	Modules []GoModChange `json:"modules,omitempty"`
	// ModulesOmitted is how many more lines differed than Modules holds
	// (at most 200, the go, toolchain and godebug lines first): a go.mod
	// of thousands of changed lines is not listed whole.
	ModulesOmitted int      `json:"modules_omitted,omitempty"`
	GateFailed     []string `json:"gate_failed,omitempty"`
	Reasons        []string `json:"reasons,omitempty"`
	Config         string   `json:"config"`
}

// GoModChange is a line of go.mod that differs between the revisions: a
// required module's version (kind require), a replacement (replace), the
// go or toolchain line, a godebug setting (path: its key), or a go.sum
// that changed while its go.mod did not.
type GoModChange struct {
	File   string `json:"file"` // the go.mod (go.sum), relative to the repository's root
	Line   int    `json:"line"` // in the head; 0 when the head removed it
	Kind   string `json:"kind"` // require, replace, go, toolchain, godebug, go.sum
	Path   string `json:"path"` // the module (replace: path[@version]); go, toolchain
	Before string `json:"before"`
	After  string `json:"after"`
}

// ReviewItem is one server or benchmark package, compared.
type ReviewItem struct {
	Kind    string   `json:"kind"` // server or benchmarks
	Name    string   `json:"name"`
	Dir     string   `json:"dir"` // its probe ab folder, relative to the review's
	Judged  bool     `json:"judged"`
	Reasons []string `json:"reasons,omitempty"`
	// Error is why the item could not be measured; the review went on
	// with the others.
	Error string `json:"error,omitempty"`
	// Changes are its metrics, each route's or benchmark's, in the order
	// probe ab lists them.
	Changes   []ReviewChange `json:"metrics"`
	Functions []ABFunction   `json:"functions"`
	// Route is the request a server without a request file sends
	// ("GET /hello"), or "the request mix"; "" for benchmarks.
	Route string `json:"route,omitempty"`
	// Tail is probe ab's comparison of the slowest 1%'s own bills
	// (ABResult.Tail).
	Tail map[string]*ABMetric `json:"tail,omitempty"`
	// Once is, for benchmarks, what each benchmark paid once in each
	// revision (ABResult.Once): its process's init, its first op beyond
	// a steady one, its reported run beyond N steady ops. Not gated.
	Once map[string]*ABOnce `json:"once,omitempty"`
}

// ReviewChange is one metric of a route (or of the whole mix) or of a benchmark.
type ReviewChange struct {
	Subject  string   `json:"subject"` // "GET /users/{id}", "BenchmarkEncode-2"
	Metric   string   `json:"metric"`  // allocs/req, B/op...
	Before   float64  `json:"before"`
	After    float64  `json:"after"`
	Delta    float64  `json:"delta"`
	DeltaPct float64  `json:"delta_pct"`
	Verdict  string   `json:"verdict"`
	Gate     *float64 `json:"gate,omitempty"` // allowed growth in percent, when gated
	Failed   bool     `json:"failed"`
	// Why says how the review judged it when that is not probe ab's
	// verdict on the figure: allocations and bytes are read again from
	// their profiles, bytes as the code asked for them (requested), the
	// allocations that follow the GC's cadence (sync.Pool, a map's
	// growth) apart, judged by their spread across rounds.
	Why string `json:"why,omitempty"`
	// Flame is the differential flame graph of its profile (the first
	// round of each revision), relative to the review's folder, when it
	// changed.
	Flame string `json:"flame,omitempty"`
	// Profile is the results profile that explains it: "allocs",
	// "GET /x allocs", "BenchmarkX-2 allocs" ("" when none does).
	Profile string `json:"profile,omitempty"`
}

// Annotation is one source line whose count grew.
type Annotation struct {
	Level string `json:"level"` // error (its metric failed its gate) or warning
	File  string `json:"file"`  // relative to the repository's root
	Line  int    `json:"line"`  // in the head revision
	// AllocLine is the line that allocates when it is not Line: the head
	// left it alone, and the changed Line made it allocate (a local
	// whose address Line stores, a slice whose capacity Line set).
	AllocLine int     `json:"alloc_line,omitempty"`
	Func      string  `json:"func"`
	Item      string  `json:"item"`
	Subject   string  `json:"subject"` // the route or benchmark
	Metric    string  `json:"metric"`  // allocs/req, copied-B/req, allocs/op...
	Delta     float64 `json:"delta"`
	Bytes     float64 `json:"bytes,omitempty"` // for allocations: the bytes' change beside the count's
	Title     string  `json:"title"`
	Message   string  `json:"message"`
	// Stack is the heaviest stack to the line in the head (the base's
	// for a line that no longer allocates), from the repository's
	// outermost frame, the handler or the benchmark, down to the frame
	// that allocated or copied: "main.user (server/main.go:17)".
	Stack []string `json:"stack,omitempty"`
	// Compiler is the compiler's reason for an allocation's change at
	// the line: the escape-analysis and inlining diagnostics
	// (-gcflags=-m=2) that differ between the revisions, or that none do.
	Compiler []string `json:"compiler,omitempty"`
}
