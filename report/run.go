package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// TopSites is how many allocation sites report.md and the terminal list.
const TopSites = 10

// Run is what a run's report.md and terminal table are made of: the
// summary, the sites of the attribution window and the results folder.
type Run struct {
	Summary      *schema.Summary
	Dir          string  // the results folder, the terminal's last line
	Sites        []Site  // allocation sites, largest first
	Requests     int64   // the attribution window's, by which sites divide
	Totals       []int64 // the allocations' totals, for the remainder row
	CopySites    []schema.CopySite
	CopyRequests int64
	CopyTotal    [2]int64
}

// Markdown writes report.md.
func (r *Run) Markdown(w io.Writer) {
	writeReport(w, r.Summary, r.Sites, r.Requests, r.Totals)
	writeCopyReport(w, r.CopySites, r.CopyRequests, r.CopyTotal)
	if len(r.Summary.Routes) > 0 {
		writeRoutesTable(w, r.Summary, true, 0)
	}
	writeSyscallReport(w, r.Summary)
	writeOffCPUReport(w, r.Summary)
	writeBills(w, r.Summary)
}

// writeReport writes report.md's first part: the per-request table with the source of
// each figure, then the top allocation sites; the sites add up to the
// total, the rest shown as one row.
func writeReport(w io.Writer, s *schema.Summary, sites []Site, requests int64, tot []int64) {
	fmt.Fprintf(w, "# perfspy: %s\n\n", safetext.Markdown(s.Target))
	fmt.Fprintf(w, "commit %s, %s, verdict **%s**%s", safetext.Code(s.Commit), s.Go, s.Verdict, judgedPart(s))
	if len(s.Reasons) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(s.Reasons, "; "))
	}
	fmt.Fprint(w, "\n\n")
	if b := s.Build; b != nil {
		fmt.Fprintf(w, "Build: %s.\n\n", BuildLine(b))
	}
	fmt.Fprintf(w, "| figure | per request | source |\n|---|---:|---|\n")
	fmt.Fprintf(w, "| requests (timing window) | %d in %.2f s, %.1f req/s | load driver, 2xx only |\n", s.Window.Requests, s.Window.Seconds, s.Window.RPS)
	latencyRows(w, s.Window)
	fmt.Fprintf(w, "| server cores used | %.2f of %.0f%s | %s, timing window |\n", s.ServerCores, s.CoresAvailable, placement(s), s.Sources["cpu"])
	if c, ok := s.Checks["cpu_profile_coverage"]; ok && c < LowCPUProfileCoverage {
		fmt.Fprintf(w, "| CPU profile | %.0f%% of the measured CPU sampled | %s |\n", 100*c, s.Sources["cpu_profile"])
	}
	if m := s.Machine; m != nil {
		fmt.Fprintf(w, "| machine | %s | %s, timing window |\n", machineLine(m), m.Source)
	}
	if d := s.Driver; d != nil {
		fmt.Fprintf(w, "| load driver's own CPU (%s) | %.2f µs, %.2f cores | %s of probe, timing window |\n", d.Name, d.CPUUS, d.CoresUsed, d.Source)
		if d.TLS != "" {
			fmt.Fprintf(w, "| TLS | %s | the server's certificate |\n", d.TLS)
		}
	}
	if s.Floor != nil {
		fmt.Fprintf(w, "| CPU vs the floor | %.2fx (floor %.2f µs, %s) | %s, same settings |\n", s.Floor.CPURatio, s.Floor.CPUUS, s.Floor.Verdict, s.Floor.Target)
	}
	if t := s.Transfer; t != nil {
		fmt.Fprintf(w, "| datagrams per transfer (%d B) | %.3f, %.0f B each, largest %d | load driver (%s), timing window |\n", t.Bytes, *s.DatagramsPerRequest, t.BytesPerDatagram, t.LargestDatagram, t.DatagramSource)
		fmt.Fprintf(w, "| CPU per MB | %.2f µs | %s, timing window |\n", t.CPUUSPerMB, s.Sources["cpu"])
		fmt.Fprintf(w, "| bytes per syscall | %.0f | datagram bytes over the server's syscalls |\n", t.BytesPerSyscall)
		fmt.Fprintf(w, "| per datagram | %.4f syscalls, %.4f µs CPU | per-transfer figures over datagrams |\n", s.PerDatagram.Syscalls, s.PerDatagram.CPUUS)
		for _, k := range slices.Sorted(maps.Keys(s.FloorRatio)) {
			fmt.Fprintf(w, "| %s vs the UDP floor | %.2fx | targets/udpfloor, same transfers |\n", k, s.FloorRatio[k])
		}
	}
	writeFigureRows(w, s)
	fmt.Fprint(w, "\nBlind spots: ")
	if s.Sources["allocs"] == schema.SourceAllocspy {
		fmt.Fprint(w, "allocspy counts objects as the program asked for them (tiny objects packed into one 16-byte block each count; the blocks are heap_blocks) and keeps stacks of up to 128 return PCs from mallocgc's caller, as the runtime's own profiles; a deeper stack is cut there and ends in a [truncated] frame. ")
	} else {
		fmt.Fprint(w, "the heap profile counts heap blocks: several tiny (<16 B, pointer-free) objects packed into one 16-byte block count once. ")
	}
	if strings.HasPrefix(s.Sources["syscalls"], schema.SourceSyscallsIO) {
		fmt.Fprint(w, "Syscalls from /proc/PID/io count only the read/write family (not epoll, futex, nanosleep). ")
	} else {
		fmt.Fprint(w, "Syscalls are every sys_enter of the target's threads, counted in the kernel; the timing window's CPU profile adds about 100 rt_sigreturn a second. ")
	}
	fmt.Fprint(w, "Copies count calls of memmove and memclrNoHeapPointers; copies the compiler inlines (constant sizes up to 16 B, array and struct assignment, inline zeroing) never reach them. Off-CPU time comes from an execution trace of its own window: the trace sees only syscalls that go through entersyscall.\n\n")
	writeEndpoints(w, s, true)

	if requests <= 0 || len(tot) < 2 {
		return
	}
	fmt.Fprintf(w, "## Top allocation sites (per request, attribution window)\n\n")
	fmt.Fprintf(w, "| site | allocs | bytes |\n|---|---:|---:|\n")
	var shownO, shownB int64
	shown := visibleSites(sites, requests, TopSites)
	for _, st := range shown {
		shownO += st.Values[0]
		shownB += st.Values[1]
		site := safetext.Code(st.Func)
		for _, c := range st.Callers {
			site += " ← " + safetext.Code(c)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.0f |\n", site, float64(st.Values[0])/float64(requests), float64(st.Values[1])/float64(requests))
	}
	if len(sites) > len(shown) {
		fmt.Fprintf(w, "| other %d sites | %.2f | %.0f |\n", len(sites)-len(shown), float64(tot[0]-shownO)/float64(requests), float64(tot[1]-shownB)/float64(requests))
	}
	fmt.Fprintf(w, "| **total** | %.2f | %.0f |\n", float64(tot[0])/float64(requests), float64(tot[1])/float64(requests))
}

