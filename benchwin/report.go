package benchwin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/perfspy/perfspy/agent/wire"
)

// Event is one benchmark result as the recorder wrote it: the run that
// testing reported, its timed region's sequence number, testing's own
// -benchmem totals for that run, and the reports' file names.
type Event struct {
	Name           string `json:"name"` // as testing prints it, with the -cpu suffix
	N              int    `json:"n"`
	Seq            uint32 `json:"seq"`
	BenchmemAllocs uint64 `json:"benchmem_allocs"` // runtime.MemStats Mallocs over the timed region
	BenchmemBytes  uint64 `json:"benchmem_bytes"`  // TotalAlloc over the timed region
	Allocs         string `json:"allocs,omitempty"`
	Copies         string `json:"copies,omitempty"`
	// Retained names the retained run's report of the result (the path
	// ReadRetained takes, and of the goroutine dumps, with .goroutines and
	// .goroutines.end).
	Retained string `json:"retained,omitempty"`
	Error    string `json:"error,omitempty"`
	// Steady is the two warm runs made after the reported one when
	// SteadyEnv is set.
	Steady *Steady `json:"steady,omitempty"`
	// StartupAllocs and StartupBytes are what the process allocated
	// before its first run (MemStats Mallocs and TotalAlloc): package
	// init, TestMain, testing's own setup. The same in every event of a
	// process.
	StartupAllocs uint64 `json:"startup_allocs"`
	StartupBytes  uint64 `json:"startup_bytes"`
	// First is the benchmark's first run, of 1 op, when it is not the
	// reported run (testing's run1 before launch's run; with b.Loop the
	// first run is the reported one): what its first op paid.
	First *First `json:"first,omitempty"`
}

// First is a benchmark's first run: its ops, testing's -benchmem counts
// and its reports.
type First struct {
	N              int    `json:"n"`
	BenchmemAllocs uint64 `json:"benchmem_allocs"`
	BenchmemBytes  uint64 `json:"benchmem_bytes"`
	Allocs         string `json:"allocs,omitempty"`
	Copies         string `json:"copies,omitempty"`
	Retained       string `json:"retained,omitempty"`
}

// SteadyEnv makes the recorder run each benchmark twice more after the
// run testing reports, warm: 1 op, then M+1 ops, M being N/4 when 4
// divides N, N/2 when 2 does, and N otherwise. The second's counts minus
// the first's, times N/M, are N ops in steady state (probe's steady
// per-op figures); the reported run's counts minus those are what it paid
// once.
const SteadyEnv = "PERFSPY_BENCH_STEADY"

// BudgetEnv bounds the warm runs of a long op: the nanoseconds M ops may
// take at the reported run's time per op. Past it M is the largest
// divisor of N whose ops fit (1 at least): N/M stays whole.
const BudgetEnv = "PERFSPY_BENCH_BUDGET"

// OpsEnv names a file that lowers, for the results it names, a
// -benchtime of Nx: a line "NAME<TAB>OPS" each, NAME as testing prints
// it (probe's traced run, whose ops are only timed: a long op needs
// fewer).
const OpsEnv = "PERFSPY_BENCH_OPS"

// Steady names the two warm runs' reports, each a pair: the 1-op run's,
// then the (M+1)-op run's.
type Steady struct {
	// Linear: the reported run counted exactly N times what the
	// benchmark's first run, of 1 op, counted, slot by slot, in what it
	// left live and in goroutines left; no warm runs were made (N is then
	// [1, N], and no report is named): the reported run is the steady
	// state, and nothing was paid once.
	Linear         bool      `json:"linear,omitempty"`
	N              [2]int    `json:"n"`
	BenchmemAllocs [2]uint64 `json:"benchmem_allocs"`
	BenchmemBytes  [2]uint64 `json:"benchmem_bytes"`
	Allocs         []string  `json:"allocs,omitempty"`
	Copies         []string  `json:"copies,omitempty"`
	Retained       []string  `json:"retained,omitempty"`
	Error          string    `json:"error,omitempty"`
}

// ReadEvents reads the results the recorder wrote into dir, in order.
func ReadEvents(dir string) ([]Event, error) {
	path := filepath.Join(dir, "events.jsonl")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// ReadFinished reads the events of a run that was stopped: a last line
// the recorder had not finished writing is left out, as its result is.
func ReadFinished(dir string) ([]Event, error) {
	b, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // stopped before its first result
	}
	if err != nil {
		return nil, err
	}
	var out []Event
	for line := 1; ; line++ {
		l, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			return out, nil
		}
		var e Event
		if err := json.Unmarshal(l, &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", filepath.Join(dir, "events.jsonl"), line, err)
		}
		out = append(out, e)
		b = rest
	}
}

// EventTail reads a run's events as the recorder appends them.
type EventTail struct {
	path string
	off  int64  // the file's bytes read
	part []byte // a last line not finished when read
	line int
}

