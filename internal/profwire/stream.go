package profwire

import (
	"errors"
	"hash/maphash"
	"io"
	"math"
	"sync/atomic"
)

// DecodeStream decodes a profile while it is read from r (an inflating
// reader, say) on another goroutine, into a buffer made for size bytes
// (what the gzip trailer says): the two take a core each. It returns the
// bytes read whole, with the decoded profile or, for a profile Decode
// refuses (an error wrapping ErrMalformed), for the general parser. An
// error of r is returned as it is, with no bytes. When size is unknown
// (0) or wrong, it reads first and decodes after.
func DecodeStream(r io.Reader, size int64) (*Profile, []byte, error) {
	if size <= 0 || size >= math.MaxUint32 {
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, nil, err
		}
		p, err := Decode(data)
		return p, data, err
	}
	st := &stream{buf: make([]byte, size+1), kick: make(chan struct{}, 1), done: make(chan struct{})}
	go st.fill(r)
	d := &decoder{p: &Profile{data: st.buf, lineOff: []int32{0}}, nv: -1}
	d.table.seed = maphash.MakeSeed()
	err := d.top(st.buf, st)
	<-st.done // the whole input, for the general parser when it is needed
	switch {
	case st.err != nil:
		return nil, nil, st.err
	case st.over:
		// Longer than the trailer said (several gzip members): the
		// rest, then one pass over the whole.
		rest, err := io.ReadAll(r)
		if err != nil {
			return nil, nil, err
		}
		data := append(st.buf, rest...)
		p, err := Decode(data)
		return p, data, err
	}
	data := st.buf[:st.n]
	if err == nil {
		d.p.data = data
		err = d.finish()
	}
	if err != nil {
		return nil, data, err
	}
	return d.p, data, nil
}

// stream is a buffer filled by one goroutine and decoded by another:
// avail says how many bytes are in, kick wakes the decoder.
type stream struct {
	buf   []byte
	avail atomic.Int64
	kick  chan struct{}
	done  chan struct{}
	// Set before done is closed:
	n    int
	err  error
	over bool // the input is longer than buf
}

func (st *stream) fill(r io.Reader) {
	defer close(st.done)
	n := 0
	for {
		if n == len(st.buf) {
			st.over = true
			break
		}
		m, err := r.Read(st.buf[n:min(n+1<<20, len(st.buf))])
		n += m
		st.avail.Store(int64(n))
		select {
		case st.kick <- struct{}{}:
		default:
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			st.err = err
			break
		}
	}
	st.n = n
	st.avail.Store(math.MaxInt64) // all in: no more waiting
	select {
	case st.kick <- struct{}{}:
	default:
	}
}

// wait blocks until need bytes are in, or all are; it returns how many
// may be read (at most the buffer).
func (st *stream) wait(need int) int {
	for {
		a := st.avail.Load()
		if a == math.MaxInt64 {
			if st.over || st.err != nil {
				return 0 // stop decoding: DecodeStream starts again
			}
			return st.n
		}
		if a >= int64(need) {
			return int(a)
		}
		<-st.kick
	}
}

// fieldEnd waits for the field at off to be in whole and returns where
// it ends (what is in, for a field that is cut short: field says so),
// or off at the end of the input or when decoding stops (any wait may
// find the reader failed).
func (st *stream) fieldEnd(b []byte, off int) int {
	in := st.wait(off + 1)
	if in <= off {
		return off
	}
	if in < off+2*binaryMaxVarint {
		if in = st.wait(off + 2*binaryMaxVarint); in <= off {
			return off
		}
	}
	h := b[off:min(in, len(b))]
	tag, n := uvarint(h)
	if n <= 0 {
		return in
	}
	switch tag & 7 {
	case bytesType:
		l, m := uvarint(h[n:])
		if m <= 0 || l > uint64(len(b)-off) {
			return in
		}
		end := off + n + m + int(l)
		if end > in {
			if in = st.wait(end); in <= off {
				return off
			}
		}
		return min(end, in)
	case fixed64Type:
		return min(off+n+8, in)
	case fixed32Type:
		return min(off+n+4, in)
	case varintType:
		_, m := uvarint(h[n:])
		if m <= 0 {
			return in
		}
		return off + n + m
	}
	return in
}

const binaryMaxVarint = 10