// writeFigureRows are report.md's rows of the metric table's labelled
// figures: each with its source and the window that counted it; a source
// that measured none of its figures says why in one row.
func writeFigureRows(w io.Writer, s *schema.Summary) {
	doc := metric.Doc(s)
	figs := figures(doc, "req", labelled)
	for _, f := range figs {
		fmt.Fprintf(w, "| %s | %s | %s, %s |\n", f.Label, f.text(), s.Sources[f.SourceKey], windowWords(doc, f.Window))
	}
	for _, k := range unmeasured(s, figs) {
		fmt.Fprintf(w, "| %s | n/a | %s |\n", strings.ReplaceAll(k, "_", " "), s.Sources[k])
	}
}

// unmeasured are the source keys of labelled rows that the run measured
// none of, whose source says why, in the table's order.
func unmeasured(s *schema.Summary, figs []figure) []string {
	have := map[string]bool{}
	for _, f := range figs {
		have[f.SourceKey] = true
	}
	var out []string
	for _, m := range metric.Table {
		if k := m.SourceKey; m.Label != "" && m.Summary != "" && !have[k] && s.Sources[k] != "" {
			have[k] = true
			out = append(out, k)
		}
	}
	return out
}

// writeFigureLines are the terminal's lines of the metric table's
// labelled figures, one per source: "allocs  22.02 allocs/req, 17090
// B/req  [allocspy]"; a source that measured none says why.
func writeFigureLines(w io.Writer, s *schema.Summary) {
	figs := figures(metric.Doc(s), "req", labelled)
	for _, g := range groups(figs) {
		fmt.Fprintf(w, "  %s %s  [%s]\n", head(g.key), g.line(), s.Sources[g.key])
	}
	for _, k := range unmeasured(s, figs) {
		fmt.Fprintf(w, "  %s n/a  [%s]\n", head(k), s.Sources[k])
	}
}

// writeCopyReport lists the top copy sites per request: the first frame
// outside the runtime, the direct caller, and calls per size bucket.
func writeCopyReport(w io.Writer, sites []schema.CopySite, requests int64, tot [2]int64) {
	if requests <= 0 || sites == nil {
		return
	}
	per := func(v int64) float64 { return float64(v) / float64(requests) }
	fmt.Fprintf(w, "\n## Top copy sites (per request, attribution window)\n\n")
	fmt.Fprintf(w, "| site | via | kind | calls | bytes | calls <64 / <1K / <16K / >=16K |\n|---|---|---|---:|---:|---|\n")
	var shownC, shownB int64
	for i := range sites {
		if i == TopSites {
			break
		}
		s := &sites[i]
		shownC += s.TotalCalls()
		shownB += s.TotalBytes()
		fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.0f | %.2f / %.2f / %.2f / %.2f |\n", safetext.Code(s.User), safetext.Code(s.Direct), s.Kind,
			per(s.TotalCalls()), per(s.TotalBytes()), per(s.Calls[0]), per(s.Calls[1]), per(s.Calls[2]), per(s.Calls[3]))
	}
	if len(sites) > TopSites {
		fmt.Fprintf(w, "| other %d sites | | | %.2f | %.0f | |\n", len(sites)-TopSites, per(tot[0]-shownC), per(tot[1]-shownB))
	}
	fmt.Fprintf(w, "| **total** | | | %.2f | %.0f | |\n", per(tot[0]), per(tot[1]))
}

