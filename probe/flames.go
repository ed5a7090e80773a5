package probe

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/perfspy/perfspy/flame"
)

// flameProfiles are the profiles probe draws, in the run folder, as
// flame-NAME.html.
var flameProfiles = []string{"cpu", "allocs", "copies", "syscalls", "offcpu", "wallclock"}

// writeFlames draws a single-file HTML flame graph of each profile written.
func writeFlames(out string, s *Summary) error {
	for _, name := range flameProfiles {
		file, ok := s.Files[name]
		if !ok {
			continue
		}
		f, err := os.Open(filepath.Join(out, file))
		if err != nil {
			return err
		}
		t, err := flame.Read(f, flame.Options{})
		f.Close()
		if err != nil {
			continue // an empty profile (no samples in the window) has no graph
		}
		var buf bytes.Buffer
		if err := flame.WriteHTML(&buf, t, fmt.Sprintf("%s: %s (%s)", s.Target, name, t.Sample)); err != nil {
			return err
		}
		fn := "flame-" + name + ".html"
		if err := os.WriteFile(filepath.Join(out, fn), buf.Bytes(), 0o644); err != nil {
			return err
		}
		s.Files["flame_"+name] = fn
	}
	return nil
}
