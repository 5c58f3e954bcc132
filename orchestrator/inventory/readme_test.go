package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The README is the schema's documentation: these tests fail when a key
// or a variable is added without it, or when its example stops loading.

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadmeExampleLoads(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	text := readme(t)
	_, rest, ok := strings.Cut(text, "```yaml\n")
	if !ok {
		t.Fatal("README has no ```yaml block")
	}
	example, _, _ := strings.Cut(rest, "```")
	inv, err := parse(filepath.Join(examplesDir, "README.md"), []byte(example), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, inv)
}

func TestReadmeDocumentsEveryKey(t *testing.T) {
	text := readme(t)
	for _, key := range documentedKeys(inventoryType, "") {
		if !strings.Contains(text, "`"+key+"`") {
			t.Errorf("README does not document `%s`", key)
		}
	}
	for _, key := range EnvKeys() {
		if !strings.Contains(text, "`"+EnvVar(key)+"`") {
			t.Errorf("README does not list `%s`", EnvVar(key))
		}
	}
}

// documentedKeys lists the top-level keys and every leaf key path, with
// nodes[] for the list of nodes.
func documentedKeys(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		name := tagName(f)
		if name == "" {
			continue
		}
		path := joinKey(prefix, name)
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			out = append(out, path)
			out = append(out, documentedKeys(ft.Elem(), path+"[]")...)
			continue
		}
		if ft.Kind() == reflect.Struct && ft != durationType {
			if prefix == "" {
				out = append(out, path)
			}
			out = append(out, documentedKeys(ft, path)...)
			continue
		}
		out = append(out, path)
	}
	return out
}
