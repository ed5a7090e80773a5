package probe

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perfspy/perfspy/benchwin"
	"github.com/perfspy/perfspy/schema"
)

// figureStream makes each result's figures that the counted run alone
// gives (runFigures: allocations, copies, what the ops left; their
// profiles and flame graphs) while the counted run goes on, and writes
// their files, so that writing the results folder after the runs is
// mostly done by then. The recorder writes a result's reports before
// its event, and those figures need nothing a later run gives. Counts do
// not depend on time: the run may share the machine with the stream (one
// worker, where the run itself keeps a core and a bit busy). The stream
// stops with the counted run, before the traced run, whose times would
// not bear it; what it did not make, allFigures makes.
type figureStream struct {
	o       *benchOutput
	pollGap time.Duration

	tail   *benchwin.EventTail // read by the poller alone
	mu     sync.Mutex
	events []benchwin.Event // the events read so far, in order
	ks     []int            // each event's occurrence of its name
	seen   map[string]int   // results read so far by name
	done   []streamed       // by event index

	jobs     chan int
	halted   atomic.Bool
	tid      atomic.Int64 // the worker's thread, once at its idle policy
	stop     chan struct{}
	stopOnce sync.Once
	stopped  sync.WaitGroup
}

// streamed is one result's figures, each kind made on a fork of the
// output: counts and retained by runFigures (the stream's), later and
// last after the runs (allFigures). written are the files of counts and
// retained the stream wrote.
type streamed struct {
	e                             benchwin.Event
	k                             int
	f                             schema.BenchFigures
	counts, later, retained, last *benchOutput
	written                       map[string]bool
	err                           error
	ok                            bool
}

// streamQueue bounds the results waiting for the worker; a result that
// finds it full is left to allFigures.
const streamQueue = 1 << 12

func newFigureStream(o *benchOutput) *figureStream {
	return &figureStream{o: o, pollGap: 20 * time.Millisecond, seen: map[string]int{}, jobs: make(chan int, streamQueue), stop: make(chan struct{})}
}

// start follows w's folder until halt: each new event's counted figures
// are made by the worker.
func (s *figureStream) start(w *benchWindow) {
	s.o.win = w
	s.tail = benchwin.FollowEvents(w.dir)
	s.stopped.Add(2)
	go func() {
		defer s.stopped.Done()
		defer close(s.jobs)
		t := time.NewTicker(s.pollGap)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				if !s.poll(w) {
					return
				}
			}
		}
	}()
	go func() {
		defer s.stopped.Done()
		tid, release, err := idleThread()
		if err != nil {
			// Not idle: the stream would take a core from the run
			// (its GCs wait for both of a 2-core machine's).
			return
		}
		s.tid.Store(int64(tid))
		defer func() {
			// Not ours once released: halt leaves it alone.
			s.tid.Store(0)
			release()
		}()
		for i := range s.jobs {
			if s.halted.Load() {
				return
			}
			s.mu.Lock()
			e, k := s.events[i], s.ks[i]
			s.mu.Unlock()
			r := s.o.runFigures(e, k)
			if r.err == nil {
				r.written = writeEarly(s.o.dir, r.counts.files, r.retained.files)
			}
			s.mu.Lock()
			s.done[i] = r
			s.mu.Unlock()
		}
	}()
}

// poll reads the events the recorder added and queues them, after the
// reports they name. It returns false when the folder cannot be read as
// it is being written: the stream ends, and allFigures reads it whole
// (and names what is wrong) after the run.
func (s *figureStream) poll(w *benchWindow) bool {
	events, err := s.tail.Next()
	if err != nil {
		return false
	}
	if len(events) == 0 {
		return true
	}
	if err := w.reports.Update(); err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		i := len(s.events)
		s.events = append(s.events, e)
		s.ks = append(s.ks, s.seen[e.Name])
		s.seen[e.Name]++
		s.done = append(s.done, streamed{})
		select {
		case s.jobs <- i:
		default:
		}
	}
	return true
}

// halt ends the stream: the worker finishes the result it is on, and
// what was made is returned, by event index. It may be called again.
func (s *figureStream) halt() []streamed {
	if s == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		s.halted.Store(true)
		close(s.stop)
		// The result the worker is on is waited for: at its idle
		// policy, on a machine whose cores are all busy, it would get
		// a few thousandths of one, for as long as they stay busy.
		if tid := s.tid.Load(); tid != 0 {
			normalThread(int(tid))
		}
	})
	s.stopped.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// discard halts the stream and removes the files it wrote into dir, and
// the folders that held only them: the counted run failed, and a results
// folder without its summary.json is none (what the run printed, its
// bench-window.txt, stays and says why).
func (s *figureStream) discard(dir string) {
	var folders []string
	for _, r := range s.halt() {
		for name := range r.written {
			os.Remove(filepath.Join(dir, name))
			for f := filepath.Dir(name); f != "." && f != "/"; f = filepath.Dir(f) {
				folders = append(folders, f)
			}
		}
	}
	// Deepest first: a folder is empty once its subfolders are gone.
	slices.SortFunc(folders, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b)) })
	for _, f := range slices.Compact(folders) {
		os.Remove(filepath.Join(dir, f)) // fails, as it should, where other files are
	}
}

// writeEarly writes a result's files into dir while the run goes on (on
// the stream's idle thread: a file's creation costs a tenth of a
// millisecond of the kernel's time, more where files were deleted in the
// last minutes). It returns the names written whole; a file it could not
// write is removed and left to finish, which names the error.
func writeEarly(dir string, files ...map[string][]byte) map[string]bool {
	written := map[string]bool{}
	for _, fs := range files {
		for name, b := range fs {
			if writeResult(dir, name, b) == nil {
				written[name] = true
			}
		}
	}
	return written
}
