// Package srcroot finds this module's source tree, from which perfspy's own
// targets are built (the default target, -floor, probe bulk, the bench
// commands and the tests). Building a user's target does not need it: the
// agent's sources are embedded in probe.
package srcroot

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// Dir returns the root of this module's source tree: $PERFSPY_ROOT when
// set, else the tree this binary was built from.
func Dir() (string, error) {
	if r := os.Getenv("PERFSPY_ROOT"); r != "" {
		return filepath.Abs(r)
	}
	_, file, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if _, err := os.Stat(filepath.Join(root, "agent", "agent.go")); err == nil {
			return root, nil
		}
	}
	return "", errors.New("cannot find the perfspy source tree; set PERFSPY_ROOT")
}