// writeSyscallReport lists syscalls per request by name, largest first.
func writeSyscallReport(w io.Writer, s *schema.Summary) {
	if len(s.PerRequest.SyscallsByName) == 0 {
		return
	}
	type kv struct {
		name string
		v    float64
	}
	var rows []kv
	for k, v := range s.PerRequest.SyscallsByName {
		rows = append(rows, kv{k, v})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].v != rows[j].v {
			return rows[i].v > rows[j].v
		}
		return rows[i].name < rows[j].name
	})
	fmt.Fprintf(w, "\n## Syscalls per request (timing window, %s)\n\n| syscall | per request |\n|---|---:|\n", s.Sources["syscalls"])
	var rest float64
	var nrest int
	for _, r := range rows {
		if r.v < 0.0001 {
			rest += r.v
			nrest++
			continue
		}
		fmt.Fprintf(w, "| %s | %.4f |\n", safetext.Markdown(r.name), r.v)
	}
	if nrest > 0 {
		fmt.Fprintf(w, "| other %d names (each < 0.0001) | %.4f |\n", nrest, rest)
	}
	fmt.Fprintf(w, "| **total** | %s |\n", fmtPtr(s.PerRequest.Syscalls, 4))
}

// latencyRows are report.md's latency rows: an open loop's from the
// intended send, with the raw latency and the sends beside them.
func latencyRows(w io.Writer, ow schema.WindowSummary) {
	if ow.Rate > 0 {
		fmt.Fprintf(w, "| latency p50 / p99 / p99.9 | %d / %d / %d µs | load driver, HDR histogram, timing window; open loop at %g req/s (%s arrivals), from each request's intended send time |\n", ow.LatencyUS["p50"], ow.LatencyUS["p99"], ow.LatencyUS["p999"], ow.Rate, ow.Arrivals)
		fmt.Fprintf(w, "| latency from the actual send | %d / %d / %d µs | the same requests, as a closed loop would time them |\n", ow.LatencyRawUS["p50"], ow.LatencyRawUS["p99"], ow.LatencyRawUS["p999"])
		fmt.Fprintf(w, "| sends | %d scheduled, %d late (> 1 ms), %d dropped | load driver's clock, timing window |\n", ow.ScheduledSends, ow.LateSends, ow.DroppedSends)
	} else {
		fmt.Fprintf(w, "| latency p50 / p99 / p99.9 | %d / %d / %d µs | load driver, HDR histogram, timing window |\n", ow.LatencyUS["p50"], ow.LatencyUS["p99"], ow.LatencyUS["p999"])
	}
}

// LowCPUProfileCoverage is the share of the server's measured CPU under
// which a run's CPU profile is said to have lost most of its samples
// (summary.json checks.cpu_profile_coverage).
const LowCPUProfileCoverage = 0.5

