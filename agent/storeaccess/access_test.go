package storeaccess

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRedirectKeepsCredentials: a store that redirects to another host
// (here, another port of loopback) is refused, and the other host sees no
// request, so neither the token nor the tenant header reaches it; a
// redirect within the store is followed, with them.
func TestRedirectKeepsCredentials(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	var sawToken, sawTenant string
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
		case "/moved":
			sawToken, sawTenant = r.Header.Get("Authorization"), r.Header.Get("X-Scope-OrgID")
		}
	}))
	defer store.Close()
	a := &Access{Token: "secret", Headers: map[string]string{"X-Scope-OrgID": "tenant"}}
	hc, err := a.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Get(store.URL + "/away"); !errors.Is(err, ErrRedirect) {
		t.Errorf("a redirect to another host: %v, want ErrRedirect", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
	resp, err := hc.Get(store.URL + "/here")
	if err != nil {
		t.Fatalf("a redirect within the store: %v", err)
	}
	resp.Body.Close()
	if sawToken != "Bearer secret" || sawTenant != "tenant" {
		t.Errorf("within the store the redirect carried %q and %q", sawToken, sawTenant)
	}
}

// TestDeclaredTooLarge: an answer that declares more than MaxResponse is
// refused on its header, before its body is read.
func TestDeclaredTooLarge(t *testing.T) {
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(10<<30, 10))
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("only this"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	}))
	defer store.Close()
	hc, err := (&Access{MaxResponse: 1 << 20}).Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Get(store.URL); !errors.Is(err, ErrTooLarge) {
		t.Errorf("10 GiB declared: %v, want ErrTooLarge", err)
	}
}

// TestCredentialFiles: a token file or a CA certificate that is a FIFO is
// refused at once, naming it (its open() would wait for a writer for
// ever); a regular token file is read, its newline dropped.
func TestCredentialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("s3cret\n"), 0o600)
	done := make(chan struct{})
	go func() {
		defer close(done)
		env := map[string]string{EnvTokenFile: fifo}
		var a Access
		if err := a.FromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), fifo+" is not a regular file") {
			t.Errorf("%s a FIFO: %v", EnvTokenFile, err)
		}
		env[EnvTokenFile] = good
		a = Access{}
		if err := a.FromEnv(func(k string) string { return env[k] }); err != nil || a.Token != "s3cret" {
			t.Errorf("%s a file: token %q, %v", EnvTokenFile, a.Token, err)
		}
		a = Access{CACert: fifo}
		if _, err := a.Client(); err == nil || !strings.Contains(err.Error(), "-push-cacert: "+fifo+" is not a regular file") {
			t.Errorf("-push-cacert a FIFO: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil { // let a blocked open return
			f.Close()
		}
		t.Fatal("a FIFO blocked the credentials' reading")
	}
}
