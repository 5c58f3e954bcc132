package inventory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func deepBlock(n int) string {
	var b strings.Builder
	b.WriteString("provider:\n")
	for i := 1; i < n; i++ {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return b.String()
}

// A deeply nested document is refused before the YAML reader sees it (5,000
// nested flow maps took it 332 s), with the line where it went too deep.
func TestADeeplyNestedInventoryIsRefusedFast(t *testing.T) {
	for name, doc := range map[string]string{
		"flow maps":   "provider: x\nssh: " + strings.Repeat("{a: ", 5000) + "1" + strings.Repeat("}", 5000) + "\n",
		"flow seqs":   "provider: x\nnodes: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n",
		"dashes":      "provider: x\nnodes:\n" + strings.Repeat("- ", 5000) + "x\n",
		"indentation": deepBlock(1000),
		"mixed":       deepBlock(20) + strings.Repeat(" ", 21) + "b: " + strings.Repeat("[", 20) + "\n",
	} {
		start := time.Now()
		_, err := Parse("deep.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "deep.yaml:") || !strings.Contains(err.Error(), "nesting deeper than 32") {
			t.Errorf("%s: %v", name, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refused after %s", name, d)
		}
	}
	// Brackets in quoted scalars and comments are text, and a real
	// inventory's few levels are far from the limit.
	for _, doc := range []string{
		"provider: \"" + strings.Repeat("[{", 100) + "\" # " + strings.Repeat("{", 100) + "\n",
		"provider: '" + strings.Repeat("[", 100) + "''s'\n",
		"provider: it's {\nregion: \"a\\\"" + strings.Repeat("[", 100) + "\"\n",
		"nodes:\n  - {name: a, labels: {rack: [r1, {x: [1]}]}}\n",
	} {
		if line := tooDeep([]byte(doc)); line != 0 {
			t.Errorf("tooDeep(%.60q) = line %d, want 0", doc, line)
		}
	}
}

// What the pre-check misses is bounded in time, and a load gives up when
// its context ends (SIGTERM, Ctrl-C): the command is told why.
func TestALoadGivesUpOnItsContextAndAfterMaxParse(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := func() (*Inventory, error) { <-release; return nil, errors.New("never") }
	old := maxParse
	maxParse = 50 * time.Millisecond
	defer func() { maxParse = old }()
	_, err := bounded(t.Context(), "slow.yaml", slow)
	if err == nil || !strings.Contains(err.Error(), "slow.yaml") || !strings.Contains(err.Error(), "took longer than 50ms") {
		t.Errorf("after maxParse: %v", err)
	}
	maxParse = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = bounded(ctx, "slow.yaml", slow)
	if err == nil || !strings.Contains(err.Error(), "slow.yaml: reading it was interrupted") || time.Since(start) > time.Second {
		t.Errorf("cancelled: %v after %s", err, time.Since(start))
	}
}
