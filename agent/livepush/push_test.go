package livepush

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStoreErrorQuoted: a store's error answer reaches the application's
// standard error quoted: its escape sequences and control characters are
// not written raw.
func TestStoreErrorQuoted(t *testing.T) {
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte("bad\x1b]52;c;aGk=\x07\u202e tenant"))
	}))
	defer store.Close()
	err := postPush(context.Background(), store.Client(), store.URL, []byte("x"))
	if err == nil {
		t.Fatal("no error for a 400")
	}
	for _, raw := range []string{"\x1b", "\x07", "\u202e"} {
		if strings.Contains(err.Error(), raw) {
			t.Errorf("the error holds %q raw: %q", raw, err.Error())
		}
	}
	if !strings.Contains(err.Error(), `\x1b]52`) {
		t.Errorf("the store's words are not shown: %q", err.Error())
	}
}
