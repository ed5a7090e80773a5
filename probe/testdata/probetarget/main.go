// Command probetarget is the ground-truth server of probe's tests. Each
// endpoint has a known per-request cost:
//
//	/alloc      exactly allocK allocations of allocS bytes, in main.allocK
//	/alloc10    exactly 10 heap allocations of 64 B in main.alloc10; with
//	            ?spin=N also N µs of CPU
//	/generic    2 allocations in main.genAlloc[...] and 3 in the closure
//	            main.makeClosure.func1
//	/none       no allocation of its own
//	/write      one extra write(2) to /dev/null
//	/getppid    one getppid(2)
//	/loop?n=N   exactly N iterations of a fixed loop (for instruction counts)
//	/chanwait?ms=N  waits on a channel for a worker that answers after N ms
//	/sysblock?ms=N  blocks N ms in a nanosleep(2) system call
//	/mutex?us=N     holds a global mutex while it sleeps N µs: concurrent
//	                requests wait for it
//	/pool?ms=N      hands a job to a pool of -workers goroutines (64) parked
//	                on a channel; the worker sleeps N ms and answers: the
//	                request waits N ms on a channel (sync), the worker sleeps
//	/tail?every=K&ms=N  every K-th request waits N ms on a timer's channel
//	                (sync); the others answer at once
//	-idle N         starts N goroutines that block forever
//	/spin?us=N  N µs of thread CPU time
//	/sleep?ms=N N ms of sleep
//	/deep?frames=N[,M...]  for each number, one 64 B allocation and one copy
//	            of 3000 B in main.deepLeaf, that many calls of main.deep
//	            below the handler (stack depth)
//	/copy       memmove: 3000 B in main.copyN (size known only at run time),
//	            100 B in runtime.slicebytetostring under main.str100, and
//	            2 x 200 B in bytes.(*Buffer).Write under main.bufWrites
//
//	GET /users/{id}  exactly 3 allocations of 48 B in main.userAlloc
//	/child      1 allocation of 32 B in main.childParent, then hands work to
//	            a goroutine it starts and waits for: 4 allocations of 64 B
//	            in main.childWork and one copy of 3000 B in main.copyN
//	-ticker D   a background goroutine allocates 128 B in main.tickAlloc
//	            every D, outside any request
//	/handoff    hands a job over an unbuffered channel to a worker started
//	            outside any request; it makes 4 allocations of 1024 B (8
//	            objects: each put in an interface) in main.handoffWork and
//	            answers: the handoff carries the request, so they are its.
//	            /pooled/..., /owner, /batch/..., /afterfunc: handoffs.go
//
// -mode panic panics in a goroutine after -crash-after requests; -mode
// flood writes 10 MB without a newline and exits; -spawn FILE starts two
// sleeping children (one in a session of its own) and writes their pids.
//
// -cpuprofile keeps the CPU profiler on, so SIGPROF arrives while copies are
// recorded. -mode chooses a failure: exit (exits at start), nolisten (never listens),
// crash (exits after -crash-after requests).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	allocK = 7
	allocS = 64
)

var sink [allocK][]byte

//go:noinline
func allocK7() {
	for i := 0; i < allocK; i++ {
		sink[i] = make([]byte, allocS)
	}
}

var (
	userSink  [3]*[48]byte
	childSink [4]*[64]byte
	tickSink  *[128]byte
	smallSink *[32]byte
)

//go:noinline
func userAlloc() {
	for i := range userSink {
		userSink[i] = new([48]byte)
	}
}

//go:noinline
func tickAlloc() { tickSink = new([128]byte) }

// childParent allocates once, then runs childWork on a goroutine it starts
// and waits for it. done is a channel made once per request.
//
//go:noinline
func childParent() {
	smallSink = new([32]byte)
	done := make(chan int, 1)
	go childWork(done)
	<-done
}

//go:noinline
func childWork(done chan int) {
	for i := range childSink {
		childSink[i] = new([64]byte)
	}
	var dst [4096]byte
	done <- copyN(dst[:], copySrc, copySize)
}

//go:noinline
func alloc10() {
	for i := 0; i < 10; i++ {
		sink[i%allocK] = make([]byte, allocS)
	}
}

var (
	deepSink []byte
	deepDst  = make([]byte, 4096)
)

