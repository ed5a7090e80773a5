// Package metric is the one table of perfspy's figures: for each, its
// name per request and per op, what one unit of it is, how a change in it
// is judged (an exact count, bytes, a timing, instructions), which way is
// better, the profile whose samples add up to it, its key in summary.json
// and its source. bench.txt's unit metadata, probe ab's verdicts, probe
// review's gates and the reports read it: a new figure is one row here.
package metric

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Judgement is how a change in a figure is judged.
type Judgement int

const (
	// Exact counts: any change beyond rounding is real.
	Exact Judgement = iota
	// Bytes are exact counts too, and a change is at least one byte.
	Bytes
	// Timing figures move from run to run: Mann-Whitney U over rounds
	// and a change of at least 2%.
	Timing
	// Instructions are callgrind's counts: a change beyond the runs' own
	// spread.
	Instructions
)

// String is the judgement's name in ab.json's judged_as.
func (j Judgement) String() string {
	switch j {
	case Exact:
		return "exact"
	case Bytes:
		return "bytes"
	case Timing:
		return "timing"
	case Instructions:
		return "instructions"
	}
	return "unknown"
}

// Counted reports whether figures judged so are exact counts: bench.txt
// marks them assume=exact, and a review gates them at 0 unless told.
func (j Judgement) Counted() bool { return j == Exact || j == Bytes }

// Metric is one figure.
type Metric struct {
	// Name is the figure without its divisor: "allocs" is written
	// allocs/req per request and allocs/op per op; a figure with no Per
	// (req/s, p99-us) is written as its name.
	Name string
	Per  []string
	// Unit is what one of it is.
	Unit        string
	Judged      Judgement
	HigherWorse bool
	// Compared says that probe ab compares it between two builds, and so
	// that a review may gate it.
	Compared bool
	// Summary is where summary.json holds it per request (a path from
	// the top); BenchSummary where the bench summary holds it per op, a
	// path from a benchmark's object ("" when not measured so). Split
	// and BenchSplit hold the same figure split by name or reason.
	Summary, BenchSummary string
	Split, BenchSplit     string
	// Endpoint is its key in an object of summary.json's endpoints[]
	// (each request of a mix measured alone, per request); Route its key
	// per request in an object of routes[] (the mix split by route), and
	// RouteBackground its key per second in routes_background.
	Endpoint, Route, RouteBackground string
	// Profile is the results file whose samples add up to it, and its
	// sample type ("" when it has none).
	Profile, Sample string
	// Source is how it is measured, in a few words; docs/metrics.md has
	// the whole story and the blind spots.
	Source string
	// What the writers need. Label is its words in report.md's table of
	// figures, and the terminal's line of its SourceKey (its key in
	// summary.json's sources, which says how this run measured it): a
	// row without a label is written by its own lines (the window, the
	// latencies) or pages. Window is the summary's object of the window
	// that counted it ("window", the timing window; "attribution_window",
	// "copies_window", "retained_window"). Digits are its decimals per
	// request; per op two more. Bench says that bench.txt carries it.
	Label, SourceKey, Window string
	Digits                   int
	Bench                    bool
	// Callgrind says that it is measured under callgrind only
	// (-instructions): a report gives it no column when no result has it.
	Callgrind bool
}

