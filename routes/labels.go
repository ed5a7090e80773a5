package routes

import (
	_ "embed"
	"os"
	"path/filepath"

	"github.com/perfspy/perfspy/internal/capability"
)

//go:embed pprof/zz_perfspy_labels.go.txt
var labelsGo string

// GRPCLabelsEnv is grpc-go's switch (1.83 and later) that labels the
// goroutine of each call its server serves with grpc.method; GRPCLabelsOn
// turns it on. probe sets it, so that PprofOverlay can mark the call.
const (
	GRPCLabelsEnv = "GRPC_GO_SERVER_GOROUTINE_LABELS"
	GRPCLabelsOn  = "grpc.method=true"
)

// PprofOverlay marks the calls grpc-go's own server serves (not through
// net/http) with their method as the route: runtime/pprof's
// SetGoroutineLabels, which grpc-go calls on each call's goroutine when
// GRPCLabelsEnv is on, sets the mark from the grpc.method label. It
// returns the go build -overlay Replace entries, written into dir.
func PprofOverlay(goroot, dir string) (map[string]string, error) {
	src := filepath.Join(goroot, "src", "runtime", "pprof")
	files, err := ApplyEdits(src, "gRPC calls", []Edit{{File: "runtime.go",
		Old: "\truntime_setProfLabel(unsafe.Pointer(ctxLabels))\n}\n",
		New: "\truntime_setProfLabel(unsafe.Pointer(ctxLabels)); perfspyLabels(ctxLabels)\n}\n"}})
	if err != nil {
		return nil, err
	}
	name := filepath.Join(src, "zz_perfspy_labels.go")
	if _, err := os.Stat(name); err == nil {
		return nil, capability.Shape("gRPC calls", "%s already exists in GOROOT", name)
	}
	files[name] = envReplacer().Replace(labelsGo)
	out := map[string]string{}
	for path, text := range files {
		dst := filepath.Join(dir, "pprof_"+filepath.Base(path))
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return nil, err
		}
		out[path] = dst
	}
	return out, nil
}
