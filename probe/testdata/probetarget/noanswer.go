package main

import (
	"net/http"
	"strconv"
	"sync/atomic"
)

// registerNoAnswer adds /noanswer?every=N[&leak=1]: every Nth request
// never answers (its handler waits for ever), and with leak=1 every
// request starts a goroutine that never ends: a server whose windows must
// still end at their deadlines.
func registerNoAnswer(mux *http.ServeMux) {
	var n atomic.Int64
	never := make(chan struct{})
	mux.HandleFunc("GET /noanswer", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("leak") == "1" {
			go func() { <-never }()
		}
		if every, _ := strconv.ParseInt(r.URL.Query().Get("every"), 10, 64); every > 0 && n.Add(1)%every == 0 {
			<-never
		}
		w.Write([]byte("ok"))
	})
}
