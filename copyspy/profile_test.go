package copyspy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
)

func frames(pc uint64, fns ...string) wire.PCFrames {
	pf := wire.PCFrames{PC: pc}
	for i, f := range fns {
		pf.Frames = append(pf.Frames, wire.Frame{Func: f, File: "x.go", Line: i + 1})
	}
	return pf
}

func sampleReport() *wire.CopyReport {
	return &wire.CopyReport{Sites: []wire.CopySite{
		{Kind: "memmove", Stack: []wire.PCFrames{frames(0x20, "runtime.slicebytetostring"), frames(0x30, "main.str100"), frames(0x40, "main.handler")},
			Calls: [4]uint64{0, 10, 0, 0}, Bytes: [4]uint64{0, 1000, 0, 0}},
		// Another stack to the same user site: grouped with the first.
		{Kind: "memmove", Stack: []wire.PCFrames{frames(0x20, "runtime.slicebytetostring"), frames(0x31, "main.str100"), frames(0x50, "main.other")},
			Calls: [4]uint64{0, 5, 0, 0}, Bytes: [4]uint64{0, 500, 0, 0}},
		// An inlined frame: bytes.(*Buffer).Write inlined into main.bufWrites.
		{Kind: "memmove", Stack: []wire.PCFrames{frames(0x60, "bytes.(*Buffer).Write", "main.bufWrites")},
			Calls: [4]uint64{3, 7, 0, 1}, Bytes: [4]uint64{30, 1400, 0, 20000}},
		{Kind: "memclr", Stack: []wire.PCFrames{frames(0x70, "runtime.(*fixalloc).alloc"), frames(0x80, "runtime.systemstack")},
			Calls: [4]uint64{4, 0, 0, 0}, Bytes: [4]uint64{64, 0, 0, 0}},
	}}
}

func TestProfile(t *testing.T) {
	p := Profile(sampleReport())
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	// Copies and clears are sample types of their own: a memclr sample's
	// copy pair is 0, a memmove sample's clear pair.
	var calls, nbytes, clears, cleared int64
	for _, s := range p.Sample {
		calls += s.Value[0]
		nbytes += s.Value[1]
		clears += s.Value[2]
		cleared += s.Value[3]
		if len(s.Label["bucket"]) != 1 || len(s.Label["kind"]) != 1 {
			t.Errorf("sample labels %v", s.Label)
		}
		if k := s.Label["kind"][0]; k == "memclr" && s.Value[0]+s.Value[1] != 0 || k == "memmove" && s.Value[2]+s.Value[3] != 0 {
			t.Errorf("a %s sample with values %v", k, s.Value)
		}
	}
	if calls != 26 || nbytes != 1000+500+30+1400+20000 || clears != 4 || cleared != 64 {
		t.Errorf("profile totals: %d calls %d bytes copied, %d calls %d bytes cleared", calls, nbytes, clears, cleared)
	}
	if len(p.SampleType) != 4 || p.SampleType[3].Type != "cleared_bytes" || p.DefaultSampleType != "copied_bytes" || p.Comments[0] != ProfileVersion {
		t.Errorf("types %v, default %s, comments %v", p.SampleType, p.DefaultSampleType, p.Comments)
	}
	if len(p.Sample) != 6 {
		t.Errorf("%d samples, want one per stack and bucket: 6", len(p.Sample))
	}
	// The inlined PC is one location with two lines, innermost first.
	for _, l := range p.Location {
		if l.Address == 0x60 && (len(l.Line) != 2 || l.Line[0].Function.Name != "bytes.(*Buffer).Write") {
			t.Errorf("inlined location lines %+v", l.Line)
		}
	}
	// Written and read back through the pprof encoder, unchanged.
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Sample) != len(p.Sample) || q.SampleType[1].Type != "copied_bytes" {
		t.Errorf("round trip: %d samples, types %v", len(q.Sample), q.SampleType)
	}
	// Deterministic: the same report in another order writes the same bytes.
	r := sampleReport()
	r.Sites[0], r.Sites[3] = r.Sites[3], r.Sites[0]
	var buf2, buf3 bytes.Buffer
	Profile(r).WriteUncompressed(&buf2)
	p.WriteUncompressed(&buf3)
	if !bytes.Equal(buf2.Bytes(), buf3.Bytes()) {
		t.Error("profile depends on the order of the report")
	}
}

func TestSites(t *testing.T) {
	sites := Sites(sampleReport())
	if len(sites) != 3 {
		t.Fatalf("%d sites, want 3: %+v", len(sites), sites)
	}
	want := []struct {
		user, direct string
		calls, bytes int64
	}{
		{"bytes.(*Buffer).Write", "bytes.(*Buffer).Write", 11, 21430},
		{"main.str100", "runtime.slicebytetostring", 15, 1500},
		{"runtime.(*fixalloc).alloc", "runtime.(*fixalloc).alloc", 4, 64},
	}
	for i, w := range want {
		s := sites[i]
		if s.User != w.user || s.Direct != w.direct || s.TotalCalls() != w.calls || s.TotalBytes() != w.bytes {
			t.Errorf("site %d = %s via %s %d/%d, want %s via %s %d/%d", i, s.User, s.Direct, s.TotalCalls(), s.TotalBytes(), w.user, w.direct, w.calls, w.bytes)
		}
	}
}

func TestReadReport(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadReport(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file: no error")
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	if _, err := ReadReport(bad); err == nil {
		t.Error("bad json: no error")
	}
}
