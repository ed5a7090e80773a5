package withagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// liveMainFile starts the agent's live mode (agent/live) from package
// main's init, which runs after every package's: the recorders have
// registered by then. The import is named so that it cannot clash with
// the program's own names.
const liveMainFile = `package main

import perfspylive "IMPORT"

func init() { perfspylive.Start(perfspylive.Build{Commit: COMMIT}) }
`

// signalFile is added to os/signal: live mode, after its last push on
// SIGTERM, raises the signal again only when the program does not watch
// it itself (its own handler already has it).
const signalFile = `// Code added to package os/signal by perfspy's live mode. DO NOT EDIT.

package signal

import (
	"os"
	_ "unsafe" // for go:linkname
)

// perfspyWatched tells whether a channel is notified of sig.
//
//go:linkname perfspyWatched
func perfspyWatched(sig os.Signal) bool {
	handlers.Lock()
	defer handlers.Unlock()
	n := signum(sig)
	return n >= 0 && handlers.ref[n] > 0
}
`

// liveOverlay adds live mode to a build whose recorders are on: the
// file in package main and the one in os/signal (among the spies: a
// build without them has no live mode either).
func (b *builder) liveOverlay(ctx context.Context) error {
	commit := ""
	if _, version, ok := strings.Cut(b.t.Spec, "@"); ok {
		commit = version
	} else if c, _ := gitCommit(ctx, b.t.PkgDir); c != "" {
		commit = c
	}
	mainSrc := filepath.Join(b.work, "zz_perfspy_live.go")
	text := strings.NewReplacer("IMPORT", agentImport+"/live", "COMMIT", strconv.Quote(commit)).Replace(liveMainFile)
	if err := os.WriteFile(mainSrc, []byte(text), 0o644); err != nil {
		return err
	}
	b.spies[filepath.Join(b.setup.PkgDir, "zz_perfspy_live.go")] = mainSrc
	sigDst := filepath.Join(b.setup.Toolchain.GOROOT, "src", "os", "signal", "zz_perfspy_signal.go")
	if _, err := os.Stat(sigDst); err == nil {
		return fmt.Errorf("live mode: %s already exists in GOROOT", sigDst)
	}
	sigSrc := filepath.Join(b.work, "signal_zz_perfspy_signal.go")
	if err := os.WriteFile(sigSrc, []byte(signalFile), 0o644); err != nil {
		return err
	}
	b.spies[sigDst] = sigSrc
	return nil
}