// Table is every figure, in the order reports list them.
var Table = []Metric{
	{Name: "ns", Per: []string{"op"}, Unit: "nanoseconds", Judged: Timing, HigherWorse: true, Compared: true,
		BenchSummary: "per_op.ns", Source: "the plain test binary's ns/op, as go test -bench reports it",
		Digits: 0, Bench: true},
	{Name: "allocs", Per: []string{"req", "op"}, Unit: "objects", Judged: Exact, HigherWorse: true, Compared: true,
		Summary: "per_request.allocs", BenchSummary: "per_op.allocs",
		Endpoint: "allocs", Route: "allocs_per_req", RouteBackground: "allocs_per_s", Profile: "allocs.pb.gz", Sample: "alloc_objects",
		Source: "allocspy's runtime overlay: every allocation, by call site (else the heap profile at MemProfileRate=1)",
		Label:  "allocations", SourceKey: "allocs", Window: "attribution_window", Digits: 2, Bench: true},
	{Name: "B", Per: []string{"req", "op"}, Unit: "bytes", Judged: Bytes, HigherWorse: true, Compared: true,
		Summary: "per_request.alloc_bytes", BenchSummary: "per_op.alloc_bytes",
		Endpoint: "alloc_bytes", Route: "alloc_bytes_per_req", RouteBackground: "alloc_bytes_per_s", Profile: "allocs.pb.gz", Sample: "alloc_space",
		Source: "allocspy's runtime overlay: the size-class bytes of every allocation, by call site",
		Label:  "allocated bytes", SourceKey: "allocs", Window: "attribution_window", Digits: 0, Bench: true},
	{Name: "alloc-blocks", Per: []string{"req"}, Unit: "objects", Judged: Exact, HigherWorse: true,
		Summary: "per_request.alloc_blocks", Profile: "allocs.pb.gz", Sample: "heap_blocks",
		Source: "allocspy: the allocations that took a heap slot of their own (tiny objects share 16-byte blocks)"},
	{Name: "requested-B", Per: []string{"req"}, Unit: "bytes", Judged: Bytes, HigherWorse: true,
		Summary: "per_request.alloc_requested_bytes", Profile: "allocs.pb.gz", Sample: "requested_space",
		Source: "allocspy: the bytes the allocations asked for, before rounding to a size class"},
	{Name: "copy-calls", Per: []string{"req"}, Unit: "calls", Judged: Exact, HigherWorse: true,
		Summary: "per_request.copy_calls", Profile: "copies.pb.gz", Sample: "copy_calls",
		Source: "copyspy's runtime overlay: memmove's calls",
		Label:  "copies (memmove calls)", SourceKey: "copies", Window: "copies_window", Digits: 2},
	{Name: "copied-B", Per: []string{"req", "op"}, Unit: "bytes", Judged: Bytes, HigherWorse: true, Compared: true,
		Summary: "per_request.copied_bytes", BenchSummary: "per_op.copied_bytes",
		Endpoint: "copied_bytes", Route: "copied_bytes_per_req", RouteBackground: "copied_bytes_per_s", Profile: "copies.pb.gz", Sample: "copied_bytes",
		Source: "copyspy's runtime overlay: every memmove's bytes, by call site",
		Label:  "bytes copied", SourceKey: "copies", Window: "copies_window", Digits: 0, Bench: true},
	{Name: "clear-calls", Per: []string{"req"}, Unit: "calls", Judged: Exact, HigherWorse: true,
		Summary: "per_request.clear_calls", Profile: "copies.pb.gz", Sample: "clear_calls",
		Source: "copyspy's runtime overlay: memclr's calls",
		Label:  "clears (memclr calls, apart from copies)", SourceKey: "copies", Window: "copies_window", Digits: 2},
	{Name: "cleared-B", Per: []string{"req", "op"}, Unit: "bytes", Judged: Bytes, HigherWorse: true,
		Summary: "per_request.cleared_bytes", BenchSummary: "per_op.cleared_bytes", Profile: "copies.pb.gz", Sample: "cleared_bytes",
		Source: "copyspy's runtime overlay: every memclr's bytes (malloc's zeroing among them), by call site",
		Label:  "bytes cleared", SourceKey: "copies", Window: "copies_window", Digits: 0, Bench: true},
	{Name: "syscalls", Per: []string{"req", "op"}, Unit: "calls", Judged: Timing, HigherWorse: true, Compared: true,
		Summary: "per_request.syscalls", BenchSummary: "per_op.syscalls", Endpoint: "syscalls", Profile: "syscalls.pb.gz", Sample: "syscalls",
		Split: "per_request.syscalls_by_name", BenchSplit: "per_op.syscalls_by_name",
		Source: "eBPF on sys_enter, by name and Go stack; they hold the scheduler's epoll, futex and nanosleep calls, which move with timing",
		Label:  "syscalls", SourceKey: "syscalls", Window: "window", Digits: 2, Bench: true},
	{Name: "cpu-us", Per: []string{"req"}, Unit: "microseconds", Judged: Timing, HigherWorse: true, Compared: true,
		Summary: "per_request.cpu_us", Endpoint: "cpu_us", Profile: "cpu.pb.gz", Sample: "cpu",
		Source: "the target's CPU time (/proc) in the timing window over its successful requests",
		Label:  "CPU µs", SourceKey: "cpu", Window: "window", Digits: 2, Bench: true},
	{Name: "req/s", Unit: "requests per second", Judged: Timing, HigherWorse: false, Compared: true,
		Summary: "window.rps", Source: "the driver's successful requests over the timing window", Digits: 1, Bench: true},
	{Name: "p50-us", Unit: "microseconds", Judged: Timing, HigherWorse: true,
		Summary: "window.latency_us.p50", Source: "the driver's latency histogram of the timing window (under -rate, from each request's intended send time)", Bench: true},
	{Name: "p99-us", Unit: "microseconds", Judged: Timing, HigherWorse: true, Compared: true,
		Summary: "window.latency_us.p99", Source: "the driver's latency histogram of the timing window (under -rate, from each request's intended send time)", Bench: true},
	{Name: "p999-us", Unit: "microseconds", Judged: Timing, HigherWorse: true,
		Summary: "window.latency_us.p999", Source: "the driver's latency histogram of the timing window (under -rate, from each request's intended send time)", Bench: true},
	{Name: "retained-B", Per: []string{"req", "op"}, Unit: "bytes", Judged: Bytes, HigherWorse: true, Compared: true,
		Summary: "per_request.retained_bytes", BenchSummary: "per_op.retained_bytes", Profile: "retained.pb.gz", Sample: "inuse_space",
		Source: "the heap profile at MemProfileRate=1 after two GCs: what the retained window's requests left live; per op, allocspy's tracking of each block the counted run's timed region made, still in use after what two GCs free",
		Label:  "retained bytes (live after the window)", SourceKey: "retained", Window: "retained_window", Digits: 0, Bench: true},
	{Name: "retained-objects", Per: []string{"req", "op"}, Unit: "objects", Judged: Exact, HigherWorse: true,
		Summary: "per_request.retained_objects", BenchSummary: "per_op.retained_objects", Profile: "retained.pb.gz", Sample: "inuse_objects",
		Source: "the heap profile at MemProfileRate=1 after two GCs: the objects the retained window's requests left live; per op, allocspy's tracking in the counted run",
		Label:  "retained objects", SourceKey: "retained", Window: "retained_window", Digits: 4},
	{Name: "goroutines-left", Per: []string{"req", "op"}, Unit: "goroutines", Judged: Exact, HigherWorse: true, Compared: true,
		Summary: "per_request.goroutines_left", BenchSummary: "per_op.goroutines_left", Profile: "goroutines_left.pb.gz", Sample: "goroutines",
		Source: "goroutine dumps at the retained window's ends: goroutines started in it and still running",
		Label:  "goroutines left running", SourceKey: "goroutines_left", Window: "retained_window", Digits: 4, Bench: true},
	{Name: "goroutines-leaked", Per: []string{"req"}, Unit: "goroutines", Judged: Exact, HigherWorse: true,
		Summary: "per_request.goroutines_leaked",
		Source:  "the goroutine leak profile (Go 1.27 on): the goroutines left that can never run again",
		Label:   "of them leaked (never to run again)", SourceKey: "goroutines_leaked", Window: "retained_window", Digits: 4},
	{Name: "offcpu-us", Per: []string{"req"}, Unit: "microseconds", Judged: Timing, HigherWorse: true,
		Split: "per_request.offcpu_us", Profile: "offcpu.pb.gz", Sample: "delay",
		Source: "the execution trace between each request's boundaries, on its own goroutine, by reason"},
	{Name: "offcpu-ns", Per: []string{"op"}, Unit: "nanoseconds", Judged: Timing, HigherWorse: true,
		BenchSplit: "per_op.offcpu_ns", Profile: "offcpu.pb.gz", Sample: "delay",
		Source: "the execution trace of the timed region (a run of its own), by reason"},
	{Name: "request-us", Per: []string{"req"}, Unit: "microseconds", Judged: Timing, HigherWorse: true,
		Split:  "per_request.request_us",
		Source: "the mean request's server-side time: its off-CPU reasons, its CPU, and their total"},
	{Name: "tail-allocs", Per: []string{"req"}, Unit: "objects", Judged: Exact, HigherWorse: true,
		Summary: "bills.groups.p99.allocs", Profile: "tail_allocs.pb.gz", Sample: "alloc_objects",
		Source: "the slowest 1%'s own bills, mean per request: allocspy's recorder adds each allocation of a billed request's goroutines to its bill"},
	{Name: "tail-copied-B", Per: []string{"req"}, Unit: "bytes", Judged: Bytes, HigherWorse: true,
		Summary: "bills.groups.p99.copies.copied_bytes", Profile: "tail_copies.pb.gz", Sample: "copied_bytes",
		Source: "the slowest 1%'s own bills, mean per request: copyspy's recorder adds each memmove of a billed request's goroutines to its bill"},
	{Name: "tail-us", Per: []string{"req"}, Unit: "microseconds", Judged: Timing, HigherWorse: true,
		Summary: "bills.groups.p99.duration_us", Split: "bills.groups.p99.time_us",
		Source: "the slowest 1%'s own bills, mean per request: server-side duration, split by the runtime's state changes of the request's goroutines (CPU of each, the waits of its own)"},
	{Name: "tail-syscalls", Per: []string{"req"}, Unit: "calls", Judged: Timing, HigherWorse: true,
		Summary: "bills.groups.p99.syscalls", Split: "bills.groups.p99.syscalls_by_name",
		Source: "the slowest 1%'s own bills, mean per request: the syscalls its goroutines entered through the runtime (not the vDSO's, not raw ones), by name those package syscall made"},
	{Name: "goroutines-created", Per: []string{"req"}, Unit: "goroutines", Judged: Exact, HigherWorse: true,
		Summary: "per_request.goroutines_created", Source: "runtime/metrics' /sched/goroutines-created at the timing window's ends (Go 1.26 on): every goroutine the process started, a request's and the background's",
		Label: "goroutines created", SourceKey: "goroutines_created", Window: "window", Digits: 2, Bench: true},
	{Name: "datagrams", Per: []string{"req"}, Unit: "datagrams", Judged: Timing, HigherWorse: true,
		Summary: "datagrams_per_request", Source: "the target's UDP datagrams per transfer (quic, udp); they move with ACK timing", Digits: 3, Bench: true},
	{Name: "handed-off-B", Per: []string{"req"}, Unit: "bytes", Judged: Timing, HigherWorse: true,
		Endpoint: "background_bytes",
		Source:   "an estimate: a request's window's bytes allocated outside any request, less the quietest request's window's background rate"},
	{Name: "handed-off-share", Unit: "fraction of the window's bytes", Judged: Timing, HigherWorse: true,
		Endpoint: "background_share",
		Source:   "handed-off-B over all the bytes the request's window allocated"},
	{Name: "background-share", Unit: "fraction of the window's allocated bytes", Judged: Timing, HigherWorse: true,
		Summary: "routes_background.share_bytes", RouteBackground: "share_bytes",
		Source: "the request marks, after the handoffs they follow (channels, time.AfterFunc): the attribution window's bytes that no request held, over all its bytes"},
	{Name: "background-allocs-share", Unit: "fraction of the window's allocations", Judged: Timing, HigherWorse: true,
		Summary: "routes_background.share_allocs", RouteBackground: "share_allocs",
		Source: "the request marks, after the handoffs they follow: the attribution window's allocations that no request held, over all of them"},
	{Name: "unfollowed-share", Unit: "fraction of the window's allocated bytes", Judged: Timing, HigherWorse: true,
		Summary: "routes_unfollowed.share_bytes",
		Source:  "the request marks: the attribution window's bytes allocated under the mark of a request that no longer had it (it ended, or its goroutine handed it back), over all its bytes; on no route"},
	{Name: "unfollowed-allocs-share", Unit: "fraction of the window's allocations", Judged: Timing, HigherWorse: true,
		Summary: "routes_unfollowed.share_allocs",
		Source:  "the request marks: the attribution window's allocations under the mark of a request that no longer had it, over all of them"},
	{Name: "route-allocs", Per: []string{"req"}, Unit: "objects", Judged: Exact, HigherWorse: true,
		Endpoint: "route_allocs",
		Source:   "allocspy route labels: a request's own route's allocations in its window alone, per request of the route (what the mix check compares with routes[])"},
	{Name: "route-alloc-B", Per: []string{"req"}, Unit: "bytes", Judged: Bytes, HigherWorse: true,
		Endpoint: "route_alloc_bytes",
		Source:   "allocspy route labels: a request's own route's bytes in its window alone, per request of the route"},
	{Name: "instructions", Per: []string{"req", "op"}, Unit: "instructions", Judged: Instructions, HigherWorse: true, Compared: true,
		Summary: "per_request.instructions", BenchSummary: "per_op.instructions", Profile: "instructions.pb.gz", Sample: "instructions",
		Source: "valgrind's callgrind (probe run -instructions; with -bench, the plain test binary at two op counts, the difference per op)", Digits: 2, Bench: true, Callgrind: true},
	{Name: "compiler-copied-B", Per: []string{"op"}, Unit: "bytes", Judged: Bytes, HigherWorse: true, Compared: true,
		BenchSummary: "per_op.compiler_copied_bytes", Profile: "compiler_copies.pb.gz", Sample: "copied_bytes",
		Source: "the compiler's own copies (vector stores, REP; MOVSQ; amd64), which never reach memmove: the instructions' executions under callgrind (-instructions) times the bytes each moves", Digits: 0, Bench: true, Callgrind: true},
}

