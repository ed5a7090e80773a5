// Package copyspy counts the bytes a Go program copies (memmove) and clears
// (memclrNoHeapPointers), per call site, exactly.
//
// In-process mode adds a recorder to the runtime through a build-time
// overlay: Overlay patches the local GOROOT's memmove and memclr (amd64 and
// arm64 assembly) so that their entry calls runtime·copyspyRecord, a
// NOSPLIT|NOFRAME assembly function that keys a lock-free table by a hash of
// the direct caller and the frame-pointer chain above it. The package
// agent/copytable, added to the target's package main by the same overlay,
// reads the table for the probe agent.
//
// Blind spots: copies the compiler inlines never reach memmove. These are
// constant sizes up to 16 bytes, array and struct assignment (REP MOVSQ,
// DUFFCOPY or unrolled moves), and inline zeroing.
package copyspy

import (
	_ "embed"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/gorelease"
	"github.com/perfspy/perfspy/routes"
)

//go:embed runtime/zz_copyspy.go.txt
var runtimeGo string

//go:embed runtime/zz_copyspy_amd64.s.txt
var runtimeAsmAMD64 string

//go:embed runtime/zz_copyspy_arm64.s.txt
var runtimeAsmARM64 string

// runtimeAsm is the recorder, by GOARCH.
var runtimeAsm = map[string]string{"amd64": runtimeAsmAMD64, "arm64": runtimeAsmARM64}

// patch is one edit of a GOROOT file: the line `entry` becomes `frameless`
// followed by `call`. NOFRAME keeps the function without a frame, as it was:
// with a CALL in it the assembler would otherwise push BP (amd64) or save
// LR (arm64), and the recorder relies on the caller's return address
// (8(SP) on amd64, LR saved in R3 on arm64) and frame pointer being
// where the function found them. The contract lines must follow the entry
// unchanged: they are the register assignment the recorder relies on.
// asmH adds go_asm.h (for g_perfspyMark) to a file that lacks it: one
// more line.
type patch struct {
	file      string
	entry     string
	frameless string
	call      string
	contract  []string
	asmH      bool
}

// patches are the edits, by GOARCH.
var patches = map[string][]patch{"amd64": patchesAMD64, "arm64": patchesARM64}

var patchesAMD64 = []patch{
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

var patchesARM64 = []patch{
	{
		file:      "memmove_arm64.s",
		entry:     "TEXT runtime·memmove<ABIInternal>(SB), NOSPLIT|NOFRAME, $0-24",
		frameless: "TEXT runtime·memmove<ABIInternal>(SB), NOSPLIT|NOFRAME, $0-24",
		call:      idleSkipARM64("copyspyMove"),
		contract:  []string{"CBZ\tR2, copy0"},
		asmH:      true,
	},
	{
		file:      "memclr_arm64.s",
		entry:     "TEXT runtime·memclrNoHeapPointers<ABIInternal>(SB),NOSPLIT,$0-16",
		frameless: "TEXT runtime·memclrNoHeapPointers<ABIInternal>(SB),NOSPLIT|NOFRAME,$0-16",
		call:      idleSkipARM64("copyspyClr"),
		contract:  []string{"CMP\t$16, R1"},
		asmH:      true,
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

// idleSkipARM64 is idleSkip for arm64. Around the BL, the return address
// (LR) is kept where a 16-byte frame holds it, 0(RSP): stored below the
// stack pointer first, then SUB $16, RSP, which the assembler records as
// the frame's size (a MOVD.W it does not), so that at every instruction
// the runtime's unwinder, from a signal (the CPU profiler's), finds
// memmove's caller: in LR, or at 0(SP) while the frame is 16 bytes. Go
// runs signal handlers on their own stack and memmove is no async
// preemption point, so nothing writes below RSP meanwhile. R3 (free at
// the entry of memmove and memclr) holds the address too, for the
// recorder, which keeps R3.
func idleSkipARM64(recorder string) string {
	return "\tMOVWU\truntime·perfspyGate(SB), R3; CBZW R3, copyspyidle; MOVWU runtime·copyspyOn(SB), R3; CBZW R3, copyspyidle; CMPW $2, R3; BNE copyspyrec; " +
		"MOVD g_perfspyMark(g), R3; TBZ $62, R3, copyspyidle; copyspyrec: MOVD R30, -16(RSP); SUB $16, RSP; MOVD R30, R3; BL runtime·" + recorder + "(SB); MOVD (RSP), R30; ADD $16, RSP; copyspyidle:"
}

// Overlay writes the patched runtime files into dir and returns the
// go build -overlay Replace entries for them, keyed by GOROOT paths.
func Overlay(goroot, goarch, dir string) (map[string]string, error) {
	if patches[goarch] == nil {
		return nil, capability.Shape("copyspy overlay", "GOARCH=%s (amd64 and arm64 only)", goarch)
	}
	// memmove's and memclr's entries are the same on every release known.
	if _, err := gorelease.Of("copyspy overlay", goroot, "copies are n/a; a built binary's copies can still be counted with copyspy attach (root)", gorelease.Supported); err != nil {
		return nil, err
	}
	rt := filepath.Join(goroot, "src", "runtime")
	out := map[string]string{}
	for _, p := range patches[goarch] {
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
	for name, text := range map[string]string{"zz_copyspy.go": runtimeGo, "zz_copyspy_" + goarch + ".s": runtimeAsm[goarch]} {
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
	out := make([]string, 0, len(lines)+2)
	out = append(out, lines[:at]...)
	out = append(out, p.frameless, p.call)
	out = append(out, lines[at+1:]...)
	if p.asmH {
		return addAsmH(out)
	}
	return strings.Join(out, "\n"), nil
}

// addAsmH puts go_asm.h before the file's single textflag.h include.
func addAsmH(lines []string) (string, error) {
	const flags = `#include "textflag.h"`
	for i, l := range lines {
		if strings.TrimSpace(l) == flags {
			out := append(append(append([]string(nil), lines[:i]...), `#include "go_asm.h"`), lines[i:]...)
			return strings.Join(out, "\n"), nil
		}
	}
	return "", fmt.Errorf("no line %q", flags)
}
