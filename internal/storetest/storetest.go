// Package storetest runs a real profile store for tests: the unmodified
// Pyroscope server, built from the module proxy as a program of its own
// (it is AGPL: it is never linked, vendored or shipped), cached in the
// cache folder, started on loopback only and stopped by the test.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfspy/perfspy/internal/cache"
	"github.com/perfspy/perfspy/internal/proc"
)

// Version is the server built: the newest the module proxy serves here.
const Version = "v1.12.0"

// goMod is the scratch module that builds the server: its two replace
// directives are the server's own, and its api module is the one it
// builds with outside its repository.
const goMod = `module perfspy.invalid/pyroscope-server

go 1.24

require (
	github.com/grafana/pyroscope ` + Version + `
	github.com/grafana/pyroscope/api v1.1.0
)

replace github.com/hashicorp/memberlist => github.com/grafana/memberlist v0.3.1-0.20220708130638-bd88e10a3d91

replace gopkg.in/yaml.v3 => github.com/colega/go-yaml-yaml v0.0.0-20220720105220-255a8d16d094
`

// Binary builds the server once into the user's cache folder
// (perfspy/pyroscope/VERSION: not a test's private $PERFSPY_CACHE, so
// that it is built once per machine) and returns its path; it skips the
// test, saying why, when it cannot be built (no module proxy).
func Binary(t *testing.T) string {
	t.Helper()
	root, err := cache.UserDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "pyroscope", Version)
	bin := filepath.Join(dir, "pyroscope")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644)
	t.Logf("building the Pyroscope server %s (a few minutes, once)", Version)
	cmd := exec.Command("go", "build", "-o", bin+".tmp", "github.com/grafana/pyroscope/cmd/pyroscope")
	cmd.Dir = dir
	// The checksum database does not answer for some of the server's
	// pseudo-versions here: this build alone goes without it.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOTOOLCHAIN=local", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("skipped: the Pyroscope server %s does not build here (no module proxy?): %v\n%s", Version, err, lastLines(out, 5))
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

func lastLines(b []byte, n int) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// Start runs the server on loopback, every ring and instance address set
// to 127.0.0.1 (left alone it dials the machine's other addresses), and
// returns its base URL, http://127.0.0.1:PORT, once it is ready.
func Start(t *testing.T) string {
	t.Helper()
	base, stop, err := start(Binary(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}

// Shared is Start's server, started once for the tests of a package that
// call it (each keeps to series of its own labels): a Pyroscope server
// takes seconds to be ready. The package's TestMain calls StopShared after
// its tests.
func Shared(t *testing.T) string {
	t.Helper()
	bin := Binary(t)
	shared.once.Do(func() {
		data, err := os.MkdirTemp("", "perfspy-store-")
		if err != nil {
			shared.err = err
			return
		}
		shared.data = data
		shared.base, shared.stop, shared.err = start(bin, data)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.base
}

// StopShared stops the shared server, if one started, and removes its data.
func StopShared() {
	if shared.stop != nil {
		shared.stop()
	}
	if shared.data != "" {
		os.RemoveAll(shared.data)
	}
}

var shared struct {
	once       sync.Once
	base, data string
	stop       func()
	err        error
}

// start starts bin with its data in data and waits until it is ready.
func start(bin, data string) (base string, stop func(), err error) {
	var ports [3]int
	for i := range ports {
		if ports[i], err = proc.FreePort(); err != nil {
			return "", nil, err
		}
	}
	httpPort, grpcPort, gossip := ports[0], ports[1], ports[2]
	args := []string{
		"-server.http-listen-address=127.0.0.1", "-server.http-listen-port=" + strconv.Itoa(httpPort),
		"-server.grpc-listen-address=127.0.0.1", "-server.grpc-listen-port=" + strconv.Itoa(grpcPort),
		"-memberlist.bind-addr=127.0.0.1", "-memberlist.advertise-addr=127.0.0.1", "-memberlist.bind-port=" + strconv.Itoa(gossip),
		"-ingester.lifecycler.addr=127.0.0.1", "-distributor.ring.instance-addr=127.0.0.1", "-compactor.ring.instance-addr=127.0.0.1",
		"-query-frontend.instance-addr=127.0.0.1", "-query-scheduler.ring.instance-addr=127.0.0.1",
		"-store-gateway.sharding-ring.instance-addr=127.0.0.1", "-overrides-exporter.ring.instance-addr=127.0.0.1",
		"-storage.backend=filesystem", "-storage.filesystem.dir=" + filepath.Join(data, "store"),
		"-pyroscopedb.data-path=" + filepath.Join(data, "db"),
		"-self-profiling.disable-push=true",
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = data, &log, &log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	base = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if ready(ctx, base) {
			return base, stop, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("the Pyroscope server was not ready in 90 s:\n%s", lastLines(log.Bytes(), 10))
}

func ready(ctx context.Context, base string) bool {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/ready", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode == 200 && strings.TrimSpace(b.String()) == "ready"
}

// Silent listens on loopback, accepts every connection and never
// answers: a store that hangs. It returns its address; the test's end
// closes it and its connections.
func Silent(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
