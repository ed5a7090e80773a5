package withagent

import (
	"bufio"
	"context"
	"fmt"
	"go/version"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// What a build says before and while the go command works, so that a first
// run is never a silent minute: the toolchain it downloads first, and how
// long it has been building.

// toolchainNote says that the toolchain the module's go.mod asks for (or
// GOTOOLCHAIN names) is not on this machine yet, and that the go command
// downloads it before anything else; "" when nothing is downloaded.
func toolchainNote(ctx context.Context, modRoot string, env []string) string {
	local := withEnv(env, "GOTOOLCHAIN=local")
	out, err := goOut(ctx, modRoot, local, "env", "GOVERSION", "GOMODCACHE")
	if err != nil {
		return ""
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return ""
	}
	have, modcache := f[0], f[1]
	want, why := wantedToolchain(filepath.Join(modRoot, "go.mod"), envValue(env, "GOTOOLCHAIN"))
	if want == "" || !version.IsValid(want) || version.Compare(want, have) <= 0 {
		return ""
	}
	dir := filepath.Join(modcache, "golang.org", "toolchain@v0.0.1-"+want+"."+runtime.GOOS+"-"+runtime.GOARCH)
	if _, err := os.Stat(dir); err == nil {
		return ""
	}
	return fmt.Sprintf("%s asks for %s and this machine has %s: the go command downloads it first from the module proxy (about 70 MB: a minute or more), then builds; later runs reuse it", why, want, have)
}

// wantedToolchain is the toolchain a build switches to, as the go command
// chooses it: GOTOOLCHAIN's version, else (auto) the higher of go.mod's go
// and toolchain lines; why names where it was asked.
func wantedToolchain(gomod, gotoolchain string) (want, why string) {
	name, _, _ := strings.Cut(gotoolchain, "+")
	switch {
	case name == "local" || name == "path":
		return "", ""
	case strings.HasPrefix(name, "go"):
		return name, "GOTOOLCHAIN"
	}
	fh, err := os.Open(gomod)
	if err != nil {
		return "", ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		var v string
		switch {
		case len(w) >= 2 && w[0] == "go":
			v = "go" + w[1]
		case len(w) >= 2 && w[0] == "toolchain":
			v = w[1]
		default:
			continue
		}
		if version.IsValid(v) && (want == "" || version.Compare(v, want) > 0) {
			want, why = v, "go.mod's "+w[0]+" line"
		}
	}
	return want, why
}

// envValue is the last value of key in env.
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// withEnv is env with kv set last.
func withEnv(env []string, kv string) []string {
	return append(append([]string(nil), env...), kv)
}

// heartbeatEvery is how often a build that is still going says so.
var heartbeatEvery = 20 * time.Second

// heartbeat says every heartbeatEvery, until stop returns, that the
// build of spec is still going and for how long.
func heartbeat(spec string, logf func(string, ...any)) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(exited)
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				logf("still building %s: %s so far (a first build with perfspy's overlays compiles the runtime and the standard library again; the next reuse them)", spec, time.Since(start).Round(time.Second))
			}
		}
	}()
	// Nothing is said once stop returns (the build's own lines follow).
	return func() { close(done); <-exited }
}
