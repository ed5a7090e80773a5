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
