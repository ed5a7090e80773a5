package withagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/semver"
)

// resolved is what go get and go list said of module/path@version: the
// package's name and folder, and its module's path, version and folder
// in the module cache.
type resolved struct {
	Name, Dir, ModPath, ModVersion, ModDir string
}

// resolvedPath is where the resolution of spec is kept, or "" when it may
// change: only an exact version (a release or a pseudo-version) names the
// same module files for ever (the checksum database holds the proxy to
// them), where a query (latest, a branch) moves. The environment that
// chooses the module cache and the go command's flags is in the key.
func resolvedPath(cacheRoot, spec string) string {
	_, version, _ := strings.Cut(spec, "@")
	// v1 and v1.2 are queries too: only a whole version is its canonical form.
	if c := semver.Canonical(version); c == "" || version != c && version != c+"+incompatible" {
		return ""
	}
	key := strings.Join([]string{spec, os.Getenv("GOMODCACHE"), os.Getenv("GOPATH"), os.Getenv("GOFLAGS"), os.Getenv("GOTOOLCHAIN")}, "\x00")
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(cacheRoot, "resolved", hex.EncodeToString(sum[:8])+".json")
}

// loadResolved reads the resolution kept at path: ok only when its module
// and package folders are still in the module cache (go clean -modcache
// empties it, and the slow way fetches them again).
func loadResolved(path string) (resolved, bool) {
	var r resolved
	if path == "" {
		return r, false
	}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &r) != nil || r.Dir == "" || r.ModDir == "" {
		return resolved{}, false
	}
	for _, d := range []string{r.ModDir, r.Dir} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return resolved{}, false
		}
	}
	return r, true
}

// saveResolved keeps r at path; a failure costs the next run a go get.
func saveResolved(path string, r resolved) {
	if path == "" {
		return
	}
	b, _ := json.Marshal(r)
	if os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	tmp := path + ".tmp" + fmt.Sprint(os.Getpid())
	if os.WriteFile(tmp, b, 0o644) != nil || os.Rename(tmp, path) != nil {
		os.Remove(tmp)
	}
}

// resolve runs go get spec and go list of its package in an empty
// module, as go install module@version resolves it.
func resolve(ctx context.Context, spec, work string) (resolved, error) {
	path, _, _ := strings.Cut(spec, "@")
	wrap := filepath.Join(work, "wrap")
	if err := os.Mkdir(wrap, 0o755); err != nil {
		return resolved{}, err
	}
	if err := writeWrapModule(wrap); err != nil {
		return resolved{}, err
	}
	wrapEnv := append(os.Environ(), "GOWORK=off", "GOTMPDIR="+filepath.Join(work, "gotmp"))
	if out, err := goCmd(ctx, wrap, wrapEnv, "get", spec); err != nil {
		return resolved{}, &BuildError{Spec: spec, Output: out, Err: err}
	}
	out, err := goCmd(ctx, wrap, wrapEnv, "list", "-f", "{{.Name}}\t{{.Dir}}\t{{.Module.Path}}\t{{.Module.Version}}\t{{.Module.Dir}}", path)
	if err != nil {
		return resolved{}, &BuildError{Spec: spec, Output: out, Err: err}
	}
	f := strings.Split(strings.TrimSpace(out), "\t")
	if len(f) != 5 {
		return resolved{}, fmt.Errorf("target %s: unexpected go list output %q", spec, out)
	}
	return resolved{Name: f[0], Dir: f[1], ModPath: f[2], ModVersion: f[3], ModDir: f[4]}, nil
}