// Terminal prints the short table at the end of a run.
func (r *Run) Terminal(w io.Writer) {
	s := r.Summary
	fmt.Fprintf(w, "%s  %s  verdict: %s%s\n", s.Target, s.Commit, s.Verdict, judgedPart(s))
	for _, why := range s.Reasons {
		what := "not judged"
		if s.Judged != nil && slices.Contains(s.Judged.TimingReasons, why) {
			what = "timing not judged"
		}
		fmt.Fprintf(w, "  %s: %s\n", what, why)
	}
	if b := s.Build; b != nil {
		fmt.Fprintf(w, "  build         %s\n", BuildLine(b))
	}
	fmt.Fprintf(w, "  window        %d requests in %.2fs, %.0f req/s, errors %d\n", s.Window.Requests, s.Window.Seconds, s.Window.RPS, s.Window.Errors+s.Window.Non2xx)
	fmt.Fprintf(w, "  latency       p50 %dµs  p99 %dµs  p99.9 %dµs", s.Window.LatencyUS["p50"], s.Window.LatencyUS["p99"], s.Window.LatencyUS["p999"])
	if ow := s.Window; ow.Rate > 0 {
		fmt.Fprintf(w, "  [open loop, %g req/s %s, from the intended send]\n  raw latency   p50 %dµs  p99 %dµs  p99.9 %dµs  [from the actual send]; sends %d scheduled, %d late, %d dropped",
			ow.Rate, ow.Arrivals, ow.LatencyRawUS["p50"], ow.LatencyRawUS["p99"], ow.LatencyRawUS["p999"], ow.ScheduledSends, ow.LateSends, ow.DroppedSends)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  cores         %.2f of %.0f used%s  [%s]\n", s.ServerCores, s.CoresAvailable, placement(s), s.Sources["cpu"])
	if m := s.Machine; m != nil && m.Busy {
		fmt.Fprintf(w, "  machine       busy: %s  [%s]\n", machineLine(m), m.Source)
	}
	if c, ok := s.Checks["cpu_profile_coverage"]; ok && c < LowCPUProfileCoverage {
		fmt.Fprintf(w, "  cpu profile   %.0f%% of the measured CPU sampled (a busy machine held the kernel's ticks): cpu.pb.gz and its flame graph are thin, cpu µs/req is not  [runtime/pprof]\n", 100*c)
	}
	if d := s.Driver; d != nil {
		fmt.Fprintf(w, "  driver        %s: %.2f µs/req of its own, %.2f cores  [%s]\n", d.Name, d.CPUUS, d.CoresUsed, d.Source)
		if d.TLS != "" {
			fmt.Fprintf(w, "  tls           %s\n", d.TLS)
		}
	}
	if s.Floor != nil {
		fmt.Fprintf(w, "  floor         %.2f µs/req (%s): the target costs %.2fx the floor\n", s.Floor.CPUUS, s.Floor.Target, s.Floor.CPURatio)
	}
	if t := s.Transfer; t != nil {
		fmt.Fprintf(w, "  transfer      %d B: %.2f datagrams (%.0f B each), %.2f µs CPU per MB, %.0f B per syscall  [%s]\n",
			t.Bytes, *s.DatagramsPerRequest, t.BytesPerDatagram, t.CPUUSPerMB, t.BytesPerSyscall, t.DatagramSource)
		fmt.Fprintf(w, "  per datagram  %.4f syscalls, %.4f µs CPU\n", s.PerDatagram.Syscalls, s.PerDatagram.CPUUS)
	}
	writeFigureLines(w, s)
	if c := s.Closure; c != nil && c.Allocs != nil {
		a := c.Allocs
		state := "closes"
		if !a.Closed {
			state = fmt.Sprintf("MISSES %d objects, %d B", a.MissedObjects, a.MissedBytes)
		}
		fmt.Fprintf(w, "  closure       allocs %s on the runtime's count: %d objects = %d counted + %d the agent's + %d dropped  [MemStats, world stopped]\n",
			state, a.RuntimeObjects, a.Objects, a.AgentObjects, a.DroppedObjects)
	}
	if c := s.Closure; c != nil && c.Requests != nil {
		writeRequestsClosure(w, c.Requests)
	}
	writeRetainedLines(w, s)
	if len(s.Routes) > 1 {
		writeRoutesTable(w, s, false, 5)
	}
	if src := s.Sources["offcpu"]; s.PerRequest.RequestUS == nil && strings.HasPrefix(src, schema.SourceNone+": no request boundaries") {
		// Outside net/http (gRPC, fasthttp), say why there is no
		// request line, in one line.
		fmt.Fprintf(w, "  request       n/a: %s\n", strings.TrimPrefix(src, schema.SourceNone+": "))
	}
	if s.PerRequest.RequestUS != nil {
		fmt.Fprintf(w, "  request       %s  [%s]\n", requestLine(s), s.Sources["offcpu"])
		if g := s.Tail["p99"]; g != nil && len(g.Top) > 0 {
			top := g.Top[0]
			woken := ""
			if top.WokenBy != "" {
				woken = " (woken by " + top.WokenBy + ")"
			}
			fmt.Fprintf(w, "  slowest 1%%    %.0f µs, most of it %s %.0f µs in %s%s\n", g.TotalUS, top.Reason, top.US, top.Func, woken)
		}
	}
	if line := BillLine(s.Bills); line != "" {
		fmt.Fprintf(w, "  tail bill     %s%s  [%s]\n", line, billScope(s), s.Bills.Source)
	}
	n := s.AttributionWindow.Requests
	if n > 0 {
		fmt.Fprintf(w, "  top allocation sites (per request):\n")
		for _, st := range visibleSites(r.Sites, int64(n), 5) {
			from := ""
			if len(st.Callers) > 0 {
				from = "  ← " + strings.Join(st.Callers, " ← ")
			}
			fmt.Fprintf(w, "    %8.2f  %8.0f B  %s%s\n", float64(st.Values[0])/float64(n), float64(st.Values[1])/float64(n), st.Func, from)
		}
	}
	writeEndpoints(w, s, false)
	fmt.Fprintf(w, "  results       %s\n", r.Dir)
}

// billScope says, beside the bill's figures, what the per-request totals
// hold that no bill does: a bill runs from the handler's start, so the
// request's reading and parsing before routing is on none.
func billScope(s *schema.Summary) string {
	br := s.RoutesBeforeRouting
	if br == nil || br.AllocsPerReq == nil || *br.AllocsPerReq == 0 {
		return ""
	}
	bytes := 0.0
	if br.AllocBytesPerReq != nil {
		bytes = *br.AllocBytesPerReq
	}
	return fmt.Sprintf(" (a bill runs from the handler's start: the %.2f allocs, %.0f B a request spends before routing are in the per-request totals, on no bill)", *br.AllocsPerReq, bytes)
}

// BuildLine says what the build-list check found: the measured binary has
// a plain build's modules, plus the agent's.
func BuildLine(b *schema.BuildCheck) string {
	var added []string
	for _, m := range b.Added {
		added = append(added, m.Path)
	}
	switch {
	case len(added) == 0 && b.Mode == schema.ModeTest:
		added = []string{"nothing (standard-library overlays only)"}
	case len(added) == 0:
		added = []string{"nothing (the agent is in the target's module)"}
	}
	source := "go list -deps vs the binary's build info"
	if b.Mode == schema.ModeTest {
		source = "the plain test binary's build info vs the counted one's"
	}
	return fmt.Sprintf("%s mode, the %d modules of a plain build at its versions, %d changed, added %s  [%s]",
		b.Mode, b.Modules, len(b.Changed), strings.Join(added, ", "), source)
}

// machineLine is what the machine did: its waits, the others' cores and
// the CPU pressure.
func machineLine(m *schema.MachineSummary) string {
	s := fmt.Sprintf("target waited %.2f s per s for a CPU, driver %.2f; other processes %.2f cores", m.ServerRunQueueWait, m.DriverRunQueueWait, m.OtherCores)
	if m.CPUPressure != nil {
		s += fmt.Sprintf("; CPU pressure %.0f%%", *m.CPUPressure*100)
	}
	return s
}

// visibleSites are the first sites, at most top, whose figures per
// request do not print as 0.00 and 0 B (a site hit once in the window);
// the rest go to the remainder row.
func visibleSites(sites []Site, requests int64, top int) []Site {
	n := 0
	for n < len(sites) && n < top {
		v := sites[n].Values
		if float64(v[0])/float64(requests) < 0.005 && float64(v[1])/float64(requests) < 0.5 {
			break
		}
		n++
	}
	return sites[:n]
}

// placement says what the target ran on: its GOMAXPROCS, and the CPUs it
// and the driver were pinned to. Every per-request figure is the
// target's at that size.
func placement(s *schema.Summary) string {
	if s.GOMAXPROCS == 0 {
		return ""
	}
	out := fmt.Sprintf(" (GOMAXPROCS %d", s.GOMAXPROCS)
	if len(s.ServerCPUs) > 0 {
		out += ", on cpus " + schema.CPUList(s.ServerCPUs)
	}
	if len(s.DriverCPUs) > 0 {
		out += "; the driver on cpus " + schema.CPUList(s.DriverCPUs)
	}
	return out + ")"
}

// writeRetainedLines writes the terminal's lines of the retained window
// under its figures: the top sites and goroutines when they are not zero.
func writeRetainedLines(w io.Writer, s *schema.Summary) {
	if s.RetainedWindow == nil {
		return
	}
	for i, site := range s.RetainedSites {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "                %.4f objects, %.0f B /req kept by %s\n", site.Objects, site.Bytes, site.Func)
	}
	for i, g := range s.GoroutinesLeft {
		if i == 3 {
			break
		}
		mark := ""
		if g.Leaked > 0 {
			mark = fmt.Sprintf(" (%d of %d leaked)", g.Leaked, g.Count)
		}
		fmt.Fprintf(w, "                %.4f goroutines/req left in %s, started by %s%s\n", g.PerReq, g.Func, g.CreatedBy, mark)
	}
}

