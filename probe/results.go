package probe

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/syscalls"
)

// Sources of each figure, as summary.json names them.
const (
	SourceAllocsHeap    = "heapprofile-rate1"
	SourceSyscallsIO    = "proc-io-syscr-syscw"
	SourceNone          = "none"
	SourceAllocspy      = "allocspy"
	SourceCopiesOverlay = "copyspy-overlay"
	minServerCoreFrac   = 0.9
)

// rawFiles are what the agent wrote in the private folder; a path is ""
// when that figure was not measured.
type rawFiles struct {
	cpu, heap, allocs, copies  string
	trace, blocking, wallclock string
	sysNote                    string // why syscalls were not counted with eBPF
	wallclockPprof             bool   // wallclock is fgprof's pprof file, not the agent's report
}

// writeResults turns the windows into the results folder.
func writeResults(out string, cfg Config, tgt *Target, commit string, hello *wire.Response, plan CPUPlan, allowed []string, coresHad float64, clean, attr, copyWin, offWin *windowResult, raw rawFiles, reasons []string, floor *Summary) (*Result, error) {
	cl, at := clean.load, attr.load
	secs := cl.Elapsed.Seconds()
	s := &Summary{
		Schema: SummarySchema,
		Target: cfg.Target,
		Commit: commit,
		Go:     tgt.GoVersion,
		Build:  tgt.BuildCheck,
		Window: WindowSummary{
			Seconds: round(secs, 3), Requests: cl.OK, Errors: cl.Errors, Non2xx: cl.Non2xx, Dials: cl.Dials,
			RPS: round(cl.RPS(), 1),
			LatencyUS: map[string]int64{
				"p50": cl.Percentile(50), "p99": cl.Percentile(99), "p999": cl.Percentile(99.9),
			},
		},
		AttributionWindow: *windowSummary(attr),
		CoresAvailable:    coresHad,
		PerRequest: PerRequest{
			SyscallsByName: map[string]float64{},
			OffCPUUS:       nil,
		},
		Sources: map[string]string{
			"allocs": SourceAllocsHeap, "copies": SourceNone, "syscalls": SourceSyscallsIO,
			"offcpu": SourceNone, "cpu": clean.cpuSource,
		},
		Files:  map[string]string{},
		Checks: map[string]float64{},
	}
	if secs > 0 {
		s.ServerCores = round(float64(clean.cpu)/1e9/secs, 3)
	}
	if cl.OK > 0 {
		n := float64(cl.OK)
		s.PerRequest.CPUUS = f64(round(float64(clean.cpu)/1e3/n, 3))
		if clean.sys != nil {
			var total uint64
			for id, c := range clean.sys {
				total += c
				s.PerRequest.SyscallsByName[syscalls.Name(id)] = round(float64(c)/n, 6)
			}
			s.PerRequest.Syscalls = f64(round(float64(total)/n, 4))
			s.Sources["syscalls"] = syscalls.Source
		} else {
			sc := float64((clean.io1.SysR - clean.io0.SysR) + (clean.io1.SysW - clean.io0.SysW))
			s.PerRequest.Syscalls = f64(round(sc/n, 4))
			if raw.sysNote != "" {
				s.Sources["syscalls"] = SourceSyscallsIO + " (eBPF unavailable: " + raw.sysNote + ")"
			}
		}
		if clean.m0 != nil && clean.m1 != nil {
			s.Checks["metrics_allocs_per_req_timing_window"] = round(float64(clean.m1.AllocObjects-clean.m0.AllocObjects)/n, 4)
		}
		if cl.Datagrams > 0 {
			bulkFigures(s, clean, cfg.Size)
		}
	}

	// Verdict.
	min := cfg.MinRequests
	if min <= 0 {
		min = 100
	}
	windows := []namedWindow{{"timing window", clean}, {"attribution window", attr}, {"copy window", copyWin}, {"off-CPU window", offWin}}
	reasons = append(reasons, windowReasons(windows, min)...)
	if coresHad > 0 && s.ServerCores < minServerCoreFrac*coresHad {
		reasons = append(reasons, fmt.Sprintf("the target used %.2f of its %.0f cores (< %.0f%%): the load driver, not the server, set the pace", s.ServerCores, coresHad, minServerCoreFrac*100))
	}
	comments := func(w *windowResult) []string {
		return windowComments(w.load.OK, w.load.Elapsed.Seconds(), cfg.Target, commit)
	}

	// Allocations: allocspy's table, or the exact heap profile delta of the
	// attribution window; with both (the tests' cross-check), allocspy's
	// goes to allocs.pb.gz and the heap profile's beside it.
	var allocs *profile.Profile
	if raw.heap != "" {
		hp, err := heapProfileDelta(raw.heap)
		if err != nil {
			return nil, err
		}
		hp.Comments = comments(attr)
		allocs = hp
		if raw.allocs != "" {
			if err := writeProfile(filepath.Join(out, "allocs-heapprofile.pb.gz"), hp); err != nil {
				return nil, err
			}
			s.Files["allocs_heapprofile"] = "allocs-heapprofile.pb.gz"
		}
	}
	if raw.allocs != "" {
		rep, err := allocspy.ReadReport(raw.allocs)
		if err != nil {
			return nil, fmt.Errorf("allocs: %w", err)
		}
		allocs = allocspy.Profile(rep)
		allocs.Comments = comments(attr)
		s.Sources["allocs"] = SourceAllocspy
		objects, _, blocks, reqBytes := allocspy.Totals(rep)
		if at.OK > 0 {
			n := float64(at.OK)
			s.PerRequest.AllocBlocks = f64(round(float64(blocks)/n, 4))
			s.PerRequest.AllocRequestedBytes = f64(round(float64(reqBytes)/n, 2))
			s.Checks["allocspy_tiny_objects_per_req"] = round(float64(objects-blocks)/n, 4)
		}
		s.Checks["allocs_dropped"] = float64(rep.Dropped)
		if rep.Dropped > 0 {
			reasons = append(reasons, fmt.Sprintf("allocspy's table was full: %d allocations were not counted", rep.Dropped))
		}
	} else if tgt.AllocsOff != "" {
		s.Sources["allocs"] = SourceAllocsHeap + " (allocspy unavailable: " + tgt.AllocsOff + ")"
	}
	var tot []int64
	if allocs != nil {
		if err := writeProfile(filepath.Join(out, "allocs.pb.gz"), allocs); err != nil {
			return nil, err
		}
		s.Files["allocs"] = "allocs.pb.gz"
		tot = totals(allocs)
	}
	if at.OK > 0 && allocs != nil {
		s.PerRequest.Allocs = f64(round(float64(tot[0])/float64(at.OK), 4))
		s.PerRequest.AllocBytes = f64(round(float64(tot[1])/float64(at.OK), 2))
		if attr.m0 != nil && attr.m1 != nil {
			s.Checks["metrics_allocs_per_req_attribution_window"] = round(float64(attr.m1.AllocObjects-attr.m0.AllocObjects)/float64(at.OK), 4)
		}
	}

	var copySites []copyspy.Site
	var copyTotal [2]int64
	var copyReqs int64
	if raw.copies != "" {
		rep, err := copyspy.ReadReport(raw.copies)
		if err != nil {
			return nil, fmt.Errorf("copies: %w", err)
		}
		cp := copyspy.Profile(rep)
		cp.Comments = comments(copyWin)
		cw := copyWin.load
		if copyWin != attr {
			s.CopiesWindow = windowSummary(copyWin)
		}
		if err := writeProfile(filepath.Join(out, "copies.pb.gz"), cp); err != nil {
			return nil, err
		}
		s.Files["copies"] = "copies.pb.gz"
		s.Sources["copies"] = SourceCopiesOverlay
		copySites = copyspy.Sites(rep)
		for i := range copySites {
			copyTotal[0] += copySites[i].TotalCalls()
			copyTotal[1] += copySites[i].TotalBytes()
		}
		copyReqs = cw.OK
		if cw.OK > 0 {
			s.PerRequest.CopyCalls = f64(round(float64(copyTotal[0])/float64(cw.OK), 4))
			s.PerRequest.CopiedBytes = f64(round(float64(copyTotal[1])/float64(cw.OK), 2))
		}
		s.Checks["copies_dropped"] = float64(rep.Dropped)
		if rep.Dropped > 0 {
			reasons = append(reasons, fmt.Sprintf("copyspy's table was full: %d copies were not counted", rep.Dropped))
		}
	} else if tgt.CopiesOff != "" {
		s.Sources["copies"] = SourceNone + ": " + tgt.CopiesOff
	}
	s.Reasons = reasons
	s.Verdict = VerdictServerBound
	if len(reasons) > 0 {
		s.Verdict = VerdictNotJudged
	}

	if offWin != nil {
		if err := writeOffCPU(out, s, offWin, raw, comments(offWin)); err != nil {
			return nil, err
		}
		if s.PerRequest.OffCPUUS == nil && tgt.RequestsOff != "" {
			s.Sources["offcpu"] = SourceNone + ": no request boundaries: " + tgt.RequestsOff
		}
	}

	sysWin := attr
	if offWin != nil {
		sysWin = offWin
	}
	if sysWin.sysSites != nil {
		sp := syscalls.Profile(targetSites(sysWin.sysSites))
		sp.Comments = comments(sysWin)
		if err := writeProfile(filepath.Join(out, "syscalls.pb.gz"), sp); err != nil {
			return nil, err
		}
		s.Files["syscalls"] = "syscalls.pb.gz"
	}

	cpuProf, err := profileFromFile(raw.cpu)
	if err != nil {
		return nil, err
	}
	cpuProf.Comments = comments(clean)
	if err := writeProfile(filepath.Join(out, "cpu.pb.gz"), cpuProf); err != nil {
		return nil, err
	}
	s.Files["cpu"] = "cpu.pb.gz"
	s.Files["bench"] = "bench.txt"
	s.Files["report"] = "report.md"
	s.Files["meta"] = "meta"
	s.Files["target_log"] = "target.log"

	if err := writeFlames(out, s); err != nil {
		return nil, err
	}

	meta := collectMeta(cfg, tgt, commit, hello, plan, allowed)
	var sites []Site
	if allocs != nil {
		sites = topSites(allocs, 0)
	}
	if floor != nil && floor.PerRequest.CPUUS != nil {
		f := &FloorSummary{Target: "targets/" + filepath.Base(floor.Target), CPUUS: *floor.PerRequest.CPUUS, RPS: floor.Window.RPS, Verdict: floor.Verdict}
		if s.PerRequest.CPUUS != nil && f.CPUUS > 0 {
			f.CPURatio = round(*s.PerRequest.CPUUS/f.CPUUS, 3)
		}
		s.Floor = f
		s.FloorRatio = floorRatios(s, floor)
	}

	var buf bytes.Buffer
	if err := writeJSON(&buf, s); err != nil {
		return nil, err
	}
	files := map[string][]byte{"summary.json": append([]byte(nil), buf.Bytes()...)}
	buf.Reset()
	if err := writeBench(&buf, s, tgt.Name, benchConfig(meta)); err != nil {
		return nil, err
	}
	files["bench.txt"] = append([]byte(nil), buf.Bytes()...)
	buf.Reset()
	rep := reportInput{s: s, sites: sites, requests: at.OK, totals: tot, copySites: copySites, copyRequests: copyReqs, copyTotal: copyTotal}
	rep.markdown(&buf)
	files["report.md"] = append([]byte(nil), buf.Bytes()...)
	files["meta"] = []byte(formatMeta(meta))
	if err := writeFiles(out, files); err != nil {
		return nil, err
	}
	return &Result{Dir: out, Summary: s, Sites: sites, CopySites: copySites}, nil
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// collectMeta gathers the configuration a figure needs to be believed.
func collectMeta(cfg Config, tgt *Target, commit string, hello *wire.Response, plan CPUPlan, allowed []string) map[string]string {
	m := map[string]string{
		"goos":            runtime.GOOS,
		"goarch":          runtime.GOARCH,
		"pkg":             cfg.Target,
		"cpu":             cpuModel(),
		"go":              tgt.GoVersion,
		"target-go":       hello.GoVersion,
		"gomaxprocs":      fmt.Sprint(hello.GOMAXPROCS),
		"kernel":          kernelRelease(),
		"governor":        governor(),
		"commit":          commit,
		"dirty":           fmt.Sprint(tgt.Dirty),
		"ncpu":            fmt.Sprint(runtime.NumCPU()),
		"cpus-server":     formatCPUList(plan.Server),
		"cpus-load":       formatCPUList(plan.Load),
		"cpus-readback":   strings.Join(allowed, " "),
		"target-args":     strings.Join(cfg.Args, " "),
		"flags":           strings.Join(cfg.Flags, " "),
		"binary":          tgt.Binary,
		"perfspy-version": "v1",
	}
	if m["cpus-server"] == "" {
		m["cpus-server"] = "unpinned"
		m["cpus-load"] = "unpinned"
	}
	return m
}

// benchConfig picks the meta keys that belong in bench.txt's header.
func benchConfig(meta map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"goos", "goarch", "pkg", "cpu", "commit", "gomaxprocs", "kernel"} {
		if v := meta[k]; v != "" {
			out[k] = v
		}
	}
	return out
}

