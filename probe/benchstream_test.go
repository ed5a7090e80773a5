package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/perfspy/perfspy/benchwin"
	"github.com/perfspy/perfspy/internal/withagent"
)

// TestFigureStream: results whose reports and events arrive one by one,
// as a counted run writes them (a record cut mid-way at times), are made
// by the stream while they arrive, and the results folder written from
// them is, byte for byte, the one written without the stream. A result
// the stream made from another event (a later read differs) is made
// again.
func TestFigureStream(t *testing.T) {
	rec := t.TempDir()
	frames := `[{"pc":4096,"frames":[{"func":"x.BenchmarkX","file":"x_test.go","line":9}]},{"pc":8192,"frames":[{"func":"x.copyIt","file":"x_test.go","line":20}]}]`
	var records []string
	var events []benchwin.Event
	for i := 1; i <= 6; i++ {
		n, allocs, copied := 10*i, 10*i*(i%3+1), 64*i
		a := fmt.Sprintf(`{"dropped":0,"sites":[{"pcs":[4096],"words":[%[1]d,%[1]d,%[2]d,%[2]d,0,0,0,0,0],"delta":[%[1]d,%[1]d,%[2]d,%[2]d,0,0,0,0,0]}]}`, allocs, 48*allocs)
		c := fmt.Sprintf(`{"dropped":0,"sites":[{"pcs":[8192,4096],"words":[0,%[1]d,0,0,0,%[2]d,0,0,0],"delta":[0,%[1]d,0,0,0,%[2]d,0,0,0]}]}`, n, copied*n)
		rs := ""
		if i == 1 {
			rs = record("frames", frames)
		}
		an, cn := strconv.Itoa(i)+".allocs.json", strconv.Itoa(i)+".copies.json"
		records = append(records, rs+record(an, a)+record(cn, c))
		// Two results of one name: the second is its k=1.
		name := "BenchmarkX/" + strconv.Itoa(i%4) + "-2"
		events = append(events, benchwin.Event{Name: name, N: n, Seq: uint32(i), BenchmemAllocs: uint64(allocs), BenchmemBytes: uint64(48 * allocs), Allocs: an, Copies: cn})
	}
	newOutput := func() *benchOutput {
		return &benchOutput{cfg: BenchConfig{Target: "x", Bench: ".", Count: 1}, tgt: &withagent.Binary{GoVersion: "go1.26"}, commit: "c", dir: t.TempDir(), files: map[string][]byte{}}
	}

	// The stream, fed as a run writes.
	so := newOutput()
	s := newFigureStream(so)
	s.pollGap = time.Millisecond
	w := &benchWindow{dir: rec, reports: benchwin.FollowReports(rec)}
	s.start(w)
	rf, err := os.Create(filepath.Join(rec, benchwin.ReportsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	ef, err := os.Create(filepath.Join(rec, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	made := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, d := range s.done {
			if d.ok {
				n++
			}
		}
		return n
	}
	for i, e := range events {
		half := len(records[i]) / 2
		rf.WriteString(records[i][:half])
		time.Sleep(3 * time.Millisecond) // a poll may read the half
		rf.WriteString(records[i][half:])
		line, _ := json.Marshal(e)
		cut := len(line) / 2
		ef.Write(line[:cut])
		time.Sleep(3 * time.Millisecond) // a poll may read the half line
		ef.Write(append(line[cut:], '\n'))
		for deadline := time.Now().Add(10 * time.Second); made() <= i && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	got := s.halt()
	if made() != len(events) {
		t.Fatalf("the stream made %d of %d results", made(), len(events))
	}
	for i, d := range got {
		if d.err != nil || !sameEvent(d.e, events[i]) {
			t.Fatalf("streamed %d: %+v, %v", i, d.e, d.err)
		}
	}
	// One streamed result from another event: made again (its figures
	// spoilt, as they would differ).
	got[2].e.N++
	got[2].f.PerOp.Allocs = 999
	if err := w.reports.Update(); err != nil {
		t.Fatal(err)
	}
	w.events = events
	so.win, so.streamed = w, got

	// The same folder without the stream.
	po := newOutput()
	reports, err := benchwin.OpenReports(rec)
	if err != nil {
		t.Fatal(err)
	}
	po.win = &benchWindow{dir: rec, events: events, reports: reports}
	for _, o := range []*benchOutput{so, po} {
		if err := o.write(); err != nil {
			t.Fatal(err)
		}
	}
	if len(so.files) != len(po.files) || len(so.files) < 4*len(events) {
		t.Fatalf("%d files with the stream, %d without", len(so.files), len(po.files))
	}
	for name, b := range po.files {
		if !bytes.Equal(so.files[name], b) {
			t.Errorf("%s differs with the stream", name)
		}
		// On disk too: the stream wrote its results' files early, finish
		// the rest.
		for _, dir := range []string{so.dir, po.dir} {
			if disk, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(disk, b) {
				t.Errorf("%s in %s: %d bytes, %v; want %d", name, dir, len(disk), err, len(b))
			}
		}
	}
	if len(so.written) == 0 {
		t.Error("the stream wrote no file early")
	}
	if len(so.mismatch)+len(po.mismatch) != 0 {
		t.Errorf("mismatches %q, %q", so.mismatch, po.mismatch)
	}
}

// record is one record of a reports file, as the recorder writes it.
func record(name, payload string) string {
	return name + " " + strconv.Itoa(len(payload)) + "\n" + payload + "\n"
}

// TestStreamDiscard: when the counted run fails, the files the stream
// wrote go, and the folders that held only them; the run's log and any
// other file stay.
func TestStreamDiscard(t *testing.T) {
	dir := t.TempDir()
	mine := []string{"BenchmarkX-2/allocs.pb.gz", "BenchmarkX-2/flame/allocs.svg", "BenchmarkY-2/copies.pb.gz"}
	others := []string{"bench-window.txt", "BenchmarkY-2/notes.txt"}
	for _, name := range append(append([]string{}, mine...), others...) {
		if err := writeResult(dir, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	s := newFigureStream(&benchOutput{})
	s.done = []streamed{{written: map[string]bool{mine[0]: true, mine[1]: true}}, {}, {written: map[string]bool{mine[2]: true}}}
	s.discard(dir)
	for _, name := range append(mine, "BenchmarkX-2/flame", "BenchmarkX-2") {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", name, err)
		}
	}
	for _, name := range others {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != name {
			t.Errorf("%s: %q, %v; want it kept", name, b, err)
		}
	}
}