// writeOffCPUReport writes the requests' server-side time, split, for the
// mean, median and slowest requests, where the slowest waited, and the
// background's waits per second apart.
func writeOffCPUReport(w io.Writer, s *schema.Summary) {
	if s.PerRequest.RequestUS != nil {
		p50, p99 := s.Tail["p50"], s.Tail["p99"]
		fmt.Fprintf(w, "\n## Server-side time per request (off-CPU window, %s)\n\n", s.Sources["offcpu"])
		fmt.Fprintf(w, "From the handler's start to the response's end, on the request's goroutine, over the %.0f requests the trace saw whole.\n\n", s.Checks["offcpu_requests"])
		fmt.Fprintf(w, "| part | mean µs | median requests µs (%d) | slowest 1%% µs (%d) |\n|---|---:|---:|---:|\n", p50.Requests, p99.Requests)
		for _, p := range schema.RequestParts {
			fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f |\n", partLabel(p), s.PerRequest.RequestUS[p], p50.PartsUS[p], p99.PartsUS[p])
		}
		fmt.Fprintf(w, "| remainder (not placed by the trace) | %.2f | %.2f | %.2f |\n", s.Checks["request_us_remainder"], p50.Remainder, p99.Remainder)
		fmt.Fprintf(w, "| **total** | %.2f | %.2f | %.2f |\n", s.PerRequest.RequestUS["total"], p50.TotalUS, p99.TotalUS)
		if m, ok := s.Checks["driver_latency_mean_us"]; ok {
			fmt.Fprintf(w, "\nThe load driver's mean latency in this window: %.2f µs; the other %.2f µs are the network, the driver and the server's work outside the handler (reading the request).\n", m, s.Checks["request_us_driver_gap"])
		}
		fmt.Fprintf(w, "\nWhere the slowest 1%% waited (µs per request of that group):\n\n")
		writeWaitRows(w, p99.Top)
	}
	if s.BackgroundOffCPUUS != nil {
		fmt.Fprintf(w, "\n## Background waits (goroutines serving no request, never divided by requests)\n\nSeconds of waiting per second of the window: 6.64 is six or seven goroutines (idle workers, timers, the runtime's) waiting all the time, on average; summary.json's background_offcpu_us holds the same in µs per second.\n\n| reason | goroutines waiting (s per s) |\n|---|---:|\n")
		for _, r := range schema.OffCPUReasons {
			fmt.Fprintf(w, "| %s | %.2f |\n", r, s.BackgroundOffCPUUS[r]/1e6)
		}
		fmt.Fprintf(w, "\n")
		writeWaitRows(w, s.BackgroundTop)
	}
	fmt.Fprintf(w, "\nThe trace does not see the runtime's own epoll and futex calls or RawSyscall.\n")
}

