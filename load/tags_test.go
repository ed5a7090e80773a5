package load

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// TestLeanTags: with tagging on, the lean driver keys each answered
// request as the server names it (the connection's port, the request's
// number on the connection, as net/http's overlay counts them); off, it
// keeps none; Tags forgets what it returned.
func TestLeanTags(t *testing.T) {
	var mu sync.Mutex
	perConn := map[string]uint64{}
	var seen []uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perConn[r.RemoteAddr]++
		_, port, _ := net.SplitHostPort(r.RemoteAddr)
		p, _ := strconv.ParseUint(port, 10, 64)
		seen = append(seen, p<<48|perConn[r.RemoteAddr])
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	d, err := NewLean(HTTPOptions{URL: srv.URL + "/", Conns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.RunN(context.Background(), 30); err != nil { // untagged: counted, not kept
		t.Fatal(err)
	}
	mu.Lock()
	seen = nil
	mu.Unlock()
	d.Tagging(true)
	if _, err := d.RunN(context.Background(), 60); err != nil {
		t.Fatal(err)
	}
	d.Tagging(false)
	tags := d.Tags()
	var keys []uint64
	for _, tg := range tags {
		if tg.US <= 0 {
			t.Errorf("tag %x: latency %d µs", tg.Peer, tg.US)
		}
		keys = append(keys, tg.Peer)
	}
	slices.Sort(keys)
	slices.Sort(seen)
	if len(keys) != 60 || !slices.Equal(keys, seen) {
		t.Errorf("the driver keyed %d requests %x, the server numbered %x", len(keys), keys, seen)
	}
	if again := d.Tags(); len(again) != 0 {
		t.Errorf("Tags kept %d after returning them", len(again))
	}
}

// TestH2LeanTags: with tagging on, the lean h2c driver keys each answered
// request by its connection's local port and its stream id, which on a
// connection of one stream at a time is 2n-1 for the server's n-th
// request there (RFC 9113: client streams are odd and increase); net/http's
// overlay writes the stream id the server read, so the keys are the ones a
// plain server numbers. Off, it keeps none.
func TestH2LeanTags(t *testing.T) {
	addr, _, _ := h2cServer(t)
	d, err := NewH2Lean(HTTPOptions{URL: "http://" + addr + "/ok", Conns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.RunN(context.Background(), 30); err != nil {
		t.Fatal(err)
	}
	if tags := d.Tags(); len(tags) != 0 {
		t.Fatalf("untagged, yet %d tags", len(tags))
	}
	d.Tagging(true)
	if _, err := d.RunN(context.Background(), 60); err != nil {
		t.Fatal(err)
	}
	d.Tagging(false)
	byPort := map[uint64][]uint64{}
	for _, tg := range d.Tags() {
		if tg.US <= 0 {
			t.Errorf("tag %x: latency %d µs", tg.Peer, tg.US)
		}
		byPort[tg.Peer>>48] = append(byPort[tg.Peer>>48], tg.Peer&(1<<48-1))
	}
	n := 0
	for port, ids := range byPort {
		slices.Sort(ids)
		first := ids[0]
		for k, id := range ids {
			if id != first+2*uint64(k) || id%2 != 1 {
				t.Errorf("port %d: stream ids %v, want odd and consecutive", port, ids)
				break
			}
		}
		n += len(ids)
	}
	if n != 60 || len(byPort) == 0 || len(byPort) > 3 {
		t.Errorf("%d tags on %d connections, want 60 on at most 3", n, len(byPort))
	}
}
