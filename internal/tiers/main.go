// Command tiers joins the test command's two passes so that no test runs
// twice: it reads the short pass's `go test -json` on stdin, prints it as
// `go test` would (each package's result line, and the whole output of a
// test that failed), and writes to the -long file, per package, a -run
// pattern of the top-level tests that skipped there or had a subtest that
// skipped. The full pass (test.sh) runs just those. With -times it also
// appends each top-level test's seconds, so that test.sh can name the
// slowest.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on a test's pass or fail
}

// timing is a top-level test's seconds.
type timing struct {
	pkg, test string
	secs      float64
}

func main() {
	long := flag.String("long", "", "write here, per package, a -run `pattern` of the tests that skipped")
	times := flag.String("times", "", "append here each top-level test's seconds, package and name, a line each")
	flag.Parse()
	if *long == "" && *times == "" {
		fmt.Fprintln(os.Stderr, "tiers: -long FILE or -times FILE is required")
		os.Exit(2)
	}
	var ts []timing
	skipped, err := follow(os.Stdin, os.Stdout, &ts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tiers: %v\n", err)
		os.Exit(1)
	}
	if *long != "" {
		if err := os.WriteFile(*long, []byte(patterns(skipped)), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "tiers: -long: %v\n", err)
			os.Exit(1)
		}
	}
	if *times != "" {
		if err := appendTimes(*times, ts); err != nil {
			fmt.Fprintf(os.Stderr, "tiers: -times: %v\n", err)
			os.Exit(1)
		}
	}
}

// appendTimes appends ts to the file, one "seconds package test" a line.
func appendTimes(file string, ts []timing) error {
	fh, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, t := range ts {
		fmt.Fprintf(fh, "%.1f %s %s\n", t.secs, t.pkg, t.test)
	}
	return fh.Close()
}

// follow prints the events of r to w as go test's plain output would
// read, without the passing tests' lines, and returns the top-level tests
// that skipped (themselves or a subtest), by package; each top-level
// test's seconds go to ts.
func follow(r io.Reader, w io.Writer, ts *[]timing) (map[string][]string, error) {
	skipped := map[string][]string{}
	held := map[[2]string][]string{} // a running test's output, printed if it fails
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // go vet's and older releases' build errors are plain text
			continue
		}
		key := [2]string{e.Package, e.Test}
		if (e.Action == "pass" || e.Action == "fail") && e.Test != "" && !strings.Contains(e.Test, "/") {
			*ts = append(*ts, timing{e.Package, e.Test, e.Elapsed})
		}
		switch {
		case e.Action == "build-output": // a build error, since Go 1.24
			io.WriteString(w, e.Output)
		case e.Action == "output" && e.Test == "":
			if o := e.Output; o != "PASS\n" && o != "FAIL\n" && !strings.HasPrefix(o, "=== ") {
				io.WriteString(w, o)
			}
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "fail" && e.Test != "":
			io.WriteString(w, strings.Join(held[key], ""))
			delete(held, key)
		case e.Action == "pass" || e.Action == "skip":
			delete(held, key)
			if e.Action == "skip" && e.Test != "" {
				top, _, _ := strings.Cut(e.Test, "/")
				if !slices.Contains(skipped[e.Package], top) {
					skipped[e.Package] = append(skipped[e.Package], top)
				}
			}
		}
	}
	return skipped, sc.Err()
}

// patterns writes one line per package: its import path and the -run
// pattern of its skipped tests, packages in order.
func patterns(skipped map[string][]string) string {
	var b strings.Builder
	pkgs := make([]string, 0, len(skipped))
	for p := range skipped {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		names := slices.Sorted(slices.Values(skipped[p]))
		for i, n := range names {
			names[i] = regexp.QuoteMeta(n)
		}
		fmt.Fprintf(&b, "%s ^(%s)$\n", p, strings.Join(names, "|"))
	}
	return b.String()
}
