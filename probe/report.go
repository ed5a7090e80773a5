package probe

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/internal/withagent"

	"github.com/perfspy/perfspy/internal/safetext"
)

// TopSites is how many allocation sites report.md and the terminal list.
const TopSites = 10

func fmtPtr(v *float64, digits int) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", digits, *v)
}

// reportInput is what report.md is made of: the summary and the sites of
// the attribution window.
type reportInput struct {
	s            *Summary
	sites        []Site
	requests     int64   // the attribution window's, by which sites divide
	totals       []int64 // the allocations' totals, for the remainder row
	copySites    []copyspy.Site
	copyRequests int64
	copyTotal    [2]int64
}

// markdown writes report.md.
func (r *reportInput) markdown(w io.Writer) {
	writeReport(w, r.s, r.sites, r.requests, r.totals)
	writeCopyReport(w, r.copySites, r.copyRequests, r.copyTotal)
	if len(r.s.Routes) > 0 {
		writeRoutesTable(w, routesOf(r.s), true, 0)
	}
	writeSyscallReport(w, r.s)
	writeOffCPUReport(w, r.s)
}

// writeReport writes report.md's first part: the per-request table with the source of
// each figure, then the top allocation sites; the sites add up to the
// total, the rest shown as one row.
func writeReport(w io.Writer, s *Summary, sites []Site, requests int64, tot []int64) {
	fmt.Fprintf(w, "# perfspy: %s\n\n", safetext.Markdown(s.Target))
	fmt.Fprintf(w, "commit %s, %s, verdict **%s**", safetext.Code(s.Commit), s.Go, s.Verdict)
	if len(s.Reasons) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(s.Reasons, "; "))
	}
	fmt.Fprint(w, "\n\n")
	if b := s.Build; b != nil {
		fmt.Fprintf(w, "Build: %s.\n\n", buildLine(b))
	}
	fmt.Fprintf(w, "| figure | per request | source |\n|---|---:|---|\n")
	fmt.Fprintf(w, "| requests (timing window) | %d in %.2f s, %.1f req/s | load driver, 2xx only |\n", s.Window.Requests, s.Window.Seconds, s.Window.RPS)
	fmt.Fprintf(w, "| latency p50 / p99 / p99.9 | %d / %d / %d µs | load driver, HDR histogram, timing window |\n", s.Window.LatencyUS["p50"], s.Window.LatencyUS["p99"], s.Window.LatencyUS["p999"])
	fmt.Fprintf(w, "| CPU | %s µs | %s, timing window |\n", fmtPtr(s.PerRequest.CPUUS, 2), s.Sources["cpu"])
	fmt.Fprintf(w, "| server cores used | %.2f of %.0f%s | %s, timing window |\n", s.ServerCores, s.CoresAvailable, placement(s), s.Sources["cpu"])
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
	attr := fmt.Sprintf("attribution window, %d requests", s.AttributionWindow.Requests)
	fmt.Fprintf(w, "| allocations | %s | %s, %s |\n", fmtPtr(s.PerRequest.Allocs, 2), s.Sources["allocs"], attr)
	fmt.Fprintf(w, "| allocated bytes | %s | %s, %s |\n", fmtPtr(s.PerRequest.AllocBytes, 0), s.Sources["allocs"], attr)
	copyWin := attr
	if s.CopiesWindow != nil {
		copyWin = fmt.Sprintf("copies window, %d requests", s.CopiesWindow.Requests)
	}
	fmt.Fprintf(w, "| copies | %s calls, %s B | %s, %s |\n", fmtPtr(s.PerRequest.CopyCalls, 2), fmtPtr(s.PerRequest.CopiedBytes, 0), s.Sources["copies"], copyWin)
	if s.PerRequest.ClearedBytes != nil {
		fmt.Fprintf(w, "| clears (memclr, apart from copies) | %s calls, %s B | %s, %s |\n", fmtPtr(s.PerRequest.ClearCalls, 2), fmtPtr(s.PerRequest.ClearedBytes, 0), s.Sources["copies"], copyWin)
	}
	if rw := s.RetainedWindow; rw != nil {
		ret := fmt.Sprintf("retained window, %d requests", rw.Requests)
		fmt.Fprintf(w, "| retained (live after the window) | %s objects, %s B | %s, %s |\n", fmtPtr(s.PerRequest.RetainedObjects, 4), fmtPtr(s.PerRequest.RetainedBytes, 0), s.Sources["retained"], ret)
		fmt.Fprintf(w, "| goroutines left running | %s | %s, %s |\n", fmtPtr(s.PerRequest.GoroutinesLeft, 4), s.Sources["goroutines_left"], ret)
		if s.PerRequest.GoroutinesLeaked != nil {
			fmt.Fprintf(w, "| of them leaked (never to run again) | %s | %s |\n", fmtPtr(s.PerRequest.GoroutinesLeaked, 4), s.Sources["goroutines_leaked"])
		}
	}
	fmt.Fprintf(w, "| syscalls | %s | %s, timing window |\n", fmtPtr(s.PerRequest.Syscalls, 2), s.Sources["syscalls"])
	fmt.Fprint(w, "\nBlind spots: ")
	if s.Sources["allocs"] == SourceAllocspy {
		fmt.Fprint(w, "allocspy counts objects as the program asked for them (tiny objects packed into one 16-byte block each count; the blocks are heap_blocks) and keeps stacks of up to 128 return PCs from mallocgc's caller, as the runtime's own profiles; a deeper stack is cut there and ends in a [truncated] frame. ")
	} else {
		fmt.Fprint(w, "the heap profile counts heap blocks: several tiny (<16 B, pointer-free) objects packed into one 16-byte block count once. ")
	}
	if strings.HasPrefix(s.Sources["syscalls"], SourceSyscallsIO) {
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

// writeCopyReport lists the top copy sites per request: the first frame
// outside the runtime, the direct caller, and calls per size bucket.
func writeCopyReport(w io.Writer, sites []copyspy.Site, requests int64, tot [2]int64) {
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
func writeSyscallReport(w io.Writer, s *Summary) {
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

// WriteTerminal prints the short table at the end of a run.
func WriteTerminal(w io.Writer, r *Result) {
	s := r.Summary
	fmt.Fprintf(w, "%s  %s  verdict: %s\n", s.Target, s.Commit, s.Verdict)
	for _, why := range s.Reasons {
		fmt.Fprintf(w, "  not judged: %s\n", why)
	}
	if b := s.Build; b != nil {
		fmt.Fprintf(w, "  build         %s\n", buildLine(b))
	}
	fmt.Fprintf(w, "  window        %d requests in %.2fs, %.0f req/s, errors %d\n", s.Window.Requests, s.Window.Seconds, s.Window.RPS, s.Window.Errors+s.Window.Non2xx)
	fmt.Fprintf(w, "  latency       p50 %dµs  p99 %dµs  p99.9 %dµs\n", s.Window.LatencyUS["p50"], s.Window.LatencyUS["p99"], s.Window.LatencyUS["p999"])
	fmt.Fprintf(w, "  cpu           %s µs/req, %.2f of %.0f cores used%s  [%s]\n", fmtPtr(s.PerRequest.CPUUS, 2), s.ServerCores, s.CoresAvailable, placement(s), s.Sources["cpu"])
	if m := s.Machine; m != nil && m.Busy {
		fmt.Fprintf(w, "  machine       busy: %s  [%s]\n", machineLine(m), m.Source)
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
	fmt.Fprintf(w, "  allocs        %s /req, %s B/req  [%s]\n", fmtPtr(s.PerRequest.Allocs, 2), fmtPtr(s.PerRequest.AllocBytes, 0), s.Sources["allocs"])
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
		r := c.Requests
		state := "close"
		if !r.Closed {
			state = fmt.Sprintf("MISS %d", r.Missed)
		}
		fmt.Fprintf(w, "  closure       requests %s: %d ended by the request marks, %d the driver's successes  [request marks]\n", state, r.Marked, r.Driver)
	}
	clears := ""
	if s.PerRequest.ClearedBytes != nil {
		clears = fmt.Sprintf("; cleared %s calls/req, %s B/req", fmtPtr(s.PerRequest.ClearCalls, 2), fmtPtr(s.PerRequest.ClearedBytes, 0))
	}
	fmt.Fprintf(w, "  copies        %s calls/req, %s B/req%s  [%s]\n", fmtPtr(s.PerRequest.CopyCalls, 2), fmtPtr(s.PerRequest.CopiedBytes, 0), clears, s.Sources["copies"])
	writeRetainedLines(w, s)
	if len(s.Routes) > 1 {
		writeRoutesTable(w, routesOf(s), false, 5)
	}
	fmt.Fprintf(w, "  syscalls      %s /req  [%s]\n", fmtPtr(s.PerRequest.Syscalls, 2), s.Sources["syscalls"])
	if src := s.Sources["offcpu"]; s.PerRequest.RequestUS == nil && strings.HasPrefix(src, SourceNone+": no request boundaries") {
		// Outside net/http (gRPC, fasthttp), say why there is no
		// request line, in one line.
		fmt.Fprintf(w, "  request       n/a: %s\n", strings.TrimPrefix(src, SourceNone+": "))
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

// buildLine says what the build-list check found: the measured binary has
// a plain build's modules, plus the agent's.
func buildLine(b *withagent.Check) string {
	var added []string
	for _, m := range b.Added {
		added = append(added, m.Path)
	}
	switch {
	case len(added) == 0 && b.Mode == withagent.ModeTest:
		added = []string{"nothing (standard-library overlays only)"}
	case len(added) == 0:
		added = []string{"nothing (the agent is in the target's module)"}
	}
	source := "go list -deps vs the binary's build info"
	if b.Mode == withagent.ModeTest {
		source = "the plain test binary's build info vs the counted one's"
	}
	return fmt.Sprintf("%s mode, the %d modules of a plain build at its versions, %d changed, added %s  [%s]",
		b.Mode, b.Modules, len(b.Changed), strings.Join(added, ", "), source)
}

// machineLine is what the machine did: its waits, the others' cores and
// the CPU pressure.
func machineLine(m *MachineSummary) string {
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
func placement(s *Summary) string {
	if s.GOMAXPROCS == 0 {
		return ""
	}
	out := fmt.Sprintf(" (GOMAXPROCS %d", s.GOMAXPROCS)
	if len(s.ServerCPUs) > 0 {
		out += ", on cpus " + proc.FormatCPUList(s.ServerCPUs)
	}
	if len(s.DriverCPUs) > 0 {
		out += "; the driver on cpus " + proc.FormatCPUList(s.DriverCPUs)
	}
	return out + ")"
}
