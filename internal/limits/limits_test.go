package limits

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"
)

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

// TestInflate: within the limit the bytes come back; past it, an *Error
// that names the flag, after reading at most limit+1 bytes.
func TestInflate(t *testing.T) {
	src := bytes.Repeat([]byte("x"), 1000)
	if b, err := Inflate(gz(src), 1000, "-f"); err != nil || !bytes.Equal(b, src) {
		t.Errorf("Inflate at the limit: %d bytes, %v", len(b), err)
	}
	_, err := Inflate(gz(src), 999, "-f")
	var le *Error
	if !errors.As(err, &le) || le.Flag != "-f" || le.Limit != 999 {
		t.Errorf("Inflate past the limit: %v", err)
	}
	if _, err := Inflate(src, 999, "-f"); !errors.As(err, &le) {
		t.Errorf("plain bytes past the limit: %v", err)
	}
	if _, err := Inflate(gz(src)[:15], 1<<20, "-f"); err == nil {
		t.Error("a truncated gzip stream was taken")
	}
}

func TestReader(t *testing.T) {
	r := &Reader{R: bytes.NewReader(make([]byte, 100)), N: 50, Limit: 50, What: "x", Flag: "-f"}
	b, err := io.ReadAll(r)
	var le *Error
	if !errors.As(err, &le) || len(b) > 51 {
		t.Errorf("read %d bytes, %v", len(b), err)
	}
	r = &Reader{R: bytes.NewReader(make([]byte, 50)), N: 50, Limit: 50}
	if b, err := io.ReadAll(r); err != nil || len(b) != 50 {
		t.Errorf("at the limit: %d, %v", len(b), err)
	}
}

// FuzzInflate: whatever the input, Inflate returns at most limit bytes,
// or an error.
func FuzzInflate(f *testing.F) {
	f.Add(gz(make([]byte, 5000)), uint16(100))
	f.Add([]byte("\x1f\x8b\x08\x00"), uint16(10))
	f.Add(gz([]byte("abc")), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, limit uint16) {
		b, err := Inflate(in, int64(limit), "-f")
		if err == nil && len(b) > int(limit) {
			t.Fatalf("%d bytes past a limit of %d", len(b), limit)
		}
	})
}