func partLabel(p string) string {
	switch p {
	case "cpu":
		return "cpu (running)"
	case "sched":
		return "sched (runnable, waiting for a P)"
	case "net_idle":
		return "net_idle (waiting for the client)"
	}
	return p
}

func writeWaitRows(w io.Writer, rows []schema.WaitRow) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "(none)\n")
		return
	}
	fmt.Fprintf(w, "| µs | reason | wait | in | woken by |\n|---:|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %.2f | %s | %s | %s | %s |\n", r.US, r.Reason, safetext.Markdown(r.Wait), safetext.Code(r.Func), safetext.Markdown(r.WokenBy))
	}
}

// requestLine is the terminal's line for the mean request's split.
func requestLine(s *schema.Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%.0f µs on the server:", s.PerRequest.RequestUS["total"])
	for _, p := range schema.RequestParts {
		if v := s.PerRequest.RequestUS[p]; v >= 0.5 {
			fmt.Fprintf(&b, " %s %.0f", p, v)
		}
	}
	fmt.Fprintf(&b, " (remainder %.1f)", s.Checks["request_us_remainder"])
	if m, ok := s.Checks["driver_latency_mean_us"]; ok {
		fmt.Fprintf(&b, "; driver latency %.0f µs (%.0f outside the handler)", m, s.Checks["request_us_driver_gap"])
	}
	return b.String()
}

// writeEndpoints writes the mix's per-request table (report.md, the
// terminal).
func writeEndpoints(w io.Writer, s *schema.Summary, markdown bool) {
	if s.Mix == nil {
		return
	}
	if len(s.Endpoints) == 0 {
		if !markdown {
			fmt.Fprintf(w, "  mix           %s: the figures above, split by route in one window (-alone measures each request alone too)\n", s.Mix.File)
		}
		return
	}
	if markdown {
		fmt.Fprintf(w, "\n## Requests of %s, each measured alone\n\nThe figures above are for the mix, sent in a fixed order (%v, cycled). Each request is then measured in windows of its own, per request: CPU and syscalls over its timing window's requests, allocations and copies over its attribution window's.\n\n| request | weight | requests (timing / attribution) | CPU µs | allocs | B | copied B | syscalls |\n|---|---:|---:|---:|---:|---:|---:|---:|\n", s.Mix.File, s.Mix.Order)
		for _, e := range s.Endpoints {
			fmt.Fprintf(w, "| %s | %d | %d / %d | %s | %s | %s | %s | %s |\n", safetext.Code(e.Name), e.Weight, e.Requests, e.AttributionRequests, fmtPtr(e.CPUUS, 2), fmtPtr(e.Allocs, 2), fmtPtr(e.AllocBytes, 0), fmtPtr(e.CopiedBytes, 0), fmtPtr(e.Syscalls, 2))
		}
		if len(s.Endpoints) > 0 {
			src := s.Endpoints[0].Sources
			fmt.Fprintf(w, "\nSources: CPU %s, allocations %s, copies %s, syscalls %s.\n", src["cpu"], src["allocs"], src["copies"], src["syscalls"])
		}
		for _, e := range handingOff(s.Endpoints) {
			fmt.Fprintf(w, "\n**Handed off**: %s\n", handOffLine(e, safetext.Code(e.Name)))
		}
		return
	}
	fmt.Fprintf(w, "  mix           %s: the figures above; each request alone, per request:\n", s.Mix.File)
	for _, e := range s.Endpoints {
		fmt.Fprintf(w, "    %-24s w%-3d cpu %s µs  allocs %s (%s B)  copied %s B  syscalls %s\n", e.Name, e.Weight, fmtPtr(e.CPUUS, 2), fmtPtr(e.Allocs, 2), fmtPtr(e.AllocBytes, 0), fmtPtr(e.CopiedBytes, 0), fmtPtr(e.Syscalls, 2))
	}
	for _, e := range handingOff(s.Endpoints) {
		fmt.Fprintf(w, "  handed off    %s\n", handOffLine(e, safetext.Text(e.Name)))
	}
}

