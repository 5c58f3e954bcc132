package remote

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// eachImport calls fn with every import of every Go file of the module
// (outside hidden directories, testdata, and the directories skip names),
// its path relative to the module root and its directory.
func eachImport(t *testing.T, skip map[string]bool, fn func(rel, dir, imp string)) {
	t.Helper()
	root := ".."
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skip[rel] || rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			fn(rel, dir, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d Go files: is the module root at %s?", files, root)
	}
}

// TestOnlyRemoteTouchesSSH keeps the package boundary DESIGN.md draws: no
// Go file outside remote/ imports the SSH or SFTP libraries, and no file
// under orchestrator/phases dials a node (the window does).
func TestOnlyRemoteTouchesSSH(t *testing.T) {
	eachImport(t, map[string]bool{"remote": true}, func(rel, _, p string) {
		if strings.HasPrefix(p, "golang.org/x/crypto/ssh") || p == "github.com/pkg/sftp" {
			t.Errorf("%s imports %s: only package remote may", rel, p)
		}
	})
	phases, _ := filepath.Glob("../orchestrator/phases/*.go")
	if len(phases) == 0 {
		t.Fatal("no files under orchestrator/phases")
	}
	for _, p := range phases {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.Contains(s, "remote.Dial(") || strings.Contains(s, "remote.DialSSH") {
			t.Errorf("%s dials a node: phases reach nodes through the window (Connect, Reconnect)", p)
		}
	}
}

// clientGoLinkers are the only packages that may import client-go or
// remote/kube, which links it: it made every binary linking remote 2.6
// times as big (orchestrator/phases' race test binary 44 MB -> 113 MB).
var clientGoLinkers = map[string]bool{"remote/kube": true, "remote/kubetest": true, "cmd/gpuaccept": true}

// TestOnlyTheCommandLinksClientGo keeps the Kubernetes transport out of
// every binary but the command's and the Kubernetes tests': package remote
// holds its settings and the seam, remote/kube the client-go code.
func TestOnlyTheCommandLinksClientGo(t *testing.T) {
	commandLinks := false
	eachImport(t, nil, func(rel, dir, p string) {
		if !strings.HasPrefix(p, "k8s.io/") && p != "gpuaccept/remote/kube" {
			return
		}
		if !clientGoLinkers[dir] {
			t.Errorf("%s imports %s: only %v may", rel, p, slices.Sorted(maps.Keys(clientGoLinkers)))
		}
		if dir == "cmd/gpuaccept" && p == "gpuaccept/remote/kube" && !strings.HasSuffix(rel, "_test.go") {
			commandLinks = true
		}
	})
	if !commandLinks {
		t.Error("cmd/gpuaccept does not import gpuaccept/remote/kube: the command could not reach a Kubernetes node")
	}
}
