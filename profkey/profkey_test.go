package profkey

import (
	"testing"

	"github.com/google/pprof/profile"
)

func TestFuncKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"main.main.func1", "main.main.func*"},
		{"main.main.func12.3", "main.main.func*"},
		{"main.(*T).run.func2.1", "main.(*T).run.func*"},
		{"net/http.(*Server).Serve.gowrap3", "net/http.(*Server).Serve.gowrap*"},
		{"main.f.deferwrap1", "main.f.deferwrap*"},
		{"example.com/p.glob..func7", "example.com/p.glob..func*"},
		{"encoding/json.appendString[go.shape.string]", "encoding/json.appendString[...]"},
		{"encoding/json.appendString[...]", "encoding/json.appendString[...]"},
		{"example.com/p.Map[map[string]int,int].Get", "example.com/p.Map[...].Get"},
		{"example.com/p.(*List[go.shape.int]).Push", "example.com/p.(*List[...]).Push"},
		{"runtime.memmove.abi0", "runtime.memmove"},
		{"encoding/json.arrayEncoder.encode-fm", "encoding/json.arrayEncoder.encode"},
		{"github.com/a/b/v2.F", "github.com/a/b/vN.F"},
		{"github.com/a/b/v2/c.F", "github.com/a/b/vN/c.F"},
		{"github.com/a/b/v2.(*T).v3", "github.com/a/b/vN.(*T).v3"},
		{"vendor/golang.org/x/net/http2.(*Framer).ReadFrame", "golang.org/x/net/http2.(*Framer).ReadFrame"},
		{"example.com/app/vendor/github.com/x/y.F", "github.com/x/y.F"},
		{"main.funcName", "main.funcName"},
		{"runtime.mallocgc", "runtime.mallocgc"},
	} {
		if got := FuncKey(tc.in, DefaultFolds); got != tc.want {
			t.Errorf("FuncKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := FuncKey(tc.in, Folds{}); got != tc.in {
			t.Errorf("FuncKey(%q) with no folds = %q", tc.in, got)
		}
	}
}

func TestRequests(t *testing.T) {
	for _, tc := range []struct {
		comments []string
		want     int64
	}{
		{[]string{"perfspy.target=x", "perfspy.requests=1250"}, 1250},
		{[]string{"perfspy.requests=0"}, 0},
		{[]string{"perfspy.requests=-3"}, 0},
		{[]string{"perfspy.requests=many"}, 0},
		{nil, 0},
	} {
		if got := Requests(&profile.Profile{Comments: tc.comments}); got != tc.want {
			t.Errorf("Requests(%q) = %d, want %d", tc.comments, got, tc.want)
		}
	}
}
