// Package cmdmain is what every perfspy main does around its command:
// the shared exit codes, standard output and error through
// safetext.Writer, and a crash that never looks like a usage error.
package cmdmain

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// Run runs cmd (with -version alone, it prints the version instead) with the process's standard output and error made safe,
// and exits with its code. A panic exits Failed (1) with its stack; a
// fatal runtime error (which Go ends with exit status 2, the usage code)
// aborts the process with SIGABRT instead (GOTRACEBACK=crash: a core
// file only where the user's core limit allows one), so that no script
// takes a crash for a usage error.
func Run(cmd func(stdout, stderr io.Writer) int) {
	debug.SetTraceback("crash")
	stdout, stderr := safetext.NewWriter(os.Stdout), safetext.NewWriter(os.Stderr)
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Fprintf(stdout, "%s %s\n", filepath.Base(progName()), Version())
		os.Exit(OK)
	}
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

// Version is perfspy's version as the binary's build info says: the
// module version (go install ...@v1.2.3), else the VCS revision the
// binary was built from (with +dirty), else "devel".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev + dirty
}

// Parse parses a command's flags: ok is false when the command must exit
// with code, OK after -h (the usage is printed), Usage on a bad flag (the
// flag package said which).
func Parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return OK, false
		}
		return Usage, false
	}
	return OK, true
}
