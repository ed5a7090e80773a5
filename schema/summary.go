package schema

// Summary is summary.json. Figures that this build cannot measure are null,
// never zero, and their source says "none".
type Summary struct {
	Schema string `json:"schema"`
	Target string `json:"target"`
	Commit string `json:"commit"`
	Go     string `json:"go"`
	// GOARCH is the architecture measured (the target's build), and Exec
	// what ran it when not this machine directly (-exec).
	GOARCH string `json:"goarch,omitempty"`
	Exec   string `json:"exec,omitempty"`
	// Build compares the measured binary's build list with a plain
	// build's: only the agent module may be added, nothing changed.
	Build             *BuildCheck        `json:"build,omitempty"`
	Window            WindowSummary      `json:"window"`
	AttributionWindow AttributionSummary `json:"attribution_window"`
	// CopiesWindow is the window that counted copies, when they had one of their own.
	CopiesWindow *AttributionSummary `json:"copies_window,omitempty"`
	// RetainedWindow is the window whose requests' leftovers were
	// measured (-retained): the heap still live after it, the goroutines
	// still running; RetainedSites and GoroutinesLeft are what they are.
	RetainedWindow *AttributionSummary `json:"retained_window,omitempty"`
	RetainedSites  []RetainedSite      `json:"retained_sites,omitempty"`
	GoroutinesLeft []GoroutinesLeft    `json:"goroutines_left,omitempty"`
	// OffCPUWindow is the window of the execution trace, the block and
	// mutex profiles.
	OffCPUWindow *AttributionSummary `json:"offcpu_window,omitempty"`
	// WallclockWindow is the window of the wall-clock profile: its
	// sampler stops the world, so it is not the trace's window.
	WallclockWindow *AttributionSummary `json:"wallclock_window,omitempty"`
	// BackgroundOffCPUUS is the waits of goroutines serving no request,
	// in µs per second of the off-CPU window, by reason; never divided by
	// requests. BackgroundTop lists the largest.
	BackgroundOffCPUUS map[string]float64 `json:"background_offcpu_us,omitempty"`
	BackgroundTop      []WaitRow          `json:"background_top,omitempty"`
	// Tail is the split of the median requests and of the slowest 1%.
	Tail map[string]*TailGroup `json:"tail,omitempty"`
	// Bills are each request's own allocations by site, and the slowest
	// 1%'s mean bill against the median's (schema.Bills).
	Bills *Bills `json:"bills,omitempty"`
	// Floor is targets/floor measured with the same settings (-floor).
	Floor       *FloorSummary `json:"floor,omitempty"`
	ServerCores float64       `json:"server_cores"`
	// GOMAXPROCS is the target's (its runtime said so at the start), and
	// ServerCPUs and DriverCPUs the CPUs the target and the load driver
	// were pinned to (absent when not pinned): the figures are the
	// target's as it ran here; a server that sizes its work by its CPUs
	// does other work with more (-cpus 0-2:3, -env GOMAXPROCS=N).
	GOMAXPROCS int   `json:"gomaxprocs,omitempty"`
	ServerCPUs []int `json:"server_cpus,omitempty"`
	DriverCPUs []int `json:"driver_cpus,omitempty"`
	// Machine is what the machine did in the timing window.
	Machine *MachineSummary `json:"machine,omitempty"`
	// Driver is the load driver's own cost in the timing window.
	Driver         *DriverSummary `json:"driver,omitempty"`
	CoresAvailable float64        `json:"cores_available"`
	Verdict        string         `json:"verdict"`
	Reasons        []string       `json:"reasons,omitempty"`
	// Judged says which figures the window supports, apart: a run not
	// judged on its timings alone (a busy or 2-core machine, a driver that
	// set the pace) still has exact counts a script can gate on
	// (probe run -judge counts). Absent from an instructions run.
	Judged     *Judged            `json:"judged,omitempty"`
	PerRequest PerRequest         `json:"per_request"`
	Sources    map[string]string  `json:"sources"`
	Files      map[string]string  `json:"files"`
	Checks     map[string]float64 `json:"checks,omitempty"`
	// Closure is each exact count checked against the runtime's own count
	// of the same window; a miss is a reason (not judged) that names it.
	Closure *Closure `json:"closure,omitempty"`
	// The bulk drivers' figures (quic, udp): a request is one transfer.
	Transfer            *TransferSummary `json:"transfer,omitempty"`
	DatagramsPerRequest *float64         `json:"datagrams_per_request,omitempty"`
	PerDatagram         *PerDatagram     `json:"per_datagram,omitempty"`
	// Mix is the request file's mix (-requests FILE); Endpoints each of
	// its requests measured alone.
	Mix       *MixSummary       `json:"mix,omitempty"`
	Endpoints []EndpointSummary `json:"endpoints,omitempty"`
	// Routes split the attribution window by the route of the request
	// each allocation and copy was made for (net/http targets: the
	// request mark, docs/routes.md), most requested first; the
	// background is the work outside any request, per second; the closure
	// adds them up to the window's totals.
	Routes           []RouteSummary `json:"routes,omitempty"`
	RoutesBackground *RouteSummary  `json:"routes_background,omitempty"`
	// RoutesBeforeRouting is the work each HTTP/1 request causes before
	// its route is known (reading, parsing), per request of all routes.
	RoutesBeforeRouting *RouteSummary `json:"routes_before_routing,omitempty"`
	// RoutesUnfollowed is the work done under the mark of a request that
	// no longer had it (its request ended, or its goroutine handed it
	// back and went on: docs/routes.md, "Unfollowed work"): per second
	// and as a share of the window, like the background, with its parts by
	// route of origin (origins), each per request of that route. Present
	// whenever routes are: zero when everything was followed.
	RoutesUnfollowed *RouteSummary  `json:"routes_unfollowed,omitempty"`
	RoutesClosure    *RoutesClosure `json:"routes_closure,omitempty"`
	// RoutesMixCheck names each route whose figures in the mix differ
	// from its own window's (-alone) beyond noise: work that travelled
	// between routes, or that its request shares with others (a cache, a
	// pool), so that its row in routes[] is not what it costs alone.
	// Empty when every route agreed; absent without -alone.
	RoutesMixCheck []RouteMixCheck `json:"routes_mix_check,omitempty"`
	// FloorRatio is the target's figure over targets/udpfloor's, measured
	// in the same run with the same transfers (-floor): cpu_us,
	// syscalls and datagrams per transfer, and cpu_us per datagram.
	FloorRatio map[string]float64 `json:"floor_ratio,omitempty"`
}

