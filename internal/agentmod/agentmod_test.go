package agentmod

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWriteVerifies: an agent folder already in the cache is compared
// with the embedded sources before each build; a planted file (code
// another user wrote) is not built in.
func TestWriteVerifies(t *testing.T) {
	root := t.TempDir()
	m, err := Write(root)
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(m.Dir, "zz_planted.go")
	if err := os.WriteFile(planted, []byte("package agent\n\nfunc init() { println(\"planted\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agentGo := filepath.Join(m.Dir, "agent.go")
	if err := os.WriteFile(agentGo, []byte("package agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(planted); !os.IsNotExist(err) {
		t.Errorf("the planted file is still in the agent module: %v", err)
	}
	if b, err := os.ReadFile(agentGo); err != nil || string(b) != string(m.Files["agent.go"]) {
		t.Errorf("agent.go was not restored from the embedded sources (%v)", err)
	}
}

// TestCompilesAtGoLine: the agent module compiles as its go.mod's go line
// (GoLine) says, as it does inside a target of another module: the
// language features of later releases (min, max, clear, range over an
// integer or a function) are refused there.
func TestCompilesAtGoLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command; skipped with -short")
	}
	m, err := Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = m.Dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the agent module does not compile at go %s: %v\n%s", GoLine, err, out)
	}
}
