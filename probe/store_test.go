package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/diff"
	"github.com/perfspy/perfspy/flame"
	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/storetest"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/profstore"
	"github.com/perfspy/perfspy/schema"
)

// TestStore: two builds of a known cost (the ab test repository's
// commits 1 and 2: one more 64-byte allocation per request in
// main.extraAlloc), two rounds each through probe ab -push, into a real
// Pyroscope server; the store's per-request diff of the two arms equals
// the local allocdiff of the same runs exactly.
func TestStore(t *testing.T) {
	skipShort(t)
	base := storetest.Shared(t)
	dir, c1, c2, _ := makeRepo(t)
	out := filepath.Join(t.TempDir(), "ab")
	cfg := abConfig(dir, c1, c2, out)
	cfg.Rounds = 2
	// Every kind of profile, so that each is seen to keep its own series.
	cfg.Run.OffCPU, cfg.Run.Wallclock, cfg.Run.Copies = true, true, "overlay"
	cfg.Run.Push = PushConfig{URL: base, Labels: map[string]string{"suite": "TestStore"}, Required: true}
	if _, err := AB(context.Background(), cfg, nil); err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	local := map[string][]string{}
	for _, arm := range []string{"before", "after"} {
		m, err := filepath.Glob(filepath.Join(out, "runs", "*-"+arm, "allocs.pb.gz"))
		if err != nil || len(m) != cfg.Rounds {
			t.Fatalf("%s: %d runs (%v)", arm, len(m), err)
		}
		local[arm] = m
	}
	sel := func(arm string) string {
		return `pyroscope://` + strings.TrimPrefix(base, "http://") + `/{service_name="server",suite="TestStore",arm="` + arm + `"}?type=alloc_objects&from=-1h`
	}
	compareRoute := func(b, a []string, route string) *diff.Result {
		bs, err := diff.Load(b, diff.LoadOptions{Route: route})
		if err != nil {
			t.Fatal(err)
		}
		as, err := diff.Load(a, diff.LoadOptions{Route: route})
		if err != nil {
			t.Fatal(err)
		}
		r, err := diff.Compare(bs, as, diff.Options{Sample: "alloc_objects", Folds: profkey.DefaultFolds})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	compare := func(b, a []string) *diff.Result { return compareRoute(b, a, "") }
	want := compare(local["before"], local["after"])
	got := compare([]string{sel("before")}, []string{sel("after")})
	if got.ReqBefore != want.ReqBefore || got.ReqAfter != want.ReqAfter || got.TotalBefore != want.TotalBefore || got.TotalAfter != want.TotalAfter {
		t.Fatalf("store: requests %d/%d totals %d/%d; local: %d/%d, %d/%d", got.ReqBefore, got.ReqAfter, got.TotalBefore, got.TotalAfter,
			want.ReqBefore, want.ReqAfter, want.TotalBefore, want.TotalAfter)
	}
	rows := map[string][2]float64{}
	for _, r := range want.Rows {
		rows[r.Key] = [2]float64{r.FlatBeforePR, r.FlatAfterPR}
	}
	for _, r := range got.Rows {
		if w := rows[r.Key]; math.Abs(w[0]-r.FlatBeforePR) > 1e-12 || math.Abs(w[1]-r.FlatAfterPR) > 1e-12 {
			t.Errorf("%s: store %.4f -> %.4f per request, local %.4f -> %.4f", r.Key, r.FlatBeforePR, r.FlatAfterPR, w[0], w[1])
		}
	}
	if len(got.Rows) != len(want.Rows) {
		t.Errorf("store %d rows, local %d", len(got.Rows), len(want.Rows))
	}
	for _, r := range got.Rows {
		if r.Key == "main.extraAlloc" && (r.FlatBeforePR != 0 || r.FlatAfterPR != 1) {
			t.Errorf("main.extraAlloc %.4f -> %.4f per request, want 0 -> 1", r.FlatBeforePR, r.FlatAfterPR)
		}
	}
	// One series per route: a route's selection in the store is the same
	// route of the local profiles, per request of that route.
	route := busiestRoute(t, local["after"][0])
	rsel := func(arm string) string {
		return strings.Replace(sel(arm), `arm="`+arm+`"}`, `arm="`+arm+`",route="`+route+`"}`, 1)
	}
	wantR, gotR := compareRoute(local["before"], local["after"], route), compareRoute([]string{rsel("before")}, []string{rsel("after")}, "")
	t.Logf("route %s: store requests %d/%d, totals %d/%d", route, gotR.ReqBefore, gotR.ReqAfter, gotR.TotalBefore, gotR.TotalAfter)
	if gotR.ReqBefore != wantR.ReqBefore || gotR.ReqAfter != wantR.ReqAfter || gotR.TotalBefore != wantR.TotalBefore || gotR.TotalAfter != wantR.TotalAfter || wantR.ReqAfter == 0 {
		t.Errorf("route %s: store requests %d/%d totals %d/%d; local -route: %d/%d, %d/%d", route, gotR.ReqBefore, gotR.ReqAfter, gotR.TotalBefore, gotR.TotalAfter,
			wantR.ReqBefore, wantR.ReqAfter, wantR.TotalBefore, wantR.TotalAfter)
	}
	checkStoreKinds(t, base, filepath.Join(out, "runs"))
	checkStoreBench(t, base)
	// flame reads a selection wherever it reads a file.
	svg := filepath.Join(t.TempDir(), "store.svg")
	var fo, fe bytes.Buffer
	if code := flame.Command([]string{"-o", svg, sel("after")}, &fo, &fe); code != 0 {
		t.Errorf("flame on the store: exit %d, %s", code, fe.String())
	} else if b, _ := os.ReadFile(svg); !strings.Contains(string(b), "main.extraAlloc") {
		t.Error("flame's graph of the store has no main.extraAlloc")
	}
	// A selection that matches nothing is an error, not an empty table.
	var o, e bytes.Buffer
	if code := diff.Command([]string{sel("nope"), local["before"][0]}, &o, &e); code != 1 || !strings.Contains(e.String(), "no profile matches the selection") {
		t.Errorf("empty selection: exit %d, %q", code, e.String())
	}
}

// checkStoreKinds: every kind of profile the after arm's runs pushed
// keeps a series of its own: for each of its sample types, the store's
// merged total and requests equal the sums over the local runs.
func checkStoreKinds(t *testing.T, base, runs string) {
	t.Helper()
	var s schema.Summary
	sums, err := filepath.Glob(filepath.Join(runs, "*-after", "summary.json"))
	if err != nil || len(sums) == 0 {
		t.Fatalf("no summaries in %s: %v", runs, err)
	}
	if b, err := os.ReadFile(sums[0]); err != nil || json.Unmarshal(b, &s) != nil {
		t.Fatalf("%s: %v", sums[0], err)
	}
	var kinds []string
	for k, f := range s.Files {
		if !pushed(k, f) {
			continue
		}
		kinds = append(kinds, k)
		local, _ := filepath.Glob(filepath.Join(runs, "*-after", f))
		var profs []*profile.Profile
		var requests int64
		for _, l := range local {
			p, err := readProfile(l)
			if err != nil {
				t.Fatal(err)
			}
			profs = append(profs, p)
			requests += profkey.Requests(p)
		}
		for i, st := range profs[0].SampleType {
			var want int64
			for _, p := range profs {
				want += sampleSums(p, i)
			}
			typ := StoreName(k) + ":" + strings.ReplaceAll(st.Type, "-", "_")
			sel, err := profstore.ParseSelection(`pyroscope://`+strings.TrimPrefix(base, "http://")+`/{service_name="server",suite="TestStore",arm="after"}?from=-1h&type=`+typ, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			got, err := profstore.Fetch(context.Background(), nil, sel)
			if want == 0 {
				continue // the store keeps no empty profiles
			}
			if err != nil {
				t.Errorf("%s (%s): %v", k, typ, err)
				continue
			}
			if total := sampleSums(got, 0); total != want || profkey.Requests(got) != requests {
				t.Errorf("%s (%s): store %d over %d requests, local runs %d over %d", k, typ, total, profkey.Requests(got), want, requests)
			}
		}
	}
	// Every kind the run was asked for was there to check: off-CPU and
	// wall clock on, copies on, syscalls where eBPF can count them.
	slices.Sort(kinds)
	want := []string{"allocs", "block", "copies", "cpu", "mutex", "offcpu", "offcpu_background", "wallclock"}
	if capability.BPF("counting syscalls") == nil {
		want = append(want, "syscalls")
		slices.Sort(want)
	}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds of profile pushed %v, want %v", kinds, want)
	}
	t.Logf("%d kinds of profile checked in the store: %v", len(kinds), kinds)
}

// checkStoreBench: probe run -bench -push sends each benchmark's profiles
// with its ops as the requests and its name as the endpoint: the store's
// totals and ops equal the local profile's, and the fixture's own sites
// give its known costs per op (BenchmarkSetup 1 allocation of 48 B,
// BenchmarkSub/big 1 of 1024 B; the rest of a total is the runtime's
// work in the timed region, which varies).
func checkStoreBench(t *testing.T, base string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bench")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"run", "-q", "-bench", "BenchmarkSetup$|BenchmarkSub$/big", "-benchtime", "500x", "-offcpu=false",
		"-push", base, "-push-required", "-label", "suite=TestStoreBench", "-out", out, benchFixture}, &o, &e)
	if code != ExitOK || !strings.Contains(e.String(), "pushed the profiles") {
		t.Fatalf("probe run -bench -push: exit %d\n%s%s", code, o.String(), e.String())
	}
	var sum schema.BenchSummary
	if b, err := os.ReadFile(filepath.Join(out, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("%s: %v", out, err)
	}
	known := map[string][2]int64{"BenchmarkSetup": {1, 48}, "BenchmarkSub/big": {1, 1024}}
	for _, f := range sum.Benchmarks {
		name := procsSuffix.ReplaceAllString(f.Name, "")
		local, err := readProfile(filepath.Join(out, f.Files["allocs"]))
		if err != nil {
			t.Fatal(err)
		}
		for i, typ := range []string{"alloc_objects", "alloc_space"} {
			sel, err := profstore.ParseSelection(`pyroscope://`+strings.TrimPrefix(base, "http://")+`/{service_name="fix",suite="TestStoreBench",endpoint=~"`+name+`(-[0-9]+)?"}?from=-1h&type=`+typ, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			p, err := profstore.Fetch(context.Background(), nil, sel)
			if err != nil {
				t.Errorf("%s %s: %v", name, typ, err)
				continue
			}
			total, fixture := sampleSums(p, 0), fixtureSamples(p, 0)
			if want := sampleSums(local, i); total != want || profkey.Requests(p) != int64(f.N) {
				t.Errorf("%s %s: store %d over %d ops, local %d over %d", name, typ, total, profkey.Requests(p), want, f.N)
			}
			if want := known[name][i] * int64(f.N); fixture != want {
				t.Errorf("%s %s: the fixture's sites %d in the store over %d ops, want %d per op", name, typ, fixture, f.N, known[name][i])
			}
		}
	}
	if len(sum.Benchmarks) != 2 {
		t.Errorf("%d benchmarks, want 2", len(sum.Benchmarks))
	}
}

// sampleSums sums value i of p's samples.
func sampleSums(p *profile.Profile, i int) int64 {
	var n int64
	for _, s := range p.Sample {
		n += s.Value[i]
	}
	return n
}

// fixtureSamples sums value i of p's samples through benchwin's fixture.
func fixtureSamples(p *profile.Profile, i int) int64 {
	var n int64
	for _, s := range p.Sample {
		if slices.ContainsFunc(s.Location, func(l *profile.Location) bool {
			return slices.ContainsFunc(l.Line, func(ln profile.Line) bool { return strings.Contains(ln.Function.Name, "benchwin/testdata/fix.") })
		}) {
			n += s.Value[i]
		}
	}
	return n
}

// TestPushDown: a push to a server that is down keeps the results and
// says why; exit non-zero for it only with -push-required, and then exit 1
// even for a run that was not judged (-min-requests out of reach).
func TestPushDown(t *testing.T) {
	skipShort(t)
	silent := storetest.Silent(t)
	for _, c := range []struct {
		required, notJudged, silent bool
		want                        []int
	}{
		{false, false, false, []int{ExitOK, ExitNotJudged}},
		{false, true, false, []int{ExitNotJudged}},
		{true, true, false, []int{ExitFailed}},
		// A store that accepts and never answers: the push ends at its
		// deadline, after the verdict and the folder were printed (-q).
		{false, false, true, []int{ExitOK, ExitNotJudged}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := []string{"-out", out, "-path", "/none", "-offcpu=false", "-copies", "off", "-push", "http://127.0.0.1:1"}
		if c.required {
			args = append(args, "-push-required")
		}
		if c.notJudged {
			args = append(args, "-min-requests", "1000000000")
		}
		if c.silent {
			args = append(args, "-q", "-push", "http://"+silent, "-push-timeout", "2s", "-header", "Authorization: Bearer hdr-s3cret")
		}
		code, stdout, stderr := probeRun(t, append(args, "./testdata/probetarget")...)
		want := "connection refused"
		if c.silent {
			// One deadline for the push, not one per profile.
			want = "-push-timeout"
			if !strings.Contains(stderr, "profiles were not sent") {
				t.Errorf("%+v: the push went on after the store did not answer:\n%s", c, stderr)
			}
			if !strings.Contains(stdout, "results       "+out) {
				t.Errorf("%+v: the results folder was not printed: %q", c, stdout)
			}
			meta, err := os.Stat(filepath.Join(out, "meta"))
			if err != nil || meta.Mode().Perm() != 0o600 {
				t.Errorf("%+v: meta %v, want mode 0600", c, err)
			}
			if b, _ := os.ReadFile(filepath.Join(out, "meta")); strings.Contains(string(b), "hdr-s3cret") || !strings.Contains(string(b), "Authorization:REDACTED") {
				t.Errorf("%+v: meta's header is not redacted:\n%s", c, b)
			}
		}
		if !strings.Contains(stderr, "push to the profile store failed") || !strings.Contains(stderr, want) {
			t.Errorf("%+v: stderr %q", c, stderr)
		}
		if _, err := os.Stat(filepath.Join(out, "allocs.pb.gz")); err != nil {
			t.Errorf("%+v: results lost: %v", c, err)
		}
		if !slices.Contains(c.want, code) {
			t.Errorf("%+v: exit %d", c, code)
		}
	}
}

// busiestRoute is the route (not the background, not before routing) with
// the most allocations in a profile.
func busiestRoute(t *testing.T, path string) string {
	t.Helper()
	p, err := readProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int64{}
	for _, s := range p.Sample {
		if r := routeOf(s); r != "" && r != profkey.Background && r != profkey.BeforeRouting {
			n[r] += s.Value[0]
		}
	}
	best := ""
	for r, v := range n {
		if best == "" || v > n[best] {
			best = r
		}
	}
	if best == "" {
		t.Fatalf("%s: no route labels", path)
	}
	return best
}
