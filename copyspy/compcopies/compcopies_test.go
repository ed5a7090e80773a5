package compcopies

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// TestFind: in a real build, the 176-byte row is copied by eleven 16-byte
// vector stores, and the 2400-byte block by a REP; MOVSQ whose count, 300,
// the compiler set just before it; a clear (a store from X15) is no copy.
func TestFind(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "copies")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/copies")
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	widths := map[string][]Move{}
	for _, fn := range []string{"main.copyRow", "main.copyBlocks"} {
		addrs := addrsOf(t, bin, fn)
		moves, err := Find(bin, addrs)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if m, ok := moves[a]; ok {
				widths[fn] = append(widths[fn], m)
			}
		}
	}
	if rs := widths["main.copyRow"]; len(rs) != 11 || rs[0].Width != 16 || rs[0].Rep {
		t.Errorf("copyRow's moves: %+v, want 11 16-byte stores", rs)
	}
	bs := widths["main.copyBlocks"]
	if len(bs) != 1 || !bs[0].Rep || bs[0].Width != 8 || bs[0].Count != 300 || bs[0].CountAt == 0 {
		t.Fatalf("copyBlocks' moves: %+v, want one REP; MOVSQ of 300", bs)
	}
	if got := bs[0].Bytes(602, 2); got != 4800 {
		t.Errorf("two runs of the block's copy: %d bytes, want 4800", got)
	}
	if got := bs[0].Bytes(602, 0); got != 8*602 {
		t.Errorf("the count's instruction not counted: %d bytes, want the bound 8 × 602", got)
	}
}

// addrsOf decodes a function of bin from its first instruction to its
// end and returns each instruction's address.
func addrsOf(t *testing.T, bin, fn string) []uint64 {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	code, _ := text.Data()
	for _, s := range syms {
		if s.Name != fn {
			continue
		}
		var out []uint64
		for a := s.Value; a < s.Value+s.Size; {
			in, err := x86asm.Decode(code[a-text.Addr:], 64)
			if err != nil {
				a++
				continue
			}
			out = append(out, a)
			a += uint64(in.Len)
		}
		return out
	}
	t.Fatalf("no symbol %s", fn)
	return nil
}
