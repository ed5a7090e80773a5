package probe

import (
	"reflect"
	"strings"
	"testing"
)

// The bulk flags and -env reach the configuration.
func TestBulkFlags(t *testing.T) {
	var stderr strings.Builder
	cfg, _, code, ok := parseRunFlags("probe run", []string{"-size", "4096", "-streams", "3", "-pkt", "1400", "-env", "A=1", "-env", "B=x=y",
		"-args", "-mode=echo", "./targets/quicecho"}, &stderr, nil)
	if !ok {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if cfg.Size != 4096 || cfg.Streams != 3 || cfg.Pkt != 1400 || !reflect.DeepEqual(cfg.Env, []string{"A=1", "B=x=y"}) ||
		!reflect.DeepEqual(cfg.Args, []string{"-mode=echo"}) || cfg.Conns != 0 {
		t.Errorf("config %+v", cfg)
	}
	if got := modeArgs([]string{"-sockbuf=1", "-mode", "echo"}); !reflect.DeepEqual(got, []string{"-mode", "echo"}) {
		t.Errorf("modeArgs: %v", got)
	}
	if got := modeArgs([]string{"--mode=push"}); !reflect.DeepEqual(got, []string{"--mode=push"}) {
		t.Errorf("modeArgs: %v", got)
	}
}
