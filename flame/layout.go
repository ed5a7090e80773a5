package flame

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"
)

// setWidths computes every node's w: its total, plus, in a differential
// tree, the before-values of removed frames below it, so that removed
// frames stay visible.
func setWidths(n *Node, diff bool) int64 {
	if !diff {
		n.w = n.Total
		for _, c := range n.Children() {
			setWidths(c, diff)
		}
		return n.w
	}
	if n.Total == 0 {
		n.w = n.Before
		for _, c := range n.Children() {
			setWidths(c, diff)
		}
		return n.w
	}
	n.w = n.Total
	for _, c := range n.Children() {
		n.w += setWidths(c, diff) - c.Total
	}
	return n.w
}

// Frame is one laid-out rectangle.
type Frame struct {
	Node  *Node
	Depth int
	X, W  float64 // pixels
}

// Layout places the frames of t in a graph width px wide, dropping frames
// narrower than minWidth px (and their children), root first.
func Layout(t *Tree, width, minWidth float64) ([]Frame, int) {
	total := setWidths(t.Root, t.Diff)
	if total <= 0 {
		return nil, 0
	}
	scale := width / float64(total)
	var out []Frame
	maxDepth := 0
	var walk func(n *Node, depth int, x float64)
	walk = func(n *Node, depth int, x float64) {
		w := float64(n.w) * scale
		if w < minWidth {
			return
		}
		out = append(out, Frame{Node: n, Depth: depth, X: x, W: w})
		maxDepth = max(maxDepth, depth)
		for _, c := range n.Children() {
			walk(c, depth+1, x)
			x += float64(c.w) * scale
		}
	}
	walk(t.Root, 0, 0)
	return out, maxDepth
}

// pkgOf is the package part of a function name, which picks its color.
func pkgOf(name string) string {
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// color is deterministic: the same package gets the same warm color in
// every run; the function name varies it a little.
func color(name string) string {
	h := fnv.New32a()
	h.Write([]byte(pkgOf(name)))
	v := h.Sum32()
	h2 := fnv.New32a()
	h2.Write([]byte(name))
	w := h2.Sum32()
	r := 205 + int(v%50)
	g := int((v>>8)%180) + int(w%20)
	b := int((v>>16)%55) + int((w>>8)%10)
	return fmt.Sprintf("rgb(%d,%d,%d)", r, g, b)
}

// diffColor is red for growth, blue for shrinkage, white for no change;
// removed frames are solid blue.
func diffColor(n *Node) string {
	if n.Total == 0 {
		return "rgb(90,120,255)"
	}
	den := math.Max(float64(n.Total), float64(n.Before))
	r := (float64(n.Total) - float64(n.Before)) / den
	c := int(255 - 200*math.Min(math.Abs(r), 1))
	if r > 0 {
		return fmt.Sprintf("rgb(255,%d,%d)", c, c)
	}
	if r < 0 {
		return fmt.Sprintf("rgb(%d,%d,255)", c, c)
	}
	return "rgb(245,245,245)"
}

func (t *Tree) fill(n *Node) string {
	if t.Diff {
		return diffColor(n)
	}
	if n == t.Root {
		return "rgb(230,110,60)"
	}
	// perf's annotations, as flamegraph.pl colors them: kernel, JIT,
	// inlined.
	switch n.Annot {
	case 'k':
		return "rgb(230,140,50)"
	case 'j':
		return "rgb(80,190,80)"
	case 'i':
		return "rgb(80,200,200)"
	}
	return color(n.Name)
}

// describe is a frame's tooltip: its value, share and, when known, per
// request; in a differential tree, before, after and the change.
func (t *Tree) describe(n *Node) string {
	root := t.Root
	if t.Diff {
		d := n.Total - n.Before
		s := fmt.Sprintf("%s (after %s, before %s, %s%s %s", n.Name, t.value(n.Total), t.value(n.Before), sign(d), t.value(abs64(d)), t.Unit)
		if n.Before > 0 {
			s += fmt.Sprintf(", %+.1f%%", 100*float64(d)/float64(n.Before))
		} else if n.Total > 0 {
			s += ", new"
		}
		if n.Total == 0 {
			s += ", removed"
		}
		if t.Requests > 0 && t.BeforeRequests > 0 {
			s += fmt.Sprintf(", %+.2f per request", float64(n.Total)/float64(t.Requests)-float64(n.Before)/float64(t.BeforeRequests))
		}
		return s + ")"
	}
	s := fmt.Sprintf("%s (%s %s, %.2f%%", n.Name, t.value(n.Total), t.Unit, 100*float64(n.Total)/float64(root.Total))
	if t.Requests > 0 {
		s += fmt.Sprintf(", %.2f per request", float64(n.Total)/float64(t.Requests))
	}
	return s + ")"
}

// value writes a value in its units: thousandths as a decimal fraction
// when the tree counts them (Scale).
func (t *Tree) value(v int64) string {
	if t.Scale <= 1 {
		return commas(v)
	}
	s := commas(v / t.Scale)
	if f := v % t.Scale; f != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", f), "0")
	}
	return s
}

func sign(v int64) string {
	if v < 0 {
		return "-"
	}
	return "+"
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func commas(v int64) string {
	s := fmt.Sprint(v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
