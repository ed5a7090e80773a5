package withagent

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The standard library under the runtime overlays is compiled once per
// overlay content, toolchain and environment, then served by the go
// command's build cache: the first such build takes about 80 s on two
// cores, later ones a few. A stamp in probe's cache, written after a
// build succeeds, tells which case a build is, so that the run says "the
// first build rebuilds the standard library" only when it does. The stamp
// can outlive the build cache's entry (go clean -cache, or entries unused
// for days): the line is then missing from a slow build. A build cache
// filled without the stamp (by an earlier probe) says the line once on a
// fast build.

// stdKey names a build of the standard library: the toolchain, the
// environment that changes its compiled code, and the content of each
// overlay entry (the paths are private folders that differ per run).
func (b *builder) stdKey(replace map[string]string) string {
	h := sha256.New()
	tc := b.setup.Toolchain
	for _, s := range []string{tc.GOROOT, tc.GOVERSION, tc.GOARCH, tc.GOEXPERIMENT, strings.Join(b.opts.Tags, ",")} {
		h.Write([]byte(s + "\x00"))
	}
	for _, kv := range b.setup.Env {
		for _, name := range []string{"GOFLAGS=", "GOCACHE=", "CGO_ENABLED=", "GOAMD64=", "GOARM64=", "GOOS="} {
			if strings.HasPrefix(kv, name) {
				h.Write([]byte(kv + "\x00"))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(replace)) {
		if !strings.HasPrefix(k, tc.GOROOT+string(filepath.Separator)) {
			continue // the target's own files: compiled every build anyway
		}
		data, _ := os.ReadFile(replace[k])
		sum := sha256.Sum256(data)
		h.Write([]byte(k + "\x00"))
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// stdStamp is the stamp's path for key.
func (b *builder) stdStamp(key string) string {
	return filepath.Join(b.cache, "std-built", key)
}

// stdBuiltBefore says whether a build with these overlay entries
// succeeded before in this cache.
func (b *builder) stdBuiltBefore(key string) bool {
	_, err := os.Stat(b.stdStamp(key))
	return err == nil
}

// markStdBuilt records a successful build; a failure to write it costs
// only a line of advice on the next run.
func (b *builder) markStdBuilt(key string) {
	p := b.stdStamp(key)
	if os.MkdirAll(filepath.Dir(p), 0o700) == nil {
		_ = os.WriteFile(p, nil, 0o600)
	}
}

// firstBuildNote is the clause a build's line carries when the standard
// library will be compiled under the overlays: "" when it was before.
func (b *builder) firstBuildNote(key string) string {
	if b.stdBuiltBefore(key) {
		return ""
	}
	return " (the first build with these overlays rebuilds the standard library: about 80 s on 2 cores; later builds reuse it)"
}