// FollowEvents is the events of the run whose recorder writes into dir.
func FollowEvents(dir string) *EventTail {
	return &EventTail{path: filepath.Join(dir, "events.jsonl")}
}

// Next returns the events written whole since the last call, in order.
func (t *EventTail) Next() ([]Event, error) {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no result yet
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, t.off, math.MaxInt64-t.off))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.path, err)
	}
	t.off += int64(len(b))
	b = append(t.part, b...)
	var out []Event
	for {
		l, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			break
		}
		t.line++
		var e Event
		if err := json.Unmarshal(l, &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", t.path, t.line, err)
		}
		out = append(out, e)
		b = rest
	}
	t.part = slices.Clone(b)
	return out, nil
}

// Reports are the reports of a counted run: the recorder appends every
// run's to one file, ReportsFile in its folder, as records (a line with
// the record's name and length, its bytes, a newline). A report's stacks
// name PCs; the "frames" records symbolize each PC once, before the
// first report that names it. Update reads what the recorder appended
// since, so that a result's reports can be read while the run goes on;
// its reads and Update may run at once.
type Reports struct {
	path    string
	update  sync.Mutex // one Update at a time: each reads from off on
	mu      sync.RWMutex
	records map[string][]byte
	frames  map[uint64][]wire.Frame
	off     int64 // the file's bytes read into records and frames
}

// ReportsFile is the name of the recorder's reports file in its folder.
const ReportsFile = "reports"

// OpenReports reads the reports the recorder wrote into dir. A last
// record cut short (a run stopped while it wrote) is left out, as the
// event that would have named it is.
func OpenReports(dir string) (*Reports, error) {
	r := FollowReports(dir)
	if err := r.Update(); err != nil {
		return nil, err
	}
	return r, nil
}

// FollowReports is the reports of a run that has not written any yet,
// read by Update as the recorder writes them.
func FollowReports(dir string) *Reports {
	return &Reports{path: filepath.Join(dir, ReportsFile), records: map[string][]byte{}, frames: map[uint64][]wire.Frame{}}
}

// Update reads the records the recorder appended since the last read: a
// result's records are all in the file before its event is (the recorder
// writes them first), and a record cut short is read once complete.
func (r *Reports) Update() error {
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no report yet
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r.update.Lock()
	defer r.update.Unlock()
	r.mu.RLock()
	off := r.off
	r.mu.RUnlock()
	b, err := io.ReadAll(io.NewSectionReader(f, off, math.MaxInt64-off))
	if err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	return r.parse(b)
}

// parseReports splits b, the reports file at path, into its records.
func parseReports(path string, b []byte) (*Reports, error) {
	r := &Reports{path: path, records: map[string][]byte{}, frames: map[uint64][]wire.Frame{}}
	if err := r.parse(b); err != nil {
		return nil, err
	}
	return r, nil
}

// parse adds the complete records of b, the file's bytes from r.off on.
func (r *Reports) parse(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	base, off := r.off, 0
	defer func() { r.off = base + int64(off) }()
	for off < len(b) {
		head, _, ok := bytes.Cut(b[off:], []byte("\n"))
		if !ok {
			break // cut short
		}
		at := base + int64(off)
		name, size, ok := bytes.Cut(head, []byte(" "))
		n, err := strconv.Atoi(string(size))
		if !ok || err != nil || n < 0 || len(name) == 0 {
			return fmt.Errorf("%s: offset %d: a record's head %q: want its name and length", r.path, at, truncate(head))
		}
		start := off + len(head) + 1
		if n > len(b)-start-1 {
			break // cut short
		}
		if b[start+n] != '\n' {
			return fmt.Errorf("%s: record %s at offset %d: no newline after its %d bytes", r.path, name, at, n)
		}
		payload := b[start : start+n : start+n]
		if string(name) == "frames" {
			var fs []wire.PCFrames
			if err := json.Unmarshal(payload, &fs); err != nil {
				return fmt.Errorf("%s: frames record at offset %d: %w", r.path, at, err)
			}
			for _, f := range fs {
				r.frames[f.PC] = f.Frames
			}
		} else {
			r.records[string(name)] = payload
		}
		off = start + n + 1
	}
	return nil
}

func truncate(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}

// stackRef is a report's stack: its PCs, innermost first, and whether
// frames further out were left out.
type stackRef struct {
	PCs       []uint64 `json:"pcs"`
	Truncated bool     `json:"truncated"`
}

// stack symbolizes s from the frames records.
func (r *Reports) stack(name string, s stackRef) ([]wire.PCFrames, error) {
	out := make([]wire.PCFrames, 0, len(s.PCs)+1)
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, pc := range s.PCs {
		fr, ok := r.frames[pc]
		if !ok {
			return nil, fmt.Errorf("%s: record %s names PC %#x, which no frames record symbolizes", r.path, name, pc)
		}
		out = append(out, wire.PCFrames{PC: pc, Frames: fr})
	}
	return wire.MarkTruncated(out, s.Truncated), nil
}

