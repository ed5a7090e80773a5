package main

import (
	"net/http"
	"strconv"
	"sync"
)

// registerContend adds /contend?g=G&n=N: the request starts G goroutines
// that pass N values each through one shared channel, so that the
// channel's lock (a runtime lock) is contended across Ps, long enough
// for a waiter to sleep in the runtime's lock2 (which reads the CPU's
// tick counter): the instructions window's ground for runs under
// callgrind.
func registerContend(mux *http.ServeMux) {
	shared := make(chan int, 4)
	mux.HandleFunc("GET /contend", func(w http.ResponseWriter, r *http.Request) {
		g, _ := strconv.Atoi(r.URL.Query().Get("g"))
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		var wg sync.WaitGroup
		for range min(max(g, 1), 64) {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range n {
					shared <- i
				}
			}()
			go func() {
				defer wg.Done()
				for range n {
					<-shared
				}
			}()
		}
		wg.Wait()
		w.Write([]byte("ok"))
	})
}
