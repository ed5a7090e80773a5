package probe

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/schema"

	"github.com/perfspy/perfspy/internal/browser"
)

// fixedAB is an ab comparison with a regression, an improvement, a gate
// and function rows of two profiles.
func fixedAB() (*ABResult, ABConfig) {
	cfg := ABConfig{Before: "main", After: "HEAD", Rounds: 4, Run: Config{TargetConfig: TargetConfig{Target: "./targets/httpjson", CPUs: "auto"}, WindowConfig: WindowConfig{Duration: 5 * time.Second, Warmup: time.Second}}}
	r := &ABResult{ABResult: schema.ABResult{Schema: ABSchema, Rounds: 4, Order: "ABBAABBA", Judged: true,
		Before:  map[string]string{"rev": "main", "commit": "1111111111111111"},
		After:   map[string]string{"rev": "HEAD", "commit": "2222222222222222"},
		Metrics: map[string]*schema.ABMetric{}, Gate: []string{"allocs/req +4.44% (22.5 -> 23.5), past 1%"},
		Functions: []schema.ABFunction{
			{Profile: "allocs", Key: "main.buildDocument", Before: 1, After: 2, Delta: 1},
			{Profile: "allocs", Key: "main.encode[...]", Before: 3, After: 2.5, Delta: -0.5},
			{Profile: "syscalls", Key: "syscall.write", Before: 1, After: 1.25, Delta: 0.25},
		}}}
	for _, m := range metricsFor(cfg.Run) {
		r.Metrics[m.name] = &schema.ABMetric{Before: 10, After: 10, Verdict: "no change"}
	}
	r.Metrics["allocs/req"] = &schema.ABMetric{Before: 22.5, After: 23.5, Delta: 1, DeltaPct: 4.44, P: 0.029, Verdict: "regression"}
	r.Metrics["cpu-us/req"] = &schema.ABMetric{Before: 50, After: 45, Delta: -5, DeltaPct: -10, P: 0.029, Verdict: "improvement"}
	return r, cfg
}

// TestABReportGolden: ab's report.md and report.html from a fixed result.
func TestABReportGolden(t *testing.T) {
	t.Parallel()
	r, cfg := fixedAB()
	var md bytes.Buffer
	abPage(r, cfg).Markdown(&md)
	golden(t, "ab-report.golden.md", md.Bytes())
	svg := []byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="1200" height="40"><rect width="10" height="10"/></svg>`)
	html, err := abPage(r, cfg).HTML(svg)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "ab-report.golden.html", html)
}

// TestABReportBrowser opens report.html in headless Chromium: the tables
// are there, the regression and the improvement are marked, the flame
// graph spans the page.
func TestABReportBrowser(t *testing.T) {
	bin := browser.Chromium(t)
	r, cfg := fixedAB()
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="40" id="diffflame"><rect width="10" height="10"/></svg>`)
	html, err := abPage(r, cfg).HTML(svg)
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, html, 0o644); err != nil {
		t.Fatal(err)
	}
	dom := browser.Headless(t, bin, "--dump-dom", "file://"+page)
	for _, want := range []string{`data-regressions="1"`, `<table id="metrics">`, `<tr class="regression"><td>allocs/req</td>`,
		`<tr class="improvement"><td>cpu-us/req</td>`, `data-profile="syscalls"`, `class="gate"`, `id="diffflame"`, `<td class="worse">+1.00</td>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("report.html's DOM lacks %q", want)
		}
	}
	shot := filepath.Join(t.TempDir(), "ab.png")
	browser.Headless(t, bin, "--screenshot="+shot, "--window-size=1280,900", "file://"+page)
	if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
		t.Errorf("no screenshot: %v", err)
	}
}

// TestABBenchPerOp: an ab of benchmarks says per op in report.md and
// report.html alike.
func TestABBenchPerOp(t *testing.T) {
	r, cfg := fixedAB()
	cfg.Bench = BenchConfig{Bench: ".", Target: "./lib"}
	var md bytes.Buffer
	abPage(r, cfg).Markdown(&md)
	html, err := abPage(r, cfg).HTML(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"report.md": md.String(), "report.html": string(html)} {
		if strings.Contains(out, "changes per request") || !strings.Contains(out, "changes per op") {
			t.Errorf("%s does not say per op", name)
		}
	}
}

// TestABFunctionUnits: each function table says what it counts.
func TestABFunctionUnits(t *testing.T) {
	r, cfg := fixedAB()
	r.Functions = []schema.ABFunction{{Profile: "copies", Key: "main.f", Before: 114, After: 135, Delta: 21, Sample: "copied_bytes", Unit: "bytes"}}
	var md bytes.Buffer
	abPage(r, cfg).Markdown(&md)
	html, _ := abPage(r, cfg).HTML(nil)
	for name, out := range map[string]string{"report.md": md.String(), "report.html": string(html)} {
		if !strings.Contains(out, "copies (copied_bytes, bytes): top function changes per request") {
			t.Errorf("%s does not name the table's sample and unit", name)
		}
	}
}
