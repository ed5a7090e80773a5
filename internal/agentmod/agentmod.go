// Package agentmod writes the probe agent out as a Go module of its own,
// github.com/perfspy/perfspy/agent, from the sources embedded in perfspy's
// binaries. The module has no requirements and a go line below any target's,
// so that adding it to a target's build changes no other module's version
// and no language semantics of the target.
package agentmod

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/perfspy/perfspy"
	"github.com/perfspy/perfspy/internal/cache"
)

// Path is the agent module's path, and the import path of the agent.
const Path = "github.com/perfspy/perfspy/agent"

// GoLine is the agent module's go line: the oldest language version its
// code compiles with, so that it never raises a target's.
const GoLine = "1.18"

// Module is the agent module as written for one build.
type Module struct {
	Dir     string // the module's root; holds go.mod
	Version string // a pseudo-version naming its contents
	Files   map[string][]byte
}

// Files returns the agent module's files, by slash path relative to its
// root: go.mod and the packages' non-test Go and assembly files.
func Files() (map[string][]byte, error) {
	files := map[string][]byte{"go.mod": []byte("module " + Path + "\n\ngo " + GoLine + "\n")}
	err := fs.WalkDir(perfspy.AgentSource, "agent", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") || (path.Ext(p) != ".go" && path.Ext(p) != ".s") {
			return nil
		}
		b, err := perfspy.AgentSource.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, "agent/")] = b
		return nil
	})
	return files, err
}

// Version returns the pseudo-version that names files' contents.
func Version(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return "v0.0.0-00010101000000-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// Write writes the agent module under cache/agent/<version>. A folder
// that exists is compared file by file with the embedded sources before
// every build and replaced when it differs in anything: the cache is
// never trusted because a file is there.
func Write(cacheDir string) (*Module, error) {
	files, err := Files()
	if err != nil {
		return nil, fmt.Errorf("agent sources: %w", err)
	}
	m := &Module{Version: Version(files), Files: files}
	m.Dir = filepath.Join(cacheDir, "agent", m.Version)
	if err := cache.Install(m.Dir, files); err != nil {
		return nil, err
	}
	return m, nil
}

// Packages returns the import paths of the module's packages, sorted.
func Packages(files map[string][]byte) []string {
	seen := map[string]bool{}
	for n := range files {
		if n == "go.mod" {
			continue
		}
		d := path.Dir(n)
		if d == "." {
			seen[Path] = true
		} else {
			seen[Path+"/"+d] = true
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