// TransferSummary describes a bulk window's transfers.
type TransferSummary struct {
	Bytes           int64   `json:"bytes"`             // per transfer, one way
	CPUUSPerMB      float64 `json:"cpu_us_per_mb"`     // server CPU per 10^6 transfer bytes
	BytesPerSyscall float64 `json:"bytes_per_syscall"` // datagram bytes (both ways) per server syscall
	// BytesPerDatagram is the mean datagram; LargestDatagram the size the
	// connection settled on.
	BytesPerDatagram float64 `json:"bytes_per_datagram"`
	LargestDatagram  int64   `json:"largest_datagram"`
	DatagramSource   string  `json:"datagram_source"`
	// KernelUDP is the machine's UDP counters (/proc/net/snmp) per
	// transfer: every socket's, the driver's and the target's alike, so
	// datagrams count twice on loopback; RcvbufErrors are the datagrams
	// the kernel dropped for a full receive buffer.
	KernelUDP map[string]float64 `json:"kernel_udp_per_transfer,omitempty"`
}

// PerDatagram divides the per-transfer figures by the datagrams of a
// transfer, both ways.
type PerDatagram struct {
	Syscalls       float64            `json:"syscalls"`
	SyscallsByName map[string]float64 `json:"syscalls_by_name"`
	CPUUS          float64            `json:"cpu_us"`
}

