package routes

// This file is also added, as it is, to net/http by the overlay (HTTPFile):
// standard library only, no imports, names that net/http does not use.

// perfspyFold writes method, a space and path into dst, with each path
// segment of digits written {n} and each UUID segment {uuid}, so that
// /users/42 and /users/7 are one route. It returns the bytes written, or
// -1 when they do not fit in dst.
func perfspyFold(dst []byte, method, path string) int {
	n := 0
	put := func(s string) bool {
		if n+len(s) > len(dst) {
			return false
		}
		n += copy(dst[n:], s)
		return true
	}
	if !put(method) || !put(" ") {
		return -1
	}
	if path == "" {
		path = "/"
	}
	for len(path) > 0 {
		seg := path
		rest := ""
		for i := 0; i < len(path); i++ {
			if path[i] == '/' && i > 0 {
				seg, rest = path[:i], path[i:]
				break
			}
		}
		// seg is "/name" or, for a path without a leading slash, "name".
		lead, name := "", seg
		if seg[0] == '/' {
			lead, name = "/", seg[1:]
		}
		switch {
		case perfspyDigits(name):
			name = "{n}"
		case perfspyUUID(name):
			name = "{uuid}"
		}
		if !put(lead) || !put(name) {
			return -1
		}
		path = rest
	}
	return n
}

func perfspyDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// perfspyUUID reports whether s is a UUID in its text form
// (8-4-4-4-12 hex digits).
func perfspyUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		default:
			return false
		}
	}
	return true
}
