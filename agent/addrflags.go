package agent

import (
	"flag"
	"net"
	"strconv"
)

// addrFlags are the flags of package flag's command line whose value, or
// default, is a listen address (HOST:PORT, :PORT): a server that listens
// on several gives each its flag, and probe offers those flags by name
// (-addr flag:NAME) where the ports it chose at its start change every
// run. Each is "NAME=VALUE", in the flag package's order.
func addrFlags() []string {
	var out []string
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if isListenAddr(v) || isListenAddr(f.DefValue) {
			out = append(out, f.Name+"="+v)
		}
	})
	return out
}

// isListenAddr says whether s is HOST:PORT or :PORT with a numeric port
// and a host that is empty, an IP or a plain host name: a flag holding a
// URL or a DSN ("user:secret@db:5432") is not one, and its value, which
// probe prints, is never offered.
func isListenAddr(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return false
	}
	if host == "" || net.ParseIP(host) != nil {
		return true
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
