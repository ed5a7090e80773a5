package livepush

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	pushv1 "github.com/grafana/pyroscope/api/gen/proto/go/push/v1"
	"google.golang.org/protobuf/proto"

	"github.com/perfspy/perfspy/agent/wire"
)

func frames(pc uint64, fns ...string) wire.PCFrames {
	pf := wire.PCFrames{PC: pc}
	for i, f := range fns {
		pf.Frames = append(pf.Frames, wire.Frame{Func: f, File: "/src/" + f + ".go", Line: 10 + i})
	}
	return pf
}

// TestAllocProfile: the agent's own pprof encoding, read by
// github.com/google/pprof: sample types, values, stacks as allocspy
// shapes them (runtime frames above the site dropped, inlined frames as
// one location's lines), labels, the requests sample, comments, time.
func TestAllocProfile(t *testing.T) {
	sites := []wire.AllocSite{
		{Stack: []wire.PCFrames{frames(0x10, "runtime.makeslice"), frames(0x20, "main.inner", "main.outer"), frames(0x30, "main.handler")}, Objects: 3, Blocks: 3, ReqBytes: 24, AllocBytes: 48},
		{Stack: []wire.PCFrames{frames(0x40, "main.other"), frames(0x30, "main.handler")}, Objects: 1, Blocks: 1, ReqBytes: 8, AllocBytes: 8},
	}
	b := allocProfile("GET /x", sites, 5)
	b.timeNanos, b.durationNanos = 1e18, 15e9
	b.addComment("perfspy.requests=5")
	p, err := profile.ParseData(b.encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, " "); got != "alloc_objects/count alloc_space/bytes heap_blocks/count requested_space/bytes requests/count" {
		t.Errorf("sample types %s", got)
	}
	if p.DefaultSampleType != "alloc_space" || p.PeriodType.Type != "space" || p.TimeNanos != 1e18 || p.DurationNanos != 15e9 || !slices.Equal(p.Comments, []string{"perfspy.requests=5"}) {
		t.Errorf("header: default %s period %v time %d duration %d comments %q", p.DefaultSampleType, p.PeriodType, p.TimeNanos, p.DurationNanos, p.Comments)
	}
	if len(p.Sample) != 3 {
		t.Fatalf("%d samples, want 3", len(p.Sample))
	}
	s := p.Sample[0]
	if !slices.Equal(s.Value, []int64{3, 48, 3, 24, 0}) || s.Label["via"][0] != "runtime.makeslice" || s.Label["route"][0] != "GET /x" {
		t.Errorf("first sample %v %v", s.Value, s.Label)
	}
	if len(s.Location) != 2 || len(s.Location[0].Line) != 2 || s.Location[0].Line[0].Function.Name != "main.inner" || s.Location[0].Line[1].Line != 11 || s.Location[0].Address != 0x20 {
		t.Errorf("first sample's stack: %+v", s.Location[0])
	}
	if p.Sample[1].Location[1] != s.Location[1] {
		t.Error("main.handler's location is not shared")
	}
	r := p.Sample[2]
	if r.Location[0].Line[0].Function.Name != RequestsFrame || !slices.Equal(r.Value, []int64{0, 0, 0, 0, 5}) {
		t.Errorf("requests sample %v on %s", r.Value, r.Location[0].Line[0].Function.Name)
	}
}

// TestCopyProfile: copies by size bucket, memmove and memclr in sample
// types of their own, as copyspy's profile has them.
func TestCopyProfile(t *testing.T) {
	sites := []wire.CopySite{
		{Kind: "memmove", Stack: []wire.PCFrames{frames(0x10, "runtime.growslice"), frames(0x20, "main.f")}, Calls: [4]uint64{2, 0, 1, 0}, Bytes: [4]uint64{40, 0, 2000, 0}},
		{Kind: "memclr", Stack: []wire.PCFrames{frames(0x30, "main.g")}, Calls: [4]uint64{0, 1, 0, 0}, Bytes: [4]uint64{0, 512, 0, 0}},
	}
	p, err := profile.ParseData(copyProfile("GET /x", sites, 2).encode())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{"main.f <64": {2, 40, 0, 0, 0}, "main.f <16K": {1, 2000, 0, 0, 0}, "main.g <1K": {0, 0, 1, 512, 0}, "perfspy.requests ": {0, 0, 0, 0, 2}}
	got := map[string][]int64{}
	for _, s := range p.Sample {
		got[s.Location[0].Line[0].Function.Name+" "+strings.Join(s.Label["bucket"], "")] = s.Value
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) || !slices.Contains(p.Comments, "perfspy.copies_profile=v2") {
		t.Errorf("samples %v comments %q", got, p.Comments)
	}
}

