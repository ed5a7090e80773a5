package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/proc"
)

// agentConn is probe's side of the control socket.
type agentConn struct {
	c  net.Conn
	r  *bufio.Reader
	to time.Duration
}

func dialAgent(ctx context.Context, path string) (*agentConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	return &agentConn{c: c, r: bufio.NewReader(c), to: 2 * time.Minute}, nil
}

func (a *agentConn) Close() error { return a.c.Close() }

// askListeners asks the agent at sock for the target's listening sockets
// (where /proc cannot tell: proc.WaitReady).
func askListeners(ctx context.Context, sock string) proc.AskListeners {
	return func() ([]proc.Listener, error) {
		ac, err := dialAgent(ctx, sock)
		if err != nil {
			return nil, err
		}
		defer ac.Close()
		ac.to = 5 * time.Second
		r, err := ac.call(wire.Request{Cmd: "listeners"})
		if err != nil {
			return nil, err
		}
		var out []proc.Listener
		for _, s := range r.Listeners {
			l, err := proc.ParseListener(s)
			if err != nil {
				return nil, fmt.Errorf("agent listeners: %w", err)
			}
			out = append(out, l)
		}
		return out, nil
	}
}

func (a *agentConn) call(req wire.Request) (*wire.Response, error) {
	a.c.SetDeadline(time.Now().Add(a.to))
	b, _ := json.Marshal(req)
	if _, err := a.c.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("agent %s: %w", req.Cmd, err)
	}
	line, err := a.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("agent %s: no answer: %w", req.Cmd, err)
	}
	var resp wire.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("agent %s: bad answer: %w", req.Cmd, err)
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("agent %s: %w", req.Cmd, errors.New(resp.Error))
	}
	return &resp, nil
}
