package probe

import (
	"bytes"
	"fmt"

	"github.com/perfspy/perfspy/flame"
)

// flameProfiles are the profiles probe draws, in the run folder, as
// flame-NAME.html.
var flameProfiles = []string{"cpu", "allocs", "copies", "syscalls", "offcpu", "wallclock"}

// addFlames draws a single-file HTML flame graph of each profile in files
// (encoded, in memory) and adds it to files.
func addFlames(files map[string][]byte, s *Summary) error {
	for _, name := range flameProfiles {
		file, ok := s.Files[name]
		if !ok {
			continue
		}
		t, err := flame.Read(bytes.NewReader(files[file]), flame.Options{})
		if err != nil {
			continue // an empty profile (no samples in the window) has no graph
		}
		var buf bytes.Buffer
		if err := flame.WriteHTML(&buf, t, fmt.Sprintf("%s: %s (%s)", s.Target, name, t.Sample)); err != nil {
			return err
		}
		fn := "flame-" + name + ".html"
		files[fn] = buf.Bytes()
		s.Files["flame_"+name] = fn
	}
	return nil
}
