package main

import (
	"flag"
	"io"
	"log"
	"net"
	"net/http"
)

var upstreamAddr = flag.String("upstream", "", "also listen on this `address`, an upstream in the same process: GET /up answers there (3 allocations in main.upWork), and GET /proxy on the main listener asks it once per request")

// upSink keeps upWork's allocations.
var upSink [][]byte

// upWork allocates 3 objects of 64 B: the upstream's own work.
//
//go:noinline
func upWork() {
	for range 3 {
		upSink = append(upSink[:0], make([]byte, 64))
	}
}

// startUpstream serves the in-process upstream and adds /proxy to mux.
func startUpstream(mux *http.ServeMux) {
	if *upstreamAddr == "" {
		return
	}
	ln, err := net.Listen("tcp", *upstreamAddr)
	if err != nil {
		log.Fatal(err)
	}
	up := http.NewServeMux()
	up.HandleFunc("GET /up", func(w http.ResponseWriter, r *http.Request) {
		upWork()
		w.Write([]byte("up"))
	})
	go http.Serve(ln, up)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	url := "http://" + ln.Addr().String() + "/up"
	mux.HandleFunc("GET /proxy", func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Get(url)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(w, resp.Body)
		resp.Body.Close()
	})
}
