package review

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/perfspy/perfspy/internal/srcroot"
)

// actionlintVersion is the actionlint the tests run (go run, from the
// module proxy).
const actionlintVersion = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"

// exampleWorkflow is the workflow docs/review.md gives, after its marker.
func exampleWorkflow(t *testing.T, root string) string {
	doc := readFile(t, filepath.Join(root, "docs", "review.md"))
	_, rest, ok := strings.Cut(doc, "<!-- example-workflow -->\n```yaml\n")
	if !ok {
		t.Fatal("docs/review.md has no example workflow after its marker")
	}
	wf, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/review.md: the example workflow's block does not end")
	}
	return wf
}

// TestActionLint runs actionlint on the example workflow of
// docs/review.md, with the action it uses taken from this repository's
// action.yml (a local action, which actionlint checks too: its inputs,
// outputs and steps).
func TestActionLint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs actionlint through go run; skipped with -short")
	}
	root, err := srcroot.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wf := exampleWorkflow(t, root)
	if !strings.Contains(wf, "uses: perfspy/perfspy@v1") {
		t.Fatalf("the example workflow does not use perfspy/perfspy@v1:\n%s", wf)
	}
	wf = strings.Replace(wf, "uses: perfspy/perfspy@v1", "uses: ./", 1)
	os.MkdirAll(filepath.Join(dir, ".github", "workflows"), 0o755)
	os.WriteFile(filepath.Join(dir, ".github", "workflows", "perfspy.yml"), []byte(wf), 0o644)
	action, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "action.yml"), action, 0o644)
	exec.Command("git", "-C", dir, "init", "-q").Run()
	cmd := exec.Command("go", "run", actionlintVersion, "-no-color", "-shellcheck=", "-pyflakes=")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}
	// actionlint checks a local action's metadata; a broken one must fail.
	os.WriteFile(filepath.Join(dir, "action.yml"), []byte(strings.Replace(string(action), "using: composite", "using: compost", 1)), 0o644)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("actionlint passed a broken action.yml:\n%s", out)
	}
}

// actionStep is one step of action.yml.
type actionStep struct {
	Name string            `yaml:"name"`
	Run  string            `yaml:"run"`
	Env  map[string]string `yaml:"env"`
}

