package proc

import (
	"reflect"
	"sort"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

func TestParseCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want CPUPlan
	}{
		{"none", 4, CPUPlan{}},
		{"auto", 1, CPUPlan{}},
		{"auto", 2, CPUPlan{Server: []int{0}, Load: []int{1}}},
		{"auto", 5, CPUPlan{Server: []int{0, 1, 2}, Load: []int{3, 4}}},
		{"0:1", 2, CPUPlan{Server: []int{0}, Load: []int{1}}},
		{"0-2,5:3", 8, CPUPlan{Server: []int{0, 1, 2, 5}, Load: []int{3}}},
	} {
		got, err := ParseCPUs(tc.in, tc.n)
		if err != nil {
			t.Errorf("ParseCPUs(%q, %d): %v", tc.in, tc.n, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseCPUs(%q, %d) = %+v, want %+v", tc.in, tc.n, got, tc.want)
		}
	}
	for _, bad := range []string{"0", "0:0", "0:2", "a:1", "1-0:1", ":1", "0:"} {
		if _, err := ParseCPUs(bad, 2); err == nil {
			t.Errorf("ParseCPUs(%q, 2): no error", bad)
		}
	}
	if got := schema.CPUList([]int{0, 1, 2, 4, 6, 7}); got != "0-2,4,6-7" {
		t.Errorf("FormatCPUList = %q", got)
	}
}

func FuzzParseCPUs(f *testing.F) {
	f.Add("0:1", 2)
	f.Add("0-3,8:4-7", 16)
	f.Add("auto", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1024 {
			return
		}
		p, err := ParseCPUs(s, n)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, side := range [][]int{p.Server, p.Load} {
			if !sort.IntsAreSorted(side) {
				t.Fatalf("%q: unsorted %v", s, side)
			}
			for _, c := range side {
				if c < 0 || c >= n || seen[c] {
					t.Fatalf("%q with n=%d: bad or shared cpu %d in %+v", s, n, c, p)
				}
				seen[c] = true
			}
		}
		if back, err := ParseCPUList(schema.CPUList(p.Server), n); len(p.Server) > 0 && (err != nil || !reflect.DeepEqual(back, p.Server)) {
			t.Fatalf("format/parse round trip of %v: %v, %v", p.Server, back, err)
		}
	})
}
