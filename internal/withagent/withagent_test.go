package withagent

import (
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/agentmod"
	"github.com/perfspy/perfspy/schema"
)

func TestCompare(t *testing.T) {
	plain := []schema.Module{
		{Path: "golang.org/x/net", Version: "v0.20.0"},
		{Path: "golang.org/x/sys", Version: "v0.16.0"},
		{Path: "example.com/lib", Version: "v1.0.0", Replace: "../lib"},
	}
	agent := schema.Module{Path: agentmod.Path, Version: "v0.0.0-00010101000000-abcdefabcdef", Replace: "/cache/agent (devel)"}
	cases := []struct {
		name   string
		probed []schema.Module
		errs   []string // each must appear in the error; none: no error
	}{
		{"agent added", append(append([]schema.Module{}, plain...), agent), nil},
		{"folder spelled otherwise", []schema.Module{plain[0], plain[1], {Path: "example.com/lib", Version: "v1.0.0", Replace: "/abs/lib"}, agent}, nil},
		// go version -m's build information gives a folder the version
		// (devel): seen on a replace by an absolute folder.
		{"folder as the binary records it", []schema.Module{plain[0], plain[1], {Path: "example.com/lib", Version: "v1.0.0", Replace: "/abs/lib (devel)"}, agent}, nil},
		{"raised", []schema.Module{{Path: "golang.org/x/net", Version: "v0.61.0"}, plain[1], plain[2], agent},
			[]string{"golang.org/x/net: golang.org/x/net@v0.20.0 in a plain build, golang.org/x/net@v0.61.0 in the measured binary"}},
		{"other module added", append(append([]schema.Module{}, plain...), agent, schema.Module{Path: "github.com/felixge/fgprof", Version: "v0.9.5"}),
			[]string{"github.com/felixge/fgprof@v0.9.5: not in a plain build"}},
		{"removed", []schema.Module{plain[0], plain[2], agent}, []string{"golang.org/x/sys@v0.16.0: in a plain build, missing"}},
		{"replaced by a version", []schema.Module{plain[0], plain[1], {Path: "example.com/lib", Version: "v1.0.0", Replace: "example.com/fork v1.0.1"}, agent},
			[]string{"example.com/lib: example.com/lib@v1.0.0 => ../lib in a plain build, example.com/lib@v1.0.0 => example.com/fork v1.0.1 in the measured binary"}},
	}
	for _, c := range cases {
		err := CheckErr(Compare(plain, c.probed))
		if len(c.errs) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, want := range c.errs {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q lacks %q", c.name, err, want)
			}
		}
	}
}

// TestCompareDeterministic: the lists come out sorted whatever the input
// order, so summary.json does not follow map or build order.
func TestCompareDeterministic(t *testing.T) {
	c := Compare([]schema.Module{{Path: "b", Version: "v1"}, {Path: "a", Version: "v1"}},
		[]schema.Module{{Path: "z", Version: "v1"}, {Path: "b", Version: "v2"}, {Path: "y", Version: "v1"}, {Path: "a", Version: "v2"}})
	if len(c.Added) != 2 || c.Added[0].Path != "y" || len(c.Changed) != 2 || c.Changed[0].Path != "a" {
		t.Errorf("%+v", c)
	}
}
