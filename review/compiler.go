package review

// The compiler's reason on the line that allocates: the escape-analysis
// and inlining diagnostics (go build -gcflags=-m=2) of both revisions, for
// the packages that hold an annotated allocation only, matched through
// the same line map as the counts. "now moved to heap: p (from last = p
// (assign) at main.go:20)" says why a line allocates since this change;
// "keep is no longer inlined (function too complex: cost 85 exceeds budget
// 80)" why an argument now leaks; a line whose diagnostics did not change
// allocates because the code asks it to (a new make, new or call).

import (
	"bufio"
	"context"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/worktree"
	"github.com/perfspy/perfspy/schema"
)

// diag is one diagnostic of the compiler's at a line: its message and,
// for an escape, the last step of its flow (the assignment that made it
// escape).
type diag struct{ msg, from string }

// diagnostics are a revision's diagnostics by root-relative file and line,
// and its "cannot inline F: reason" by function.
type diagnostics struct {
	at       map[string]map[int][]diag
	noInline map[string]string
	// inlined are the functions inlined somewhere in the packages built;
	// stays what the compiler said somewhere does not escape.
	inlined, stays map[string]bool
	// src is the revision's source of the annotated files, by line, and
	// values the struct and array types they declare (whose empty
	// literal is a zero value, not an allocation).
	src    map[string][]string
	values map[string]bool
}

// source is a line of a file's source, trimmed; "" when not read.
func (d *diagnostics) source(file string, line int) string {
	if l := d.src[file]; line >= 1 && line <= len(l) {
		return strings.TrimSpace(l[line-1])
	}
	return ""
}

// sourceLines are lines of a file's source, trimmed, those read.
func (d *diagnostics) sourceLines(file string, lines []int) []string {
	var out []string
	for _, n := range lines {
		if l := d.source(file, n); l != "" {
			out = append(out, l)
		}
	}
	return out
}

var (
	diagLine = regexp.MustCompile(`^(.+?\.go):(\d+):\d+: (.*)$`)
	position = regexp.MustCompile(`(\S+?\.go):(\d+):\d+`)
)

// parseDiagnostics reads -m=2's output of the package in dir (the root-
// relative folder the paths are relative to).
func parseDiagnostics(out, dir string, d *diagnostics) {
	if d.at == nil {
		d.at, d.noInline, d.inlined, d.stays = map[string]map[int][]diag{}, map[string]string{}, map[string]bool{}, map[string]bool{}
	}
	type block struct{ file, subject string }
	var cur *block
	froms := map[string]string{} // "file:line subject" -> the flow's last step
	var keep []struct {
		file string
		line int
		msg  string
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := diagLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		file := strings.ReplaceAll(filepath.ToSlash(filepath.Clean(filepath.Join(dir, m[1]))), nlMark, "\n")
		line, _ := strconv.Atoi(m[2])
		msg := m[3]
		if strings.HasPrefix(msg, " ") { // a flow's step, under its header
			if step, ok := strings.CutPrefix(strings.TrimSpace(msg), "from "); ok && cur != nil {
				froms[cur.file+":"+strconv.Itoa(line)+" "+cur.subject] = position.ReplaceAllStringFunc(step, shortPos)
			}
			continue
		}
		cur = nil
		if subject, _, ok := strings.Cut(msg, " escapes to heap in "); ok && strings.HasSuffix(msg, ":") {
			cur = &block{file: file, subject: subject}
			continue
		}
		if fn, why, ok := strings.Cut(strings.TrimPrefix(msg, "cannot inline "), ": "); ok && strings.HasPrefix(msg, "cannot inline ") {
			d.noInline[fn] = why
			continue
		}
		// A header of a flow's explanation ("parameter p leaks to {heap}
		// for f with derefs=0:") says what the summary lines say.
		if fn, ok := strings.CutPrefix(msg, "inlining call to "); ok {
			d.inlined[fn] = true
		}
		if s, ok := strings.CutSuffix(msg, " does not escape"); ok {
			d.stays[s] = true
		}
		if strings.HasPrefix(msg, "can inline ") || strings.HasPrefix(msg, "leaking param") || strings.HasSuffix(msg, ":") {
			continue
		}
		keep = append(keep, struct {
			file string
			line int
			msg  string
		}{file, line, msg})
	}
	for _, k := range keep {
		subject := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(k.msg, "moved to heap: "), " escapes to heap"), " does not escape")
		dg := diag{msg: k.msg, from: froms[k.file+":"+strconv.Itoa(k.line)+" "+subject]}
		if d.at[k.file] == nil {
			d.at[k.file] = map[int][]diag{}
		}
		if !slices.Contains(d.at[k.file][k.line], dg) {
			d.at[k.file][k.line] = append(d.at[k.file][k.line], dg)
		}
	}
}

// nlMark stands for a newline inside a file's name in the compiler's
// output, so that the output splits into its diagnostics: no file name
// holds a NUL.
const nlMark = "\x00"

// joinNewlineNames writes each newline in the names of dir's Go files
// (names the compiler prints as they are, splitting a diagnostic over two
// lines) as nlMark, wherever the output has such a name.
func joinNewlineNames(out, dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		if n := e.Name(); strings.Contains(n, "\n") && strings.HasSuffix(n, ".go") {
			out = strings.ReplaceAll(out, n, strings.ReplaceAll(n, "\n", nlMark))
		}
	}
	return out
}

// shortPos writes a position as file:line, the file's base name.
func shortPos(p string) string {
	m := position.FindStringSubmatch(p)
	return strings.ReplaceAll(filepath.Base(m[1]), nlMark, "\n") + ":" + m[2]
}

