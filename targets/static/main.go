// Command static serves a directory of files (by default its own corpus,
// testdata/www, embedded). A file may have precompressed twins, name.gz and
// name.br: with -precompressed=1 they are served when the request's
// Accept-Encoding allows; otherwise a client that accepts gzip gets the
// file gzipped on the fly, with a new gzip writer per request.
package main

import (
	"compress/gzip"
	"embed"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"mime"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
)

//go:embed testdata/www
var corpus embed.FS

var precompressed = flag.Bool("precompressed", false, "serve name.gz / name.br twins when the client accepts them")

func accepts(r *http.Request, enc string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(strings.SplitN(part, ";", 2)[0]) == enc {
			return true
		}
	}
	return false
}

// gzipOnTheFly compresses the file for this request.
//
//go:noinline
func gzipOnTheFly(w io.Writer, f io.Reader) error {
	zw := gzip.NewWriter(w)
	if _, err := io.Copy(zw, f); err != nil {
		return err
	}
	return zw.Close()
}

func handler(files fs.FS) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.Header().Set("Vary", "Accept-Encoding")
		if *precompressed {
			for _, tw := range []struct{ enc, ext string }{{"br", ".br"}, {"gzip", ".gz"}} {
				if !accepts(r, tw.enc) {
					continue
				}
				if f, err := files.Open(name + tw.ext); err == nil {
					defer f.Close()
					w.Header().Set("Content-Encoding", tw.enc)
					io.Copy(w, f)
					return
				}
			}
		}
		f, err := files.Open(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		if accepts(r, "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			gzipOnTheFly(w, f)
			return
		}
		io.Copy(w, f)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dir := flag.String("dir", "", "directory to serve (default: the embedded corpus)")
	flag.Parse()
	var files fs.FS
	if *dir != "" {
		files = os.DirFS(*dir)
	} else {
		sub, err := fs.Sub(corpus, "testdata/www")
		if err != nil {
			log.Fatal(err)
		}
		files = sub
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "static: listening on %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, handler(files)))
}
