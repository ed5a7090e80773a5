//go:build routes

package main

import (
	"os"
	"os/exec"
	"strconv"
	_ "unsafe" // for go:linkname
)

//go:linkname perfspyMarking runtime.perfspyMarking
func perfspyMarking() bool

//go:linkname perfspyMarkSwap runtime.perfspyMarkSwap
func perfspyMarkSwap(m uintptr) uintptr

// setup names the mode: on when the runtime marks requests (the child
// run), the main goroutine then marked with route 1 as a request's is.
func setup() string {
	if !perfspyMarking() {
		return "off"
	}
	perfspyMarkSwap(1)
	return "on"
}

// runOn times the same operations in a child with the marks on: the
// runtime reads their switch once, at its start.
func runOn(iters int) {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(self, "-iters", strconv.Itoa(iters))
	cmd.Env = append(os.Environ(), "PERFSPY_AGENT_SOCK=chanbench")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		panic(err)
	}
}
