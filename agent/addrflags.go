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

// isListenAddr says whether s is HOST:PORT or :PORT with a numeric port.
func isListenAddr(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}