// Names are the metric's written names: one per divisor, or its name.
func (m Metric) Names() []string {
	if len(m.Per) == 0 {
		return []string{m.Name}
	}
	out := make([]string, len(m.Per))
	for i, p := range m.Per {
		out[i] = m.Name + "/" + p
	}
	return out
}

// Named is the written name of the table's metric name per divisor
// ("allocs", "op": "allocs/op"). A name or divisor the table does not
// hold panics: Named is for the package's own variables below, checked
// when the package loads, so that no other package spells a metric.
func Named(name, per string) string {
	for _, m := range Table {
		if m.Name == name {
			if w, ok := m.Written(per); ok {
				return w
			}
		}
	}
	panic("metric: no metric " + name + " per " + per)
}

// The written names other packages use by themselves (a default, a unit
// read back from go test's output).
var (
	AllocsReq = Named("allocs", "req")
	AllocsOp  = Named("allocs", "op")
	BytesOp   = Named("B", "op")
)

// Lookup finds the metric of a written name: "allocs/req", "ns/op",
// "req/s", or one prefixed with its subject ("GET /x allocs/req",
// "BenchmarkX-2 B/op").
func Lookup(name string) (Metric, bool) {
	if i := strings.LastIndex(name, " "); i >= 0 {
		name = name[i+1:]
	}
	for _, m := range Table {
		for _, n := range m.Names() {
			if n == name {
				return m, true
			}
		}
	}
	return Metric{}, false
}

