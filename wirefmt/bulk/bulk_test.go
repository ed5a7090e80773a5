package bulk

import (
	"bytes"
	"testing"
)

// Fill and Check agree with At at every alignment, and Check finds the
// first wrong byte, including a chunk moved to another offset.
func TestPattern(t *testing.T) {
	for _, off := range []int64{0, 1, 7, 8, 4093, 1 << 20} {
		for _, n := range []int{0, 1, 7, 8, 9, 100, 1500} {
			b := make([]byte, n)
			Fill(b, off)
			for i := range b {
				if b[i] != At(off+int64(i)) {
					t.Fatalf("Fill(%d bytes at %d): byte %d is %#x, At says %#x", n, off, i, b[i], At(off+int64(i)))
				}
			}
			if got := Check(b, off); got != -1 {
				t.Fatalf("Check of a correct chunk (%d at %d): %d", n, off, got)
			}
			if n > 0 {
				b[n-1] ^= 1
				if got := Check(b, off); got != off+int64(n-1) {
					t.Fatalf("Check with byte %d wrong: %d", n-1, got)
				}
			}
		}
	}
	// Two chunks swapped: the right bytes, in the wrong places.
	a, b := make([]byte, 1200), make([]byte, 1200)
	Fill(a, 0)
	Fill(b, 1200)
	if Check(b, 0) != 0 || Check(a, 1200) != 1200 {
		t.Error("a chunk at another offset passes the check")
	}
	if bytes.Equal(a, b) {
		t.Error("two chunks of the pattern are equal")
	}
}

func TestWire(t *testing.T) {
	r := Reply{Received: 1 << 20, BadAt: -1}
	got, err := ParseReply(r.Append(nil))
	if err != nil || got != r || got.Check(1<<20) != nil {
		t.Errorf("reply round trip: %+v %v", got, err)
	}
	if (Reply{Received: 10, BadAt: -1}).Check(11) == nil || (Reply{Received: 11, BadAt: 3}).Check(11) == nil {
		t.Error("a short or wrong push passes")
	}
	if _, err := ParseReply(make([]byte, 3)); err == nil {
		t.Error("a 3-byte reply parses")
	}
	h := Header{Transfer: 7, Pkt: 116, Seq: 2, Count: 9}
	b := make([]byte, HeaderSize)
	h.Put(b)
	if g, err := ParseHeader(b); err != nil || g != h {
		t.Errorf("header round trip: %+v %v", g, err)
	}
	if _, err := ParseHeader(b[:5]); err != ErrShort {
		t.Errorf("short header: %v", err)
	}
	if Datagrams(1<<20, 1252) != 849 || Datagrams(1, 1252) != 1 || h.Offset() != 200 {
		t.Errorf("Datagrams %d, %d; Offset %d", Datagrams(1<<20, 1252), Datagrams(1, 1252), h.Offset())
	}
}

func FuzzParse(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := ParseReply(b); err == nil {
			if g, _ := ParseReply(r.Append(nil)); g != r {
				t.Errorf("reply %+v does not round-trip", r)
			}
		}
		if h, err := ParseHeader(b); err == nil {
			out := make([]byte, HeaderSize)
			h.Put(out)
			if g, _ := ParseHeader(out); g != h {
				t.Errorf("header %+v does not round-trip", h)
			}
		}
	})
}