// WindowSummary describes the clean timing window.
type WindowSummary struct {
	Seconds   float64          `json:"seconds"`
	Requests  int64            `json:"requests"`
	Errors    int64            `json:"errors"`
	Non2xx    int64            `json:"non_2xx"`
	Dials     int64            `json:"new_connections"`
	RPS       float64          `json:"rps"`
	LatencyUS map[string]int64 `json:"latency_us"`
	// Open-loop load (-rate): Rate is the requests per second asked for,
	// Arrivals "constant" or "poisson". LatencyUS is then from each
	// request's intended send time (as wrk2 reports it: a stall's wait
	// lands on every request the clock scheduled during it), and
	// LatencyRawUS from its actual send (what a closed loop reports).
	// ScheduledSends are the sends the clock gave the window, LateSends
	// those started more than a millisecond behind, DroppedSends those no
	// connection could start before the window ended.
	Rate           float64          `json:"rate,omitempty"`
	Arrivals       string           `json:"arrivals,omitempty"`
	LatencyRawUS   map[string]int64 `json:"latency_raw_us,omitempty"`
	ScheduledSends int64            `json:"scheduled_sends,omitempty"`
	LateSends      int64            `json:"late_sends,omitempty"`
	DroppedSends   int64            `json:"dropped_sends,omitempty"`
}

// AttributionSummary describes the window that gives exact counts.
type AttributionSummary struct {
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	RPS      float64 `json:"rps"`
	CPUUS    float64 `json:"cpu_us,omitempty"` // target CPU per request in this window
}

// FloorSummary is the minimal server's timing window, and the target's CPU
// per request as a ratio to it.
type FloorSummary struct {
	Target   string  `json:"target"`
	CPUUS    float64 `json:"cpu_us"`
	RPS      float64 `json:"rps"`
	Verdict  string  `json:"verdict"`
	CPURatio float64 `json:"cpu_ratio"`
}

// DriverSummary is what the load driver itself cost in the timing window:
// probe's CPU time while it ran (getrusage), per request and in cores.
type DriverSummary struct {
	Name      string  `json:"name"`
	CPUUS     float64 `json:"cpu_us"`
	CoresUsed float64 `json:"cores_used"`
	Source    string  `json:"source"`
	// TLS says how the server's certificate was checked, for the
	// drivers that speak TLS (https, h2).
	TLS string `json:"tls,omitempty"`
}

// TailGroup is the mean split of a group of requests, in µs, and where
// they waited most.
type TailGroup struct {
	Requests  int                `json:"requests"`
	TotalUS   float64            `json:"total_us"`
	PartsUS   map[string]float64 `json:"parts_us"`
	Remainder float64            `json:"remainder_us"`
	Top       []WaitRow          `json:"top"`
	// Bill is the group's mean bill (Bills.Groups), from the attribution
	// window's bills: a group of other requests than the trace's.
	Bill *Bill `json:"bill,omitempty"`
}

// WaitRow is time spent waiting at one place: per request of its group,
// or per second for the background.
type WaitRow struct {
	Reason  string  `json:"reason"`
	Wait    string  `json:"wait"`
	Func    string  `json:"func"`
	WokenBy string  `json:"woken_by,omitempty"`
	US      float64 `json:"us"`
}

// PerRequest holds every figure divided by the successful requests of its window.
type PerRequest struct {
	Allocs     *float64 `json:"allocs"`
	AllocBytes *float64 `json:"alloc_bytes"`
	// With allocspy: the objects among Allocs that took a heap slot of their
	// own (tiny objects share 16-byte blocks), and the bytes asked for.
	AllocBlocks         *float64 `json:"alloc_blocks,omitempty"`
	AllocRequestedBytes *float64 `json:"alloc_requested_bytes,omitempty"`
	// CopyCalls and CopiedBytes are memmove's: bytes copied. Since
	// perfspy.copies_profile=v2 memclr's are ClearCalls and ClearedBytes
	// (before, copied_bytes held both).
	CopyCalls      *float64           `json:"copy_calls"`
	CopiedBytes    *float64           `json:"copied_bytes"`
	ClearCalls     *float64           `json:"clear_calls,omitempty"`
	ClearedBytes   *float64           `json:"cleared_bytes,omitempty"`
	Syscalls       *float64           `json:"syscalls"`
	SyscallsByName map[string]float64 `json:"syscalls_by_name"`
	CPUUS          *float64           `json:"cpu_us"`
	// OffCPUUS is the mean request's time off CPU by reason: from its
	// handler's start to its response's end, on its own goroutine.
	OffCPUUS map[string]float64 `json:"offcpu_us"`
	// RequestUS is the mean request's server-side time: OffCPUUS's
	// reasons plus cpu, and their total.
	RequestUS map[string]float64 `json:"request_us,omitempty"`
	// Instructions per request, from callgrind (probe run -instructions).
	Instructions *float64 `json:"instructions,omitempty"`
	// What a request leaves behind (the retained window): heap objects
	// and bytes allocated in the window and still live after two GCs,
	// and goroutines started in the window and still running.
	RetainedObjects *float64 `json:"retained_objects,omitempty"`
	RetainedBytes   *float64 `json:"retained_bytes,omitempty"`
	GoroutinesLeft  *float64 `json:"goroutines_left,omitempty"`
	// GoroutinesLeaked is the part of GoroutinesLeft that can never run
	// again (the goroutine leak profile, Go 1.27 on; absent before).
	GoroutinesLeaked *float64 `json:"goroutines_leaked,omitempty"`
	// GoroutinesCreated is the goroutines the timing window created
	// (runtime/metrics, Go 1.26 on; absent before).
	GoroutinesCreated *float64 `json:"goroutines_created,omitempty"`
}

