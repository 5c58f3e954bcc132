package phases

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/scripts"
)

// The node's copy runs only while it is the one this binary pushed.
func TestToolCmdRunsOnlyThePushedCopy(t *testing.T) {
	home := t.TempDir()
	const run = "20261130T000000Z-test"
	dir := filepath.Join(home, toolsDir(run, "n1"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stage string
	for _, f := range scripts.Pushed() {
		if f.Name == "stage.sh" {
			stage = f.Body
		}
	}
	file := filepath.Join(dir, "stage.sh")
	sh := func() (string, string, int) {
		cmd := exec.Command("bash", "-c", toolCmd(run, "n1", "stage.sh", "prepare", "'"+filepath.Join(home, "data")+"'"))
		cmd.Env = append(os.Environ(), "HOME="+home)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	// Missing: refused, naming the file.
	if _, stderr, code := sh(); code != 96 || !strings.Contains(stderr, file) {
		t.Fatalf("missing copy: exit %d, stderr %q", code, stderr)
	}
	if err := os.WriteFile(file, []byte(stage), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := sh(); code != 0 || !strings.HasPrefix(out, "avail ") {
		t.Fatalf("pushed copy: exit %d, stdout %q stderr %q", code, out, stderr)
	}
	// One byte changed on the node: refused.
	if err := os.WriteFile(file, []byte(stage+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := sh(); code != 96 || !strings.Contains(stderr, "not the copy pushed") {
		t.Fatalf("changed copy: exit %d, stderr %q", code, stderr)
	}
}

func TestEveryPushedScriptHasADistinctName(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range scripts.Pushed() {
		if seen[f.Name] || f.Body == "" || strings.Contains(f.Name, "/") {
			t.Errorf("pushed script %q: duplicate, empty or not a plain name", f.Name)
		}
		seen[f.Name] = true
	}
}
