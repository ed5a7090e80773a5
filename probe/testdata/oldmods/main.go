// Command oldmods is a test target that requires older versions of modules
// perfspy itself requires (golang.org/x/net, golang.org/x/sys): a probe
// build must keep them. GET / answers with the Unicode version of the
// x/net/idna tables it was built with, which differs between x/net v0.20.0
// (15.0.0) and perfspy's x/net (17.0.0).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"

	"golang.org/x/net/idna"
	"golang.org/x/sys/unix"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "idna %s uid %d\n", idna.UnicodeVersion, unix.Getuid())
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening on", ln.Addr())
	http.Serve(ln, nil)
}
