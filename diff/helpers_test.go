package diff

import (
	"github.com/perfspy/perfspy/internal/synthprof"

	"testing"

	"github.com/google/pprof/profile"
)

func encode(t *testing.T, p *profile.Profile) []byte {
	t.Helper()
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return synthprof.Encode(p)
}
