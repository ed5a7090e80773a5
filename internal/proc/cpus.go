package proc

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// CPUPlan says where the target and the load driver run. Empty lists mean
// unpinned.
type CPUPlan struct {
	Server, Load []int
}

// ParseCPUs reads -cpus: "none", "auto", or SERVER:LOAD where each side is a
// list like 0-2,4. auto gives the first half of the n CPUs to the target and
// the rest to the load driver, so that on a small machine they do not share
// cores; with one CPU it does not pin.
// Where the platform cannot pin (CanPin), auto does not, and a list is an
// error.
func ParseCPUs(s string, n int) (CPUPlan, error) {
	switch s {
	case "none", "":
		return CPUPlan{}, nil
	case "auto":
		if n < 2 || !CanPin {
			return CPUPlan{}, nil
		}
		half := (n + 1) / 2
		var p CPUPlan
		for i := 0; i < n; i++ {
			if i < half {
				p.Server = append(p.Server, i)
			} else {
				p.Load = append(p.Load, i)
			}
		}
		return p, nil
	}
	if !CanPin {
		return CPUPlan{}, errNoPinning
	}
	srv, ld, ok := strings.Cut(s, ":")
	if !ok {
		return CPUPlan{}, fmt.Errorf("want SERVER:LOAD (e.g. 0:1), auto or none, got %q", s)
	}
	var p CPUPlan
	var err error
	if p.Server, err = ParseCPUList(srv, n); err != nil {
		return CPUPlan{}, fmt.Errorf("server cpus: %w", err)
	}
	if p.Load, err = ParseCPUList(ld, n); err != nil {
		return CPUPlan{}, fmt.Errorf("load cpus: %w", err)
	}
	for _, a := range p.Server {
		for _, b := range p.Load {
			if a == b {
				return CPUPlan{}, fmt.Errorf("cpu %d is given to both the target and the load driver", a)
			}
		}
	}
	return p, nil
}

// ParseCPUList reads "0-2,4" into sorted, distinct CPU numbers below n.
func ParseCPUList(s string, n int) ([]int, error) {
	if s == "" {
		return nil, errors.New("empty cpu list")
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad cpu %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad cpu range %q", part)
			}
		}
		if b >= n {
			return nil, fmt.Errorf("cpu %d does not exist (this machine has %d)", b, n)
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
