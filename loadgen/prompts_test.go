package loadgen

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadPrompts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.jsonl", `{"prompt": "Tell me a story.", "max_tokens": 64}`+"\r\n\n"+
		`{"input_tokens": 300, "output_tokens": 20}`+"\n"+`{"prompt": "Hi"}`)
	ps, err := LoadPrompts(good, 128)
	if err != nil {
		t.Fatal(err)
	}
	want := []Prompt{{Text: "Tell me a story.", MaxTokens: 64}, {Words: 300, MaxTokens: 20}, {Text: "Hi", MaxTokens: 128}}
	if len(ps) != len(want) {
		t.Fatalf("%+v", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i+1, ps[i], want[i])
		}
	}
	for _, c := range []struct{ name, text, want string }{
		{"bad-json.jsonl", `{"prompt": "a"}` + "\n\n" + `{"prompt": "b"` + "\n", "bad-json.jsonl:3: not a JSON object"},
		{"unknown.jsonl", `{"prompt": "a", "max_tokenz": 3}`, `unknown.jsonl:1: not a JSON object`},
		{"both.jsonl", `{"prompt": "a", "input_tokens": 3}`, "both.jsonl:1: give prompt or input_tokens"},
		{"neither.jsonl", `{"max_tokens": 3}`, `neither.jsonl:1: no "prompt"`},
		{"zero.jsonl", `{"prompt": "a"}` + "\n" + `{"input_tokens": 0}`, "zero.jsonl:2: input_tokens must be"},
		{"negative.jsonl", `{"prompt": "a", "max_tokens": -1}`, "negative.jsonl:1: the output length must be"},
		{"empty.jsonl", "\n\n", "empty.jsonl: no prompt"},
		{"two.jsonl", `{"prompt": "a"} {"prompt": "b"}`, "two.jsonl:1: more than one JSON value"},
		{"long.jsonl", `{"prompt": "a"}` + "\n" + strings.Repeat("x", maxPromptLine+10), "long.jsonl:2: line longer than"},
	} {
		_, err := LoadPrompts(write(c.name, c.text), 128)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := LoadPrompts(filepath.Join(dir, "missing.jsonl"), 1); err == nil ||
		!strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestSyntheticPrompts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := synthetic(rng, 512)
	if n := len(strings.Fields(p)); n != 512 {
		t.Fatalf("%d words, want 512", n)
	}
	if synthetic(rng, 512) == p {
		t.Fatal("two synthetic prompts alike: a prefix cache would answer the second")
	}
	lo, hi := 1<<30, 0
	for range 10_000 {
		n := spread(rng, Lengths{Mean: 100, Spread: 0.2})
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo != 80 || hi != 120 {
		t.Fatalf("100±20%%: %d..%d", lo, hi)
	}
	if spread(rng, Lengths{Mean: 7}) != 7 {
		t.Fatal("no spread: the mean")
	}
	// The same seed asks the same prompts.
	a, b := &source{cfg: &Config{Seed: 9, Input: Lengths{Mean: 20}, Output: Lengths{Mean: 4}}},
		&source{cfg: &Config{Seed: 9, Input: Lengths{Mean: 20}, Output: Lengths{Mean: 4}}}
	pa, ma, wa := a.request()
	pb, mb, wb := b.request()
	if pa != pb || ma != mb || wa != wb || wa != 20 || ma != 4 {
		t.Fatal("the same seed, other prompts")
	}
}