// handOffShare is the share of a request's window's bytes allocated
// outside any request past which the terminal and report.md say so.
const handOffShare = 0.2

// handingOff are the endpoints whose windows allocated more than
// handOffShare of their bytes outside their requests.
func handingOff(es []schema.EndpointSummary) []schema.EndpointSummary {
	var out []schema.EndpointSummary
	for _, e := range es {
		if e.BackgroundShare != nil && *e.BackgroundShare >= handOffShare {
			out = append(out, e)
		}
	}
	return out
}

func handOffLine(e schema.EndpointSummary, name string) string {
	return fmt.Sprintf("%s: %.0f%% of its window's bytes (%s B/req) were allocated outside its requests, by goroutines that already existed (workers, pools): its row counts them; the mix's split puts what the runtime saw handed (a channel, a sync.Cond) on the request's route, what it could not (a queue polled under a mutex) in the background, and what ran after the request ended in unfollowed (docs/routes.md, Handoffs)", name, *e.BackgroundShare*100, fmtPtr(e.BackgroundBytes, 0))
}

// writeRoutesTable writes the per-route table (markdown when md) with the
// top sites of each route, the background and the closure.
func writeRoutesTable(w io.Writer, s *schema.Summary, md bool, top int) {
	esc := safetext.Text
	if md {
		esc = safetext.Markdown
		fmt.Fprintf(w, "\n## Per route (one window, the mix)\n\n")
		fmt.Fprintf(w, "| route | requests | allocs/req | B/req | copied B/req | server µs/req | top sites (allocs/req) |\n|---|---:|---:|---:|---:|---:|---|\n")
	} else {
		fmt.Fprintf(w, "  per route (one window, the mix):\n")
	}
	shown := s.Routes
	if top > 0 && len(shown) > top {
		shown = shown[:top]
	}
	for _, rs := range shown {
		sites := ""
		for i, st := range rs.Sites {
			if i == 3 {
				break
			}
			if i > 0 {
				sites += ", "
			}
			sites += fmt.Sprintf("%s %s", st.Func, fmtFloat(st.Allocs, 2))
		}
		server := "n/a"
		if t, ok := rs.RequestUS["total"]; ok {
			server = fmtFloat(t, 1)
		}
		if md {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s |\n", esc(rs.Route), rs.Requests, fmtPtr(rs.AllocsPerReq, 2), fmtPtr(rs.AllocBytesPerReq, 0), fmtPtr(rs.CopiedBytesPerReq, 0), server, esc(sites))
		} else {
			if server != "n/a" {
				server += " µs"
			}
			fmt.Fprintf(w, "    %-28s %8d req  %10s allocs/req %10s B/req %10s copied-B/req %10s\n", esc(rs.Route), rs.Requests, fmtPtr(rs.AllocsPerReq, 2), fmtPtr(rs.AllocBytesPerReq, 0), fmtPtr(rs.CopiedBytesPerReq, 0), server)
		}
	}
	if len(shown) < len(s.Routes) {
		fmt.Fprintf(w, "    (%d more routes in summary.json)\n", len(s.Routes)-len(shown))
	}
	if br := s.RoutesBeforeRouting; br != nil {
		if md {
			fmt.Fprintf(w, "| %s (every request, before its route is known) | %d | %s | %s | %s | | |\n", esc(br.Route), br.Requests, fmtPtr(br.AllocsPerReq, 2), fmtPtr(br.AllocBytesPerReq, 0), fmtPtr(br.CopiedBytesPerReq, 0))
		} else {
			fmt.Fprintf(w, "    %-28s %8d req  %10s allocs/req %10s B/req %10s copied-B/req (every request, before its route is known)\n", esc(br.Route), br.Requests, fmtPtr(br.AllocsPerReq, 2), fmtPtr(br.AllocBytesPerReq, 0), fmtPtr(br.CopiedBytesPerReq, 0))
		}
	}
	var b schema.RouteSummary
	var c schema.RoutesClosure
	if s.RoutesBackground != nil {
		b = *s.RoutesBackground
	}
	if s.RoutesClosure != nil {
		c = *s.RoutesClosure
	}
	share := ""
	if b.ShareBytes != nil {
		share = fmt.Sprintf(", %.1f%% of the window's allocated bytes after handoffs", 100**b.ShareBytes)
	}
	if md {
		fmt.Fprintf(w, "\nBackground (no request): %s allocs/s, %s B/s, %s copied B/s%s. Closure: Σ routes + before routing + background + unfollowed = %d allocations (remainder %d), %d copied bytes (remainder %d); the routes ended %d requests, the driver counted %d.\n",
			fmtPtr(b.AllocsPerSec, 1), fmtPtr(b.AllocBytesPerSec, 0), fmtPtr(b.CopiedBytesPerSec, 0), share, c.Allocs, c.AllocsRemainder, c.CopiedBytes, c.CopiedRemainder, c.RouteRequests, c.DriverRequests)
	} else {
		fmt.Fprintf(w, "    background: %s allocs/s, %s B/s%s; closure remainder %d allocs, %d copied B\n", fmtPtr(b.AllocsPerSec, 1), fmtPtr(b.AllocBytesPerSec, 0), share, c.AllocsRemainder, c.CopiedRemainder)
	}
	if line := UnfollowedLine(s.RoutesUnfollowed); line != "" {
		if md {
			fmt.Fprintf(w, "\nUnfollowed: %s.\n", line)
		} else {
			fmt.Fprintf(w, "    unfollowed: %s\n", line)
		}
	}
	if c.HandoffsLost > 0 {
		line := fmt.Sprintf("%d values handed over buffered channels or timers lost their request in the runtime's handoff table; what their receivers did next is unfollowed work of unknown origin", c.HandoffsLost)
		if md {
			fmt.Fprintf(w, "\n**Handoffs lost**: %s.\n", line)
		} else {
			fmt.Fprintf(w, "    handoffs lost: %s\n", line)
		}
	}
	for _, mc := range s.RoutesMixCheck {
		line := fmt.Sprintf("%s differs from its own window (-alone, %s): %.2f allocs, %.0f B a request in the mix against %.2f, %.0f alone; %s", mc.Route, mc.Endpoint, mc.MixAllocs, mc.MixAllocBytes, mc.AloneAllocs, mc.AloneAllocBytes, mc.Note)
		if md {
			fmt.Fprintf(w, "\n**Mix check**: %s.\n", esc(line))
		} else {
			fmt.Fprintf(w, "    mix check: %s\n", esc(line))
		}
	}
}

