package flame

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFolded reads 100k lines of folded stacks (depth 10 to 60) from
// a file and draws the SVG; 'probe cost -what flame' compares with
// flamegraph.pl and go tool pprof side by side.
func BenchmarkFolded(b *testing.B) {
	path := filepath.Join(b.TempDir(), "stacks.folded")
	f, _ := os.Create(path)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		depth := 10 + rng.Intn(51)
		for d := 0; d < depth; d++ {
			if d > 0 {
				f.WriteString(";")
			}
			fmt.Fprintf(f, "github.com/acme/shop/pkg%d.(*T).Method%d", (d*131+rng.Intn(3+d*4))%40, (d*7+rng.Intn(3+d*4))%50)
		}
		fmt.Fprintf(f, " %d\n", 1+rng.Intn(1000))
	}
	f.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, _ := os.Open(path)
		t, err := Read(f, Options{})
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		WriteSVG(io.Discard, t, SVGOptions{})
	}
	_ = bytes.MinRead
}
