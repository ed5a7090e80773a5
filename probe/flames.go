package probe

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/flame"
	"github.com/perfspy/perfspy/schema"
)

// flameProfiles are the profiles probe draws, in the run folder, as
// flame-NAME.html.
var flameProfiles = []string{"cpu", "allocs", "copies", "syscalls", "offcpu", "wallclock"}

// addFlames draws a single-file HTML flame graph of each profile in files
// (encoded, in memory) and adds it to files.
func addFlames(files map[string][]byte, s *schema.Summary) error {
	for _, name := range flameProfiles {
		file, ok := s.Files[name]
		if !ok {
			continue
		}
		page, err := flamePage(files[file], s.Target+": "+name)
		if err != nil {
			return err
		}
		if page == nil {
			continue // an empty profile (no samples in the window) has no graph
		}
		fn := "flame-" + name + ".html"
		files[fn] = page
		s.Files["flame_"+name] = fn
	}
	return nil
}

// flamePage draws an encoded profile as a single-file HTML flame graph
// titled "title (sample type)"; nil for a profile without samples (no
// graph to draw).
func flamePage(encoded []byte, title string) ([]byte, error) {
	t, err := flame.Read(bytes.NewReader(encoded), flame.Options{})
	return drawFlame(t, err, title)
}

// flamePageOf is flamePage of p, drawn from the profile in memory.
func flamePageOf(p *profile.Profile, title string) ([]byte, error) {
	t, err := flame.FromProfile(p, flame.Options{})
	return drawFlame(t, err, title)
}

// drawFlame draws the tree t that reading a profile gave, with err.
func drawFlame(t *flame.Tree, err error, title string) ([]byte, error) {
	if errors.Is(err, flame.ErrEmpty) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("flame graph of %s: %w", title, err)
	}
	var buf bytes.Buffer
	if err := flame.WriteHTML(&buf, t, fmt.Sprintf("%s (%s)", title, t.Sample)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
