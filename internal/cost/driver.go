package cost

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/schema"
)

// Driver sets the load drivers' own CPU per request side by side on
// targets/floor, in interleaved rounds: probe's lean HTTP/1.1 driver, its
// net/http driver, and wrk (-t1 -c8) when it is installed. Each is pinned
// to one core and the server to the other, as probe pins them.
var Driver = Bench{Name: "driver", Run: func(ctx context.Context, env Env) error {
	type figures struct{ driverUS, serverUS, serverCores []float64 }
	got := map[string]*figures{"lean": {}, "nethttp": {}, "wrk": {}, "h2c": {}, "h2c-nethttp": {}}
	_, noWrk := exec.LookPath("wrk")
	// Interleaved: each round runs the three, so that the machine's drift
	// falls on all of them.
	one := env
	one.Rounds = 1
	for r := 0; r < env.Rounds; r++ {
		modes := []string{"lean", "nethttp", "h2c", "h2c-nethttp"}
		if r%2 == 1 {
			modes = []string{"h2c-nethttp", "h2c", "nethttp", "lean"}
		}
		err := probeRounds(ctx, one, "targets/floor", modes, func(m string) run {
			proto, driver := "http", m
			if p, d, ok := strings.Cut(m, "-"); ok || m == "h2c" {
				proto, driver = p, map[bool]string{true: d, false: "lean"}[ok]
			}
			return run{"targets/floor", []string{"-proto", proto, "-http-driver", driver, "-offcpu=false", "-copies", "off", "-allocs", "heapprofile", "-syscalls", "proc-io", "-cpus", "0:1"}}
		}, func(m string, s *schema.Summary) error {
			if s.Driver == nil || s.PerRequest.CPUUS == nil {
				return fmt.Errorf("%s: no driver figures in summary.json", m)
			}
			got[m].driverUS = append(got[m].driverUS, s.Driver.CPUUS)
			got[m].serverUS = append(got[m].serverUS, *s.PerRequest.CPUUS)
			got[m].serverCores = append(got[m].serverCores, s.ServerCores)
			return nil
		})
		if err != nil {
			return err
		}
		if noWrk == nil {
			us, cores, err := wrkRound(ctx, env)
			if err != nil {
				return err
			}
			got["wrk"].driverUS = append(got["wrk"].driverUS, us)
			got["wrk"].serverCores = append(got["wrk"].serverCores, cores)
		}
	}
	wrkNote := "wrk is not installed (apt-get install wrk): its column is left out"
	fmt.Fprintf(env.Stdout, "load drivers on targets/floor, server and driver pinned to one core each, median of %d rounds\n", env.Rounds)
	fmt.Fprintf(env.Stdout, "  %-10s %18s %14s\n", "driver", "own CPU µs/req", "server cores")
	for _, name := range []string{"lean", "nethttp", "wrk", "h2c", "h2c-nethttp"} {
		if f := got[name]; len(f.driverUS) > 0 {
			fmt.Fprintf(env.Stdout, "  %-12s %16.2f %14.3f\n", name, median(f.driverUS), median(f.serverCores))
		}
	}
	lean := median(got["lean"].driverUS)
	fmt.Fprintf(env.Stdout, "  lean / the server's CPU per request (%.2f µs, the lightest handler): %.3fx (goal at most 0.8)\n", median(got["lean"].serverUS), lean/median(got["lean"].serverUS))
	fmt.Fprintf(env.Stdout, "  h2c (lean) / the server's CPU per request (%.2f µs): %.3fx (goal at most 0.8); h2c / h2c-nethttp: %.3fx\n",
		median(got["h2c"].serverUS), median(got["h2c"].driverUS)/median(got["h2c"].serverUS), median(got["h2c"].driverUS)/median(got["h2c-nethttp"].driverUS))
	fmt.Fprintf(env.Stdout, "  lean / nethttp: %.3fx (goal at most 0.5)\n", lean/median(got["nethttp"].driverUS))
	if len(got["wrk"].driverUS) > 0 {
		fmt.Fprintf(env.Stdout, "  lean / wrk:     %.3fx (goal at most 1.3)\n", lean/median(got["wrk"].driverUS))
	} else {
		fmt.Fprintf(env.Stdout, "  %s\n", wrkNote)
	}
	return otherDrivers(ctx, env)
}}

