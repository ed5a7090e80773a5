package proc

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets a test run another process that holds CPUs, as another
// probe run would.
func TestMain(m *testing.M) {
	if dir := os.Getenv("PROC_TEST_HOLD_CPUS"); dir != "" {
		spec := os.Getenv("PROC_TEST_HOLD_PLAN")
		if spec == "" {
			spec = "0:1"
		}
		plan, _ := ParseCPUs(spec, 4)
		if _, err := (Locks{Dir: dir, CPUs: 4, Wait: time.Second}).Reserve(context.Background(), plan, false); err != nil {
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		io.Copy(io.Discard, os.Stdin) // until the test closes it
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdCPUs starts a process that holds cpus 0 and 1 in dir until stop.
func holdCPUs(t *testing.T, dir string) (pid int, stop func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROC_TEST_HOLD_CPUS="+dir)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "held\n" {
		t.Fatalf("the holder said %q", line)
	}
	return cmd.Process.Pid, func() { in.Close(); cmd.Wait() }
}

// TestReserve: a run beside another that holds CPUs takes the free ones;
// with too few free it waits, says who holds them, and gives up at its
// deadline; a run nested in the same process takes its CPUs again.
func TestReserve(t *testing.T) {
	dir := t.TempDir()
	pid, stop := holdCPUs(t, dir)
	auto, _ := ParseCPUs("auto", 4)
	a, err := Locks{Dir: dir, CPUs: 4, Wait: time.Second}.Reserve(context.Background(), auto, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Plan.Server, []int{2}) || !slices.Equal(a.Plan.Load, []int{3}) {
		t.Errorf("auto beside a run on 0:1 got %+v, want 2:3", a.Plan)
	}
	// Nested in this process: the same CPUs again.
	nested, err := Locks{Dir: dir, CPUs: 4, Wait: time.Second}.Reserve(context.Background(), a.Plan, false)
	if err != nil || !slices.Equal(nested.Plan.Server, []int{2}) {
		t.Fatalf("nested: %+v %v", nested, err)
	}
	nested.Release()
	a.Release()
	// All four held (0:1 by the other process, 2:3 by a second one):
	// the run waits, says so once, and gives up naming the holder.
	_, stop2 := holdCPUs2(t, dir)
	var said []string
	_, err = Locks{Dir: dir, CPUs: 4, Wait: 300 * time.Millisecond, Logf: func(f string, v ...any) { said = append(said, f) }}.Reserve(context.Background(), auto, true)
	if err == nil || !strings.Contains(err.Error(), "no free CPUs") || !strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)) || len(said) != 1 {
		t.Fatalf("a run while all are held: %v (said %v)", err, said)
	}
	stop2()
	stop()
	b, err := Locks{Dir: dir, CPUs: 4, Wait: time.Second}.Reserve(context.Background(), auto, true)
	if err != nil || len(b.Plan.Server)+len(b.Plan.Load) != 4 {
		t.Fatalf("after the others ended: %+v %v", b, err)
	}
	b.Release()
	none, err := Locks{Dir: dir, CPUs: 4, Wait: time.Second}.Reserve(context.Background(), CPUPlan{}, false)
	if err != nil || len(none.Plan.Server) != 0 {
		t.Errorf("-cpus none: %+v %v", none, err)
	}
}

// holdCPUs2 is holdCPUs for cpus 2 and 3.
func holdCPUs2(t *testing.T, dir string) (int, func()) {
	t.Setenv("PROC_TEST_HOLD_PLAN", "2:3")
	return holdCPUs(t, dir)
}