func formatMeta(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, m[k])
	}
	return b.String()
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func governor() string {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
	if err != nil {
		return "unknown (no cpufreq)"
	}
	return strings.TrimSpace(string(b))
}

// bulkFigures divides a bulk window's figures by its transfers and by
// their datagrams.
func bulkFigures(s *Summary, w *windowResult, size int64) {
	cl := w.load
	n := float64(cl.OK)
	dpr := float64(cl.Datagrams) / n
	s.DatagramsPerRequest = f64(round(dpr, 3))
	t := &TransferSummary{Bytes: size, BytesPerDatagram: round(float64(cl.DatagramBytes)/float64(cl.Datagrams), 1),
		LargestDatagram: cl.MaxDatagram, DatagramSource: cl.DatagramSource}
	pd := &PerDatagram{SyscallsByName: map[string]float64{}}
	if s.PerRequest.CPUUS != nil {
		t.CPUUSPerMB = round(*s.PerRequest.CPUUS/(float64(size)/1e6), 3)
		pd.CPUUS = round(*s.PerRequest.CPUUS/dpr, 4)
	}
	if s.PerRequest.Syscalls != nil && *s.PerRequest.Syscalls > 0 {
		t.BytesPerSyscall = round(float64(cl.DatagramBytes)/n / *s.PerRequest.Syscalls, 1)
		pd.Syscalls = round(*s.PerRequest.Syscalls/dpr, 4)
	}
	for name, v := range s.PerRequest.SyscallsByName {
		pd.SyscallsByName[name] = round(v/dpr, 6)
	}
	if w.udp != nil {
		t.KernelUDP = map[string]float64{}
		for _, k := range []string{"InDatagrams", "OutDatagrams", "RcvbufErrors", "SndbufErrors", "InErrors"} {
			t.KernelUDP[k] = round(float64(w.udp[k])/n, 3)
		}
	}
	s.Transfer, s.PerDatagram = t, pd
}