// TestActionReviewStep runs action.yml's build and review steps as GitHub
// runs them (bash, the environment it sets, the inputs through env) on the
// test repository checked out at the head that adds allocations: the step
// records exit code 1 and the verdict in GITHUB_OUTPUT, the step summary
// holds review.md, and the results folder has the annotations.
func TestActionReviewStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds probe and reviews two revisions; skipped with -short")
	}
	root, err := srcroot.Dir()
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Runs struct {
			Using string       `yaml:"using"`
			Steps []actionStep `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(root, "action.yml"))), &action); err != nil {
		t.Fatal(err)
	}
	r, _, extra, _, serverHead, _ := makeReviewRepo(t)
	r.git("checkout", "-q", extra)
	tmp := t.TempDir()
	summary, output := filepath.Join(tmp, "summary.md"), filepath.Join(tmp, "output")
	env := append(os.Environ(), "GITHUB_ACTION_PATH="+root, "GITHUB_WORKSPACE="+r.dir, "GITHUB_BASE_REF=main",
		"GITHUB_STEP_SUMMARY="+summary, "GITHUB_OUTPUT="+output, "RUNNER_TEMP="+tmp,
		"INPUT_CONFIG=.perfspy.yml", "INPUT_BASE=", "INPUT_ROUNDS=2", "INPUT_TIMINGS=true")
	ran := 0
	for _, s := range action.Runs.Steps {
		if s.Name != "Build probe at the action's own revision" && s.Name != "Review" {
			continue
		}
		ran++
		cmd := exec.Command("bash", "-e", "-c", s.Run)
		cmd.Dir, cmd.Env = r.dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("step %q: %v\n%s", s.Name, err, out)
		} else {
			t.Logf("step %q:\n%s", s.Name, out)
		}
	}
	if ran != 2 || action.Runs.Using != "composite" {
		t.Fatalf("action.yml: %d of the two steps found, using %q", ran, action.Runs.Using)
	}
	if out := readFile(t, output); !strings.Contains(out, "exit-code=1\n") || !strings.Contains(out, "verdict=fail\n") {
		t.Errorf("GITHUB_OUTPUT:\n%s", out)
	}
	results := filepath.Join(tmp, "perfspy", "review")
	md := readFile(t, filepath.Join(results, "review.md"))
	if !strings.HasPrefix(md, CommentMarker) || readFile(t, summary) != md+"\n" {
		t.Errorf("the step summary is not review.md")
	}
	want := "::error file=server/main.go,line=" + strconv.Itoa(lineOf(t, serverHead, "one more per request")) + ","
	if ann := readFile(t, filepath.Join(results, "annotations.txt")); !strings.Contains(ann, want) {
		t.Errorf("annotations.txt lacks %q:\n%s", want, ann)
	}
}

// TestActionCommentStep runs action.yml's comment step with a stand-in
// for gh (its --jq filter run by jq): only a comment the action's own
// token wrote is edited; a comment of anyone else that starts with the
// marker is left alone, and a new one is posted. The step may fail (a
// fork's token) without taking the verdict with it.
func TestActionCommentStep(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("skipped: jq is not installed (Debian package jq; test.sh installs it as root)")
	}
	root, err := srcroot.Dir()
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Runs struct {
			Steps []struct {
				actionStep      `yaml:",inline"`
				If              string `yaml:"if"`
				ContinueOnError bool   `yaml:"continue-on-error"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(root, "action.yml"))), &action); err != nil {
		t.Fatal(err)
	}
	var step string
	for _, s := range action.Runs.Steps {
		switch s.Name {
		case "Comment on the pull request":
			step = s.Run
			if !s.ContinueOnError {
				t.Error("the comment step's failure (a fork's token) would skip the verdict")
			}
		case "Verdict":
			if !strings.HasPrefix(s.If, "always()") {
				t.Errorf("the verdict step runs if %q, not always()", s.If)
			}
		}
	}
	if step == "" {
		t.Fatal("action.yml has no comment step")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "gh"), []byte(`#!/bin/bash
echo "$*" >> "$GH_LOG"
if [ "$1" = api ] && [ "$2" != -X ]; then
	while [ $# -gt 0 ]; do [ "$1" = --jq ] && jq -r "$2" "$COMMENTS"; shift; done
fi
`), 0o755)
	os.MkdirAll(filepath.Join(dir, "perfspy", "review"), 0o755)
	os.WriteFile(filepath.Join(dir, "perfspy", "review", "review.md"), []byte(CommentMarker+"\nnew\n"), 0o644)
	mallory := `{"id": 11, "user": {"login": "mallory"}, "body": "` + CommentMarker + `\nplanted"}`
	ours := `{"id": 22, "user": {"login": "github-actions[bot]"}, "body": "` + CommentMarker + `\nold"}`
	for _, c := range []struct {
		comments, want string
	}{
		{"[" + mallory + ", " + ours + "]", "api -X PATCH repos/o/r/issues/comments/22 "},
		{"[" + ours + ", " + mallory + "]", "api -X PATCH repos/o/r/issues/comments/22 "},
		{"[" + mallory + "]", "pr comment 7 "},
	} {
		comments, log := filepath.Join(dir, "comments.json"), filepath.Join(dir, "gh.log")
		os.WriteFile(comments, []byte(c.comments), 0o644)
		os.Remove(log)
		cmd := exec.Command("bash", "-e", "-c", step)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "GH_LOG="+log, "COMMENTS="+comments,
			"RUNNER_TEMP="+dir, "GITHUB_REPOSITORY=o/r", "PR=7", "GH_TOKEN=x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c.comments, err, out)
		}
		got := readFile(t, log)
		if !strings.Contains(got, c.want) || strings.Contains(got, "comments/11") {
			t.Errorf("comments %s: gh was called\n%s\nwant %q, never comment 11", c.comments, got, c.want)
		}
	}
}
