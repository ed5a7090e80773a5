package probe

import (
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/metric"
)

// SummarySchema is the schema name of summary.json.
const SummarySchema = "perfspy.summary/v1"

// Verdicts.
const (
	VerdictServerBound = "server-bound"
	VerdictNotJudged   = "not-judged"
)

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
	Build             *withagent.Check   `json:"build,omitempty"`
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
	Driver         *DriverSummary     `json:"driver,omitempty"`
	CoresAvailable float64            `json:"cores_available"`
	Verdict        string             `json:"verdict"`
	Reasons        []string           `json:"reasons,omitempty"`
	PerRequest     PerRequest         `json:"per_request"`
	Sources        map[string]string  `json:"sources"`
	Files          map[string]string  `json:"files"`
	Checks         map[string]float64 `json:"checks,omitempty"`
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
	RoutesBeforeRouting *RouteSummary  `json:"routes_before_routing,omitempty"`
	RoutesClosure       *RoutesClosure `json:"routes_closure,omitempty"`
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
}

// RetainedSite is a site whose allocations the retained window's
// requests left live, per request.
type RetainedSite struct {
	Func    string  `json:"func"`
	Objects float64 `json:"objects"`
	Bytes   float64 `json:"bytes"`
}

func f64(v float64) *float64 { return &v }

// writeJSON writes v indented, with a final newline. encoding/json sorts map
// keys, so the output is deterministic.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// benchMetric is one figure of bench.txt; Exact marks the figures the
// metric table judges as exact counts.
type benchMetric struct {
	Value float64
	Unit  string
	Exact bool
}

// writeBench writes s in the Go benchmark format that benchstat reads: the
// configuration as "key: value" lines, Unit lines that mark counts exact,
// then one result line whose iteration count is the window's requests.
func writeBench(w io.Writer, s *Summary, name string, config map[string]string) error {
	ms := benchMetrics(s)
	bw := benchfmt.NewWriter(w)
	for _, m := range ms {
		if m.Exact {
			u := &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: m.Unit, Key: "assume"}, OrigUnit: m.Unit, Value: "exact"}
			if err := bw.Write(u); err != nil {
				return err
			}
		}
	}
	res := &benchfmt.Result{Name: benchfmt.Name(benchName(name)), Iters: int(s.Window.Requests)}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		res.Config = append(res.Config, benchfmt.Config{Key: k, Value: []byte(config[k]), File: true})
	}
	for _, m := range ms {
		// Four decimals at most, as the figures are rounded elsewhere.
		res.Values = append(res.Values, benchfmt.Value{Value: round(m.Value, 4), Unit: m.Unit})
	}
	return bw.Write(res)
}

// benchMetrics are the figures of bench.txt, in their order.
func benchMetrics(s *Summary) []benchMetric {
	var ms []benchMetric
	add := func(v *float64, unit string) {
		if v != nil {
			ms = append(ms, benchMetric{*v, unit, exactUnit(unit)})
		}
	}
	if s.PerRequest.Instructions != nil {
		// An instructions window is paced and slowed by callgrind: its
		// rate and latencies say nothing of the target.
		add(s.PerRequest.Instructions, "instructions/req")
		return ms
	}
	add(&s.Window.RPS, "req/s")
	add(s.PerRequest.CPUUS, "cpu-us/req")
	add(s.PerRequest.Allocs, "allocs/req")
	add(s.PerRequest.AllocBytes, "B/req")
	add(s.PerRequest.CopiedBytes, "copied-B/req")
	add(s.PerRequest.ClearedBytes, "cleared-B/req")
	add(s.PerRequest.Syscalls, "syscalls/req")
	add(s.PerRequest.RetainedBytes, "retained-B/req")
	add(s.PerRequest.GoroutinesLeft, "goroutines-left/req")
	add(s.DatagramsPerRequest, "datagrams/req")
	for _, q := range []string{"p50", "p99", "p999"} {
		if v, ok := s.Window.LatencyUS[q]; ok {
			f := float64(v)
			add(&f, q+"-us")
		}
	}
	return ms
}

// exactUnit reports whether the metric table judges unit as an exact
// count: bench.txt marks it assume=exact, so that benchstat calls any
// change significant.
func exactUnit(unit string) bool {
	m, ok := metric.Lookup(unit)
	return ok && m.Judged.Counted()
}

// benchName makes a benchmark name from a target name: no spaces, first
// letter upper case.
func benchName(target string) string {
	var b strings.Builder
	for _, r := range target {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" {
		return "Probe"
	}
	return "Probe/" + n
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
	Busy               bool     `json:"busy"`
	Source             string   `json:"source"`
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