// RetainedSite is a site whose allocations the retained window's
// requests left live, per request.
type RetainedSite struct {
	Func    string  `json:"func"`
	Objects float64 `json:"objects"`
	Bytes   float64 `json:"bytes"`
}

// MachineSummary is what the machine did in the timing window: how long
// the target's and the load driver's threads waited, ready, for a CPU
// other work had (seconds per second of the window, from schedstat), the
// CPU pressure (the share of the window in which some runnable task
// waited, from /proc/pressure/cpu; absent without PSI) and the cores
// other processes used (/proc/stat's busy time less the target's and the
// driver's). Busy says the machine, not the server, set the pace: a wait
// past BusyMachineWait.
type MachineSummary struct {
	ServerRunQueueWait float64  `json:"server_runqueue_wait"`
	DriverRunQueueWait float64  `json:"driver_runqueue_wait"`
	CPUPressure        *float64 `json:"cpu_pressure,omitempty"`
	OtherCores         float64  `json:"other_cores"`
	// TargetChildCores is the cores the target's own child processes
	// used (they descend from it): its work, left out of other_cores.
	TargetChildCores float64 `json:"target_child_cores,omitempty"`
	Busy             bool    `json:"busy"`
	Source           string  `json:"source"`
}

// Closure is the exact counts' check against the runtime's own: what a
// Go release's new allocation path would leave out shows here as a miss,
// never as a smaller count presented as exact.
type Closure struct {
	Allocs   *AllocsClosure   `json:"allocs,omitempty"`
	Requests *RequestsClosure `json:"requests,omitempty"`
}

// RequestsClosure compares the requests the marks saw end in the
// attribution window (every route's, the server's count) with the
// driver's successes in it: the request boundaries of net/http (the
// request mark) see every request, or a release moved them.
type RequestsClosure struct {
	Marked int64 `json:"marked"`
	Driver int64 `json:"driver"`
	Missed int64 `json:"missed"` // driver - marked: 0 when it closes
	Closed bool  `json:"closed"`
	// Self is the requests the process sent to itself and served (routes
	// "(self) ..."): not in Marked, never the load's.
	Self int64 `json:"self,omitempty"`
}

// AllocsClosure adds allocspy's table, the allocations it kept out (the
// agent's, the dropped) and compares them with the runtime's MemStats
// (Mallocs, TotalAlloc) over the same attribution window, read with the
// world stopped as the recorder went on and off.
type AllocsClosure struct {
	Objects        int64 `json:"objects"` // the table's, every site
	Bytes          int64 `json:"bytes"`   // their size classes
	AgentObjects   int64 `json:"agent_objects"`
	AgentBytes     int64 `json:"agent_bytes"`
	DroppedObjects int64 `json:"dropped_objects"`
	DroppedBytes   int64 `json:"dropped_bytes"`
	RuntimeObjects int64 `json:"runtime_objects"`
	RuntimeBytes   int64 `json:"runtime_bytes"`
	// Missed is the runtime's count less everything allocspy saw: 0
	// when the window closes.
	MissedObjects int64 `json:"missed_objects"`
	MissedBytes   int64 `json:"missed_bytes"`
	Closed        bool  `json:"closed"`
}

