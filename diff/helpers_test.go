package diff

import (
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/synthprof"
)

func encode(t *testing.T, p *profile.Profile) []byte {
	t.Helper()
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return synthprof.Encode(p)
}