// payload is the record name's bytes.
func (r *Reports) payload(name string) ([]byte, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	b, ok := r.records[name]
	return b, ok
}

// record unmarshals the record name into v.
func (r *Reports) record(name string, v any) error {
	b, ok := r.payload(name)
	if !ok {
		return fmt.Errorf("%s: no record %s", r.path, name)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: record %s: %w", r.path, name, err)
	}
	return nil
}

// tableReport is a table's report: its slots' counter words (those after
// the key and the pcs, wire.CounterWords), after the run and their change
// in it.
type tableReport struct {
	Dropped uint64 `json:"dropped"`
	Sites   []struct {
		stackRef
		Words []uint64 `json:"words"`
		Delta []uint64 `json:"delta"`
	} `json:"sites"`
}

// table reads the table report name, each site with its stack.
func (r *Reports) table(name string, site func(stack []wire.PCFrames, words, delta []uint64)) (dropped uint64, err error) {
	var t tableReport
	if err := r.record(name, &t); err != nil {
		return 0, err
	}
	for i, s := range t.Sites {
		if len(s.Words) != wire.CounterWords || len(s.Delta) != wire.CounterWords {
			return 0, fmt.Errorf("%s: record %s: site %d has %d and %d counter words, want %d", r.path, name, i, len(s.Words), len(s.Delta), wire.CounterWords)
		}
		st, err := r.stack(name, s.stackRef)
		if err != nil {
			return 0, err
		}
		site(st, s.Words, s.Delta)
	}
	return t.Dropped, nil
}

// Allocs reads the allocs report name as allocspy's.
func (r *Reports) Allocs(name string) (*wire.AllocReport, error) {
	rep := &wire.AllocReport{}
	var err error
	rep.Dropped, err = r.table(name, func(stack []wire.PCFrames, _, delta []uint64) {
		rep.Sites = append(rep.Sites, wire.AllocSiteOf(stack, delta))
	})
	return rep, err
}

// Copies reads the copies report name as copyspy's.
func (r *Reports) Copies(name string) (*wire.CopyReport, error) {
	rep := &wire.CopyReport{}
	var err error
	rep.Dropped, err = r.table(name, func(stack []wire.PCFrames, words, delta []uint64) {
		rep.Sites = append(rep.Sites, wire.CopySiteOf(stack, words[0], delta))
	})
	return rep, err
}

// Retained reads what a run left, the record base+".json" (base is what
// an event's Retained names).
func (r *Reports) Retained(base string) (*wire.RetainedReport, error) {
	name := base + ".json"
	var raw struct {
		Untracked uint64 `json:"untracked"`
		Sites     []struct {
			stackRef
			Objects int64 `json:"objects"`
			Bytes   int64 `json:"bytes"`
		} `json:"sites"`
	}
	if err := r.record(name, &raw); err != nil {
		return nil, err
	}
	rep := &wire.RetainedReport{Untracked: raw.Untracked}
	for _, s := range raw.Sites {
		st, err := r.stack(name, s.stackRef)
		if err != nil {
			return nil, err
		}
		rep.Sites = append(rep.Sites, wire.RetainedSite{Stack: st, Objects: s.Objects, Bytes: s.Bytes})
	}
	return rep, checkRetained(r.path+": record "+name, rep)
}

// Goroutines are the goroutine dumps at the start and the end of the run
// whose retained report is base.
func (r *Reports) Goroutines(base string) (begin, end []byte, err error) {
	begin, ok := r.payload(base + ".goroutines")
	end, ok2 := r.payload(base + ".goroutines.end")
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("%s: no goroutine dumps %s.goroutines and %s.goroutines.end", r.path, base, base)
	}
	return begin, end, nil
}

// LiveEnv makes the counted run (allocspy built in) measure what each run
// leaves too: the heap blocks its timed region made that are still in use
// after two GCs, each tracked by address from its allocation (no heap
// profile), and the goroutines it started that still run. Its events then
// name retained reports; without allocspy they name none.
const LiveEnv = "PERFSPY_BENCH_LIVE"

// MarksEnv makes the recorder only mark each timed region in the
// execution trace (probe's traced run): the runtime spies stay off, and
// its events name no report.
const MarksEnv = "PERFSPY_BENCH_MARKS"

// ReadRetained reads a retained report the agent wrote, path+".json".
func ReadRetained(path string) (*wire.RetainedReport, error) {
	var r wire.RetainedReport
	if err := wire.ReadJSON(path+".json", &r); err != nil {
		return nil, err
	}
	return &r, checkRetained(path+".json", &r)
}

// checkRetained refuses a retained report with a site that left less
// than nothing, where refers to it.
func checkRetained(where string, r *wire.RetainedReport) error {
	for i, s := range r.Sites {
		if s.Objects < 0 || s.Bytes <= 0 {
			return fmt.Errorf("%s: site %d left %d objects, %d B: want bytes above 0, objects not below", where, i, s.Objects, s.Bytes)
		}
	}
	return nil
}
