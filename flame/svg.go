package flame

import (
	"bufio"
	_ "embed"
	"fmt"
	"html"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/perfspy/perfspy/internal/safetext"
)

//go:embed assets/svg.js
var svgJS string

// SVGOptions shape the SVG. Zero fields get defaults.
type SVGOptions struct {
	Title    string
	Width    float64 // default 1200
	MinWidth float64 // frames narrower than this many px are dropped; default 0.1
	Inverted bool    // icicle: the root at the top
}

const frameHeight = 16

// WriteSVG writes t as an SVG flame graph in flamegraph.pl's shape: one
// <g> per frame holding a <title> (the name, then its total and share) and
// a <rect> whose width is proportional to the total.
func WriteSVG(w io.Writer, t *Tree, opt SVGOptions) error {
	if opt.Width <= 0 {
		opt.Width = 1200
	}
	if opt.MinWidth <= 0 {
		opt.MinWidth = 0.1
	}
	if opt.Title == "" {
		opt.Title = "Flame Graph"
		if t.Diff {
			opt.Title = "Differential Flame Graph"
		}
	}
	frames, depth := Layout(t, opt.Width-20, opt.MinWidth)
	const top, bottom = 60, 40
	height := float64(top+bottom) + float64(depth+1)*frameHeight
	flip := 1
	if opt.Inverted {
		flip = -1
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg version="1.1" width="%.0f" height="%.0f" onload="init(evt)" viewBox="0 0 %.0f %.0f" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
<style type="text/css">
text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }
#title { text-anchor: middle; font-size: 17px; }
#search, #unzoom { cursor: pointer; }
#frames > g { cursor: pointer; }
#frames > g:hover rect { stroke: black; stroke-width: 0.5; }
.hide { display: none; }
.parent { opacity: 0.5; }
</style>
<script type="text/ecmascript"><![CDATA[
var FLIP = %d;
%s]]></script>
<rect x="0" y="0" width="100%%" height="100%%" fill="rgb(250,250,250)"/>
<text id="title" x="%.1f" y="24">%s</text>
<text id="details" x="10" y="%.0f"> </text>
<text id="unzoom" class="hide" x="10" y="24">Reset Zoom</text>
<text id="search" x="%.0f" y="24">Search</text>
<text id="matched" x="%.0f" y="%.0f"> </text>
<g id="frames">
`, opt.Width, height, opt.Width, height, flip, svgJS, opt.Width/2, html.EscapeString(safetext.Text(opt.Title)), height-17, opt.Width-110, opt.Width-110, height-17)
	for _, f := range frames {
		y := height - bottom - float64(f.Depth+1)*frameHeight
		if opt.Inverted {
			y = top + float64(f.Depth)*frameHeight
		}
		name := f.Node.Name
		fmt.Fprintf(bw, `<g data-name="%s"><title>%s</title><rect x="%.2f" y="%.1f" width="%.2f" height="%d" fill="%s" rx="2" ry="2"/><text x="%.2f" y="%.1f">%s</text></g>
`, html.EscapeString(name), html.EscapeString(t.describe(f.Node)), 10+f.X, y, f.W, frameHeight-1, t.fill(f.Node), 13+f.X, y+11.5, html.EscapeString(fitLabel(name, f.W)))
	}
	bw.WriteString("</g>\n</svg>\n")
	return bw.Flush()
}

// fitLabel shortens a name to what a frame w px wide shows at 7 px a
// character, cutting between characters, never inside one.
func fitLabel(name string, w float64) string {
	fit := int((w - 6) / 7)
	if fit < 3 {
		return ""
	}
	if utf8.RuneCountInString(name) <= fit {
		return name
	}
	cut, n := 0, 0
	for i := range name {
		if n == fit-2 {
			cut = i
			break
		}
		n++
	}
	return strings.TrimRight(name[:cut], " ") + ".."
}
