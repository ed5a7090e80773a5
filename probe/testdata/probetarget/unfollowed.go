package main

// Work that travels through something the runtime sees no handoff in, or
// runs on a goroutine a request started that outlives it: each site of
// known cost per request, so that a test can hold every route to it.
//
//	/mq/a, /mq/b  submit a task to a pool whose queue is a slice guarded by a
//	            mutex (no channel, no Cond): a submit that finds fewer than
//	            -mq-workers workers starts one, which runs its task, then
//	            the queue's next tasks until it is empty, and exits (the
//	            shape of a worker pool that starts workers lazily). The
//	            task makes 2 (a) or 5 (b) allocations of 288 B in
//	            main.mqTask, sleeps 1 ms, and closes the task's done
//	            channel, which the request waits on. A task a worker takes
//	            from the queue after its own request's is no request's
//	            the runtime can name.
//	/orphan     starts a goroutine and returns: the goroutine sleeps 5 ms,
//	            then makes 3 allocations of 320 B in main.orphanWork,
//	            after its request ended.
//	/flush      makes 1 allocation of 352 B in main.flushItem; the first
//	            request to come starts a flusher on a 1 ms ticker that
//	            makes 1 allocation of 384 B in main.flushTick each tick, for
//	            the process's life (a logger's buffered writer started on
//	            its first write).
//	/flood      puts a value in each of ?n=N (default 4096) buffered
//	            channels of its own and drops them: each value takes an
//	            entry of the runtime's handoff table that no receive frees,
//	            so that other routes' handoffs (a pool's buffered channel,
//	            a time.AfterFunc) lose theirs now and then, as a server
//	            that makes thousands of buffered channels would.

import (
	"flag"
	"net/http"
	"strconv"
	"sync"
	"time"
)

var mqWorkers = flag.Int("mq-workers", 2, "the `number` of workers the mutex-queue pool starts at most (/mq/a, /mq/b)")

var (
	mqSink     [5]*[288]byte
	orphanSink [3]*[320]byte
	flushISink *[352]byte
	flushTSink *[384]byte
)

//go:noinline
func mqTask(n int) {
	for i := 0; i < n; i++ {
		mqSink[i] = new([288]byte)
	}
}

//go:noinline
func orphanWork() {
	for i := range orphanSink {
		orphanSink[i] = new([320]byte)
	}
}

//go:noinline
func flushItem() { flushISink = new([352]byte) }

//go:noinline
func flushTick() { flushTSink = new([384]byte) }

// mutexPool is a pool whose queue is guarded by a mutex: its workers are
// started by the submits that find too few, and exit when the queue is
// empty.
type mutexPool struct {
	mu      sync.Mutex
	tasks   []func()
	workers int
	max     int
}

func (p *mutexPool) submit(task func()) {
	p.mu.Lock()
	if p.workers < p.max {
		p.workers++
		p.mu.Unlock()
		go p.work(task)
		return
	}
	p.tasks = append(p.tasks, task)
	p.mu.Unlock()
}

func (p *mutexPool) work(task func()) {
	for {
		task()
		p.mu.Lock()
		if len(p.tasks) == 0 {
			p.workers--
			p.mu.Unlock()
			return
		}
		task = p.tasks[0]
		p.tasks = p.tasks[1:]
		p.mu.Unlock()
	}
}

// registerUnfollowed registers the routes above.
func registerUnfollowed(mux *http.ServeMux) {
	mux.HandleFunc("GET /flood", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n <= 0 {
			n = 4096
		}
		chans := make([]chan int, n)
		for i := range chans {
			chans[i] = make(chan int, 1)
			chans[i] <- i
		}
		w.Write([]byte("ok"))
	})
	pool := &mutexPool{max: max(*mqWorkers, 1)}
	mq := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			done := make(chan struct{})
			pool.submit(func() {
				mqTask(n)
				time.Sleep(time.Millisecond)
				close(done)
			})
			<-done
			w.Write([]byte("ok"))
		}
	}
	mux.HandleFunc("GET /mq/a", mq(2))
	mux.HandleFunc("GET /mq/b", mq(5))

	mux.HandleFunc("GET /orphan", func(w http.ResponseWriter, r *http.Request) {
		go func() {
			time.Sleep(5 * time.Millisecond)
			orphanWork()
		}()
		w.Write([]byte("ok"))
	})

	var flusher sync.Once
	mux.HandleFunc("GET /flush", func(w http.ResponseWriter, r *http.Request) {
		flushItem()
		flusher.Do(func() {
			go func() {
				for range time.Tick(time.Millisecond) {
					flushTick()
				}
			}()
		})
		w.Write([]byte("ok"))
	})
}
