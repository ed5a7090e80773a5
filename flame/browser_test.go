package flame

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/browser"
)

func chromium(t *testing.T) string { return browser.Chromium(t) }

func headless(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return browser.Headless(t, bin, args...)
}

// TestBrowserHTML opens the page in headless Chromium, searches for a frame
// and clicks to zoom (through the page's #search= and #zoom= actions, which
// run the same handlers as the search box and a click), checks the page's
// state in its DOM and takes a screenshot.
func TestBrowserHTML(t *testing.T) {
	bin := chromium(t)
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "small.html")
	f, _ := os.Create(page)
	WriteHTML(f, readFile(t, "small.folded"), "small")
	f.Close()
	url := "file://" + page + "#search=json&zoom=main.handler"
	dom := headless(t, bin, "--dump-dom", url)
	for _, want := range []string{`data-ready="1"`, `data-matched="40.0"`, `data-zoomed="main.handler"`, "Matched: 40.0%"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page DOM lacks %q", want)
		}
	}
	sw := headless(t, bin, "--dump-dom", "file://"+page+"#sandwich=main.handler.func1")
	if !strings.Contains(sw, `data-sandwich="main.handler.func1"`) {
		t.Error("the sandwich view did not open")
	}
	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, "--screenshot="+shot, "--window-size=1280,600", url)
	if st, err := os.Stat(shot); err != nil || st.Size() < 5000 {
		t.Fatalf("screenshot: %v", err)
	}
	if os.Getenv("PERFSPY_KEEP_SCREENSHOT") != "" {
		b, _ := os.ReadFile(shot)
		os.WriteFile(os.Getenv("PERFSPY_KEEP_SCREENSHOT"), b, 0o644)
	}
}

// TestBrowserSVG runs the SVG's own script: search and zoom.
func TestBrowserSVG(t *testing.T) {
	bin := chromium(t)
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
	dir := t.TempDir()
	svg := filepath.Join(dir, "small.svg")
	f, _ := os.Create(svg)
	WriteSVG(f, readFile(t, "small.folded"), SVGOptions{Title: "small"})
	f.Close()
	dom := headless(t, bin, "--dump-dom", "file://"+svg+"#search=json&zoom=main.handler")
	for _, want := range []string{`data-matched="40.0"`, `data-zoomed="main.handler"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("SVG DOM lacks %q", want)
		}
	}
}
