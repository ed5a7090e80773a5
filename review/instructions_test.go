package review

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/schema"
)

// The CPU corpus: six functions of a package that calls a public module
// (xxhash), each with a benchmark, and a head that seeds a CPU regression
// in each, on a line of its own: a linear scan for a map lookup,
// strings.ToLower per call, a redundant sort, a hash computed twice, a
// bounds check the compiler can no longer drop, reflection for a type
// switch. A second head changes nothing the CPU runs: comments, a
// renamed helper, a moved function, reordered declarations.
const cpuBase = `// Package store keeps keys in slots and shards them by hash.
package store

import (
	"sort"

	"github.com/cespare/xxhash/v2"
)

// Store is a set of keys, each in a slot.
type Store struct {
	keys  []string
	index map[string]int
}

var sink int

// New makes a store of keys.
func New(keys []string) *Store {
	s := &Store{keys: keys, index: make(map[string]int, len(keys))}
	for i, k := range keys {
		s.index[k] = i
	}
	return s
}

// Lookup is key's slot, -1 when it has none.
func (s *Store) Lookup(key string) int {
	//LOWER
	i, ok := s.index[key]
	if !ok {
		return -1
	}
	return i
}

// Has says whether key is in the store.
func (s *Store) Has(key string) bool {
	_, ok := s.index[key] //LINEAR
	return ok
}

// Shard is key's shard of n.
func Shard(key string, n int) int {
	h := xxhash.Sum64String(key)
	//TWICE
	return mod(h, n)
}

func mod(h uint64, n int) int { return int(h % uint64(n)) }

// Top is the n largest of vals, largest last.
func Top(vals []int, n int) []int {
	sort.Ints(vals)
	//RESORT
	return vals[len(vals)-n:]
}

// Sum adds xs up.
func Sum(xs []int) int {
	s := 0
	for i := range xs { //BCE
		s += xs[i]
	}
	return s
}

// Kind numbers v's type.
func Kind(v any) int {
	switch v.(type) { //REFLECT
	case int:
		return 1
	case string:
		return 2
	}
	return 0
}
`

const cpuTest = `package store

import (
	"strconv"
	"testing"
)

var out int

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "key-" + strconv.Itoa(i)
	}
	return ks
}

func BenchmarkLookup(b *testing.B) {
	s := New(keys(64))
	for b.Loop() {
		out = s.Lookup("key-40")
	}
}

func BenchmarkHas(b *testing.B) {
	s := New(keys(64))
	for b.Loop() {
		if s.Has("key-40") {
			out++
		}
	}
}

func BenchmarkShard(b *testing.B) {
	for b.Loop() {
		out = Shard("user-1234567", 16)
	}
}

func BenchmarkTop(b *testing.B) {
	vals := make([]int, 64)
	for b.Loop() {
		for i := range vals {
			vals[i] = (i * 7919) % 64
		}
		out = Top(vals, 4)[0]
	}
}

// data's length is not known where Sum is inlined.
var data = make([]int, 256)

func BenchmarkSum(b *testing.B) {
	for b.Loop() {
		out = Sum(data)
	}
}

func BenchmarkKind(b *testing.B) {
	vs := []any{1, "a", 2.0}
	for b.Loop() {
		for _, v := range vs {
			out += Kind(v)
		}
	}
}
`

const cpuGoSum = `github.com/cespare/xxhash/v2 v2.3.0 h1:UL815xU9SqsFlibzuggzjXhog7bL6oX9BbNZnL2UFvs=
github.com/cespare/xxhash/v2 v2.3.0/go.mod h1:VGX0DQ3Q6kWi7AoAeZDth3/j3BFtOZR5XLFGgcrjCOs=
`

// cpuSeeds are the regressions, each a marker's line replaced, by the
// benchmark that runs it.
var cpuSeeds = []struct{ bench, marker, line string }{
	{"BenchmarkHas", "	_, ok := s.index[key] //LINEAR\n	return ok", "	for _, k := range s.keys {\n		if k == key {\n			return true\n		}\n	}\n	return false"},
	{"BenchmarkLookup", "	//LOWER", "	key = strings.ToLower(key) // seeded"},
	{"BenchmarkTop", "	//RESORT", "	sort.Ints(vals) // seeded"},
	{"BenchmarkShard", "	//TWICE", "	h ^= xxhash.Sum64String(key) >> 63 // seeded"},
	{"BenchmarkSum", "	for i := range xs { //BCE", "	for i := 0; i < cap(xs); i++ { // seeded"},
	{"BenchmarkKind", "	switch v.(type) { //REFLECT\n	case int:\n		return 1\n	case string:", "	switch reflect.TypeOf(v).Kind() { // seeded\n	case reflect.Int:\n		return 1\n	case reflect.String:"},
}

