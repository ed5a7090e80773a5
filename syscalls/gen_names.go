//go:build ignore

// gen_names writes the syscall tables from the kernel's uapi headers
// (Debian's linux-libc-dev):
//
//	go run gen_names.go [x86_64 unistd_64.h [asm-generic/unistd.h]]
//
// names.go, x86_64's, from asm/unistd_64.h (one #define per call);
// names_aarch64.go, arm64's, from asm-generic/unistd.h, the table arm64
// uses, evaluated as arm64's asm/unistd.h includes it: 64-bit, with the
// __ARCH_WANT_ switches arm64 sets.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
)

// arm64Defines are what arm64's uapi asm/unistd.h defines before it
// includes asm-generic/unistd.h (and __BITS_PER_LONG, 64).
var arm64Defines = map[string]int{
	"__BITS_PER_LONG":             64,
	"__ARCH_WANT_RENAMEAT":        1,
	"__ARCH_WANT_NEW_STAT":        1,
	"__ARCH_WANT_SET_GET_RLIMIT":  1,
	"__ARCH_WANT_TIME32_SYSCALLS": 1,
	"__ARCH_WANT_SYS_CLONE3":      1,
	"__ARCH_WANT_MEMFD_SECRET":    1,
}

func main() {
	x86 := "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
	generic := "/usr/include/asm-generic/unistd.h"
	if len(os.Args) > 1 {
		x86 = os.Args[1]
	}
	if len(os.Args) > 2 {
		generic = os.Args[2]
	}
	amd64, err := readHeader(x86, nil)
	if err != nil {
		log.Fatal(err)
	}
	write("names.go", x86, "namesAMD64", "x86_64", amd64)
	arm64, err := readHeader(generic, arm64Defines)
	if err != nil {
		log.Fatal(err)
	}
	write("names_aarch64.go", generic, "namesARM64", "arm64", arm64)
}

// readHeader reads a header's __NR_ defines as the preprocessor would
// with defs defined: #if, #ifdef, #ifndef, #else and #endif are followed;
// a define may name another (__NR_fcntl __NR3264_fcntl).
func readHeader(path string, defs map[string]int) (map[int]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vals := map[string]int{}
	for k, v := range defs {
		vals[k] = v
	}
	var stack []bool // whether each open #if's branch is taken
	on := func() bool {
		for _, b := range stack {
			if !b {
				return false
			}
		}
		return true
	}
	names := map[int]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "#") {
			continue
		}
		dir, rest, _ := strings.Cut(strings.TrimSpace(line[1:]), " ")
		rest = strings.TrimSpace(strings.SplitN(rest, "/*", 2)[0])
		switch dir {
		case "if":
			stack = append(stack, eval(rest, vals) != 0)
		case "ifdef", "ifndef":
			_, ok := vals[rest]
			stack = append(stack, ok == (dir == "ifdef"))
		case "else":
			stack[len(stack)-1] = !stack[len(stack)-1]
		case "endif":
			stack = stack[:len(stack)-1]
		case "define":
			if !on() {
				continue
			}
			fl := strings.Fields(rest)
			if len(fl) != 2 || strings.Contains(fl[0], "(") {
				continue
			}
			n, err := strconv.Atoi(fl[1])
			if err != nil {
				v, ok := vals[fl[1]]
				if !ok {
					continue
				}
				n = v
			}
			vals[fl[0]] = n
			if name, ok := strings.CutPrefix(fl[0], "__NR_"); ok && name != "syscalls" {
				names[n] = name
			}
		case "undef":
			delete(vals, rest)
		}
	}
	return names, sc.Err()
}

// eval evaluates a #if expression: defined(X), identifiers (their value,
// 0 when undefined), numbers, !, ==, !=, && and ||, parentheses.
func eval(expr string, vals map[string]int) int {
	p := &parser{toks: tokens(expr), vals: vals}
	return p.or()
}

type parser struct {
	toks []string
	vals map[string]int
}

func tokens(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case strings.HasPrefix(s[i:], "&&") || strings.HasPrefix(s[i:], "||") || strings.HasPrefix(s[i:], "==") || strings.HasPrefix(s[i:], "!="):
			out = append(out, s[i:i+2])
			i += 2
		case c == '(' || c == ')' || c == '!':
			out = append(out, string(c))
			i++
		default:
			j := i
			for j < len(s) && strings.IndexByte(" \t()!&|=", s[j]) < 0 {
				j++
			}
			out = append(out, s[i:j])
			i = j
		}
	}
	return out
}

func (p *parser) next() string {
	if len(p.toks) == 0 {
		return ""
	}
	t := p.toks[0]
	p.toks = p.toks[1:]
	return t
}

func (p *parser) peek() string {
	if len(p.toks) == 0 {
		return ""
	}
	return p.toks[0]
}

func (p *parser) or() int {
	v := p.and()
	for p.peek() == "||" {
		p.next()
		if r := p.and(); v != 0 || r != 0 {
			v = 1
		}
	}
	return v
}

func (p *parser) and() int {
	v := p.cmp()
	for p.peek() == "&&" {
		p.next()
		if r := p.cmp(); v != 0 && r != 0 {
			v = 1
		} else {
			v = 0
		}
	}
	return v
}

func (p *parser) cmp() int {
	v := p.unary()
	for p.peek() == "==" || p.peek() == "!=" {
		op := p.next()
		r := p.unary()
		if (v == r) == (op == "==") {
			v = 1
		} else {
			v = 0
		}
	}
	return v
}

func (p *parser) unary() int {
	switch t := p.next(); t {
	case "!":
		if p.unary() == 0 {
			return 1
		}
		return 0
	case "(":
		v := p.or()
		p.next() // ")"
		return v
	case "defined":
		paren := p.peek() == "("
		if paren {
			p.next()
		}
		_, ok := p.vals[p.next()]
		if paren {
			p.next()
		}
		if ok {
			return 1
		}
		return 0
	default:
		if n, err := strconv.Atoi(t); err == nil {
			return n
		}
		return p.vals[t]
	}
}

func write(file, header, varName, arch string, names map[int]string) {
	var nums []int
	for n := range names {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by gen_names.go from %s; DO NOT EDIT.\n\npackage syscalls\n\n", header)
	fmt.Fprintf(&b, "// %s maps %s syscall numbers to names.\nvar %s = map[int]string{\n", varName, arch, varName)
	for _, n := range nums {
		fmt.Fprintf(&b, "\t%d: %q,\n", n, names[n])
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(file, src, 0o644); err != nil {
		log.Fatal(err)
	}
}