// UnfollowedLine says what the mix left unfollowed (routes_unfollowed):
// work done under the mark of a request that no longer had it, its share
// of the window and its origins, "" when there is none.
func UnfollowedLine(u *schema.RouteSummary) string {
	if u == nil || u.Allocs == 0 && u.CopiedBytes == 0 {
		return ""
	}
	share := ""
	if u.ShareBytes != nil {
		share = fmt.Sprintf(", %.1f%% of the window's allocated bytes", 100**u.ShareBytes)
	}
	var origins []string
	for i, o := range u.Origins {
		if i == 3 {
			origins = append(origins, fmt.Sprintf("%d more in summary.json", len(u.Origins)-3))
			break
		}
		name := safetext.Text(o.Route)
		if o.Route == "" {
			name = "an unknown origin (a queue that held several requests' values, or a lost handoff)"
		}
		if o.AllocsPerReq != nil {
			origins = append(origins, fmt.Sprintf("from %s %s allocs/req", name, fmtPtr(o.AllocsPerReq, 2)))
		} else {
			origins = append(origins, fmt.Sprintf("from %s %s allocs/s", name, fmtPtr(o.AllocsPerSec, 1)))
		}
	}
	return fmt.Sprintf("%s allocs/s, %s B/s%s, on no route: work under a request's mark after its request ended or handed it back (%s)",
		fmtPtr(u.AllocsPerSec, 1), fmtPtr(u.AllocBytesPerSec, 0), share, strings.Join(origins, ", "))
}

// Site is one call site's share of a profile.
type Site struct {
	Func   string
	Values []int64
	// Callers are the first frames above Func outside the standard
	// library (up to three, nearest first) on the site's heaviest stack:
	// where the reviewer's own code called it from.
	Callers []string
}

// judgedPart says, for a run not judged on its timings alone, that its
// counts are: "" otherwise.
func judgedPart(s *schema.Summary) string {
	if s.Verdict != schema.VerdictNotJudged || s.Judged == nil || !s.Judged.Counts {
		return ""
	}
	return " (the counts are judged, the timings are not)"
}

// writeRequestsClosure is the terminal's line of the request marks'
// closure on the driver's successes, the process's requests to itself
// apart.
func writeRequestsClosure(w io.Writer, r *schema.RequestsClosure) {
	state := "close"
	if !r.Closed {
		state = fmt.Sprintf("MISS %d", r.Missed)
	}
	self := ""
	if r.Self > 0 {
		self = fmt.Sprintf(", beside %d the process sent itself (routes \"%s...\")", r.Self, profkey.SelfPrefix)
	}
	fmt.Fprintf(w, "  closure       requests %s: %d ended by the request marks, %d the driver's successes%s  [request marks]\n", state, r.Marked, r.Driver, self)
}