// Compare are the written names that probe ab compares per divisor
// ("req" or "op"), in the table's order; per request, req/s and p99-us
// too.
func Compare(per string) []string {
	var out []string
	for _, m := range Table {
		if !m.Compared {
			continue
		}
		if len(m.Per) == 0 && per == "req" {
			out = append(out, m.Name)
		}
		for _, p := range m.Per {
			if p == per {
				out = append(out, m.Name+"/"+p)
			}
		}
	}
	return out
}

// Doc is v (a summary, a benchmark's object) as its JSON decodes into
// maps: the document At, Values and the writers read the table's paths
// in.
func Doc(v any) any {
	var doc any
	if b, err := json.Marshal(v); err == nil {
		json.Unmarshal(b, &doc)
	}
	return doc
}

// At reads the value at a dotted path ("per_request.allocs",
// "window.latency_us.p99") of a JSON document decoded into maps; false
// when a part of the path is missing or the value is not a number.
func At(doc any, path string) (float64, bool) {
	v := doc
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		v = m[k]
	}
	f, ok := v.(float64)
	return f, ok
}

// Written is the metric's name per divisor ("req" or "op"): "allocs/req",
// "B/op"; a figure with no Per is written as its name per request. False
// when it is not measured per that divisor.
func (m Metric) Written(per string) (string, bool) {
	if len(m.Per) == 0 {
		return m.Name, per == "req"
	}
	if slices.Contains(m.Per, per) {
		return m.Name + "/" + per, true
	}
	return "", false
}

