package withagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A module/path@version target's test binaries are kept between runs:
// everything they are built from is fixed (the module's files, which the
// checksum database holds, and those of the versions its go.mod
// requires), but the toolchain, its environment and perfspy's overlays.
// Those make the key; when it matches what the binaries were built
// with, and they are as they were written, the go command is not run:
// its check that nothing changed costs a fixed -benchtime run more than
// the benchmarks' own time (0.25 s a build on logrus, two builds).

// keptKey is the key of the test binaries of b's build: the target, the
// go command's environment (go env -json, but the build's own temporary
// folder), the build's flags, the overlay's files by content, and the
// module's go.mod and go.sum.
func (b *builder) keptKey(ctx context.Context) (string, error) {
	out, err := goOut(ctx, b.setup.Dir, b.setup.Env, "env", "-json")
	if err != nil {
		return "", err
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		return "", fmt.Errorf("go env -json: %w", err)
	}
	// A run's own: its temporary folder, and GOGCCFLAGS, which names a
	// folder in it (and is made of CC and the CGO_ flags, which stay).
	delete(env, "GOTMPDIR")
	delete(env, "GOGCCFLAGS")
	h := sha256.New()
	fmt.Fprintf(h, "%q\x00%q\x00%q\x00%q\x00", b.t.Spec, b.setup.Pkg, b.setup.Flags, b.opts.Tags)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(h, "%s=%s\x00", k, env[k])
	}
	for _, from := range slices.Sorted(maps.Keys(b.replace)) {
		data, err := os.ReadFile(b.replace[from])
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", from, len(data))
		h.Write(data)
	}
	// The module's go.mod and go.sum as the build reads them: -mod=mod
	// may have completed them in the copy.
	for _, name := range []string{"go.mod", "go.sum"} {
		data, _ := os.ReadFile(filepath.Join(b.t.ModDir, name))
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// keptStamp is a binary as it was written: its size and modification
// time, which the go command sets anew when it writes one.
func keptStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return fmt.Sprintf("%d %d", st.Size(), st.ModTime().UnixNano())
}

// keptFile is where the key of the binaries at bin is written.
func keptFile(bin string) string { return bin + ".key" }

// kept reports whether the test binaries of t were built with key and
// are as they were written then.
func kept(t *Binary, key string) bool {
	b, err := os.ReadFile(keptFile(t.Binary))
	if err != nil {
		return false
	}
	want := key + "\n" + keptStamp(t.Binary) + "\n" + keptStamp(t.PlainBinary) + "\n"
	return !strings.Contains(want, "\n\n") && string(b) == want
}

// keep writes key beside the test binaries just built; a failure costs
// the next run a go command.
func keep(t *Binary, key string) {
	a, p := keptStamp(t.Binary), keptStamp(t.PlainBinary)
	if a == "" || p == "" {
		return
	}
	path := keptFile(t.Binary)
	tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
	if os.WriteFile(tmp, []byte(key+"\n"+a+"\n"+p+"\n"), 0o644) != nil || os.Rename(tmp, path) != nil {
		os.Remove(tmp)
	}
}
