// Package srcroot finds this module's source tree, which builds with
// overlays need: the agent and the copyspy reader are compiled into targets
// from it.
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
		if _, err := os.Stat(filepath.Join(root, "probe", "agent", "agent.go")); err == nil {
			return root, nil
		}
	}
	return "", errors.New("cannot find the perfspy source tree; set PERFSPY_ROOT")
}