// RouteSummary is one route's share of the attribution window: its
// requests (those that ended under it, counted by the server's request
// mark) and its figures per request, with the sites that make them.
type RouteSummary struct {
	Route    string `json:"route"`
	Requests uint64 `json:"requests"`
	// SampledRequests are the requests accounted when the run sampled
	// (-sample N): the per-request figures' denominator.
	SampledRequests uint64 `json:"sampled_requests,omitempty"`
	// Totals over the window, from which the per-request figures are
	// divided; the closure adds them up.
	Allocs      int64 `json:"allocs"`
	AllocBytes  int64 `json:"alloc_bytes"`
	CopiedBytes int64 `json:"copied_bytes"`
	// Per request; null when the route ended no request in the window
	// (its work then shows in the totals only).
	AllocsPerReq      *float64 `json:"allocs_per_req"`
	AllocBytesPerReq  *float64 `json:"alloc_bytes_per_req"`
	CopiedBytesPerReq *float64 `json:"copied_bytes_per_req"`
	// The background's figures are per second of the window, never per
	// request (its per_req fields are null), and so are its sites'.
	AllocsPerSec      *float64    `json:"allocs_per_s,omitempty"`
	AllocBytesPerSec  *float64    `json:"alloc_bytes_per_s,omitempty"`
	CopiedBytesPerSec *float64    `json:"copied_bytes_per_s,omitempty"`
	Sites             []RouteSite `json:"sites,omitempty"`
	// ShareAllocs and ShareBytes are, for the background only, its part
	// of the window's allocations and bytes: what no request held after
	// the handoffs perfspy follows (docs/routes.md, "Handoffs"); a share
	// that grows with the load is work that escaped its requests.
	ShareAllocs *float64 `json:"share_allocs,omitempty"`
	ShareBytes  *float64 `json:"share_bytes,omitempty"`
	// RequestUS is the route's mean request on the server, in the
	// off-CPU window's trace: its parts (cpu, sync, syscall...) and
	// "total", over OffCPURequests of its requests; absent without that
	// window.
	RequestUS      map[string]float64 `json:"request_us,omitempty"`
	OffCPURequests int                `json:"offcpu_requests,omitempty"`
	// Note says why the route's figures are not a request's: work begun
	// under it that ended under several routes (before the mux routed it).
	Note string `json:"note,omitempty"`
	// Origins are, for the unfollowed work only (routes_unfollowed), its
	// parts by the route it came from (route "" when unknown), each per
	// request of that route.
	Origins []RouteSummary `json:"origins,omitempty"`
}

// RouteMixCheck is one route whose allocations per request in the mix
// (routes[]) differ from those of its endpoint measured alone.
type RouteMixCheck struct {
	Route            string  `json:"route"`
	Endpoint         string  `json:"endpoint"`
	MixAllocs        float64 `json:"mix_allocs"`
	AloneAllocs      float64 `json:"alone_allocs"`
	MixAllocBytes    float64 `json:"mix_alloc_bytes"`
	AloneAllocBytes  float64 `json:"alone_alloc_bytes"`
	UnfollowedAllocs float64 `json:"unfollowed_allocs"` // per request of the route, in the mix
	Note             string  `json:"note"`
}

// RouteSite is one allocation site of a route, per request of the route.
type RouteSite struct {
	Func   string  `json:"func"`
	Allocs float64 `json:"allocs"`
	Bytes  float64 `json:"bytes"`
}

