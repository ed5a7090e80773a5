// Package benchwin opens perfspy's window on Go benchmarks: the timed
// region of each benchmark's measured run, as package testing times it.
//
// Overlay patches the local GOROOT's testing/benchmark.go so that the
// timer's methods (StartTimer, StopTimer, ResetTimer), runN and the
// result's report call a recorder added to package testing. The recorder
// turns the runtime spies (allocspy, copyspy) on while a timed region is
// open and off outside it, snapshots their tables when a run starts or its
// timer is reset, and, when testing reports a result, writes the sites of
// the run that result comes from beside testing's own -benchmem counts
// for that run: an event line in events.jsonl naming the run's reports,
// which are records of one file, ReportsFile (stacks as PCs, each PC
// symbolized once in a "frames" record; OpenReports reads them). While a region is open, the variable
// testing.perfspyGate holds the region's sequence number, which probe's
// eBPF syscall counter reads: syscalls are counted by region.
//
// Everything added is in the standard library (testing and runtime), so
// a benchmark of any package, the standard library's included, builds with
// its own build list unchanged.
package benchwin

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/gorelease"
)

//go:embed testing/zz_benchwin.go.txt
var recorderGo string

// GateSymbol is the symbol of the variable that holds the open region's
// sequence number (0: no region open).
const GateSymbol = "testing.perfspyGate"

// TraceCategory is the category of the execution trace's log events that
// mark each region: "open SEQ" and "close".
const TraceCategory = "perfspy.bench"

// Env names the folder the recorder writes its reports into; without it
// the recorder does nothing.
const Env = "PERFSPY_BENCH_DIR"

// SyncEnv makes the recorder wait, before any benchmark runs, for one byte
// on file descriptor 3: probe writes it once its syscall counter is
// attached.
const SyncEnv = "PERFSPY_BENCH_SYNC"

// edits are the recorder's calls in testing/benchmark.go, and how many
// times each old text occurs. Each stays on its line, so that line numbers
// in profiles do not move.
var edits = []struct {
	old, new string
	count    int
}{
	// StartTimer and ResetTimer (timer running): the region opens in the
	// stop of the world in which testing reads its memory statistics, so
	// that no allocation of another goroutine falls between the two.
	{"\t\truntime.ReadMemStats(&memStats)\n\t\tb.startAllocs = memStats.Mallocs\n",
		"\t\tperfspyReadMemStats(&memStats, b, true)\n\t\tb.startAllocs = memStats.Mallocs\n", 2},
	// StopTimer: the region closes in testing's last read.
	{"\t\truntime.ReadMemStats(&memStats)\n\t\tb.netAllocs += memStats.Mallocs - b.startAllocs\n",
		"\t\tperfspyReadMemStats(&memStats, b, false)\n\t\tb.netAllocs += memStats.Mallocs - b.startAllocs\n", 1},
	// ResetTimer: after its map is made, the counts start again.
	{"\t\tclear(b.extra)\n\t}\n\tif b.timerOn {\n",
		"\t\tclear(b.extra)\n\t}; perfspyReset(b)\n\tif b.timerOn {\n", 1},
	// runN: the GC it runs before a run is skipped right after a run's
	// end ran two (perfspyGC).
	{"\t// by clearing garbage from previous runs.\n\truntime.GC()\n",
		"\t// by clearing garbage from previous runs.\n\tperfspyGC()\n", 1},
	// runN: a run starts before its ResetTimer and ends after its StopTimer.
	{"\tb.parallelism = 1\n\tb.ResetTimer()\n",
		"\tb.parallelism = 1; perfspyRunStart(b)\n\tb.ResetTimer()\n", 1},
	{"\tb.benchFunc(b)\n\tb.StopTimer()\n\tb.previousN = n\n",
		"\tb.benchFunc(b)\n\tb.StopTimer(); perfspyRunEnd(b)\n\tb.previousN = n\n", 1},
	// The runs testing may report (run1's, launch's) are followed, at
	// their own call, by the warm runs of the steady state
	// (perfspyAgain): an op whose cost depends on its callers (a stack
	// trace, a logger's caller, a source line read) costs in them what
	// it costs in the counted run.
	{"\t\tb.runN(1)\n\t}()\n",
		"\t\tperfspyCapOps(b); for k := 1; k > 0; k = perfspyAgain(b, b.loop.n != 0 || b.benchTime.n == 1) { b.runN(k) }\n\t}()\n", 1},
	{"\t\t\t\tb.runN(b.benchTime.n)\n",
		"\t\t\t\tfor k := b.benchTime.n; k > 0; k = perfspyAgain(b, true) { b.runN(k) }\n", 1},
	{"\t\t\t\tb.runN(int(n))\n",
		"\t\t\t\tfor k := int(n); k > 0; k = perfspyAgain(b, b.failed || b.duration >= d || n >= 1e9) { b.runN(k) }\n", 1},
	// processBench: the result printed comes from b's last run.
	{"\t\t\tresults := r.String()\n",
		"\t\t\tperfspyResult(b, benchName); results := r.String()\n", 1},
}

