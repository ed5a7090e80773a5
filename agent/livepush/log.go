package livepush

import (
	"fmt"
	"io"
	"runtime/debug"
	"sync"
)

// Logger writes the agent's messages (to standard error); Once says a
// thing the first time only.
type Logger struct {
	mu   sync.Mutex
	W    io.Writer
	said map[string]bool
}

func (g *Logger) Printf(format string, a ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fmt.Fprintf(g.W, format+"\n", a...)
}

func (g *Logger) Once(key, format string, a ...any) {
	g.mu.Lock()
	if g.said[key] {
		g.mu.Unlock()
		return
	}
	if g.said == nil {
		g.said = map[string]bool{}
	}
	g.said[key] = true
	g.mu.Unlock()
	g.Printf(format, a...)
}

// Recover reports a panic in the agent's goroutine (what) and ends it
// there, after running then: the service goes on. Deferred directly.
func (g *Logger) Recover(what string, then ...func()) {
	if r := recover(); r != nil {
		g.Printf("perfspy live: panic in %s, recovered (the service goes on; please report it): %v\n%s", what, r, debug.Stack())
		for _, f := range then {
			f()
		}
	}
}
