// Package safetext makes text from profiles, targets and flags safe to
// print and to put in documents: a frame name or a folder name is data,
// and must not move the terminal's cursor, write its clipboard (OSC 52),
// reorder what a reader sees (bidirectional overrides), hide characters
// (zero-width), split a table row or open HTML (docs/security.md).
package safetext

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// unsafe tells a rune that is escaped: C0 and C1 controls, DEL, the
// bidirectional embeddings, overrides and isolates, zero-width and other
// invisible format characters, the line and paragraph separators, and
// noncharacters.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x180e, r >= 0x200b && r <= 0x200f, r >= 0x2028 && r <= 0x202e,
		r >= 0x2060 && r <= 0x206f, r == 0xfeff, r >= 0xfff9 && r <= 0xfffb, r == 0xfffe, r == 0xffff:
		return true
	}
	return false
}

// Clean reports whether s needs no escaping.
func Clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			goto slow
		}
	}
	return true
slow:
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unsafe(r) {
			return false
		}
	}
	return true
}

// Text returns s with every unsafe rune written as a Go escape (\x1b,
// \u202e) and invalid UTF-8 as \xNN: what a terminal, a log line or a
// plain-text table may show. Safe text comes back unchanged.
func Text(s string) string {
	if Clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Markdown returns s as markdown text (a heading, a table cell): Text,
// then the characters that could open a code span, emphasis, a link, an
// HTML tag or entity, or split a table cell are backslash-escaped. An
// underscore inside a word (sample_type) is never emphasis, and stays.
func Markdown(s string) string {
	s = Text(s)
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', '`', '*', '[', ']', '<', '>', '|', '&':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Code returns s as a markdown code span that no backtick in s can close,
// safe in a table cell.
func Code(s string) string {
	s = strings.ReplaceAll(Text(s), "|", `\|`)
	run, longest := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// CSVField returns s for a CSV cell: Text, and a leading character a
// spreadsheet would take for a formula (= + - @) made literal with '.
func CSVField(s string) string {
	s = Text(s)
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		return "'" + s
	}
	return s
}

// Writer escapes, as Text does, what goes through it to w, line breaks
// and tabs aside: a command's standard output and error, so that no
// string from a profile, a target or a file reaches a terminal raw.
type Writer struct {
	w    io.Writer
	part []byte // the start of a rune cut by the last Write
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (sw *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if len(sw.part) > 0 {
		p = append(sw.part, p...)
		sw.part = nil
	}
	// Keep a rune cut at the end for the next Write.
	if cut := incomplete(p); cut > 0 {
		sw.part = append([]byte(nil), p[len(p)-cut:]...)
		p = p[:len(p)-cut]
	}
	if plain(p) { // printable ASCII, line breaks and tabs: as it is
		if _, err := sw.w.Write(p); err != nil {
			return 0, err
		}
		return n, nil
	}
	var b []byte
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == '\n' || r == '\t':
			b = append(b, byte(r))
		case r == utf8.RuneError && size == 1:
			b = fmt.Appendf(b, `\x%02x`, p[i])
		case r < 0x80 && unsafe(r):
			b = fmt.Appendf(b, `\x%02x`, r)
		case unsafe(r):
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = append(b, p[i:i+size]...)
		}
		i += size
	}
	if _, err := sw.w.Write(b); err != nil {
		return 0, err
	}
	return n, nil
}

// incomplete is how many bytes at the end of p start a rune that is not
// all there.
func incomplete(p []byte) int {
	for k := 1; k <= 3 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xc0 { // a leading byte: how long should its rune be
			need := 2
			if c >= 0xe0 {
				need = 3
			}
			if c >= 0xf0 {
				need = 4
			}
			if need > k {
				return k
			}
			return 0
		}
	}
	return 0
}

// plain tells bytes that need no escape at all: printable ASCII, \n, \t.
func plain(p []byte) bool {
	for _, c := range p {
		if c >= 0x7f || c < 0x20 && c != '\n' && c != '\t' {
			return false
		}
	}
	return true
}

// Relayed returns another program's output (a target's last lines, the
// go command's errors) to be quoted in perfspy's own: each line begins
// with "| ", so that none of it begins a line a CI runner parses as a
// command of its own (GitHub's "::error ...", "::stop-commands::", the
// older "##[error]"; runners trim leading space before they look).
func Relayed(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "| " + strings.ReplaceAll(s, "\n", "\n| ")
}
