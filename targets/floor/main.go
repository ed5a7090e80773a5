// Command floor is the minimal server: every request gets the 2-byte
// response "ok", over HTTP/1.1 or h2c. probe run -floor measures it beside a target, and reports
// the target's CPU per request as a ratio to this floor.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "floor: listening on %s\n", ln.Addr())
	body := []byte("ok")
	// HTTP/1.1, and HTTP/2 with prior knowledge (h2c): the lightest
	// handler for each of the HTTP drivers.
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })}
	log.Fatal(srv.Serve(ln))
}
