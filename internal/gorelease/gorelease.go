// Package gorelease names the Go release of a GOROOT, the key under which
// every runtime overlay (allocspy, copyspy, the request marks, the
// benchmark window) keeps the shapes it patches, one entry per release.
// Adding a release is adding that entry to each overlay, checked by the
// overlay's layout test against that release's GOROOT (docs/design.md,
// "Supported Go releases").
package gorelease

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/capability"
)

// Supported are the releases every overlay knows, oldest first: Go's two
// supported releases.
var Supported = []string{"go1.26", "go1.27"}

// Version is a GOROOT's full version ("go1.27.3") from its VERSION file.
func Version(goroot string) (string, error) {
	b, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return "", err
	}
	v, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(v), nil
}

var releaseRE = regexp.MustCompile(`^go1\.(\d+)`)

// Release is the release a full version belongs to: "go1.27" for
// go1.27.3 and go1.27rc1; "" for a development build.
func Release(version string) string {
	m := releaseRE.FindString(version)
	return m
}

// Of reads goroot's release and checks that it is one of known (an
// overlay's entries). An unknown one is a *capability.ShapeError that
// names the release, what the overlay knows, and what still works
// without it (without, e.g. "allocations fall back to the heap profile
// at MemProfileRate=1"), never a silent undercount.
func Of(what, goroot, without string, known []string) (string, error) {
	v, err := Version(goroot)
	if err != nil {
		return "", capability.Shape(what, "cannot read the Go release of %s: %v", goroot, err)
	}
	rel := Release(v)
	if rel == "" || !slices.Contains(known, rel) {
		return "", capability.Shape(what, "%s is not a Go release this perfspy knows (it knows %s; a release is added as one reviewed entry per overlay, docs/design.md)%s",
			v, strings.Join(known, ", "), suffix(without))
	}
	return rel, nil
}

func suffix(without string) string {
	if without == "" {
		return ""
	}
	return fmt.Sprintf("; %s", without)
}

// Tested are the full versions the tests build with, by release: the
// newest patch release of each when it was added. The local toolchain is
// used when it is of that release.
var Tested = map[string]string{"go1.26": "go1.26.8", "go1.27": "go1.27.3"}

// GOROOT returns the GOROOT of release's tested version (Tested): the
// local toolchain's when it is of that release, else the one the go
// command fetches for GOTOOLCHAIN (from the module proxy, about 10 s the
// first time). The layout tests check each overlay's entry against it.
func GOROOT(release string) (string, error) {
	v, ok := Tested[release]
	if !ok {
		return "", fmt.Errorf("no tested version of %s", release)
	}
	cmd := exec.Command("go", "env", "GOROOT", "GOVERSION")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := cmd.Output(); err == nil {
		f := strings.Fields(string(out))
		if len(f) == 2 && Release(f[1]) == release {
			return f[0], nil
		}
	}
	cmd = exec.Command("go", "env", "GOROOT")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+v)
	var stderr strings.Builder
	cmd.Stderr = &stderr // "go: downloading go1.27.3 ..." the first time
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("GOTOOLCHAIN=%s go env GOROOT: %w: %s", v, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// toolchainName is what GOTOOLCHAIN may be: local, auto, path, or a Go
// release (go1.27, go1.27.3, go1.28rc1) with +auto or +path.
var toolchainName = regexp.MustCompile(`^(local|auto|path|go1(\.[0-9]+){1,2}((rc|beta)[0-9]+)?(\+(auto|path))?)$`)

// CheckToolchain refuses a toolchain name GOTOOLCHAIN would not take,
// before anything is built with it: flag names the flag that gave it.
func CheckToolchain(flag, v string) error {
	if !toolchainName.MatchString(v) {
		return fmt.Errorf("%s %q: want a Go release (go1.27.3), local, auto or path, as GOTOOLCHAIN takes them", flag, v)
	}
	return nil
}