// TestEncodePush: a push.v1 PushRequest that the store's own generated
// code reads: one series per profile, the labels sorted, the config's
// labels under the series' own, the profile gzipped.
func TestEncodePush(t *testing.T) {
	cfg := &Config{Service: "api", Labels: map[string]string{"env": "prod", "route": "not this"}}
	prof := newProfile([][2]string{{RequestsType, "count"}}, [2]string{RequestsType, "count"}, RequestsType)
	prof.add(prof.frame(RequestsFrame), []int64{7})
	body := encodePush(cfg, []Series{{NameRequests, "GET /x", prof.encode()}, {NameDropped, "", droppedProfile(2, nil, time.Unix(0, 0), time.Unix(15, 0))}})
	var req pushv1.PushRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Series) != 2 {
		t.Fatalf("%d series", len(req.Series))
	}
	var labels []string
	for _, l := range req.Series[0].Labels {
		labels = append(labels, l.Name+"="+l.Value)
	}
	if got := strings.Join(labels, ","); got != "__delta__=false,__name__=perfspy_requests,env=prod,route=GET /x,service_name=api" {
		t.Errorf("labels %s", got)
	}
	p, err := profile.ParseData(req.Series[0].Samples[0].RawProfile)
	if err != nil || len(p.Sample) != 1 || p.Sample[0].Value[0] != 7 {
		t.Errorf("the series' profile: %v %v", p, err)
	}
	d, err := profile.ParseData(req.Series[1].Samples[0].RawProfile)
	if err != nil || len(d.Sample) != 1 || d.Sample[0].Value[0] != 2 || d.Sample[0].Location[0].Line[0].Function.Name != "perfspy.dropped_periods" {
		t.Errorf("the dropped series: %v %v", d, err)
	}
}

// testPusher is a Pusher whose post is the test's.
func testPusher(post func(ctx context.Context, body []byte) error) (*Pusher, *bytes.Buffer) {
	var log bytes.Buffer
	cfg := &Config{Push: "http://127.0.0.1:1", Service: "s", Period: time.Second}
	cfg.Access.Timeout = time.Second
	p := &Pusher{cfg: cfg, queue: make(chan *Period, QueueLen), log: &Logger{W: &log}, tables: map[string]uint64{}, post: post}
	return p, &log
}

func testPeriod(i int) *Period {
	from := time.Unix(int64(i), 0)
	return &Period{From: from, Until: from.Add(time.Second), Dropped: map[string]uint64{}, Series: RouteSeries(&Period{From: from, Until: from.Add(time.Second)}, "GET /x", &RouteData{Requests: 1}, nil, 1)}
}

// droppedIn reads the periods lost that a push says.
func droppedIn(t *testing.T, body []byte) int64 {
	t.Helper()
	var req pushv1.PushRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	for _, s := range req.Series {
		for _, l := range s.Labels {
			if l.Name == "__name__" && l.Value == NameDropped {
				p, err := profile.ParseData(s.Samples[0].RawProfile)
				if err != nil {
					t.Fatal(err)
				}
				for _, smp := range p.Sample {
					if smp.Location[0].Line[0].Function.Name == "perfspy.dropped_periods" {
						return smp.Value[0]
					}
				}
			}
		}
	}
	return 0
}

