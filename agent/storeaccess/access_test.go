package storeaccess

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
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
