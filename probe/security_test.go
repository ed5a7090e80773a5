package probe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/profstore"
)

// TestFlagsRedacted: what meta records of the flags keeps every flag's
// name and none of the secrets: header values, -env values, credentials
// among the target's arguments, a path's token.
func TestFlagsRedacted(t *testing.T) {
	t.Setenv(profstore.EnvToken, "envtoken-s3cret")
	var stderr strings.Builder
	cfg, _, code, ok := parseRunFlags("probe run", []string{
		"-header", "Authorization: Bearer hdr-s3cret", "-env", "API_KEY=env-s3cret",
		"-args", "--listen :0 --password pw-s3cret --api-token=tok-s3cret --db postgres://u:url-s3cret@h/db",
		"-path", "/get?token=path-s3cret&page=2", "-push", "http://127.0.0.1:4040", "-push-header", "X-Scope-OrgID=tenant",
		"-method", "POST", "-data", "user=a&password=data-s3cret", "./targets/httpjson"}, &stderr, nil)
	if !ok {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	meta := formatMeta(map[string]string{"flags": strings.Join(cfg.Flags, " "), "target-args": strings.Join(RedactArgs(cfg.Args), " ")})
	for _, secret := range []string{"hdr-s3cret", "env-s3cret", "pw-s3cret", "tok-s3cret", "url-s3cret", "path-s3cret", "envtoken-s3cret", "data-s3cret"} {
		if strings.Contains(meta, secret) {
			t.Errorf("meta holds %s:\n%s", secret, meta)
		}
	}
	for _, kept := range []string{"-header=Authorization:REDACTED", "-env=API_KEY=REDACTED", "--password REDACTED", "--api-token=REDACTED", "page=2", "--listen :0", "-push=http://127.0.0.1:4040", "-data=REDACTED (27 bytes)"} {
		if !strings.Contains(meta, kept) {
			t.Errorf("meta lacks %q:\n%s", kept, meta)
		}
	}
	// What the run uses is not redacted.
	if string(cfg.Data) != "user=a&password=data-s3cret" || cfg.Headers["Authorization"] != "Bearer hdr-s3cret" || cfg.Push.Access.Token != "envtoken-s3cret" || cfg.Push.Access.Headers["X-Scope-Orgid"] != "tenant" {
		t.Errorf("config lost a value: headers %v, access %+v", cfg.Headers, cfg.Push.Access)
	}
	if got := endpointLabel(cfg); got != "/get" {
		t.Errorf("endpoint label %q, want the path without its query", got)
	}
}

// TestRefusedBeforeBuild: flags that cannot work are usage errors at
// once, before any build, and name the flag.
func TestRefusedBeforeBuild(t *testing.T) {
	t.Parallel()
	existing := t.TempDir()
	body := filepath.Join(t.TempDir(), "big")
	os.WriteFile(body, make([]byte, 2048), 0o600)
	// A FIFO's open() waits for a writer, deaf to signals: refused first.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-push", "http://user:pw-s3cret@127.0.0.1:4040"}, "-push: store http://REDACTED@127.0.0.1:4040: credentials in the address are refused"},
		{[]string{"-push", "ftp://h"}, "-push: store ftp://h: want http://HOST:PORT"},
		{[]string{"-push", "127.0.0.1:4040"}, "-push: store 127.0.0.1:4040: want"},
		{[]string{"-out", existing}, "-out " + existing + ": already exists"},
		{[]string{"-ready-timeout", "-5s"}, "-ready-timeout -5s: must be positive"},
		{[]string{"-min-requests", "-1"}, "-min-requests -1: must not be negative"},
		{[]string{"-conns", "100000"}, "-conns 100000: want 1 to 4096"},
		{[]string{"-max-routes", "5000"}, "-max-routes 5000: want 1 to 1000"},
		{[]string{"-path", "/a b"}, "-path: path \"/a b\": byte 2 is ' '"},
		{[]string{"-header", "X-A: b\rc"}, "its value holds a line break"},
		{[]string{"-body", body, "-max-body", "1024"}, "-body: " + body + " over the limit of 1024 bytes (-max-body raises it)"},
		{[]string{"-body", "/dev/zero"}, "-body: /dev/zero is not a regular file (a device): refused before opening it"},
		{[]string{"-body", fifo}, "-body: " + fifo + " is not a regular file (a FIFO)"},
		{[]string{"-requests", fifo}, "-requests: " + fifo + " is not a regular file (a FIFO)"},
		{[]string{"-rate", "1e-12"}, "-rate 1e-12: one request every 1e+12s, longer than the window"},
		{[]string{"-rate-steps", "NaN"}, "-rate-steps \"NaN\": want requests per second above 0"},
		{[]string{"-rate-steps", "1e-9,1"}, "-rate-steps: -rate 1e-09: one request every 1e+09s, longer than the window"},
		{[]string{"-results-mode", "0644"}, "-results-mode"},
		// Checked before the build, not after it (a 30 s build wasted).
		{[]string{"-out", filepath.Join(existing, "no", "out")}, "-out " + filepath.Join(existing, "no", "out") + ": its folder " + filepath.Join(existing, "no") + " does not exist"},
		{[]string{"-proto", "framed", "-rate", "100"}, "-rate: the framed driver sends in a closed loop only"},
		{[]string{"-proto", "udp", "-data", "x"}, "-data: the udp driver sends no body of yours"},
		{[]string{"-data", "x", "-body", body}, "-data and -body: give the request's body once"},
		{[]string{"-cacert", body}, "-cacert " + body + ": no PEM certificate in it"},
		{[]string{"-proto-file", filepath.Join(existing, "x.proto")}, "-proto-file " + filepath.Join(existing, "x.proto") + ": not a regular file"},
		{[]string{"-import-path", body}, "-import-path " + body + ": not a folder"},
	} {
		var stderr strings.Builder
		_, _, code, ok := parseRunFlags("probe run", append(c.args, "./targets/httpjson"), &stderr, nil)
		if ok || code != ExitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want usage and %q", c.args, code, stderr.String(), c.want)
		}
		if strings.Contains(stderr.String(), "s3cret") {
			t.Errorf("%q: the password was printed: %q", c.args, stderr.String())
		}
	}
}

