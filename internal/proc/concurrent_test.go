package proc

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentStarts: processes started side by side (benchmarks counted
// under callgrind one a core) each end on their own: the search for
// orphans that one's end runs never takes another just started for one.
func TestConcurrentStarts(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	killed := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				p, err := StartCmd(exec.Command("sleep", "0.02"), filepath.Join(dir, string(rune('a'+w))+string(rune('a'+i))+".log"), nil)
				if err != nil {
					t.Error(err)
					return
				}
				<-p.Done()
				if p.WaitErr() != nil {
					mu.Lock()
					killed++
					mu.Unlock()
				}
				p.Stop()
			}
		}()
	}
	wg.Wait()
	if killed > 0 {
		t.Errorf("%d of 60 processes started side by side ended by another's stop", killed)
	}
}
