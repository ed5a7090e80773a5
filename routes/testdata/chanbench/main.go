// Command chanbench times channel operations. Built with the routes
// overlay (the request mark and its handoffs) and -tags routes it times
// them with the marks off and on (a child run with the marks' switch set,
// its sender marked with a route); built plain it times the unpatched
// runtime. It prints one line per operation and mode: "op mode ns/op".
//
//	self      a send to a buffered channel and the receive of that value,
//	          by one goroutine: the slot's request kept and taken
//	pingpong  a send and a receive on unbuffered channels between two
//	          goroutines (per one-way handoff): the direct handoffs
//	select    self's operations through select
//	cond      a sync.Cond's Signal that wakes a goroutine waiting on it,
//	          between two goroutines taking turns (per one-way handoff)
//	close     a channel made and closed by a goroutine a request handed
//	          work to: the hand back
package main

import (
	"flag"
	"fmt"
	"sync"
	"time"
)

func timeSelf(iters int) float64 {
	c := make(chan int, 1)
	start := time.Now()
	for i := 0; i < iters; i++ {
		c <- i
		<-c
	}
	return float64(time.Since(start).Nanoseconds()) / float64(iters)
}

func timeSelect(iters int) float64 {
	c := make(chan int, 1)
	start := time.Now()
	for i := 0; i < iters; i++ {
		select {
		case c <- i:
		default:
		}
		select {
		case <-c:
		default:
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(iters)
}

func timePingPong(iters int) float64 {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	start := time.Now()
	for i := 0; i < iters; i++ {
		ping <- i
		<-pong
	}
	ns := float64(time.Since(start).Nanoseconds()) / float64(2*iters)
	close(ping)
	return ns
}

func timeCond(iters int) float64 {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	turn := 0
	done := make(chan struct{})
	go func() {
		mu.Lock()
		for i := 0; i < iters; i++ {
			for turn != 1 {
				cond.Wait()
			}
			turn = 0
			cond.Signal()
		}
		mu.Unlock()
		close(done)
	}()
	start := time.Now()
	mu.Lock()
	for i := 0; i < iters; i++ {
		turn = 1
		cond.Signal()
		for turn != 0 {
			cond.Wait()
		}
	}
	mu.Unlock()
	ns := float64(time.Since(start).Nanoseconds()) / float64(2*iters)
	<-done
	return ns
}

func timeClose(iters int) float64 {
	start := time.Now()
	for i := 0; i < iters; i++ {
		c := make(chan struct{})
		close(c)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(iters)
}

func main() {
	iters := flag.Int("iters", 2_000_000, "operations per measurement")
	flag.Parse()
	mode := setup()
	for _, op := range []struct {
		name string
		f    func(int) float64
	}{{"self", timeSelf}, {"pingpong", timePingPong}, {"select", timeSelect}, {"cond", timeCond}, {"close", timeClose}} {
		op.f(*iters / 10) // warm up
		fmt.Printf("%s %s %.3f\n", op.name, mode, op.f(*iters))
	}
	if mode == "off" {
		runOn(*iters)
	}
}
