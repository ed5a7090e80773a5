// Command httpjson is perfspy's default benchmark target: a net/http server
// whose GET /json builds an 8 KB JSON document per request from an in-memory
// dataset, and whose GET /text returns a short text.
//
// Usage:
//
//	httpjson [-addr host:port] [-accesslog] [-encoder std|append]
//
// -accesslog writes one log line per request to stdout, through a global
// lock, formatted with fmt. -encoder chooses encoding/json (std) or a
// hand-written writer that appends to a pooled buffer (append).
//
// The default address, 127.0.0.1:0, picks a free port; the server prints the
// address it listens on. probe finds it from the process's sockets.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
)

// Item is one record of the dataset: 8 fields.
type Item struct {
	ID       int      `json:"id"`
	Name     string   `json:"name"`
	SKU      string   `json:"sku"`
	Price    float64  `json:"price"`
	Quantity int      `json:"quantity"`
	InStock  bool     `json:"in_stock"`
	Tags     []string `json:"tags"`
	Vendor   string   `json:"vendor"`
}

// Document is the body of GET /json.
type Document struct {
	Items []Item  `json:"items"`
	Count int     `json:"count"`
	Total float64 `json:"total"`
}

// dataset is built once; each request copies and encodes it.
var dataset = makeDataset(50)

func makeDataset(n int) []Item {
	vendors := []string{"acme-industrial-supply", "globex-corporation", "initech-systems", "umbrella-holdings"}
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{
			ID:       i + 1,
			Name:     fmt.Sprintf("widget model %03d, extended", i+1),
			SKU:      fmt.Sprintf("SKU-%06d-%04X", 100000+i*37, i*7919),
			Price:    float64(100+i*13) + 0.99,
			Quantity: (i * 7) % 23,
			InStock:  i%3 != 0,
			Tags:     []string{"hardware", fmt.Sprintf("series-%d", i%5)},
			Vendor:   vendors[i%len(vendors)],
		}
	}
	return items
}

// buildDocument assembles the per-request document and its computed total.
func buildDocument() Document {
	doc := Document{Items: make([]Item, len(dataset)), Count: len(dataset)}
	copy(doc.Items, dataset)
	for _, it := range doc.Items {
		doc.Total += it.Price * float64(it.Quantity)
	}
	return doc
}

var (
	accessLog = flag.Bool("accesslog", false, "write one log line per request")
	encoder   = flag.String("encoder", "std", "std (encoding/json) or append (hand-written)")
	logMu     sync.Mutex
	bufPool   = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}
)

// logRequest writes the access log line: a global lock, fmt formatting.
func logRequest(r *http.Request, status, size int) {
	logMu.Lock()
	fmt.Fprintf(os.Stdout, "%s %s %s %d %d\n", r.RemoteAddr, r.Method, r.URL.Path, status, size)
	logMu.Unlock()
}

// appendDocument writes doc as JSON, field for field what encoding/json
// writes, appending to b.
func appendDocument(b []byte, doc *Document) []byte {
	b = append(b, `{"items":[`...)
	for i := range doc.Items {
		it := &doc.Items[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(it.ID), 10)
		b = append(b, `,"name":`...)
		b = strconv.AppendQuote(b, it.Name)
		b = append(b, `,"sku":`...)
		b = strconv.AppendQuote(b, it.SKU)
		b = append(b, `,"price":`...)
		b = strconv.AppendFloat(b, it.Price, 'f', -1, 64)
		b = append(b, `,"quantity":`...)
		b = strconv.AppendInt(b, int64(it.Quantity), 10)
		b = append(b, `,"in_stock":`...)
		b = strconv.AppendBool(b, it.InStock)
		b = append(b, `,"tags":[`...)
		for j, t := range it.Tags {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, t)
		}
		b = append(b, `],"vendor":`...)
		b = strconv.AppendQuote(b, it.Vendor)
		b = append(b, '}')
	}
	b = append(b, `],"count":`...)
	b = strconv.AppendInt(b, int64(doc.Count), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendFloat(b, doc.Total, 'f', -1, 64)
	return append(b, '}')
}

func handleJSON(w http.ResponseWriter, r *http.Request) {
	doc := buildDocument()
	w.Header().Set("Content-Type", "application/json")
	var n int
	if *encoder == "append" {
		bp := bufPool.Get().(*[]byte)
		*bp = appendDocument((*bp)[:0], &doc)
		n, _ = w.Write(*bp)
		bufPool.Put(bp)
	} else {
		body, err := json.Marshal(doc)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		n, _ = w.Write(body)
	}
	if *accessLog {
		logRequest(r, http.StatusOK, n)
	}
}

func handleText(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	n, _ := w.Write([]byte("ok\n"))
	if *accessLog {
		logRequest(r, http.StatusOK, n)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	if *encoder != "std" && *encoder != "append" {
		log.Fatalf("httpjson: -encoder %q: want std or append", *encoder)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /json", handleJSON)
	mux.HandleFunc("GET /text", handleText)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("httpjson: %v", err)
	}
	fmt.Fprintf(os.Stderr, "httpjson: listening on %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