// diagnose builds each folder of dirs at commit, in a worktree of its own,
// with -gcflags=-m=2 (with its tests when tests says so), and reads the
// diagnostics. A folder that does not build gives none.
func diagnose(ctx context.Context, root, commit string, dirs map[string]bool) (*diagnostics, error) {
	// A killed review's worktree is removed here, the next time.
	set, err := worktree.New(ctx, root, "review")
	if err != nil {
		return nil, err
	}
	defer set.Remove()
	tmp := set.Dir()
	wt, err := set.Add(ctx, "src", commit)
	if err != nil {
		return nil, err
	}
	d := &diagnostics{}
	for _, dir := range sortedKeys(dirs) {
		args := []string{"build", "-o", filepath.Join(tmp, "bin"), "-gcflags=-m=2", "."}
		if dirs[dir] {
			args = []string{"test", "-c", "-o", filepath.Join(tmp, "test"), "-gcflags=-m=2", "."}
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = filepath.Join(wt, dir)
		out, _ := cmd.CombinedOutput() // the diagnostics are on standard error either way
		parseDiagnostics(joinNewlineNames(string(out), cmd.Dir), dir, d)
		readSources(cmd.Dir, dir, d)
	}
	return d, nil
}

// maxSource is the most of a Go file the reasons read; past it the file
// gives no source reasons.
const maxSource = 16 << 20

// readSources keeps the Go files of a folder (dir, root-relative, at
// path) by line, for the reasons that read the source.
func readSources(path, dir string, d *diagnostics) {
	if d.src == nil {
		d.src, d.values = map[string][]string{}, map[string]bool{}
	}
	ents, _ := os.ReadDir(path)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		// Regular files only, bounded: a .go name can be a symbolic link
		// to a device (/dev/zero never ends) or a FIFO.
		b, err := limits.ReadFile(filepath.Join(path, e.Name()), maxSource, "")
		if err != nil {
			continue
		}
		d.src[filepath.ToSlash(filepath.Join(dir, e.Name()))] = strings.Split(string(b), "\n")
		f, err := goparser.ParseFile(token.NewFileSet(), e.Name(), b, goparser.SkipObjectResolution)
		if err != nil {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				switch ts.Type.(type) {
				case *ast.StructType, *ast.ArrayType:
					d.values[ts.Name.Name] = true
				}
			}
			return true
		})
	}
}

// explain gives each allocation annotation the compiler's reason: the
// packages that hold one are built at both revisions with -m=2. It
// returns how long that took.
func (r *Result) explain(ctx context.Context, root string) (time.Duration, error) {
	start := time.Now()
	dirs := map[string]bool{} // folder -> an annotated line is in a test file
	for _, a := range r.Annotations {
		if onGoMod(a) {
			continue // a module's change: no line of the repository's code to explain
		}
		if strings.HasPrefix(a.Metric, "allocs/") || strings.HasPrefix(a.Metric, "retained-B/") {
			dir := filepath.ToSlash(filepath.Dir(a.File))
			dirs[dir] = dirs[dir] || strings.HasSuffix(a.File, "_test.go")
		}
	}
	if len(dirs) == 0 {
		return 0, nil
	}
	head, err := diagnose(ctx, root, r.Head["commit"], dirs)
	if err != nil {
		return time.Since(start), fmt.Errorf("the head's diagnostics: %w", err)
	}
	base, err := diagnose(ctx, root, r.Base["commit"], dirs)
	if err != nil {
		return time.Since(start), fmt.Errorf("the base's diagnostics: %w", err)
	}
	pools := poolReasons(r.Annotations)
	for i := range r.Annotations {
		a := &r.Annotations[i]
		if !strings.HasPrefix(a.Metric, "allocs/") && !strings.HasPrefix(a.Metric, "retained-B/") || onGoMod(*a) {
			continue
		}
		line := a.Line
		if a.AllocLine != 0 {
			line = a.AllocLine
		}
		fell := a.Delta < 0 || a.Delta == 0 && a.Bytes < 0
		a.Compiler = compilerReasons(head, base, reasonAt{file: a.File, line: line, baseLines: r.baseLines[annKey(*a)],
			changed: r.changedLines[annKey(*a)] && a.AllocLine == 0, caused: a.AllocLine != 0, fell: fell, fn: a.Func, stack: a.Stack,
			hunk: r.headLines[annKey(*a)]})
		if lc, ok := r.causedLines[annKey(*a)]; ok {
			for _, why := range compilerReasons(head, base, reasonAt{file: a.File, line: lc.alloc, baseLines: lc.allocBase, caused: true, fell: fell, stack: a.Stack}) {
				a.Compiler = append(a.Compiler, fmt.Sprintf("at line %d: %s", lc.alloc, why))
			}
		}
		compiler := a.Compiler
		if why, ok := pools[i]; ok {
			// The runtime's reason first: the compiler's "nothing changed
			// here" says nothing beside it.
			compiler = slices.DeleteFunc(compiler, unexplained)
			a.Compiler = append([]string{why}, compiler...)
			a.Message += "; " + why
		}
		if len(compiler) > 0 {
			a.Message += "; compiler: " + strings.Join(compiler, "; ")
		}
	}
	return time.Since(start), nil
}

// annKey names an annotation for the base lines kept beside it.
func annKey(a schema.Annotation) string {
	return strings.Join([]string{a.File, strconv.Itoa(a.Line), a.Item, a.Subject, a.Metric}, "\x00")
}

// onGoMod says whether an annotation is on go.mod (or go.sum): a
// dependency's or the toolchain's change.
func onGoMod(a schema.Annotation) bool {
	b := filepath.Base(a.File)
	return b == "go.mod" || b == "go.sum"
}
