package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Reservation is a CPU plan whose CPUs no other probe run of the user
// holds: a lock per CPU (flock on DIR/cpu-N.lock), released by Release or
// by the kernel when the process ends, however it ends.
type Reservation struct {
	Plan CPUPlan
	cpus []int
}

// held are the CPU locks this process holds, each with its users: a run
// nested in another of the same process (the floor measured beside a
// target) takes its CPUs again, as the pinning of the process is one.
var held = struct {
	sync.Mutex
	files map[int]*os.File
	users map[int]int
}{files: map[int]*os.File{}, users: map[int]int{}}

// Release lets other runs have the CPUs.
func (r *Reservation) Release() {
	held.Lock()
	defer held.Unlock()
	for _, c := range r.cpus {
		if held.users[c]--; held.users[c] == 0 {
			held.files[c].Close() // closing the descriptor drops the flock
			delete(held.files, c)
			delete(held.users, c)
		}
	}
	r.cpus = nil
}

// LockDir is where the CPU locks live: the user's runtime folder
// ($XDG_RUNTIME_DIR/perfspy), else fallback (the cache).
func LockDir(fallback string) string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "perfspy")
	}
	return filepath.Join(fallback, "locks")
}

// Locks is where and how a run takes its CPUs: Dir holds the locks
// (LockDir), CPUs is the machine's count (auto's plan is made among
// them), Wait bounds the wait for CPUs another run holds, and Logf, if
// set, hears once that the run waits.
type Locks struct {
	Dir  string
	CPUs int
	Wait time.Duration
	Logf func(string, ...any)
}

// Reserve takes plan's CPUs in l.Dir. With auto (-cpus auto), the plan is
// made of the free CPUs among l.CPUs: the first half of them for the
// target, the rest for the driver. A plan with no CPUs (-cpus none, one
// CPU) takes nothing. While the CPUs are held by another run, Reserve
// waits, saying so once through l.Logf, up to l.Wait; then it fails
// naming the holders and what to do.
func (l Locks) Reserve(ctx context.Context, plan CPUPlan, auto bool) (*Reservation, error) {
	dir, n, wait, logf := l.Dir, l.CPUs, l.Wait, l.Logf
	if len(plan.Server)+len(plan.Load) == 0 {
		return &Reservation{Plan: plan}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cpu locks: %w", err)
	}
	deadline := time.Now().Add(wait)
	said := false
	for {
		r, holders, err := tryReserve(dir, plan, auto, n)
		if err != nil || r != nil {
			return r, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no free CPUs for this run after %v: %s; run one probe at a time, or choose CPUs with -cpus S:L, or -cpus none (unpinned: the figures move more)", wait, holders)
		}
		if !said && logf != nil {
			logf("waiting for CPUs: %s", holders)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tryReserve takes the CPUs once; nil without an error when they are
// held, with who holds them.
func tryReserve(dir string, plan CPUPlan, auto bool, n int) (*Reservation, string, error) {
	want := append(append([]int(nil), plan.Server...), plan.Load...)
	if auto {
		want = want[:0]
		for c := 0; c < n; c++ {
			want = append(want, c)
		}
	}
	r := &Reservation{}
	var got []int
	var others []string
	held.Lock()
	for _, c := range want {
		if held.users[c] > 0 { // this process's own
			held.users[c]++
			r.cpus, got = append(r.cpus, c), append(got, c)
			continue
		}
		f, err := lockCPU(dir, c)
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			others = append(others, fmt.Sprintf("cpu %d by %s", c, holder(dir, c)))
			continue
		case err != nil:
			held.Unlock()
			r.Release()
			return nil, "", fmt.Errorf("cpu locks: %w", err)
		}
		held.files[c], held.users[c] = f, 1
		r.cpus, got = append(r.cpus, c), append(got, c)
	}
	held.Unlock()
	if !auto && len(others) > 0 || auto && len(got) < 2 {
		r.Release()
		return nil, "another probe run holds " + strings.Join(others, ", "), nil
	}
	if !auto {
		r.Plan = plan
		return r, "", nil
	}
	// The free CPUs, split as auto splits the machine; the others are
	// let go at once.
	half := (len(got) + 1) / 2
	r.Plan = CPUPlan{Server: got[:half], Load: got[half:]}
	return r, "", nil
}

// lockCPU takes cpu's lock without waiting, and writes this process's
// pid into it for the messages of others.
func lockCPU(dir string, cpu int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "cpu-"+strconv.Itoa(cpu)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	return f, nil
}

// holder names who holds cpu's lock, as far as its file says.
func holder(dir string, cpu int) string {
	b, _ := os.ReadFile(filepath.Join(dir, "cpu-"+strconv.Itoa(cpu)+".lock"))
	if pid := strings.TrimSpace(string(b)); pid != "" {
		return "pid " + pid
	}
	return "another process"
}