// floorRatios sets the target's bulk figures against the UDP floor's.
func floorRatios(s, floor *Summary) map[string]float64 {
	if s.DatagramsPerRequest == nil || floor.DatagramsPerRequest == nil {
		return nil
	}
	out := map[string]float64{}
	ratio := func(name string, a, b float64) {
		if b > 0 {
			out[name] = round(a/b, 3)
		}
	}
	if s.PerRequest.CPUUS != nil && floor.PerRequest.CPUUS != nil {
		ratio("cpu_us", *s.PerRequest.CPUUS, *floor.PerRequest.CPUUS)
	}
	if s.PerRequest.Syscalls != nil && floor.PerRequest.Syscalls != nil {
		ratio("syscalls", *s.PerRequest.Syscalls, *floor.PerRequest.Syscalls)
	}
	ratio("datagrams", *s.DatagramsPerRequest, *floor.DatagramsPerRequest)
	if s.PerDatagram != nil && floor.PerDatagram != nil {
		ratio("cpu_us_per_datagram", s.PerDatagram.CPUUS, floor.PerDatagram.CPUUS)
	}
	return out
}

// writeFiles writes each file into dir, in name order.
func writeFiles(dir string, files map[string][]byte) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

type namedWindow struct {
	name string
	w    *windowResult
}

// windowReasons says why the windows cannot be judged: fewer than min
// successes in any of them (every window's count is then listed), or
// failed requests in one (a failed request's work is in its window's
// counts but not in the denominator, which counts successes only). A
// window listed twice (the attribution window of a timing-only run is the
// timing window) is named once; absent windows are nil.
func windowReasons(windows []namedWindow, min int64) []string {
	var out, counts []string
	few := false
	seen := map[*windowResult]bool{}
	for _, nw := range windows {
		if nw.w == nil || seen[nw.w] {
			continue
		}
		seen[nw.w] = true
		l := nw.w.load
		counts = append(counts, fmt.Sprintf("%d in the %s", l.OK, nw.name))
		few = few || l.OK < min
		if l.Errors+l.Non2xx > 0 {
			out = append(out, fmt.Sprintf("%d failed requests in the %s (first: %s)", l.Errors+l.Non2xx, nw.name, l.FirstErr))
		}
	}
	if few {
		out = append([]string{fmt.Sprintf("too few successful requests (%s; need %d)", strings.Join(counts, ", "), min)}, out...)
	}
	return out
}
