package probe

import (
	"flag"
	"io"
	"maps"
	"testing"
)

// TestPushLabels: -label names are the store's from the start, so two
// spellings of one name are one label, the later flag's; the store's own
// names are refused.
func TestPushLabels(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	set := pushFlags(fs, &cfg)
	if err := fs.Parse([]string{"-label", "git-ref=a", "-label", "team=x", "-label", "git_ref=b"}); err != nil {
		t.Fatal(err)
	}
	if err := set(); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"git_ref": "b", "team": "x"}; !maps.Equal(cfg.Push.Labels, want) {
		t.Errorf("labels %v, want %v", cfg.Push.Labels, want)
	}
	for _, bad := range []string{"service_name=x", "__name__=x"} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		set := pushFlags(fs, &Config{})
		fs.Parse([]string{"-label", bad})
		if err := set(); err == nil {
			t.Errorf("-label %s: no error", bad)
		}
	}
}
