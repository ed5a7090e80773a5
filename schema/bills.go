package schema

// Bills are the requests' own bills in the attribution window: each
// request's allocations by site, its route and server-side duration, and
// the slowest 1%'s mean bill against the median group's (summary.json
// "bills"; tail.p50.bill and tail.p99.bill repeat the groups beside the
// off-CPU split when the run has one).
type Bills struct {
	Source string `json:"source"`
	// Kept are the bills of requests that began and ended in the window;
	// Began the requests that began while billing was on, Cap the most a
	// window keeps (the ones past it have none), Open the bills of
	// requests that had not ended when the window closed.
	Kept  int    `json:"kept"`
	Began uint64 `json:"began"`
	Every int    `json:"every"` // one request in Every, at random, took a bill
	Cap   int    `json:"cap"`
	Open  int    `json:"open"`
	// Groups: "p99" the slowest 1% of the kept bills by server-side
	// duration (at least one), "p50" as many bills ranked around the
	// median.
	Groups map[string]*Bill `json:"groups"`
	// Differ are the sites where the slowest 1%'s mean bill differs from
	// the median's, largest change in objects first.
	Differ []BillDiff `json:"differ"`
	// DifferTime are the time parts where the slowest 1%'s mean differs
	// from the median's by a microsecond or more, largest change first;
	// DifferSyscalls the difference in syscalls per request.
	DifferTime     []BillPartDiff `json:"differ_time"`
	DifferSyscalls float64        `json:"differ_syscalls"`
	// DifferWaits are the places where the slowest 1%'s mean wait differs
	// from the median's by a microsecond or more, largest change first.
	DifferWaits []BillWaitSite `json:"differ_waits"`
	// DifferSyscallsByName is the slowest 1%'s syscalls per request by
	// name less the median's, where they differ.
	DifferSyscallsByName map[string]float64 `json:"differ_syscalls_by_name,omitempty"`
	// Joined are the bills joined to the load driver's latency for their
	// request (HTTP/1 through the lean driver: the connection's port and
	// the request's number on it); TailOverlap, when any are, the share
	// of the slowest 1% of those by the driver's latency that are among
	// the slowest 1% by server-side duration (1: the server's tail is
	// the client's).
	Joined      int      `json:"joined"`
	TailOverlap *float64 `json:"tail_overlap,omitempty"`
	// DifferCopies are the lines where the slowest 1%'s mean copies
	// differ from the median's, largest change in bytes first (nil when
	// the window counted no copies).
	DifferCopies []BillCopySite `json:"differ_copies,omitempty"`
	// Exemplars are the five slowest requests' own bills.
	Exemplars []Bill `json:"exemplars"`
}

// Bill is one request's bill, or a group's mean bill per request.
type Bill struct {
	Requests   int     `json:"requests"`
	Route      string  `json:"route,omitempty"` // an exemplar's
	DurationUS float64 `json:"duration_us"`     // the handler's start to the response's end
	Allocs     float64 `json:"allocs"`
	// AllocBytes are bytes asked for (requested_space).
	AllocBytes float64    `json:"alloc_bytes"`
	Sites      []BillSite `json:"sites"`
	// Remainder is what the bills kept outside their sites (a request with
	// more sites than a bill holds): Allocs is Sites' sum plus it.
	RemainderAllocs float64 `json:"remainder_allocs"`
	RemainderBytes  float64 `json:"remainder_bytes"`
	// TimeUS is the request's time by part (cpu, net, sync, syscall,
	// sched, gc, sleep, other: offcpu's parts): "cpu" the CPU of every
	// goroutine it ran on, the rest its own goroutine's time runnable, in
	// syscalls and waiting, by why. Its own parts add up to DurationUS
	// less the goroutines' CPU beside it. Syscalls are those its
	// goroutines entered (the runtime's entersyscall: the vDSO's and raw
	// syscalls are not).
	TimeUS   map[string]float64 `json:"time_us"`
	Syscalls float64            `json:"syscalls"`
	// DriverUS is the load driver's latency for the request (a group's
	// mean over its Joined bills): from its send to its response's end,
	// as the driver saw it; 0 when none joined.
	DriverUS float64 `json:"driver_us"`
	Joined   int     `json:"joined"`
	// Waits are its own goroutine's waits by where it waited, longest
	// first (eight wait stacks a bill; the rest are in TimeUS only).
	Waits []BillWaitSite `json:"waits"`
	// SyscallsByName are the syscalls package syscall made for it, by
	// name (eight names a bill; the runtime's own syscalls and the
	// vDSO's are not here): a part of Syscalls.
	SyscallsByName map[string]float64 `json:"syscalls_by_name,omitempty"`
	// Copies are its copies (copyspy's recorder, in the same window), or
	// nil when the window counted none.
	Copies *BillCopies `json:"copies,omitempty"`
}

// BillCopies are a bill's copies per request: memmove's calls and bytes
// (CopyCalls, CopiedBytes) and memclr's (ClearCalls, ClearedBytes), each
// its sites' sum plus its remainder (the copies of a request with more
// sites than a bill holds).
type BillCopies struct {
	CopyCalls             float64        `json:"copy_calls"`
	CopiedBytes           float64        `json:"copied_bytes"`
	ClearCalls            float64        `json:"clear_calls"`
	ClearedBytes          float64        `json:"cleared_bytes"`
	Sites                 []BillCopySite `json:"sites"`
	RemainderCopyCalls    float64        `json:"remainder_copy_calls"`
	RemainderCopiedBytes  float64        `json:"remainder_copied_bytes"`
	RemainderClearCalls   float64        `json:"remainder_clear_calls"`
	RemainderClearedBytes float64        `json:"remainder_cleared_bytes"`
}

// BillCopySite is a bill's copies at one line: the first function outside
// the runtime (Func, Site as file:line), the function that called memmove
// or memclr (Via), the kind (memmove, memclr), calls and bytes. In
// Bills.DifferCopies, the slowest 1%'s mean minus the median group's.
type BillCopySite struct {
	Func  string  `json:"func"`
	Site  string  `json:"site"`
	Via   string  `json:"via"`
	Kind  string  `json:"kind"`
	Calls float64 `json:"calls"`
	Bytes float64 `json:"bytes"`
}

// BillWaitSite is a bill's wait time (µs) at one place: its part, the
// first function outside the runtime and the standard library's
// internals (sync.(*Mutex).Lock), and the first line of the program's own
// code under it (file:line).
type BillWaitSite struct {
	Part string  `json:"part"`
	Func string  `json:"func"`
	Site string  `json:"site"`
	US   float64 `json:"us"`
}

// BillPartDiff is the slowest 1%'s mean minus the median group's in one
// time part.
type BillPartDiff struct {
	Part string  `json:"part"`
	US   float64 `json:"us"`
}

// BillSite is a bill's allocations at one line, largest first.
type BillSite struct {
	Func   string  `json:"func"`
	Site   string  `json:"site"` // file:line
	Allocs float64 `json:"allocs"`
	Bytes  float64 `json:"bytes"`
}

// BillDiff is the slowest 1%'s mean minus the median group's at one line.
type BillDiff struct {
	Func   string  `json:"func"`
	Site   string  `json:"site"`
	Allocs float64 `json:"allocs"`
	Bytes  float64 `json:"bytes"`
}