// TestSlowStore: a store that does not answer holds one period in flight
// and QueueLen waiting; every other period is lost, counted, said once on
// stderr and in the next push that arrives.
func TestSlowStore(t *testing.T) {
	release, inFlight := make(chan struct{}), make(chan struct{}, 1)
	var mu sync.Mutex
	var bodies [][]byte
	p, log := testPusher(func(ctx context.Context, body []byte) error {
		select {
		case inFlight <- struct{}{}:
		default:
		}
		<-release
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	p.Enqueue(testPeriod(0))
	// Period 0 is encoded and its push under way (blocked) before the
	// others come: the periods lost are said by the push after it.
	<-inFlight
	for i := 1; i <= 10; i++ {
		p.Enqueue(testPeriod(i))
	}
	if len(p.queue) != QueueLen || p.pending.Load() != QueueLen+1 {
		t.Errorf("queue %d, pending %d: want %d waiting and one in flight", len(p.queue), p.pending.Load(), QueueLen)
	}
	close(release)
	if !p.Drain(ctx) {
		t.Fatal("not drained")
	}
	lost := int64(10 - QueueLen)
	if len(bodies) != QueueLen+1 || droppedIn(t, bodies[0]) != 0 || droppedIn(t, bodies[1]) != lost || droppedIn(t, bodies[2]) != 0 {
		t.Errorf("%d pushes; dropped said: %d, %d, %d; want %d in the second only", len(bodies), droppedIn(t, bodies[0]), droppedIn(t, bodies[1]), droppedIn(t, bodies[2]), lost)
	}
	if strings.Count(log.String(), "slower than the periods") != 1 {
		t.Errorf("stderr:\n%s", log.String())
	}
}

// TestPushPanics: a panic in a push is recovered and reported, the
// period counted lost, and the Pusher goes on.
func TestPushPanics(t *testing.T) {
	calls := 0
	var said []int64
	p, log := testPusher(func(ctx context.Context, body []byte) error {
		calls++
		if calls == 1 {
			panic("boom")
		}
		said = append(said, droppedIn(t, body))
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	p.Enqueue(testPeriod(0))
	p.Enqueue(testPeriod(1))
	if !p.Drain(ctx) {
		t.Fatal("not drained")
	}
	if !strings.Contains(log.String(), "panic in push, recovered") || calls != 2 {
		t.Errorf("calls %d, stderr:\n%s", calls, log.String())
	}
	// The period of the push that panicked is lost, and said.
	if !slices.Equal(said, []int64{1}) {
		t.Errorf("pushes after the panic: %v", said)
	}
}

// TestStoreDown: a store that refuses loses the period, says so once, and
// the next push that arrives counts it.
func TestStoreDown(t *testing.T) {
	fail := true
	var said []int64
	p, log := testPusher(func(ctx context.Context, body []byte) error {
		if fail {
			return errors.New("push to http://127.0.0.1:1: connection refused")
		}
		said = append(said, droppedIn(t, body))
		return nil
	})
	ctx := context.Background()
	for i := range 3 {
		p.pending.Add(1)
		p.send(ctx, testPeriod(i))
	}
	fail = false
	for i := 3; i < 5; i++ {
		p.pending.Add(1)
		p.send(ctx, testPeriod(i))
	}
	if !slices.Equal(said, []int64{3, 0}) || strings.Count(log.String(), "connection refused") != 1 || !strings.Contains(log.String(), "3 periods were lost") {
		t.Errorf("said %v, stderr:\n%s", said, log.String())
	}
}

// TestFromEnv: defaults, and errors that name the variable.
func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := FromEnv(env(wire.PushEnv, "http://127.0.0.1:4040/", LabelsEnv, "env=prod, region=x"), "abc")
	if err != nil {
		t.Fatal(err)
	}
	if c.Push != "http://127.0.0.1:4040" || c.Sample != wire.DefaultSample || c.Period != DefaultPeriod || c.Access.Timeout != DefaultPeriod ||
		c.Labels["env"] != "prod" || c.Labels["region"] != "x" || c.Labels["commit"] != "abc" || c.Labels["sample"] != "64" || c.Service == "" || !c.LastPush {
		t.Errorf("config %+v", c)
	}
	c, err = FromEnv(env(wire.PushEnv, "http://127.0.0.1:4040", wire.SampleEnv, "16", PeriodEnv, "2s", LabelsEnv, "commit=mine", ServiceEnv, "api"), "abc")
	if err != nil || c.Sample != 16 || c.Period != 2*time.Second || c.Access.Timeout != 2*time.Second || c.Labels["commit"] != "mine" || c.Service != "api" {
		t.Errorf("config %+v: %v", c, err)
	}
	for _, bad := range [][]string{
		{wire.PushEnv, "127.0.0.1:4040"},
		{wire.PushEnv, "http://user:secret@127.0.0.1:4040"},
		{wire.PushEnv, "http://store.example:4040", "PERFSPY_PUSH_TOKEN", "t0ken"},
		{wire.PushEnv, "http://127.0.0.1:4040", wire.SampleEnv, "0"},
		{wire.PushEnv, "http://127.0.0.1:4040", PeriodEnv, "10ms"},
		{wire.PushEnv, "http://127.0.0.1:4040", LabelsEnv, "route=x"},
		{wire.PushEnv, "http://127.0.0.1:4040", LabelsEnv, "a-b=x"},
		{wire.PushEnv, "http://127.0.0.1:4040", LastPushEnv, "no"},
	} {
		_, err := FromEnv(env(bad...), "")
		if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "t0ken") {
			t.Errorf("%q: %v", bad, err)
			continue
		}
		if named := bad[len(bad)-2]; !strings.Contains(err.Error(), named) && named != "PERFSPY_PUSH_TOKEN" {
			t.Errorf("%q: %v does not name %s", bad, err, named)
		}
	}
}

// FuzzParseLabels: PERFSPY_LABELS never panics, and what it takes is
// names the store takes.
func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{"env=prod,region=x", "", "a=", "=b", "route=x", "a=b=c", " a = b ,", "é=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseLabels(s)
		if err != nil {
			return
		}
		for k := range m {
			if !labelName.MatchString(k) || reserved[k] {
				t.Errorf("%q: took label %q", s, k)
			}
		}
	})
}

// TestIdlePeriod: a period without requests and with nothing lost is not
// pushed (the store refuses an empty push, which would count as a loss).
func TestIdlePeriod(t *testing.T) {
	calls := 0
	p, log := testPusher(func(ctx context.Context, body []byte) error {
		calls++
		return nil
	})
	p.pending.Add(1)
	p.send(context.Background(), &Period{From: time.Unix(0, 0), Until: time.Unix(1, 0)})
	if calls != 0 || p.pending.Load() != 0 || log.Len() != 0 {
		t.Errorf("an idle period: %d pushes, %d pending, stderr %q", calls, p.pending.Load(), log.String())
	}
}
