// Package limits holds the bounds perfspy puts on what it reads from
// files and servers it does not control, and the error that names a bound
// and the flag that raises it (docs/security.md).
package limits

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Defaults. A real profile is far below each: a 100k-sample CPU profile
// inflates to about 20 MB, Go's runtime keeps stacks up to 128 frames.
const (
	Profile = 256 << 20 // bytes of a profile, inflated (-max-profile-size)
	Depth   = 10000     // frames of one stack (-max-depth)
	// MaxDepth is the most -max-depth takes: the tree code recurses once
	// a frame, and a million frames stay far inside Go's 1 GB stack.
	MaxDepth = 1_000_000
	Body     = 64 << 20 // bytes of a request body read from a file (-max-body)
	// RequestEntries is the most requests a request file holds, and
	// MixRound the most its weights add up to (one round of the mix):
	// a mix is measured entry by entry, and its order is made once.
	RequestEntries = 10000
	MixRound       = 50000
	// Bodies is how many times -max-body the distinct bodies of a request
	// file may hold together (a body file named on many lines is read and
	// held once).
	Bodies = 4
)

// Error is input past a limit.
type Error struct {
	What  string // "profile", "stack", "body"
	Size  int64  // how much there was, or Limit+1 when reading stopped
	Limit int64
	Unit  string // "bytes", "frames"
	Flag  string // the flag that raises it
}

func (e *Error) Error() string {
	raise := ""
	if e.Flag != "" { // a bound no flag moves (perfspy's own records) says none
		raise = " (" + e.Flag + " raises it)"
	}
	if e.Size == e.Limit+1 { // reading stopped there
		return fmt.Sprintf("%s over the limit of %d %s%s", e.What, e.Limit, e.Unit, raise)
	}
	return fmt.Sprintf("%s of %d %s, over the limit of %d %s%s", e.What, e.Size, e.Unit, e.Limit, e.Unit, raise)
}

// ReadAll reads r to its end, or fails with an *Error past limit bytes.
func ReadAll(r io.Reader, limit int64, what, flag string) ([]byte, error) {
	return ReadAllSized(r, limit, fileSize(r), what, flag)
}

// ReadAllSized is ReadAll into a buffer made for size bytes (a file's
// size, a gzip stream's inflated size), so that a big input is neither
// copied as it grows nor held twice; size <= 0 is unknown.
func ReadAllSized(r io.Reader, limit, size int64, what, flag string) ([]byte, error) {
	r = io.LimitReader(r, limit+1)
	if size <= 0 || size > limit {
		size = 512
	}
	b := make([]byte, 0, size+1) // +1: the read that says EOF needs room
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(b)) > limit {
		return nil, &Error{What: what, Size: limit + 1, Limit: limit, Unit: "bytes", Flag: flag}
	}
	return b, nil
}

// fileSize is r's size when it is a regular file, else 0.
func fileSize(r io.Reader) int64 {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
	}
	return 0
}

// GzipSize is what a gzip stream of n bytes says it inflates to (its
// last four bytes, the size modulo 4 GiB), read from r; 0 when r cannot
// say. Only a hint: a stream of several members says its last one's.
func GzipSize(r io.ReaderAt, n int64) int64 {
	var t [4]byte
	if n < 18 {
		return 0
	}
	if _, err := r.ReadAt(t[:], n-4); err != nil {
		return 0
	}
	size := int64(t[0]) | int64(t[1])<<8 | int64(t[2])<<16 | int64(t[3])<<24
	if size > 1032*n { // more than deflate can say in n bytes: a lie
		return 0
	}
	return size
}

// ReadFile reads the file at path, or fails: with an *Error (named
// after the file) past limit bytes, or saying it is not a regular file.
func ReadFile(path string, limit int64, flag string) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, limit, path, flag)
}

// OpenRegular opens path for reading when it is a regular file (through
// symbolic links). Anything else is refused before it is opened: a FIFO's
// open() waits for a writer, deaf to signals, and a device (/dev/zero)
// never ends.
func OpenRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a folder", path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): refused before opening it", path, kindOf(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// The path may have been swapped between the two looks.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// kindOf names what a file that is not regular is.
func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0 || m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// Reader reads through r and fails with an *Error once more than limit
// bytes came: for streams read a piece at a time (gzipped folded stacks).
type Reader struct {
	R     io.Reader
	N     int64 // bytes left
	Limit int64
	What  string
	Flag  string
}

func (l *Reader) Read(p []byte) (int, error) {
	if l.N < 0 {
		return 0, &Error{What: l.What, Size: l.Limit + 1, Limit: l.Limit, Unit: "bytes", Flag: l.Flag}
	}
	if int64(len(p)) > l.N+1 {
		p = p[:l.N+1]
	}
	n, err := l.R.Read(p)
	l.N -= int64(n)
	if l.N < 0 {
		return n, &Error{What: l.What, Size: l.Limit + 1, Limit: l.Limit, Unit: "bytes", Flag: l.Flag}
	}
	return n, err
}

// Inflate returns b, gunzipped when it is gzip, within limit bytes
// inflated (a megabyte of gzipped zeros inflates to a gigabyte).
func Inflate(b []byte, limit int64, flag string) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		if int64(len(b)) > limit {
			return nil, &Error{What: "profile", Size: int64(len(b)), Limit: limit, Unit: "bytes", Flag: flag}
		}
		return b, nil
	}
	gz, err := gzip.NewReader(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	out, err := ReadAllSized(gz, limit, GzipSize(bytes.NewReader(b), int64(len(b))), "profile inflated", flag)
	if err != nil {
		return nil, unexpected(err)
	}
	return out, nil
}

// unexpected names a gzip stream cut short.
func unexpected(err error) error {
	if err == io.ErrUnexpectedEOF {
		return fmt.Errorf("gzip stream cut short (a truncated file?): %w", err)
	}
	return err
}

// ErrOutside is a path that leads out of the folder it must stay in.
var ErrOutside = errors.New("outside")

// Inside resolves rel below root, symbolic links followed in both: the
// real path, or ErrOutside when it leads out of root (a file of someone
// else's: a pull request's link, a request file's ../), or the error of a
// path that is not there (fs.ErrNotExist). rel must be relative.
func Inside(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s: an absolute path: %w", rel, ErrOutside)
	}
	top, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil {
		return "", err
	}
	if r, err := filepath.Rel(top, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return real, ErrOutside
	}
	return real, nil
}