// RoutesClosure checks that the routes and the background add up to the
// window's totals: the remainder is what no route or background holds
// (0 unless a sample lost its label).
type RoutesClosure struct {
	Allocs          int64   `json:"allocs"`
	AllocsRemainder int64   `json:"allocs_remainder"`
	CopiedBytes     int64   `json:"copied_bytes"`
	CopiedRemainder int64   `json:"copied_bytes_remainder"`
	RouteRequests   uint64  `json:"route_requests"`          // Σ routes' requests (the server's count), the self routes' apart
	SelfRequests    uint64  `json:"self_requests,omitempty"` // Σ "(self) " routes' requests: the process's to itself
	DriverRequests  int64   `json:"driver_requests"`         // the driver's successes in the window
	Seconds         float64 `json:"seconds"`
	// HandoffsLost is the values handed over buffered channels (and
	// time.AfterFunc functions) in the window whose request the runtime's
	// handoff table lost: the goroutines that took them worked for
	// "(unfollowed)", origin unknown, from then on (docs/routes.md,
	// "Handoffs"). Orphaned is the goroutines whose request ended under
	// them or that handed it back: what they did next is unfollowed.
	HandoffsLost uint64 `json:"handoffs_lost"`
	Orphaned     uint64 `json:"goroutines_orphaned"`
}

// GoroutinesLeft is a group of the goroutines a window's requests left
// running: the function they run and where they were created.
type GoroutinesLeft struct {
	Func      string  `json:"func"`
	CreatedBy string  `json:"created_by"`
	Count     int     `json:"count"`
	PerReq    float64 `json:"per_request"`
	// Leaked is how many of them the goroutine leak profile (Go 1.27)
	// found blocked for good.
	Leaked int `json:"leaked,omitempty"`
}

// EndpointSummary is one request of a request file measured alone, in a
// timing window (CPU, syscalls) and an attribution window (allocations,
// copies) of its own, per request. Figures not measured are null.
type EndpointSummary struct {
	Name     string `json:"name"` // "GET /path"
	Weight   int    `json:"weight"`
	Requests int64  `json:"requests"` // successes in its timing window: CPU's and syscalls' denominator
	// AttributionRequests are the successes in its attribution window:
	// the allocations' and copies' denominator.
	AttributionRequests int64    `json:"attribution_requests"`
	CPUUS               *float64 `json:"cpu_us"`
	Syscalls            *float64 `json:"syscalls"`
	Allocs              *float64 `json:"allocs"`
	AllocBytes          *float64 `json:"alloc_bytes"`
	CopiedBytes         *float64 `json:"copied_bytes"`
	// BackgroundBytes is what its attribution window allocated outside
	// any request, above the background rate of the quietest request's
	// window, per request: work it handed to goroutines that already
	// existed (workers, pools, a storage engine's goroutines), which its
	// own figures (AllocBytes's sites by route, routes[]) leave out.
	// BackgroundShare is that part of all the bytes its window allocated.
	// An estimate: the background that any window has (timers, the GC's
	// workers) is taken to run at the quietest window's rate.
	BackgroundBytes *float64 `json:"background_bytes,omitempty"`
	BackgroundShare *float64 `json:"background_share,omitempty"`
	// Route is the route its requests ended under in its attribution
	// window, and RouteAllocs, RouteAllocBytes that route's own
	// allocations per request there (the request mark's, as routes[]
	// splits the mix): what the mix check compares.
	Route           string   `json:"route,omitempty"`
	RouteAllocs     *float64 `json:"route_allocs,omitempty"`
	RouteAllocBytes *float64 `json:"route_alloc_bytes,omitempty"`
	// Files are its attribution window's profiles (allocs, copies).
	Files map[string]string `json:"files,omitempty"`
	// Sources name where each figure comes from, as summary.json's do.
	Sources map[string]string `json:"sources"`
}

// MixSummary is a request file's mix: its requests and the fixed order
// the driver sends them in, cycled (indexes into Requests).
type MixSummary struct {
	File     string   `json:"file"`
	Requests []string `json:"requests"`
	Weights  []int    `json:"weights"`
	Order    []int    `json:"order"`
}

// Judged is which figures of a run its window supports.
type Judged struct {
	// Counts: allocations, copies, syscalls and goroutines per request.
	// False when the window had too few or failed requests, a table was
	// full, or a count did not close on the runtime's own.
	Counts bool `json:"counts"`
	// Timing: latency, CPU and off-CPU time per request. False when the
	// server did not set the pace (the driver did, or a busy machine),
	// an open-loop driver did not hold its rate, or pinning failed.
	Timing bool `json:"timing"`
	// TimingReasons are the reasons (of Reasons) that concern the timings
	// only.
	TimingReasons []string `json:"timing_reasons,omitempty"`
}