// deep calls itself n times, then deepLeaf: the allocation and the copy sit
// n frames below the handler.
//
//go:noinline
func deep(n int) int {
	if n == 0 {
		return deepLeaf()
	}
	return deep(n-1) + 1
}

//go:noinline
func deepLeaf() int {
	deepSink = make([]byte, allocS)
	return copyN(deepDst, copySrc, copySize)
}

type triple struct{ a, b, c int64 }

// job is a wait a worker does for a request: it sleeps d, then closes done.
type job struct {
	d    time.Duration
	done chan struct{}
}

// poolWorker serves jobs: parked on the channel while idle.
//
//go:noinline
func poolWorker(jobs chan job) {
	for j := range jobs {
		time.Sleep(j.d)
		close(j.done)
	}
}

// handoffWorker serves /handoff's jobs, on a goroutine of no request.
//
//go:noinline
func handoffWorker(jobs chan chan struct{}) {
	for done := range jobs {
		handoffWork()
		close(done)
	}
}

// handoffWork is /handoff's cost: 4 allocations of 1024 B.
//
//go:noinline
func handoffWork() {
	for i := 0; i < 4; i++ {
		gsink = make([]byte, 1024)
	}
}

// tailWait waits d on a timer's channel.
//
//go:noinline
func tailWait(d time.Duration) {
	<-time.After(d)
}

var gsink any

var (
	rareCount atomic.Int64
	rareSink  []byte
)

// rareFill makes n objects of 1 KiB, each kept past the call: one
// allocation each.
//
//go:noinline
func rareFill(n int) {
	for i := 0; i < n; i++ {
		rareSink = make([]byte, 1024)
	}
}

var rareFrom, rareTo [1 << 16]byte

// rareCopy copies n bytes (at most 64 KiB) between two buffers: one
// memmove of n bytes, no allocation.
//
//go:noinline
func rareCopy(n int) {
	copy(rareTo[:n], rareFrom[:n])
}

//go:noinline
func genAlloc[T any](n int) {
	for i := 0; i < n; i++ {
		gsink = new(T)
	}
}

var csink []byte

//go:noinline
func makeClosure(n int) func() {
	return func() {
		for i := 0; i < n; i++ {
			csink = make([]byte, 48)
		}
	}
}

var closure = makeClosure(3)

var devnull int

// copySize is a variable so that the compiler cannot inline the copy.
var (
	copySize = 3000
	copySrc  = make([]byte, 4096)
	strSrc   = make([]byte, 100)
	bufSrc   = make([]byte, 200)
	strSink  string
)

//go:noinline
func copyN(dst, src []byte, n int) int {
	return copy(dst[:n], src[:n])
}

//go:noinline
func str100(b []byte) string {
	return string(b)
}

//go:noinline
func bufWrites(p []byte) int {
	var arr [512]byte
	b := bytes.NewBuffer(arr[:0])
	b.Write(p)
	b.Write(p)
	return b.Len()
}

// threadCPU is this thread's CPU time, in nanoseconds of resolution
// (getrusage counts in scheduler ticks on some kernels).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// spin burns d of CPU. Thread CPU time is read rarely, so the loop itself
// is the cost, calibrated once at start.
var spinPerUS int

// burn runs a fixed loop n times: instruction counts can be checked
// against its disassembly.
//
//go:noinline
func burn(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*1664525 + 1013904223
	}
	return x
}

var burnSink int

