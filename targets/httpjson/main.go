// Command httpjson is perfspy's default benchmark target: a net/http server
// whose GET /json builds an 8 KB JSON document per request from an in-memory
// dataset, and whose GET /text returns a short text.
//
// Usage:
//
//	httpjson [-addr host:port]
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

func handleJSON(w http.ResponseWriter, r *http.Request) {
	body, err := json.Marshal(buildDocument())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func handleText(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("ok\n"))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()

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
