package shellwords

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  -addr :8080  ", []string{"-addr", ":8080"}},
		{`-name 'a b' "c d" e\ f`, []string{"-name", "a b", "c d", "e f"}},
		{`"a\"b" 'it''s'`, []string{`a"b`, "its"}},
		{`-x "" ''`, []string{"-x", "", ""}},
		{`"$HOME" \$x`, []string{"$HOME", "$x"}},
	} {
		got, err := Split(tc.in)
		if err != nil {
			t.Errorf("Split(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `trailing\`} {
		if _, err := Split(bad); err == nil {
			t.Errorf("Split(%q): no error", bad)
		}
	}
}

// quote is the inverse of Split for the fuzzer.
func quote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func FuzzSplit(f *testing.F) {
	f.Add(`-addr :8080 -name 'a b'`)
	f.Add(`"x\"y" z\ w`)
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Split(s)
		if err != nil {
			return
		}
		again, err := Split(quote(words))
		if err != nil {
			t.Fatalf("re-splitting %q: %v", quote(words), err)
		}
		if len(words) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(words, again) {
			t.Fatalf("round trip of %q: %q then %q", s, words, again)
		}
	})
}

// TestQuote: every word Quote writes, pasted into sh, is the word itself,
// whatever it holds: $(…), backquotes, ;, quotes, newlines, spaces.
func TestQuote(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to read the words back")
	}
	words := []string{"plain", "./cmd/srv", "BenchmarkX/size=10", "", "a b", "$(touch /tmp/pwned)", "`id`", "x;touch y", "it's", "'", "\"q\"", "a\nb", "*", "~root", "!x", "-bench=.", "^Benchmark(A|B)$"}
	for _, w := range words {
		out, err := exec.Command("sh", "-c", "printf '%s' "+Quote(w)).Output()
		if err != nil || string(out) != w {
			t.Errorf("Quote(%q) = %s: sh read %q (%v)", w, Quote(w), out, err)
		}
	}
	if q := Quote("./cmd/srv"); q != "./cmd/srv" {
		t.Errorf("Quote of a plain path: %s", q)
	}
}
