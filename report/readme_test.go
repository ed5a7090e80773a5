package report

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	goldenfile "github.com/perfspy/perfspy/internal/golden"
	"github.com/perfspy/perfspy/schema"
)

// TestReadmeTerminal: the README's example of what a run prints is what
// the terminal writer prints for that run (testdata/readme-run.json: its
// summary.json, its top allocation sites and its folder, from a real run
// of the default target). go test ./report -update rewrites the README's
// block; a new run's fixture comes from a results folder's summary.json
// and allocs.pb.gz.
func TestReadmeTerminal(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/readme-run.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Summary schema.Summary
		Sites   []Site
		Dir     string
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatalf("testdata/readme-run.json: %v", err)
	}
	var term bytes.Buffer
	(&Run{Summary: &fx.Summary, Sites: fx.Sites, Dir: fx.Dir}).Terminal(&term)
	var block strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(term.String(), "\n"), "\n") {
		block.WriteString("    " + l)
	}
	block.WriteString("\n")

	goldenfile.CheckBlock(t, "../README.md", "a request):\n\n", "\nand writes into the results folder", block.String(), *update)
}
