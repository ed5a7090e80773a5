package flame

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
)

// blockSize is how much folded input a worker parses at a time.
const blockSize = 1 << 20

// block is a run of whole lines of folded input.
type block struct {
	seq  int
	line int // the number of its first line
	b    []byte
}

// blockResult is a block's stacks, on its worker's names.
type blockResult struct {
	seq     int
	frames  []byte  // varints of name ids, root first
	off     []int32 // stack i is frames[off[i]:off[i+1]]
	vals    []float64
	lineNo  []int32 // each stack's line
	lines   int
	ignored int
	first   *FoldedError // the first line left out
	err     error        // the first error, at its line
	scale   bool         // a count is a fraction
}

// readFoldedTree reads folded stacks ("a;b;c count" lines) into the tree
// a graph shows: blocks of lines are parsed on every core, their stacks
// kept as varints, and the frames holding at least 1/20000 of the total
// made top down, as for a pprof profile. It reads as readFolded does
// (the same lines left out, errors at the same lines), with far less
// memory than a tree of every frame.
func readFoldedTree(br *bufio.Reader, opt Options) (*Tree, error) {
	return readFoldedBlocks(br, opt, blockSize)
}

// readFoldedBlocks is readFoldedTree with blocks of size bytes.
func readFoldedBlocks(br *bufio.Reader, opt Options, size int) (*Tree, error) {
	nw := runtime.GOMAXPROCS(0)
	blocks := make(chan block, nw)
	results := make(chan *blockResult, nw)
	names := &sharedNames{b: newBuilder(false)}
	free := make(chan []byte, 2*nw+2) // block buffers, reused
	var wg sync.WaitGroup
	for w := 0; w < nw; w++ {
		fw := &foldedWorker{opt: opt, names: names, intern: map[string]int32{}, maxDepth: opt.maxDepth()}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bl := range blocks {
				results <- fw.parse(bl)
				select {
				case free <- bl.b[:0]:
				default:
				}
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		readErr <- splitBlocks(br, blocks, free, size)
		close(blocks)
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	var got []*blockResult
	for r := range results {
		got = append(got, r)
	}
	slices.SortFunc(got, func(a, b *blockResult) int { return a.seq - b.seq })
	if err := <-readErr; err != nil {
		// The blocks before the bad line may hold an earlier error.
		for _, r := range got {
			if r.err != nil {
				return nil, r.err
			}
		}
		return nil, err
	}
	return mergeFolded(got, names.b)
}

// sharedNames is the names of every worker's frames: a worker looks a
// frame up in a map of its own first, and here only for a frame it has
// not met, which few are.
type sharedNames struct {
	mu sync.Mutex
	b  *builder
}

// splitBlocks reads br into blocks of whole lines; a line longer than
// maxFoldedLine is an error at its number.
func splitBlocks(br *bufio.Reader, out chan<- block, free chan []byte, size int) error {
	var carry []byte
	line, seq := 1, 0
	for {
		var buf []byte
		select {
		case buf = <-free:
		default:
		}
		if cap(buf) < max(size, 2*len(carry)) {
			buf = make([]byte, 0, max(size, 2*len(carry)))
		}
		buf = append(buf[:0], carry...)
		n, err := io.ReadFull(br, buf[len(carry):cap(buf)])
		buf = buf[:len(carry)+n]
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return fmt.Errorf("line %d: %w", line, err)
		}
		end := len(buf)
		if !eof {
			end = bytes.LastIndexByte(buf, '\n') + 1
		} else if end == 0 {
			return nil
		}
		if end == 0 { // no line ends in the block: a longer one
			if len(buf) > maxFoldedLine {
				return fmt.Errorf("line %d: a line over %d bytes: %w", line, maxFoldedLine, bufio.ErrTooLong)
			}
			carry = append([]byte(nil), buf...)
			continue
		}
		out <- block{seq: seq, line: line, b: buf[:end]}
		seq++
		line += bytes.Count(buf[:end], []byte{'\n'})
		if eof {
			return nil
		}
		carry = append([]byte(nil), buf[end:]...) // buf goes to a worker
	}
}

// foldedWorker parses blocks.
type foldedWorker struct {
	opt      Options
	names    *sharedNames
	intern   map[string]int32 // a frame as it is written -> its name
	maxDepth int
	// The last line's frames, for the next one's common prefix
	// (folded files are sorted: neighbours share most frames).
	prev     []byte
	prevIDs  []int32
	prevEnds []int // where each frame of prev ends
}

// parse reads a block's lines.
func (fw *foldedWorker) parse(bl block) *blockResult {
	r := &blockResult{seq: bl.seq, off: []int32{0}, frames: make([]byte, 0, len(bl.b)/16)}
	fw.prev, fw.prevIDs, fw.prevEnds = nil, fw.prevIDs[:0], fw.prevEnds[:0]
	b := bl.b
	for n := bl.line; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, " \t\r")
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		err := fw.line(r, line, n)
		if err == nil {
			r.lines++
			continue
		}
		if !errors.Is(err, errBadLine) {
			r.err = fmt.Errorf("line %d: %w", n, err)
			return r
		}
		if r.ignored == 0 {
			r.first = &FoldedError{n, truncate(string(line))}
		}
		r.ignored++
	}
	return r
}