// TestReviewInstructions: a review of the seeded head fails, each seed
// annotated on its changed line with the benchmark's change in
// instructions per op, which agrees with callgrind run directly on the
// plain test binaries at two -benchtime counts (the difference per op);
// the head that changes nothing the CPU runs passes with no annotation
// and every instructions/op unchanged.
func TestReviewInstructions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs six benchmarks under callgrind at three revisions; skipped with -short")
	}
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	cfg := "benchmarks:\n  - package: ./store\n    bench: .\n    instructions: true\ngates:\n  instructions/op: 0.5%\n"
	base := r.commit(map[string]string{"go.mod": "module example.com/cpu\n\ngo 1.26\n\nrequire github.com/cespare/xxhash/v2 v2.3.0\n", "go.sum": cpuGoSum,
		"store/store.go": cpuBase, "store/store_test.go": cpuTest, ".perfspy.yml": cfg}, "base")
	seeded := cpuBase
	for _, s := range cpuSeeds {
		if !strings.Contains(seeded, s.marker) {
			t.Fatalf("no %q", s.marker)
		}
		seeded = strings.Replace(seeded, s.marker, s.line, 1)
	}
	seeded = strings.Replace(seeded, "\t\"sort\"\n", "\t\"reflect\"\n\t\"sort\"\n\t\"strings\"\n", 1)
	r.git("checkout", "-q", "-b", "seeded")
	head := r.commit(map[string]string{"store/store.go": seeded}, "six CPU regressions")
	// Nothing the CPU runs: a comment, mod renamed and moved below Top,
	// Sum moved above Top, the type and the var swapped.
	same := strings.Replace(cpuBase, "// New makes a store of keys.", "// New makes a store of keys, each in the slot of its index.", 1)
	same = strings.Replace(same, "func mod(h uint64, n int) int { return int(h % uint64(n)) }\n\n", "", 1)
	same = strings.Replace(same, "mod(h, n)", "modulo(h, n)", 1)
	sum := same[strings.Index(same, "// Sum adds xs up."):strings.Index(same, "// Kind numbers")]
	same = strings.Replace(same, sum, "", 1)
	same = strings.Replace(same, "// Top is the n largest", sum+"// Top is the n largest", 1)
	same = strings.Replace(same, "// Kind numbers", "func modulo(h uint64, n int) int { return int(h % uint64(n)) }\n\n// Kind numbers", 1)
	same = strings.Replace(same, "var sink int\n\n", "", 1)
	same = strings.Replace(same, "// Store is a set", "var sink int\n\n// Store is a set", 1)
	r.git("checkout", "-q", "-b", "same", base)
	aa := r.commit(map[string]string{"store/store.go": same}, "no CPU change")

	out := filepath.Join(t.TempDir(), "review")
	code, stdout, stderr := runReview(t, r.dir, "-timings=false", "-rounds", "1", "-base", base, "-head", head, "-out", out)
	if code != cmdmain.Failed {
		t.Fatalf("seeded: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	var res schema.Review
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "review.json"))), &res); err != nil {
		t.Fatal(err)
	}
	for _, it := range res.Items {
		if len(it.Reasons) > 0 {
			t.Logf("%s: %s", it.Name, strings.Join(it.Reasons, "; "))
		}
	}
	truth := groundTruth(t, valgrind, r, base, head)
	for _, s := range cpuSeeds {
		first := lineOf(t, seeded, strings.SplitN(s.line, "\n", 2)[0])
		last := first + strings.Count(s.line, "\n")
		// A seed of two hunks (Kind's switch and its second case) is
		// two annotations: each on a line of the seed, adding up to the
		// benchmark's change.
		var sum float64
		var at []string
		for _, a := range res.Annotations {
			if a.Metric != "instructions/op" || !strings.HasPrefix(a.Subject, s.bench+"-") {
				continue
			}
			sum += a.Delta
			at = append(at, fmt.Sprintf("%s:%d %+.0f", a.File, a.Line, a.Delta))
			if a.File != "store/store.go" || a.Line < first || a.Line > last || a.Level != "error" {
				t.Errorf("%s: annotated %s %s:%d, want an error on store/store.go:%s", s.bench, a.Level, a.File, a.Line, span(first, last-first+1))
			}
		}
		want := truth[s.bench]
		t.Logf("%s: %v: %+.2f instructions/op; callgrind directly %+.2f to %+.2f", s.bench, at, sum, want[0], want[1])
		if len(at) == 0 {
			t.Errorf("%s: no instructions/op annotation", s.bench)
		}
		if tol := math.Max(2, 0.01*math.Abs(want[0])); sum < want[0]-tol || sum > want[1]+tol {
			t.Errorf("%s: %+.2f instructions/op, callgrind directly %+.2f to %+.2f", s.bench, sum, want[0], want[1])
		}
	}

	// The benchmarks of the functions it moved and renamed, reviewed
	// PERFSPY_AA_REVIEWS times (once unless told).
	aaCfg := filepath.Join(t.TempDir(), "perfspy.yml")
	if err := os.WriteFile(aaCfg, []byte(strings.Replace(cfg, "bench: .", "bench: 'Shard|Sum|Top'", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	reviews, _ := strconv.Atoi(os.Getenv("PERFSPY_AA_REVIEWS"))
	alarms := 0
	for k := range max(reviews, 1) {
		out2 := filepath.Join(t.TempDir(), "review")
		code, stdout, stderr = runReview(t, r.dir, "-timings=false", "-rounds", "1", "-config", aaCfg, "-base", base, "-head", aa, "-out", out2)
		var res2 schema.Review
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out2, "review.json"))), &res2); err != nil {
			t.Fatal(err)
		}
		n, moved := 0, false
		for _, it := range res2.Items {
			for _, c := range it.Changes {
				if c.Metric == "instructions/op" {
					n++
					if c.Verdict != "no change" {
						moved = true
						t.Errorf("no CPU change, review %d: %s instructions/op %v -> %v: %s", k+1, c.Subject, c.Before, c.After, c.Verdict)
					}
				}
			}
		}
		if reviews > 1 {
			t.Logf("no CPU change, review %d: exit %d, %d figures, moved %v", k+1, code, n, moved)
		}
		if code != cmdmain.OK || strings.Contains(stdout, "::") || n != 3 || moved {
			alarms++
			t.Errorf("no CPU change, review %d: exit %d, %d instructions/op figures (want 0 and 3, no annotation)\n%s%s", k+1, code, n, stdout, stderr)
		}
	}
	t.Logf("no CPU change: %d of %d reviews flagged", alarms, max(reviews, 1))
}

