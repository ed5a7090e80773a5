package main

// Handoffs: routes that hand their work to goroutines that exist before
// any request (started by main), each site of known cost per request:
//
//	/pooled/a, /pooled/b  hand a job to a pool of 4 workers (-pool N) fed by one
//	            buffered channel; the worker makes n allocations of 80 B in
//	            main.pooledWork (a: 2, b: 5) and answers on the job's
//	            channel. With ?rare=K every K-th job of the pool also makes
//	            10 allocations of 1024 B in main.rareWorkerFill and sleeps
//	            ms=N ms (default 3) before it answers.
//	/owner      hands a request over an unbuffered channel to the one
//	            goroutine that owns a resource: 3 allocations of 112 B in
//	            main.ownerWork and one copy of 700 B in main.ownerCopy,
//	            then the answer.
//	/batch/a, /batch/b  put an item on a batcher's buffered channel and
//	            wait until its batch is flushed: 1 allocation of 96 B per
//	            item in main.batchItem; the batcher drains what is there,
//	            then flushes once, in main.batchFlushA when the last item
//	            it took came from /batch/a, main.batchFlushB otherwise (1
//	            allocation of 256 B each): the last sender's request pays
//	            for the flush.
//	/afterfunc  sets a time.AfterFunc of 50 µs whose function makes 2
//	            allocations of 160 B in main.afterWork, and waits for it.
//	/mutexq     puts a job on a queue guarded by a mutex and a sync.Cond;
//	            a worker started by main makes 4 allocations of 1024 B in
//	            main.condWork for it (the Cond's Signal hands it the
//	            request; a job it takes without a wake is unfollowed).
//	/pollq      puts a job on a queue guarded by a mutex alone, which a
//	            worker started by main polls (a sleep between looks; a
//	            pipe wakes it after 10 ms without jobs): 4
//	            allocations of 1024 B in main.pollWork, the background's
//	            (no handoff the runtime sees).
//	/ownafter   starts a goroutine and waits for it to end, then takes a
//	            value from a channel a background goroutine keeps full,
//	            then makes 3 allocations of 176 B in main.ownAfterWork: the
//	            request's own goroutine keeps its request through both (a
//	            child's end does not end it; a background value does not
//	            take it).
//	-producer D a background goroutine puts a job of 7 allocations on the
//	            pool's channel every D, outside any request.

