package flame

import (
	_ "embed"
	"encoding/json"
	"html"
	"io"
	"strings"

	"github.com/perfspy/perfspy/internal/safetext"
)

//go:embed assets/page.html
var pageHTML string

//go:embed assets/page.js
var pageJS string

// pageData is the tree as the page reads it: preorder, one entry per node
// in each array.
type pageData struct {
	Title string   `json:"title"`
	Unit  string   `json:"unit"`
	Diff  bool     `json:"diff"`
	Req   int64    `json:"req,omitempty"`
	BReq  int64    `json:"breq,omitempty"`
	Scale int64    `json:"scale,omitempty"` // values count 1/scale units
	Names []string `json:"names"`
	N     []int    `json:"n"`
	V     []int64  `json:"v"`
	B     []int64  `json:"b"`
	W     []int64  `json:"w"`
	D     []int    `json:"d"`
}

// WriteHTML writes t as one self-contained HTML page: no request leaves
// it. It has zoom, search, an icicle view, a sandwich view of a function's
// callers and callees, and tooltips with the per-request value when the
// profile carries perfspy.requests. Frames narrower than a 1/20000 share
// are left out.
func WriteHTML(w io.Writer, t *Tree, title string) error {
	if title == "" {
		title = "Flame Graph"
		if t.Diff {
			title = "Differential Flame Graph"
		}
	}
	total := setWidths(t.Root, t.Diff)
	d := pageData{Title: safetext.Text(title), Unit: safetext.Text(t.Unit), Diff: t.Diff, Req: t.Requests, BReq: t.BeforeRequests, Scale: t.Scale}
	ids := map[string]int{}
	var walk func(n *Node, depth int)
	walk = func(n *Node, depth int) {
		// A division: a product would overflow past 4.6e14.
		if n.w < total/20000 && depth > 0 {
			return
		}
		id, ok := ids[n.Name]
		if !ok {
			id = len(d.Names)
			ids[n.Name] = id
			d.Names = append(d.Names, n.Name)
		}
		d.N, d.V, d.B, d.W, d.D = append(d.N, id), append(d.V, n.Total), append(d.B, n.Before), append(d.W, n.w), append(d.D, depth)
		for _, c := range n.Children() {
			walk(c, depth+1)
		}
	}
	walk(t.Root, 0)
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	// Keep the JSON inert inside <script>.
	data := strings.ReplaceAll(string(b), "</", `<\/`)
	r := strings.NewReplacer("{{TITLE}}", html.EscapeString(safetext.Text(title)), "{{DATA}}", data, "{{JS}}", pageJS)
	_, err = io.WriteString(w, r.Replace(pageHTML))
	return err
}