// groundTruth is each benchmark's change in instructions per op from base
// to head, by callgrind run on the plain test binaries (go test -c, no
// overlay) at two -benchtime counts: the totals while the benchmark
// function runs, their difference over the ops between. A map's cost per op follows its hash
// seed, which a plain binary draws at random: the benchmarks that look a
// key up in a map are run with two seeds a revision, and their change is
// the range of what the seeds give.
func groundTruth(t *testing.T, valgrind string, r *repo, base, head string) map[string][2]float64 {
	t.Helper()
	bins := map[string]string{}
	for _, rev := range []string{base, head} {
		dir := filepath.Join(t.TempDir(), "src")
		r.git("worktree", "add", "-q", "--detach", dir, rev)
		bin := filepath.Join(t.TempDir(), "store.test")
		build := exec.Command("go", "test", "-c", "-o", bin, "./store")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go test -c at %s: %v\n%s", rev, err, out)
		}
		bins[rev] = bin
	}
	type job struct {
		rev, bench string
		rep        int
	}
	const n1, n2 = 1000, 101000
	var jobs []job
	for _, s := range cpuSeeds {
		reps := 1
		if s.bench == "BenchmarkHas" || s.bench == "BenchmarkLookup" {
			reps = 2
		}
		for _, rev := range []string{base, head} {
			for k := range reps {
				jobs = append(jobs, job{rev, s.bench, k})
			}
		}
	}
	// Two at a time: a count does not depend on what runs beside it.
	perOp := make([]float64, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			a, err := callgrindTotal(valgrind, bins[j.rev], j.bench, n1)
			if err == nil {
				var b float64
				b, err = callgrindTotal(valgrind, bins[j.rev], j.bench, n2)
				perOp[i] = (b - a) / (n2 - n1)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	lo, hi := map[string][2]float64{}, map[string][2]float64{} // by bench: base's and head's least and most
	for i, j := range jobs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		k := 0
		if j.rev == head {
			k = 1
		}
		l, h := lo[j.bench], hi[j.bench]
		if l[k] == 0 || perOp[i] < l[k] {
			l[k] = perOp[i]
		}
		h[k] = max(h[k], perOp[i])
		lo[j.bench], hi[j.bench] = l, h
	}
	out := map[string][2]float64{}
	for b := range lo {
		out[b] = [2]float64{lo[b][1] - hi[b][0], hi[b][1] - lo[b][0]}
	}
	return out
}

var summaryLine = regexp.MustCompile(`(?m)^(?:summary|totals): (\d+)`)

// callgrindTotal is callgrind's own total of a run of bench at n ops: the
// file's summary line, read by nothing of perfspy's.
func callgrindTotal(valgrind, bin, bench string, n int) (float64, error) {
	dir, err := os.MkdirTemp("", "perfspy-truth")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "callgrind.out")
	// Counted while the benchmark function is on the stack, as
	// docs/instructions.md says callgrind can: the runtime's other threads
	// (sysmon) run on a clock, not per op.
	cmd := exec.Command(valgrind, "--tool=callgrind", "--toggle-collect=*."+bench, "--toggle-collect=*."+bench+".*", "--callgrind-out-file="+file, bin, "-test.run=^$", "-test.bench=^"+bench+"$", fmt.Sprintf("-test.benchtime=%dx", n))
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "GOGC=off", "GOMAXPROCS=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind %s %dx: %w\n%s", bench, n, err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	m := summaryLine.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("callgrind %s %dx: no summary line", bench, n)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
