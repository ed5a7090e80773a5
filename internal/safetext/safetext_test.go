package safetext

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"main.(*T).M":           "main.(*T).M",
		"日本語の関数":                "日本語の関数",
		"a\x1b[2Jb":             `a\x1b[2Jb`,
		"osc\x1b]52;c;aGk=\x07": `osc\x1b]52;c;aGk=\x07`,
		"main.rtl\u202egnp.exe": `main.rtl\u202egnp.exe`,
		"zero\u200bwidth\ufeff": `zero\u200bwidth\ufeff`,
		"line\nbreak\r":         `line\x0abreak\x0d`,
		"bad\xffutf8":           `bad\xffutf8`,
		"c1\u0085":              `c1\u0085`,
		"isolate\u2066x\u2069":  `isolate\u2066x\u2069`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	if got := Markdown("<img src=x onerror=alert(1)>"); got != `\<img src=x onerror=alert(1)\>` {
		t.Errorf("Markdown = %q", got)
	}
	if got := Markdown("a|b `c` [l](u) *e* sample_type"); got != "a\\|b \\`c\\` \\[l\\](u) \\*e\\* sample_type" {
		t.Errorf("Markdown = %q", got)
	}
	for in, want := range map[string]string{
		"main.f":      "`main.f`",
		"a`b":         "``a`b``",
		"`start":      "`` `start ``",
		"x|y":         "`x\\|y`",
		"nl\nrow|cut": "`nl\\x0arow\\|cut`",
	} {
		if got := Code(in); got != want {
			t.Errorf("Code(%q) = %q, want %q", in, got, want)
		}
	}
	if got := CSVField("=cmd|' /C calc'!A0"); got != "'=cmd|' /C calc'!A0" {
		t.Errorf("CSVField = %q", got)
	}
}

// TestWriterSplitRunes: a rune cut between two Writes is kept whole.
func TestWriterSplitRunes(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	in := []byte("é\u202e日\n\t")
	for i := range in {
		w.Write(in[i : i+1])
	}
	if got := b.String(); got != "é\\u202e日\n\t" {
		t.Errorf("got %q", got)
	}
}

// FuzzText: whatever goes in, what comes out is valid UTF-8 with no
// unsafe rune, and safe text comes back unchanged.
func FuzzText(f *testing.F) {
	f.Add("main.f")
	f.Add("a\x1b]52;c;x\x07\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if unsafe(r) {
				t.Fatalf("Text(%q) = %q holds %U", s, out, r)
			}
		}
		if Clean(s) && out != s {
			t.Fatalf("clean %q changed to %q", s, out)
		}
		var b bytes.Buffer
		w := NewWriter(&b)
		for _, part := range strings.SplitAfter(s, "\x00") {
			w.Write([]byte(part))
		}
		for _, r := range b.String() {
			if unsafe(r) && r != '\n' && r != '\t' {
				t.Fatalf("Writer passed %U", r)
			}
		}
	})
}

// BenchmarkWriter: what a command's output costs through the writer; an
// SVG is printable ASCII almost throughout.
func BenchmarkWriter(b *testing.B) {
	line := []byte(`<g><title>net/http.(*conn).serve (1234 samples, 12.5%)</title><rect x="1.0" y="2.0" width="3.0" height="15"/></g>` + "\n")
	buf := bytes.Repeat(line, 1000)
	w := NewWriter(io.Discard)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		w.Write(buf)
	}
}

// TestRelayed: another program's output, quoted, begins no line that a CI
// runner would take for a workflow command, even with leading space.
func TestRelayed(t *testing.T) {
	in := "  ::stop-commands::tok\n::error file=main.go,line=1::forged\n\t##[error]old\nplain\n"
	got := Relayed(in)
	for _, line := range strings.Split(got, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if strings.HasPrefix(trimmed, "::") || strings.HasPrefix(trimmed, "##[") || !strings.HasPrefix(line, "| ") {
			t.Errorf("relayed line %q", line)
		}
	}
	if strings.Count(got, "\n") != 3 || Relayed("") != "" {
		t.Errorf("Relayed(%q) = %q", in, got)
	}
}