// Table is a runtime spy's table the recorder reads.
type Table struct {
	Name string // the report's name: "allocs" or "copies"
	Spy  string // the runtime overlay's prefix: "allocspy" or "copyspy"
}

// Allocs and Copies are the tables of the two runtime spies.
var (
	Allocs = Table{"allocs", "allocspy"}
	Copies = Table{"copies", "copyspy"}
)

// Overlay writes package testing's patched and added files into dir and
// returns the go build -overlay Replace entries, keyed by GOROOT paths.
// tables are the runtime spies built in (their overlays must be in the
// same build).
func Overlay(goroot, dir string, tables ...Table) (map[string]string, error) {
	// package testing's timer and its reads are the same on every release known.
	if _, err := gorelease.Of("benchmark window", goroot, "run the benchmarks with go test -bench -benchmem", gorelease.Supported); err != nil {
		return nil, err
	}
	src := filepath.Join(goroot, "src", "testing")
	path := filepath.Join(src, "benchmark.go")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, capability.Shape("benchmark window", "%v", err)
	}
	text := string(b)
	for _, e := range edits {
		if n := strings.Count(text, e.old); n != e.count {
			return nil, capability.Shape("benchmark window", "%s has %d of %q, want %d (a Go release this overlay does not know)", path, n, firstLine(e.old), e.count)
		}
		text = strings.ReplaceAll(text, e.old, e.new)
	}
	added := filepath.Join(src, "zz_perfspy_bench.go")
	if _, err := os.Stat(added); err == nil {
		return nil, capability.Shape("benchmark window", "%s already exists in GOROOT", added)
	}
	out := map[string]string{}
	for from, text := range map[string]string{path: text, added: recorder(tables)} {
		dst := filepath.Join(dir, "testing_"+filepath.Base(from))
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return nil, err
		}
		out[from] = dst
	}
	return out, nil
}