// Path is where it is held per divisor: per "req" in summary.json
// (Summary), per "op" in a benchmark's object of the bench summary
// (BenchSummary); "" when it is not.
func (m Metric) Path(per string) string {
	if per == "op" {
		return m.BenchSummary
	}
	return m.Summary
}

// Profiles are the results' profiles (their files' names without
// ".pb.gz") whose samples add up to a figure measured per divisor ("op":
// a benchmark's), in the table's order, each once.
func Profiles(per string) []string {
	var out []string
	for _, m := range Table {
		_, ok := m.Written(per)
		split := m.Split
		if per == "op" {
			split = m.BenchSplit
		}
		name, isPB := strings.CutSuffix(m.Profile, ".pb.gz")
		if ok && isPB && (m.Path(per) != "" || split != "") && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Values reads every figure probe ab compares per divisor (Compare(per))
// from a document decoded into maps: per "req" a summary.json at each
// row's Summary path, per "op" one benchmark's object of the bench summary
// at its BenchSummary path. Absent ones are NaN, so that a figure a run
// did not measure is said so, never a zero.
func Values(doc any, per string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range Table {
		name, ok := m.Written(per)
		if !m.Compared || !ok || m.Path(per) == "" {
			continue
		}
		v, ok := At(doc, m.Path(per))
		if !ok {
			v = math.NaN()
		}
		out[name] = v
	}
	return out
}
