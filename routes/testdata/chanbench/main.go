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
package main

import (
	"flag"
	"fmt"
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

func main() {
	iters := flag.Int("iters", 2_000_000, "operations per measurement")
	flag.Parse()
	mode := setup()
	for _, op := range []struct {
		name string
		f    func(int) float64
	}{{"self", timeSelf}, {"pingpong", timePingPong}, {"select", timeSelect}} {
		op.f(*iters / 10) // warm up
		fmt.Printf("%s %s %.3f\n", op.name, mode, op.f(*iters))
	}
	if mode == "off" {
		runOn(*iters)
	}
}