// calibrate takes the median of five timed loops: one run that a noisy
// machine slows (another VM on the core, a cold cache) does not set the
// rate.
func calibrate() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	burnSink = burn(1 << 20) // warm up
	const n = 1 << 22
	var rates []float64
	for range 5 {
		t0 := threadCPU()
		burnSink = burn(n)
		if d := threadCPU() - t0; d > 0 {
			rates = append(rates, float64(n)/(float64(d.Nanoseconds())/1e3))
		}
	}
	if len(rates) == 0 {
		spinPerUS = n / 1000 // a clock that does not move: about 1 ms per loop
		return
	}
	slices.Sort(rates)
	spinPerUS = int(rates[len(rates)/2])
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	mode := flag.String("mode", "serve", "serve, exit, nolisten, crash, panic, flood or router (no ServeMux: every path answers, /item/... allocates as /users/{id} does)")
	crashAfter := flag.Int64("crash-after", 1000, "with -mode crash: exit after this many requests")
	idle := flag.Int("idle", 0, "goroutines that block forever, to load goroutine-walking profilers")
	workers := flag.Int("workers", 64, "the /pool endpoint's workers")
	cpuprof := flag.Bool("cpuprofile", false, "run the CPU profiler (into io.Discard) for the whole life of the process")
	certFile := flag.String("tls-cert", "", "serve HTTPS (HTTP/1.1 and h2 by ALPN) with this certificate `file` (and -tls-key)")
	keyFile := flag.String("tls-key", "", "the key `file` of -tls-cert")
	ticker := flag.Duration("ticker", 0, "allocate 128 B in main.tickAlloc every `interval`, in the background")
	spawn := flag.String("spawn", "", "start two sleeping children, one in a session of its own, and write their pids to this `file`")
	burnChild := flag.Bool("burn-child", false, "start a child process that keeps one core busy (-mode burner) for the target's life: the target's own work, not another process's")
	flag.Parse()
	if *spawn != "" {
		spawnChildren(*spawn)
	}
	if *burnChild {
		cmd := exec.Command(os.Args[0], "-mode", "burner")
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
	}
	if *cpuprof {
		if err := pprof.StartCPUProfile(io.Discard); err != nil {
			log.Fatal(err)
		}
	}

	switch *mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "probetarget: exiting at start as asked")
		os.Exit(3)
	case "nolisten", "sleeper":
		time.Sleep(time.Hour)
		return
	case "burner":
		runtime.GOMAXPROCS(1)
		for x := 1; ; x = x*1103515245 + 12345 {
			burnSink = x
		}
	case "flood":
		// 10 MB on one line without a newline, then exit.
		os.Stderr.Write(bytes.Repeat([]byte("x"), 10<<20))
		os.Exit(3)
	}
	var err error
	if devnull, err = syscall.Open("/dev/null", syscall.O_WRONLY, 0); err != nil {
		log.Fatal(err)
	}
	calibrate()

	block := make(chan struct{})
	for i := 0; i < *idle; i++ {
		go func() { <-block }()
	}
	jobs := make(chan job)
	go func() {
		for j := range jobs {
			go func() {
				time.Sleep(j.d)
				close(j.done)
			}()
		}
	}()
	var mu sync.Mutex
	pool := make(chan job)
	for i := 0; i < *workers; i++ {
		go poolWorker(pool)
	}
	var tailCount atomic.Int64
	handoffs := make(chan chan struct{})
	go handoffWorker(handoffs)

	if *ticker > 0 {
		go func() {
			for range time.Tick(*ticker) {
				tickAlloc()
			}
		}()
	}
	var served atomic.Int64
	mux := newMux()
	startUpstream(mux)
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		userAlloc()
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/child", func(w http.ResponseWriter, r *http.Request) {
		childParent()
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/alloc", func(w http.ResponseWriter, r *http.Request) {
		allocK7()
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/copy", func(w http.ResponseWriter, r *http.Request) {
		var dst [4096]byte
		n := copyN(dst[:], copySrc, copySize)
		strSink = str100(strSrc)
		n += bufWrites(bufSrc)
		w.Write([]byte(strconv.Itoa(n)))
	})
	mux.HandleFunc("/deep", func(w http.ResponseWriter, r *http.Request) {
		sum := 0
		for _, f := range strings.Split(r.URL.Query().Get("frames"), ",") {
			n, _ := strconv.Atoi(f)
			sum += deep(min(max(n, 0), 10000))
		}
		w.Write([]byte(strconv.Itoa(sum)))
	})
	mux.HandleFunc("/alloc10", func(w http.ResponseWriter, r *http.Request) {
		alloc10()
		if us, _ := strconv.Atoi(r.URL.Query().Get("spin")); us > 0 {
			burnSink = burn(us * spinPerUS)
		}
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/generic", func(w http.ResponseWriter, r *http.Request) {
		genAlloc[triple](2)
		closure()
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/none", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
		syscall.Write(devnull, []byte("x"))
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		burnSink = burn(n)
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/getppid", func(w http.ResponseWriter, r *http.Request) {
		syscall.Getppid()
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/chanwait", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		j := job{time.Duration(ms) * time.Millisecond, make(chan struct{})}
		jobs <- j
		<-j.done
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/pool", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		j := job{time.Duration(ms) * time.Millisecond, make(chan struct{})}
		pool <- j
		<-j.done
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/handoff", func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		handoffs <- done
		<-done
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/tail", func(w http.ResponseWriter, r *http.Request) {
		every, _ := strconv.ParseInt(r.URL.Query().Get("every"), 10, 64)
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		if every > 0 && tailCount.Add(1)%every == 0 {
			tailWait(time.Duration(ms) * time.Millisecond)
		}
		w.Write([]byte("ok"))
	})
	// /rare?every=N&ms=M&spin=US&sys=S&copy=B: one request in N also
	// builds ten 1 KiB objects (rareFill), copies B bytes in one memmove
	// (rareCopy), runs US µs of CPU, makes S getppid syscalls and waits M
	// ms on a timer's channel: the slowest requests' own bill.
	mux.HandleFunc("/rare", func(w http.ResponseWriter, r *http.Request) {
		every, _ := strconv.ParseInt(r.URL.Query().Get("every"), 10, 64)
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		us, _ := strconv.Atoi(r.URL.Query().Get("spin"))
		sys, _ := strconv.Atoi(r.URL.Query().Get("sys"))
		cp, _ := strconv.Atoi(r.URL.Query().Get("copy"))
		if every > 0 && rareCount.Add(1)%every == 0 {
			rareFill(10)
			if cp > 0 {
				rareCopy(min(cp, len(rareFrom)))
			}
			burnSink = burn(us * spinPerUS)
			for range sys {
				syscall.Syscall(syscall.SYS_GETPPID, 0, 0, 0)
			}
			tailWait(time.Duration(ms) * time.Millisecond)
		}
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/sysblock", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		// A signal (the GC's preemption, SIGURG) ends nanosleep early with
		// EINTR: sleep the remainder, so that the request waits all N ms.
		ts := syscall.NsecToTimespec(int64(ms) * 1e6)
		for {
			var rem syscall.Timespec
			if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
				break
			}
			ts = rem
		}
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/mutex", func(w http.ResponseWriter, r *http.Request) {
		us, _ := strconv.Atoi(r.URL.Query().Get("us"))
		mu.Lock()
		time.Sleep(time.Duration(us) * time.Microsecond)
		mu.Unlock()
		w.Write([]byte("ok"))
	})
	mux.Handle("/stall", newStall())
	mux.HandleFunc("/spin", func(w http.ResponseWriter, r *http.Request) {
		us, _ := strconv.Atoi(r.URL.Query().Get("us"))
		burnSink = burn(us * spinPerUS)
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		w.Write([]byte("ok"))
	})
	var h http.Handler = mux
	switch *mode {
	case "crash":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if served.Add(1) > *crashAfter {
				fmt.Fprintln(os.Stderr, "probetarget: crashing as asked")
				os.Exit(2)
			}
			mux.ServeHTTP(w, r)
		})
	case "router":
		// No ServeMux: a router of its own, so that routes are paths.
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/item/") {
				userAlloc()
			}
			w.Write([]byte("ok"))
		})
	case "panic":
		// A panic in a goroutine of its own (net/http recovers a
		// handler's), then more output, as a crash report has.
		var once sync.Once
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if served.Add(1) > *crashAfter {
				once.Do(func() { go panicDeep(20) })
			}
			mux.ServeHTTP(w, r)
		})
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "probetarget: listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	if *certFile != "" {
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		log.Fatal(srv.ServeTLS(ln, *certFile, *keyFile))
	}
	// Without TLS: HTTP/1.1, and HTTP/2 with prior knowledge (h2c).
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	log.Fatal(srv.Serve(ln))
}

// spawnChildren starts two copies of this program that sleep: one in the
// target's process group, one that started a session of its own (as a
// daemon does); their pids go to file once both run.
func spawnChildren(file string) {
	var pids []string
	for _, setsid := range []bool{false, true} {
		cmd := exec.Command(os.Args[0], "-mode", "sleeper")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	if err := os.WriteFile(file, []byte(strings.Join(pids, " ")), 0o644); err != nil {
		log.Fatal(err)
	}
}

// panicDeep panics n calls down, so that the end of the report is far
// from its "panic:" line.
func panicDeep(n int) {
	if n == 0 {
		panic("probetarget: panicking as asked")
	}
	panicDeep(n - 1)
}