// line adds one line's stack and count.
func (fw *foldedWorker) line(r *blockResult, line []byte, n int) error {
	rest, v, ok := cutCount(line)
	if !ok {
		return errBadLine
	}
	// The frames that end within the prefix shared with the last line
	// are the last line's.
	common := 0
	for common < len(rest) && common < len(fw.prev) && rest[common] == fw.prev[common] {
		common++
	}
	k := 0
	for k < len(fw.prevEnds) && fw.prevEnds[k] < common {
		k++
	}
	ids, ends := fw.prevIDs[:k], fw.prevEnds[:k]
	start := 0
	if k > 0 {
		start = ends[k-1] + 1
	}
	for start <= len(rest) {
		semi := bytes.IndexByte(rest[start:], ';')
		end := len(rest)
		if semi >= 0 {
			end = start + semi
		}
		f := rest[start:end]
		if len(f) == 0 {
			fw.prev = nil // a bad line leaves no prefix to share
			return errBadLine
		}
		ids = append(ids, fw.frame(f))
		ends = append(ends, end)
		if len(ids) > fw.maxDepth {
			fw.prev = nil
			return depthError(len(ids)+bytes.Count(rest[end:], []byte{';'}), fw.maxDepth)
		}
		start = end + 1
	}
	fw.prev, fw.prevIDs, fw.prevEnds = rest, ids, ends
	if v != math.Trunc(v) {
		r.scale = true
	}
	for _, id := range ids {
		r.frames = binary.AppendUvarint(r.frames, uint64(id))
	}
	r.off = append(r.off, int32(len(r.frames)))
	r.vals = append(r.vals, v)
	r.lineNo = append(r.lineNo, int32(n))
	return nil
}

// frame interns a frame as readFolded does: perf's annotation off, the
// name folded.
func (fw *foldedWorker) frame(f []byte) int32 {
	if id, ok := fw.intern[string(f)]; ok {
		return id
	}
	name, annot := perfAnnotation(string(f))
	key := funcKey(name, fw.opt.Folds)
	k := key
	if annot != 0 {
		// memcpy_[k] and memcpy_[j] stay two frames, both named
		// memcpy, as flamegraph.pl draws them.
		k = key + "_[" + string(annot) + "]"
	}
	fw.names.mu.Lock()
	id := fw.names.b.internAs(k, key)
	if annot != 0 {
		fw.names.b.annotate(id, annot)
	}
	fw.names.mu.Unlock()
	fw.intern[string(f)] = id
	return id
}

// mergeFolded puts the blocks' stacks together, in file order, and makes
// the tree.
func mergeFolded(got []*blockResult, names *builder) (*Tree, error) {
	t := &Tree{Sample: "samples", Unit: "samples", Scale: 1}
	lines, size, n := 0, 0, 0
	for _, r := range got {
		if r.err != nil {
			return nil, r.err
		}
		lines += r.lines
		if r.ignored > 0 && t.Ignored == 0 {
			t.FirstIgnored = r.first
		}
		t.Ignored += r.ignored
		if r.scale {
			t.Scale = 1000 // every value counts thousandths
		}
		size, n = size+len(r.frames), n+len(r.vals)
	}
	if lines == 0 && t.FirstIgnored != nil {
		return nil, t.FirstIgnored
	}
	if lines == 0 {
		return nil, fmt.Errorf("folded input has %w", ErrEmpty)
	}
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("more than %d bytes of frames in all", math.MaxInt32)
	}
	ss := &stackSet{frames: make([]byte, 0, size), off: make([]int32, 1, n+1), vals: make([]int64, 0, n)}
	var total int64
	for _, r := range got {
		for i, v := range r.vals {
			scaled := math.Round(v * float64(t.Scale))
			if scaled >= math.MaxInt64/2 || int64(scaled) > math.MaxInt64-total {
				return nil, fmt.Errorf("line %d: %w", r.lineNo[i], errOverflow)
			}
			if scaled == 0 {
				continue
			}
			total += int64(scaled)
			ss.frames = append(ss.frames, r.frames[r.off[i]:r.off[i+1]]...)
			ss.off = append(ss.off, int32(len(ss.frames)))
			ss.vals = append(ss.vals, int64(scaled))
		}
		r.frames = nil
	}
	if total == 0 {
		return nil, fmt.Errorf("every value is zero: %w", ErrEmpty)
	}
	ss.pos = slices.Clone(ss.off[:len(ss.vals)])
	t.Root = treeOf(ss, ss.vals, total, names)
	return t, nil
}