import (
	"flag"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// poolWorkers is the pool's size: as many as the driver's connections
// (-pool 8) let no job wait for a worker another job's sleep holds.
var poolWorkers = flag.Int("pool", 4, "the `number` of the pool's workers (/pooled/a, /pooled/b)")

var producerEvery = flag.Duration("producer", 0, "put a job of 7 allocations in main.pooledWork on the pool's channel every `interval`, in the background")

type pooledJob struct {
	n    int
	rare time.Duration // the rare job's sleep; 0 a plain job
	done chan struct{}
}

type ownerReq struct{ reply chan int }

type batchIt struct {
	fromA bool
	done  chan struct{}
}

var (
	pooledSink [8]*[80]byte
	rareWSink  [10]*[1024]byte
	ownerSink  [3]*[112]byte
	batchSink  *[96]byte
	flushSink  *[256]byte
	afterSink  [2]*[160]byte
	condSink   [4]*[1024]byte
	ownSink    [3]*[176]byte
)

//go:noinline
func ownAfterWork() {
	for i := range ownSink {
		ownSink[i] = new([176]byte)
	}
}

//go:noinline
func pooledWork(n int) {
	for i := 0; i < n; i++ {
		pooledSink[i] = new([80]byte)
	}
}

//go:noinline
func rareWorkerFill() {
	for i := range rareWSink {
		rareWSink[i] = new([1024]byte)
	}
}

//go:noinline
func ownerWork() {
	for i := range ownerSink {
		ownerSink[i] = new([112]byte)
	}
}

// ownerBuf is the owner's resource: each request copies ownerCopyN bytes
// into it (a variable length, so that the copy is a memmove).
var (
	ownerBuf, ownerSrc [1024]byte
	ownerCopyN         = 700
)

//go:noinline
func ownerCopy(n int) int { return copy(ownerBuf[:n], ownerSrc[:n]) }

//go:noinline
func batchItem() { batchSink = new([96]byte) }

//go:noinline
func batchFlushA() { flushSink = new([256]byte) }

//go:noinline
func batchFlushB() { flushSink = new([256]byte) }

//go:noinline
func afterWork() {
	for i := range afterSink {
		afterSink[i] = new([160]byte)
	}
}

//go:noinline
func condWork() {
	for i := range condSink {
		condSink[i] = new([1024]byte)
	}
}

// pooledWorker serves the pool's jobs, parked on its channel while idle.
func pooledWorker(jobs chan pooledJob) {
	for j := range jobs {
		pooledWork(j.n)
		if j.rare > 0 {
			rareWorkerFill()
			time.Sleep(j.rare)
		}
		if j.done != nil {
			close(j.done)
		}
	}
}

// owner is the one goroutine that owns a resource: requests reach it over
// an unbuffered channel.
func owner(reqs chan ownerReq) {
	for r := range reqs {
		ownerWork()
		ownerCopy(ownerCopyN)
		r.reply <- 1
	}
}

// batcher takes what is on its channel, item by item, then flushes the
// batch once and answers every item of it.
func batcher(items chan batchIt) {
	var batch []chan struct{}
	for it := range items {
		batch = append(batch[:0], it.done)
		batchItem()
		last := it.fromA
	drain:
		for {
			select {
			case it := <-items:
				batch = append(batch, it.done)
				batchItem()
				last = it.fromA
			default:
				break drain
			}
		}
		if last {
			batchFlushA()
		} else {
			batchFlushB()
		}
		for _, d := range batch {
			close(d)
		}
	}
}

//go:noinline
func pollWork() {
	for i := range pollSink {
		pollSink[i] = new([1024]byte)
	}
}

var pollSink [4]*[1024]byte

// pollQueue is a queue guarded by a mutex alone: its worker looks at it
// every 50 µs while jobs came in the last 10 ms; then it sleeps on a pipe
// until a job's handler, finding it asleep, writes a byte. A target that
// serves no /pollq never wakes for it: its scheduler is idle between
// requests, as the instruction counts of the other routes need (a poll
// every millisecond cost them 250,000 instructions per request).
type pollQueue struct {
	mu     sync.Mutex
	jobs   []chan struct{}
	asleep atomic.Bool
	r, w   *os.File
}

func newPollQueue() *pollQueue {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	q := &pollQueue{r: r, w: w}
	q.asleep.Store(true)
	return q
}

// put adds a job and wakes the worker if it sleeps: a write to a pipe, a
// wake the request marks do not follow.
func (q *pollQueue) put(done chan struct{}) {
	q.mu.Lock()
	q.jobs = append(q.jobs, done)
	q.mu.Unlock()
	if q.asleep.CompareAndSwap(true, false) {
		q.w.Write([]byte{1})
	}
}

func (q *pollQueue) serve() {
	var b [1]byte
	q.r.Read(b[:]) // asleep until the first job
	last := time.Now()
	for {
		q.mu.Lock()
		jobs := q.jobs
		q.jobs = nil
		q.mu.Unlock()
		for _, done := range jobs {
			pollWork()
			close(done)
		}
		now := time.Now()
		if len(jobs) > 0 {
			last = now
		}
		if now.Sub(last) < 10*time.Millisecond {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		q.asleep.Store(true)
		q.mu.Lock()
		pending := len(q.jobs)
		q.mu.Unlock()
		if pending > 0 && q.asleep.CompareAndSwap(true, false) {
			continue // a job came before the flag was up: no write for it
		}
		q.r.Read(b[:])
		last = time.Now()
	}
}

// condQueue is a queue guarded by a mutex and a sync.Cond.
type condQueue struct {
	mu   sync.Mutex
	cond *sync.Cond
	jobs []chan struct{}
}

func (q *condQueue) serve() {
	q.mu.Lock()
	for {
		for len(q.jobs) == 0 {
			q.cond.Wait()
		}
		done := q.jobs[0]
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		condWork()
		close(done)
		q.mu.Lock()
	}
}

// newMux is main's mux, with the handoff routes (after flag.Parse).
func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	registerHandoffs(mux)
	registerNoAnswer(mux)
	registerContend(mux)
	registerUnfollowed(mux)
	return mux
}

// registerHandoffs starts the goroutines the handoff routes hand their
// work to, outside any request, and registers the routes.
func registerHandoffs(mux *http.ServeMux) {
	jobs := make(chan pooledJob, 16)
	for range max(*poolWorkers, 1) {
		go pooledWorker(jobs)
	}
	if *producerEvery > 0 {
		go func() {
			for range time.Tick(*producerEvery) {
				jobs <- pooledJob{n: 7}
			}
		}()
	}
	var poolCount atomic.Int64
	pooled := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			j := pooledJob{n: n, done: make(chan struct{})}
			if k, _ := strconv.ParseInt(r.URL.Query().Get("rare"), 10, 64); k > 0 && poolCount.Add(1)%k == 0 {
				ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
				if err != nil || ms <= 0 {
					ms = 3
				}
				j.rare = time.Duration(ms) * time.Millisecond
			}
			jobs <- j
			<-j.done
			w.Write([]byte("ok"))
		}
	}
	mux.HandleFunc("GET /pooled/a", pooled(2))
	mux.HandleFunc("GET /pooled/b", pooled(5))

	reqs := make(chan ownerReq)
	go owner(reqs)
	mux.HandleFunc("GET /owner", func(w http.ResponseWriter, r *http.Request) {
		req := ownerReq{reply: make(chan int)}
		reqs <- req
		<-req.reply
		w.Write([]byte("ok"))
	})

	items := make(chan batchIt, 64)
	go batcher(items)
	batch := func(fromA bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			it := batchIt{fromA: fromA, done: make(chan struct{})}
			items <- it
			<-it.done
			w.Write([]byte("ok"))
		}
	}
	mux.HandleFunc("GET /batch/a", batch(true))
	mux.HandleFunc("GET /batch/b", batch(false))

	mux.HandleFunc("GET /afterfunc", func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		time.AfterFunc(50*time.Microsecond, func() {
			afterWork()
			close(done)
		})
		<-done
		w.Write([]byte("ok"))
	})

	ticks := make(chan int, 1)
	go func() { // the background keeps ticks full
		for i := 0; ; i++ {
			ticks <- i
		}
	}()
	mux.HandleFunc("GET /ownafter", func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		go close(done)
		<-done
		<-ticks
		ownAfterWork()
		w.Write([]byte("ok"))
	})

	q := &condQueue{}
	q.cond = sync.NewCond(&q.mu)
	go q.serve()
	mux.HandleFunc("GET /mutexq", func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		q.mu.Lock()
		q.jobs = append(q.jobs, done)
		q.mu.Unlock()
		q.cond.Signal()
		<-done
		w.Write([]byte("ok"))
	})

	pq := newPollQueue()
	go pq.serve()
	mux.HandleFunc("GET /pollq", func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		pq.put(done)
		<-done
		w.Write([]byte("ok"))
	})
}