// recorder is the added file, with the tables' accessors in place of its
// marker: each pulls the runtime spy's functions by linkname.
func recorder(tables []Table) string {
	var s strings.Builder
	fmt.Fprintf(&s, "const perfspyNTables = %d\n\n", len(tables))
	s.WriteString("var perfspyTableName = [perfspyNTables]string{")
	for i, t := range tables {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "%q", t.Name)
	}
	s.WriteString("}\n")
	for _, t := range tables {
		fmt.Fprintf(&s, "\n//go:linkname %[1]sEnable runtime.%[1]sEnable\nfunc %[1]sEnable(on bool)\n", t.Spy)
		fmt.Fprintf(&s, "\n//go:linkname %[1]sRead runtime.%[1]sRead\nfunc %[1]sRead(dst []uint64) (n int, dropped uint64, full bool)\n", t.Spy)
		fmt.Fprintf(&s, "\n//go:linkname %[1]sStackOf runtime.%[1]sStackOf\nfunc %[1]sStackOf(index int, dst []uintptr) (n int, truncated bool)\n", t.Spy)
		fmt.Fprintf(&s, "\n//go:linkname %[1]sLayout runtime.%[1]sLayout\nfunc %[1]sLayout() (slots, depth, slotSize int)\n", t.Spy)
		fmt.Fprintf(&s, "\n//go:linkname %[1]sClear runtime.%[1]sClear\nfunc %[1]sClear()\n", t.Spy)
	}
	// With allocspy, the window's switches run inside the runtime's stop
	// of the world for ReadMemStats.
	stw := "func perfspyReadMemStatsSet(m *runtime.MemStats, set func(), first bool) {\n\tif first {\n\t\tset()\n\t}\n\truntime.ReadMemStats(m)\n\tif !first {\n\t\tset()\n\t}\n}\n"
	for _, t := range tables {
		if t == Allocs {
			stw = "//go:linkname perfspyReadMemStatsSet runtime.allocspyReadMemStats\nfunc perfspyReadMemStatsSet(m *runtime.MemStats, set func(), first bool)\n"
		}
	}
	s.WriteString("\n" + stw)
	// With allocspy, what a run's ops leave live is read from its
	// tracking of each block, in the counted run.
	live := "\nconst perfspyAllocsTable = -1\n\nfunc perfspyLiveStart() {}\n\nfunc perfspyLiveOff() {}\n\nfunc perfspyLiveRead(objects, bytes []uint64) uint64 { return 0 }\n\nfunc perfspyDropPools() {}\n\nfunc perfspyBlockingGC() { runtime.GC() }\n"
	for i, t := range tables {
		if t == Allocs {
			live = fmt.Sprintf("\nconst perfspyAllocsTable = %d\n\n//go:linkname perfspyLiveStart runtime.allocspyLiveStart\nfunc perfspyLiveStart()\n\n//go:linkname perfspyLiveOff runtime.allocspyLiveOff\nfunc perfspyLiveOff()\n\n//go:linkname perfspyLiveRead runtime.allocspyLiveRead\nfunc perfspyLiveRead(objects, bytes []uint64) uint64\n\n//go:linkname perfspyDropPools runtime.allocspyDropPools\nfunc perfspyDropPools()\n\n//go:linkname perfspyBlockingGC runtime.allocspyBlockingGC\nfunc perfspyBlockingGC()\n", i)
		}
	}
	s.WriteString(live)
	s.WriteString("\nfunc perfspyEnable(on bool) {\n")
	for _, t := range tables {
		fmt.Fprintf(&s, "\t%sEnable(on)\n", t.Spy)
	}
	s.WriteString("}\n\nfunc perfspyClearTables() {\n")
	for _, t := range tables {
		fmt.Fprintf(&s, "\t%sClear()\n", t.Spy)
	}
	s.WriteString("}\n\nfunc perfspyRead(table int, dst []uint64) (int, uint64, bool) {\n\tswitch table {\n")
	for i, t := range tables {
		fmt.Fprintf(&s, "\tcase %d:\n\t\treturn %sRead(dst)\n", i, t.Spy)
	}
	s.WriteString("\t}\n\treturn 0, 0, false\n}\n\nfunc perfspyStackOf(table, index int, dst []uintptr) (int, bool) {\n\tswitch table {\n")
	for i, t := range tables {
		fmt.Fprintf(&s, "\tcase %d:\n\t\treturn %sStackOf(index, dst)\n", i, t.Spy)
	}
	s.WriteString("\t}\n\treturn 0, false\n}\n\nfunc perfspyLayout(table int) (int, int, int) {\n\tswitch table {\n")
	for i, t := range tables {
		fmt.Fprintf(&s, "\tcase %d:\n\t\treturn %sLayout()\n", i, t.Spy)
	}
	s.WriteString("\t}\n\treturn 0, 0, 0\n}\n")
	return strings.Replace(recorderGo, "//PERFSPY:TABLES\n", s.String(), 1)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimLeft(s, "\t\n"), "\n")
	return l
}
