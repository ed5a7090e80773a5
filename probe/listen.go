package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/internal/safetext"
)

// addrFlagPrefix is -addr's form that names the target's own flag:
// flag:NAME gives that flag a free loopback port, on every run.
const addrFlagPrefix = "flag:"

// checkAddr validates -addr: HOST:PORT, :PORT, PORT or flag:NAME.
func checkAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if name, ok := strings.CutPrefix(addr, addrFlagPrefix); ok {
		if strings.TrimLeft(name, "-") == "" || strings.ContainsAny(name, " \t=") {
			return fmt.Errorf("-addr %q: want flag:NAME, the target's flag that takes its listen address (e.g. flag:admin-addr)", addr)
		}
		return nil
	}
	port := addr
	if strings.Contains(addr, ":") {
		var err error
		if _, port, err = net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("-addr %q: %w", addr, err)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("-addr %q: want HOST:PORT, :PORT, PORT (1 to 65535) or flag:NAME", addr)
	}
	return nil
}

// listenAddr turns -addr into the address to wait for and the target's
// arguments: a bare port is the loopback's; flag:NAME puts
// -NAME=127.0.0.1:PORT (--NAME when NAME has its dashes) before the
// target's arguments, PORT a port free now.
func listenAddr(addr string, args []string) (string, []string, error) {
	name, ok := strings.CutPrefix(addr, addrFlagPrefix)
	if !ok {
		if _, err := strconv.Atoi(addr); err == nil {
			return "127.0.0.1:" + addr, args, nil
		}
		return addr, args, nil
	}
	port, err := proc.FreePort()
	if err != nil {
		return "", nil, fmt.Errorf("-addr %s: no free port on 127.0.0.1: %w", addr, err)
	}
	if !strings.HasPrefix(name, "-") {
		name = "-" + name
	}
	at := "127.0.0.1:" + strconv.Itoa(port)
	return at, append([]string{name + "=" + at}, args...), nil
}

// listenersAdvice gives a refusal of several listeners (proc's
// ListenersError) what holds on the next run, when err is one: the
// target's flags that take an address, asked of its agent, each as
// -addr flag:NAME, and a fixed port as -addr :PORT.
func listenersAdvice(ctx context.Context, sock string, err error) error {
	var le *proc.ListenersError
	if !errors.As(err, &le) {
		return err
	}
	le.Advice = addrAdvice(askAddrFlags(ctx, sock))
	return err
}

// addrAdvice is the advice for the target's address flags ("NAME=VALUE").
func addrAdvice(flags []string) string {
	const fixed = "or fix a port in the target's own configuration (-args) and give it as -addr :PORT"
	if len(flags) == 0 {
		return "ports a server chooses at its start change every run: " + fixed
	}
	var names []string
	for _, f := range flags {
		// The target's words, as the terminal shows them: no escape
		// sequence of a flag's value reaches it.
		name, value, _ := strings.Cut(f, "=")
		name, value = safetext.Text(name), safetext.Text(value)
		names = append(names, fmt.Sprintf("-addr flag:%s (its -%s, now %s)", name, name, value))
	}
	return "ports a server chooses at its start change every run; the target's flags that take an address hold on every run, probe giving the one named a free port: " +
		strings.Join(names, ", ") + "; " + fixed
}

// askAddrFlags asks the agent at sock for the target's address flags;
// nil when it cannot answer.
func askAddrFlags(ctx context.Context, sock string) []string {
	ac, err := dialAgent(ctx, sock)
	if err != nil {
		return nil
	}
	defer ac.Close()
	ac.to = 5 * time.Second
	r, err := ac.call(wire.Request{Cmd: "listeners"})
	if err != nil {
		return nil
	}
	return r.AddrFlags
}
