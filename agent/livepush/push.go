// Package livepush is live mode's way to the store, inside the user's
// program: its configuration from the environment (PERFSPY_*), the
// periods' profiles encoded as pprof with the standard library only, and
// a bounded queue that pushes them one at a time, so that a store that is
// down or slow never blocks the program nor holds more than a few periods
// (docs/live.md).
package livepush

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perfspy/perfspy/agent/storeaccess"
)

// pushPath is the store's push.v1.PusherService Push, called with the
// Connect protocol's binary encoding, as probe run -push calls it.
const pushPath = "/push.v1.PusherService/Push"

// Pusher sends periods to the store one at a time, from a bounded queue:
// a store that is down or slow never blocks the collector and never holds
// more than QueueLen periods.
type Pusher struct {
	cfg     *Config
	queue   chan *Period
	pending atomic.Int64 // periods enqueued and not yet sent or lost
	post    func(ctx context.Context, body []byte) error
	log     *Logger

	mu     sync.Mutex
	lost   uint64            // periods lost since the last push that arrived
	tables map[string]uint64 // table drops not yet said
	since  time.Time         // the start of what the drops cover
	down   bool
}

func NewPusher(cfg *Config, log *Logger) (*Pusher, error) {
	hc, err := cfg.Access.Client()
	if err != nil {
		return nil, err
	}
	p := &Pusher{cfg: cfg, queue: make(chan *Period, QueueLen), log: log, tables: map[string]uint64{}}
	p.post = func(ctx context.Context, body []byte) error { return postPush(ctx, hc, cfg.Push, body) }
	return p, nil
}

// enqueue adds a period; when the queue is full, the oldest is lost.
func (p *Pusher) Enqueue(pd *Period) {
	p.pending.Add(1)
	for {
		select {
		case p.queue <- pd:
			return
		default:
		}
		select {
		case old := <-p.queue:
			p.lose(old)
			p.log.Once("queue", "perfspy live: the store %s is slower than the periods: the oldest waiting period is dropped (counted, and said in the next push)", storeaccess.Redact(p.cfg.Push))
		default:
		}
	}
}

// run sends what the queue holds until ctx ends.
func (p *Pusher) Run(ctx context.Context) {
	for {
		select {
		case pd := <-p.queue:
			p.send(ctx, pd)
		case <-ctx.Done():
			return
		}
	}
}

// send pushes one period, with what was lost before it. A period the
// store refuses is lost, not retried: the next one says so.
func (p *Pusher) send(ctx context.Context, pd *Period) {
	defer p.pending.Add(-1)
	defer p.log.Recover("push", func() { p.count(pd) })
	p.mu.Lock()
	lost, before, since := p.lost, maps.Clone(p.tables), p.since
	p.mu.Unlock()
	tables := maps.Clone(before)
	for k, v := range pd.Dropped {
		tables[k] += v
	}
	if since.IsZero() {
		since = pd.From
	}
	extra := []Series(nil)
	if lost > 0 || len(tables) > 0 {
		extra = append(extra, Series{name: NameDropped, profile: droppedProfile(lost, tables, since, pd.Until)})
	}
	if len(pd.Series)+len(extra) == 0 {
		return // an idle period, nothing lost: nothing to say (the store refuses an empty push)
	}
	body := encodePush(p.cfg, append(slices.Clip(pd.Series), extra...))
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Access.Timeout)
	err := p.post(cctx, body)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.mu.Unlock()
		p.count(pd)
		p.mu.Lock()
		if !p.down {
			p.down = true
			p.log.Printf("perfspy live: %v; periods are lost while the store fails (counted, and said in the next push)", err)
		}
		return
	}
	if p.down {
		p.down = false
		p.log.Printf("perfspy live: the store %s answers again; %d periods were lost", storeaccess.Redact(p.cfg.Push), lost)
	}
	// What was lost while this push was in flight is said by the next.
	p.lost -= lost
	for k, v := range before {
		if p.tables[k] -= v; p.tables[k] == 0 {
			delete(p.tables, k)
		}
	}
	if p.lost == 0 && len(p.tables) == 0 {
		p.since = time.Time{}
	}
}

// lose counts a period that was never sent.
func (p *Pusher) lose(pd *Period) {
	p.count(pd)
	p.pending.Add(-1)
}

// count adds a lost period to what the next push says.
func (p *Pusher) count(pd *Period) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lost++
	for k, v := range pd.Dropped {
		p.tables[k] += v
	}
	if p.since.IsZero() {
		p.since = pd.From
	}
}

// Drain waits until every period enqueued is sent or lost, or ctx ends.
func (p *Pusher) Drain(ctx context.Context) bool {
	for p.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// encodePush writes a push.v1 PushRequest: one RawProfileSeries per
// series, its labels the series' own and the config's, its profile
// gzipped.
func encodePush(cfg *Config, ss []Series) []byte {
	var p protoBuf
	for _, s := range ss {
		labels := map[string]string{"__name__": s.name, "__delta__": "false", "service_name": cfg.Service}
		if s.route != "" {
			labels[RouteLabel] = s.route
		}
		for k, v := range cfg.Labels {
			if _, ok := labels[k]; !ok {
				labels[k] = v
			}
		}
		p.message(1, func(q *protoBuf) {
			for _, k := range slices.Sorted(maps.Keys(labels)) {
				q.message(1, func(r *protoBuf) { r.string(1, k); r.string(2, labels[k]) })
			}
			q.message(2, func(r *protoBuf) { r.bytes(1, gzipped(s.profile)) })
		})
	}
	return p.b
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// postPush calls Push; an error names the store (redacted) and what it
// answered.
func postPush(ctx context.Context, hc *http.Client, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+pushPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("push to %s: %w", storeaccess.Redact(base), err)
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("push to %s: %w", storeaccess.Redact(base), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		// The store's words go to the application's standard error:
		// quoted, so that no escape sequence or control character in
		// them reaches a terminal raw.
		return fmt.Errorf("push to %s: %s: %s", storeaccess.Redact(base), strconv.Quote(resp.Status), strconv.Quote(string(bytes.TrimSpace(msg))))
	}
	return nil
}