// TestResultsMode: a results folder is private unless asked.
func TestResultsMode(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(dir, map[string][]byte{"meta": []byte("x"), "sub/a.pb.gz": nil}); err != nil {
		t.Fatal(err)
	}
	mode := func(p string) os.FileMode {
		st, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	if mode(".") != 0o700 || mode("meta") != 0o600 || mode("sub") != 0o700 || mode("sub/a.pb.gz") != 0o600 {
		t.Errorf("modes %04o %04o %04o %04o, want 0700 0600 0700 0600", mode("."), mode("meta"), mode("sub"), mode("sub/a.pb.gz"))
	}
	if err := applyResultsMode(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if mode(".") != 0o755 || mode("meta") != 0o644 || mode("sub/a.pb.gz") != 0o644 {
		t.Errorf("-results-mode 0755: %04o %04o, want 0755 0644", mode("."), mode("meta"))
	}
}

// TestABReportEscapes: a function key with a bidirectional override, a
// backtick and markup stays text in ab's report.md and report.html.
func TestABReportEscapes(t *testing.T) {
	t.Parallel()
	r, cfg := fixedAB()
	r.Functions[0].Key = "main.rtl\u202egnp.exe`|<b>"
	var md bytes.Buffer
	abPage(r, cfg).Markdown(&md)
	html, err := abPage(r, cfg).HTML(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"report.md": md.String(), "report.html": string(html)} {
		// In report.md the key is in a code span, where <b> is text.
		if strings.Contains(out, "\u202e") || name == "report.html" && strings.Contains(out, "<b>") {
			t.Errorf("%s holds the key raw", name)
		}
		if !strings.Contains(out, `main.rtl\u202egnp.exe`) {
			t.Errorf("%s lacks the key, escaped", name)
		}
	}
}

// TestFullDisk: the files a disk that fills cannot hold are named, and the
// ones it can are the verdict and the figures first: summary.json, meta
// and report.md before a large flame graph. A file cut short (here the
// graph, written to /dev/full: "no space left on device") is removed.
func TestFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("skipped: no /dev/full here")
	}
	dir := t.TempDir()
	if err := os.Symlink("/dev/full", filepath.Join(dir, "flame-cpu.html")); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"summary.json": []byte("{}\n"), "meta": []byte("m\n"), "report.md": []byte("# r\n"),
		"allocs.pb.gz": []byte("tiny"), "flame-cpu.html": bytes.Repeat([]byte("x"), 1<<20), "z-huge.pb.gz": bytes.Repeat([]byte("y"), 2<<20)}
	err := writeFiles(dir, files)
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "writing flame-cpu.html") || !strings.Contains(err.Error(), "not written: flame-cpu.html, z-huge.pb.gz") ||
		!strings.Contains(err.Error(), "written: summary.json, meta, report.md, allocs.pb.gz") {
		t.Fatalf("a full disk: %v", err)
	}
	for _, n := range []string{"summary.json", "meta", "report.md", "allocs.pb.gz"} {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(b, files[n]) {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "flame-cpu.html")); err == nil {
		t.Error("the file cut short is left behind")
	}
}

// TestDataIsTheBody: -data is the HTTP requests' body (it was recorded
// in meta and sent nowhere: a POST got 400s), with both HTTP/1.1 drivers.
func TestDataIsTheBody(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	bodies := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies[r.Method+" "+string(b)]++
		mu.Unlock()
	}))
	defer srv.Close()
	ep := proc.Endpoint{Addr: strings.TrimPrefix(srv.URL, "http://")}
	for _, driver := range []string{"lean", "nethttp"} {
		cfg := Config{Spec: load.Spec{Path: "/", Method: "POST", Data: []byte(`{"a":1}`), Proto: "http", HTTPDriver: driver, Conns: 1}}
		d, err := cfg.Spec.New(load.Endpoint(ep))
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.RunN(context.Background(), 3)
		d.Close()
		if err != nil || res.OK != 3 {
			t.Fatalf("%s: %v, %+v", driver, err, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if bodies[`POST {"a":1}`] != 6 || len(bodies) != 1 {
		t.Errorf("the server got %v, want 6 POSTs with -data's body", bodies)
	}
}
