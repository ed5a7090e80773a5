// Package synthprof makes deterministic pprof profiles with Go-like
// function names for tests and benchmarks of the profile readers.
package synthprof

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"

	"github.com/google/pprof/profile"
)

// Synthetic returns a deterministic profile of n samples with Go-like
// function names (packages, methods, closures, generics, inlined frames)
// and stack depths of 10 to 60, for tests and the benchmark. types are
// "name/unit" sample types.
func Synthetic(seed int64, n int, types []string) *profile.Profile {
	rng := rand.New(rand.NewSource(seed))
	p := &profile.Profile{Period: 1}
	for _, t := range types {
		name, unit, _ := strings.Cut(t, "/")
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: name, Unit: unit})
	}
	p.PeriodType = p.SampleType[0]
	pkgs := []string{"main", "net/http", "encoding/json", "github.com/acme/shop/v2/orders", "github.com/acme/shop/v2/internal/db", "bufio", "strings", "runtime", "sync", "example.com/lib/cache"}
	const nfuncs = 2000
	for i := 0; i < nfuncs; i++ {
		pkg := pkgs[rng.Intn(len(pkgs))]
		var name string
		switch i % 5 {
		case 0:
			name = fmt.Sprintf("%s.(*T%d).Method%d", pkg, i%37, i)
		case 1:
			name = fmt.Sprintf("%s.handler%d.func%d", pkg, i%53, 1+i%4)
		case 2:
			name = fmt.Sprintf("%s.Generic%d[go.shape.int]", pkg, i%29)
		default:
			name = fmt.Sprintf("%s.fn%d", pkg, i)
		}
		p.Function = append(p.Function, &profile.Function{ID: uint64(i + 1), Name: name, SystemName: name, Filename: "/build/" + strings.ReplaceAll(pkg, ".", "_") + ".go"})
	}
	for i := 0; i < 6000; i++ {
		loc := &profile.Location{ID: uint64(i + 1), Address: uint64(0x400000 + 16*i)}
		lines := 1 + rng.Intn(3)/2 // one in three has an inlined frame
		for l := 0; l < lines; l++ {
			loc.Line = append(loc.Line, profile.Line{Function: p.Function[rng.Intn(nfuncs)], Line: int64(1 + rng.Intn(500))})
		}
		p.Location = append(p.Location, loc)
	}
	for i := 0; i < n; i++ {
		depth := 10 + rng.Intn(51)
		s := &profile.Sample{}
		for d := 0; d < depth; d++ {
			s.Location = append(s.Location, p.Location[rng.Intn(len(p.Location))])
		}
		for range types {
			s.Value = append(s.Value, 1+rng.Int63n(10000))
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

// Encode writes p in pprof's gzipped protobuf form.
func Encode(p *profile.Profile) []byte {
	var b bytes.Buffer
	p.Write(&b)
	return b.Bytes()
}
