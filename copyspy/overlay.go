// Package copyspy counts the bytes a Go program copies (memmove) and clears
// (memclrNoHeapPointers), per call site, exactly.
//
// In-process mode adds a recorder to the runtime through a build-time
// overlay: Overlay patches the local GOROOT's memmove_amd64.s and
// memclr_amd64.s so that their entry calls runtime·copyspyRecord, a
// NOSPLIT|NOFRAME assembly function that keys a lock-free table by a hash of
// the direct caller and the frame-pointer chain above it. The package
// agent/copytable, added to the target's package main by the same overlay,
// reads the table for the probe agent.
//
// Blind spots: copies the compiler inlines never reach memmove. These are
// constant sizes up to 16 bytes, array and struct assignment (REP MOVSQ or
// unrolled moves), and inline zeroing.
package copyspy

import (
	_ "embed"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/routes"
)

//go:embed runtime/zz_copyspy.go.txt
var runtimeGo string

//go:embed runtime/zz_copyspy_amd64.s.txt
var runtimeAsm string

// patch is one edit of a GOROOT file: the line `entry` becomes `frameless`
// followed by `call`. NOFRAME keeps the function without a frame, as it was:
// with a CALL in it the assembler would otherwise push BP, and the recorder
// relies on 8(SP) being the caller's return address and BP the caller's
// frame pointer. The contract lines must follow the entry unchanged: they
// are the register assignment the recorder relies on.
type patch struct {
	file      string
	entry     string
	frameless string
	call      string
	contract  []string
}

var patches = []patch{
	{
		file:      "memmove_amd64.s",
		entry:     "TEXT runtime·memmove<ABIInternal>(SB), NOSPLIT, $0-24",
		frameless: "TEXT runtime·memmove<ABIInternal>(SB), NOSPLIT|NOFRAME, $0-24",
		call:      idleSkip("copyspyMove"),
		contract:  []string{"// AX = to", "// BX = from", "// CX = n"},
	},
	{
		file:      "memclr_amd64.s",
		entry:     "TEXT runtime·memclrNoHeapPointers<ABIInternal>(SB), NOSPLIT, $0-16",
		frameless: "TEXT runtime·memclrNoHeapPointers<ABIInternal>(SB), NOSPLIT|NOFRAME, $0-16",
		call:      idleSkip("copyspyClr"),
		contract:  []string{"// AX = ptr", "// BX = n"},
	},
}

// idleSkip is the call into the recorder behind its switch, on one line:
// while no recorder counts every goroutine and no goroutine of a sampled
// request lives (runtime.perfspyGate 0: probe build's binary unconfigured,
// or sampling between sampled requests), a memmove pays one load and one
// branch, not a call (0.0 to 0.3 ns against 0.2 to 1.1 ns:
// docs/copyspy.md); else its switch, and in its sampled mode (2) the
// mark's sampled bit (62), are tested before the call.
func idleSkip(recorder string) string {
	return "\tCMPL\truntime·perfspyGate(SB), $0; JEQ copyspyidle; CMPL runtime·copyspyOn(SB), $0; JEQ copyspyidle; CMPL runtime·copyspyOn(SB), $2; JNE copyspyrec; " +
		"TESTQ R14, R14; JEQ copyspyrec; BTQ $62, g_perfspyMark(R14); JCC copyspyidle; copyspyrec: CALL runtime·" + recorder + "(SB); copyspyidle:"
}

// Overlay writes the patched runtime files into dir and returns the
// go build -overlay Replace entries for them, keyed by GOROOT paths.
func Overlay(goroot, goarch, dir string) (map[string]string, error) {
	if goarch != "amd64" {
		return nil, capability.Shape("copyspy overlay", "GOARCH=%s (amd64 only)", goarch)
	}
	rt := filepath.Join(goroot, "src", "runtime")
	out := map[string]string{}
	for _, p := range patches {
		src := filepath.Join(rt, p.file)
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, capability.Shape("copyspy overlay", "%v", err)
		}
		patched, err := applyPatch(string(b), p)
		if err != nil {
			return nil, capability.Shape("copyspy overlay", "%s: %v (a Go release this overlay does not know)", src, err)
		}
		dst := filepath.Join(dir, p.file)
		if err := os.WriteFile(dst, []byte(patched), 0o644); err != nil {
			return nil, err
		}
		out[src] = dst
	}
	for name, text := range map[string]string{"zz_copyspy.go": runtimeGo, "zz_copyspy_amd64.s": runtimeAsm} {
		if _, err := os.Stat(filepath.Join(rt, name)); err == nil {
			return nil, capability.Shape("copyspy overlay", "%s already exists in GOROOT", name)
		}
		dst := filepath.Join(dir, name)
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return nil, err
		}
		out[filepath.Join(rt, name)] = dst
	}
	// The recorder keys sites by the request mark.
	mark, err := routes.RuntimeOverlay(goroot, dir)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, mark)
	return out, nil
}

// applyPatch inserts p.call after the single line equal to p.entry, and
// checks that the register contract lines follow it.
func applyPatch(src string, p patch) (string, error) {
	lines := strings.Split(src, "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == p.entry {
			if at >= 0 {
				return "", fmt.Errorf("%q appears twice", p.entry)
			}
			at = i
		}
	}
	if at < 0 {
		return "", fmt.Errorf("no line %q", p.entry)
	}
	// The contract comments sit right below the entry.
	for j, c := range p.contract {
		if at+1+j >= len(lines) || strings.TrimSpace(lines[at+1+j]) != c {
			return "", fmt.Errorf("line %d after %q is not %q", j+1, p.entry, c)
		}
	}
	out := make([]string, 0, len(lines)+1)
	out = append(out, lines[:at]...)
	out = append(out, p.frameless, p.call)
	out = append(out, lines[at+1:]...)
	return strings.Join(out, "\n"), nil
}
