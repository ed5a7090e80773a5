// Package cmdmain is what every perfspy main does around its command:
// the shared exit codes, standard output and error through
// safetext.Writer, and a crash that never looks like a usage error.
package cmdmain

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/perfspy/perfspy/internal/safetext"
)

// Exit codes shared by every perfspy command.
const (
	OK        = 0
	Failed    = 1 // failed, or a regression past a gate
	Usage     = 2
	NotJudged = 3 // the measurement cannot support a verdict
)

// Run runs cmd with the process's standard output and error made safe,
// and exits with its code. A panic exits Failed (1) with its stack; a
// fatal runtime error (which Go ends with exit status 2, the usage code)
// aborts the process with SIGABRT instead (GOTRACEBACK=crash: a core
// file only where the user's core limit allows one), so that no script
// takes a crash for a usage error.
func Run(cmd func(stdout, stderr io.Writer) int) {
	debug.SetTraceback("crash")
	stdout, stderr := safetext.NewWriter(os.Stdout), safetext.NewWriter(os.Stderr)
	code := func() (code int) {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(stderr, "%s: internal error (a bug; please report it): %v\n%s", progName(), r, debug.Stack())
				code = Failed
			}
		}()
		return cmd(stdout, stderr)
	}()
	os.Exit(code)
}

func progName() string {
	if len(os.Args) > 0 {
		return os.Args[0]
	}
	return "perfspy"
}
