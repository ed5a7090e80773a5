package benchwin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
}

// SteadyEnv makes the recorder run each benchmark twice more after the
// run testing reports, warm: 1 op, then M+1 ops, M being N/2 when N is
// even and N otherwise. The second's counts minus the first's, times
// N/M, are N ops in steady state (probe's steady per-op figures); the
// reported run's counts minus those are what it paid once.
const SteadyEnv = "PERFSPY_BENCH_STEADY"

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

// tableReport is a table's report: its slots' counter words (those after
// the key and the pcs, wire.CounterWords), after the run and their change
// in it.
type tableReport struct {
	Dropped uint64 `json:"dropped"`
	Sites   []struct {
		Stack []wire.PCFrames `json:"stack"`
		Words []uint64        `json:"words"`
		Delta []uint64        `json:"delta"`
	} `json:"sites"`
}

func readTable(path string) (*tableReport, error) {
	var r tableReport
	if err := wire.ReadJSON(path, &r); err != nil {
		return nil, err
	}
	for i, s := range r.Sites {
		if len(s.Words) != wire.CounterWords || len(s.Delta) != wire.CounterWords {
			return nil, fmt.Errorf("%s: site %d has %d and %d counter words, want %d", path, i, len(s.Words), len(s.Delta), wire.CounterWords)
		}
	}
	return &r, nil
}

// ReadAllocs reads an allocs report as allocspy's.
func ReadAllocs(path string) (*wire.AllocReport, error) {
	t, err := readTable(path)
	if err != nil {
		return nil, err
	}
	r := &wire.AllocReport{Dropped: t.Dropped}
	for _, s := range t.Sites {
		r.Sites = append(r.Sites, wire.AllocSiteOf(s.Stack, s.Delta))
	}
	return r, nil
}

// ReadCopies reads a copies report as copyspy's.
func ReadCopies(path string) (*wire.CopyReport, error) {
	t, err := readTable(path)
	if err != nil {
		return nil, err
	}
	r := &wire.CopyReport{Dropped: t.Dropped}
	for _, s := range t.Sites {
		r.Sites = append(r.Sites, wire.CopySiteOf(s.Stack, s.Words[0], s.Delta))
	}
	return r, nil
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

// ReadRetained reads a retained report, path+".json".
func ReadRetained(path string) (*wire.RetainedReport, error) {
	var r wire.RetainedReport
	if err := wire.ReadJSON(path+".json", &r); err != nil {
		return nil, err
	}
	for i, s := range r.Sites {
		if s.Objects < 0 || s.Bytes <= 0 {
			return nil, fmt.Errorf("%s.json: site %d left %d objects, %d B: want bytes above 0, objects not below", path, i, s.Objects, s.Bytes)
		}
	}
	return &r, nil
}