// otherDrivers sets the framed driver (targets/rpcecho) and the UDP
// driver (targets/udpfloor, 1 MiB pushes) against their servers, measured
// the same way: a driver must cost less per request than its server for
// the server to set the pace.
func otherDrivers(ctx context.Context, env Env) error {
	targets := map[string]string{"framed": "targets/rpcecho", "udp": "targets/udpfloor", "grpc": "targets/grpcecho", "grpcgo": "targets/grpcecho", "grpc-health": "targets/grpcecho"}
	type figures struct{ driverUS, serverUS, serverCores []float64 }
	got := map[string]*figures{"framed": {}, "udp": {}, "grpc": {}, "grpcgo": {}, "grpc-health": {}}
	record := func(m string, s *schema.Summary) error {
		if s.Driver == nil || s.PerRequest.CPUUS == nil {
			return fmt.Errorf("%s: no driver figures in summary.json", m)
		}
		got[m].driverUS = append(got[m].driverUS, s.Driver.CPUUS)
		got[m].serverUS = append(got[m].serverUS, *s.PerRequest.CPUUS)
		got[m].serverCores = append(got[m].serverCores, s.ServerCores)
		return nil
	}
	flags := []string{"-offcpu=false", "-copies", "off", "-allocs", "heapprofile", "-syscalls", "proc-io", "-cpus", "0:1"}
	err := probeRounds(ctx, env, "framed and udp drivers", []string{"framed", "udp"}, func(m string) run {
		return run{targets[m], flags}
	}, record)
	if err != nil {
		return err
	}
	// The gRPC drivers side by side on grpcecho's echo method: the lean
	// one (grpc) and grpc-go's client (grpcgo); and the lean one on the
	// lightest method a server has, the health service's Check
	// (grpc-health).
	err = probeRounds(ctx, env, "grpc drivers", []string{"grpc", "grpcgo", "grpc-health"}, func(m string) run {
		if m == "grpc-health" {
			return run{targets[m], append([]string{"-grpc-driver", "lean", "-method", "grpc.health.v1.Health/Check", "-data", "{}"}, flags...)}
		}
		d := map[string]string{"grpc": "lean", "grpcgo": "grpcgo"}[m]
		return run{targets[m], append([]string{"-grpc-driver", d}, flags...)}
	}, record)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "other drivers against their servers, median of %d rounds\n", env.Rounds)
	fmt.Fprintf(env.Stdout, "  %-10s %18s %18s %14s %16s\n", "driver", "own CPU µs/req", "server µs/req", "server cores", "driver / server")
	for _, name := range []string{"framed", "udp", "grpc", "grpcgo", "grpc-health"} {
		f := got[name]
		fmt.Fprintf(env.Stdout, "  %-10s %18.2f %18.2f %14.3f %15.3fx\n", name, median(f.driverUS), median(f.serverUS), median(f.serverCores), median(f.driverUS)/median(f.serverUS))
	}
	fmt.Fprintf(env.Stdout, "  grpc (lean) / grpcgo, own CPU per call: %.3fx; lean driver / server: %.3fx on Echo, %.3fx on Health/Check (goal at most 0.8)\n",
		median(got["grpc"].driverUS)/median(got["grpcgo"].driverUS), median(got["grpc"].driverUS)/median(got["grpc"].serverUS), median(got["grpc-health"].driverUS)/median(got["grpc-health"].serverUS))
	return nil
}

var wrkRequests = regexp.MustCompile(`(\d+) requests in`)

// wrkRound runs wrk -t1 -c8 on core 1 against targets/floor on core 0
// and returns wrk's CPU per request (its rusage) and the server's cores.
func wrkRound(ctx context.Context, env Env) (float64, float64, error) {
	root, err := srcroot.Dir()
	if err != nil {
		return 0, 0, err
	}
	tmp, err := os.MkdirTemp("", "perfspy-cost-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "floor")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./targets/floor")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("building targets/floor: %v\n%s", err, b)
	}
	srv := exec.CommandContext(ctx, "taskset", "-c", "0", bin)
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	sc := bufio.NewScanner(stderr)
	addr := ""
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "floor: listening on "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		return 0, 0, fmt.Errorf("targets/floor did not say where it listens")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	fmt.Fprintf(env.Stderr, "wrk -t1 -c8 -d%v on %s\n", env.Duration, addr)
	cpu0 := procCPU(srv.Process.Pid)
	start := time.Now()
	wrk := exec.CommandContext(ctx, "taskset", "-c", "1", "wrk", "-t1", "-c8", "-d"+strconv.Itoa(int(env.Duration.Seconds()))+"s", "http://"+addr+"/")
	out, err := wrk.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	secs := time.Since(start).Seconds()
	server := float64(procCPU(srv.Process.Pid)-cpu0) / 1e9 / secs
	m := wrkRequests.FindSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("wrk said %q", out)
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	ru := wrk.ProcessState.SysUsage().(*syscall.Rusage)
	own := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
	return own / n, server, nil
}

// procCPU is a process's CPU time in nanoseconds (/proc/PID/stat utime
// and stime, in clock ticks of 10 ms).
func procCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + st) * 1e7
}
