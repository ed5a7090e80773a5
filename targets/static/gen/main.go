// Command gen writes targets/static's corpus: deterministic text files of a
// few kilobytes and their gzip twins. Run from the repository root:
//
//	go run ./targets/static/gen
package main

import (
	"compress/gzip"
	"fmt"
	"log"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	dir := "targets/static/testdata/www"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	words := strings.Fields("perfspy request allocation copy syscall window profile server handler latency budget review build commit function delta")
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[rng.Intn(len(words))])
			if rng.Intn(12) == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	files := map[string]string{
		"index.html": "<!doctype html><title>static</title><body><pre>\n" + text(6000) + "</pre></body>\n",
		"app.js":     "// generated\n" + strings.ReplaceAll(text(12000), ".\n", ";\nconsole.log(1);\n"),
		"data.json":  fmt.Sprintf("{\"text\":%q}\n", text(20000)),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			log.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, name+".gz"))
		if err != nil {
			log.Fatal(err)
		}
		zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
		zw.ModTime = zw.ModTime.UTC() // zero time: deterministic output
		zw.Write([]byte(body))
		if err := zw.Close(); err != nil {
			log.Fatal(err)
		}
		f.Close()
	}
}
