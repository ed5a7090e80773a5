package flame_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/perfspy/perfspy/flame"
)

// Read folded stacks into a call tree, walk it, and draw it as an SVG.
func ExampleRead() {
	folded := "main;serve;encode 30\nmain;serve;read 10\nmain;gc 5\n"
	t, err := flame.Read(strings.NewReader(folded), flame.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var walk func(n *flame.Node, depth int)
	walk = func(n *flame.Node, depth int) {
		fmt.Printf("%s%s %d\n", strings.Repeat("  ", depth), n.Name, n.Total)
		for _, k := range n.Children() {
			walk(k, depth+1)
		}
	}
	walk(t.Root, 0)
	var svg bytes.Buffer
	if err := flame.WriteSVG(&svg, t, flame.SVGOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.HasPrefix(svg.String(), "<?xml"))
	// Output:
	// all 45
	//   main 45
	//     gc 5
	//     serve 40
	//       encode 30
	//       read 10
	// true
}

// A differential graph: the after side's values, with what they were
// before.
func ExampleReadDiff() {
	before := strings.NewReader("main;encode 30\nmain;read 10\n")
	after := strings.NewReader("main;encode 12\nmain;read 10\n")
	t, err := flame.ReadDiff(before, after, flame.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range t.Root.Children()[0].Children() {
		fmt.Printf("%s %d -> %d\n", k.Name, k.Before, k.Total)
	}
	// Output:
	// encode 30 -> 12
	// read 10 -> 10
}
