// Command rsswrap runs a command and prints its peak resident memory, in
// KiB, on standard output. The bench commands measure through it: Linux
// charges a child the high-water memory of the process it was forked from
// (at exec), so a child of the large bench process would report the bench's
// own memory; a child of this small process does not.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rsswrap command [args...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "rsswrap: %v\n", err)
		os.Exit(1)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		os.Exit(1)
	}
	fmt.Println(ru.Maxrss)
}
