package proc

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReserve: two runs on one machine get CPUs of their own; a third
// finds none free, waits, and says who holds them; a released CPU is
// free again.
func TestReserve(t *testing.T) {
	dir := t.TempDir()
	auto, _ := ParseCPUs("auto", 4)
	a, err := Reserve(context.Background(), dir, auto, true, 4, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Plan.Server, []int{0, 1}) || !slices.Equal(a.Plan.Load, []int{2, 3}) {
		t.Errorf("first run %+v", a.Plan)
	}
	// The first holds all four: the second waits, then says why.
	var said []string
	_, err = Reserve(context.Background(), dir, auto, true, 4, 300*time.Millisecond, func(f string, v ...any) { said = append(said, f) })
	if err == nil || !strings.Contains(err.Error(), "no free CPUs") || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || len(said) != 1 {
		t.Fatalf("second run while all are held: %v (said %v)", err, said)
	}
	a.Release()
	explicit, _ := ParseCPUs("0:1", 4)
	b, err := Reserve(context.Background(), dir, explicit, false, 4, time.Second, nil)
	if err != nil || !slices.Equal(b.Plan.Server, []int{0}) {
		t.Fatalf("explicit 0:1: %+v %v", b, err)
	}
	c, err := Reserve(context.Background(), dir, auto, true, 4, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Plan.Server, []int{2}) || !slices.Equal(c.Plan.Load, []int{3}) {
		t.Errorf("auto beside 0:1 got %+v, want 2:3", c.Plan)
	}
	b.Release()
	c.Release()
	none, err := Reserve(context.Background(), dir, CPUPlan{}, false, 4, time.Second, nil)
	if err != nil || len(none.Plan.Server) != 0 {
		t.Errorf("-cpus none: %+v %v", none, err)
	}
}
