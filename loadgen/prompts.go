package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
)

// Prompt is one request of the set: the buyer's own text, or a synthetic
// prompt of Words words (each a common English word, about one token).
type Prompt struct {
	Text      string
	Words     int
	MaxTokens int
}

// Bounds of a prompts file: the generator keeps it in memory on a node
// whose memory serves the model.
const (
	maxPromptLine  = 4 << 20
	maxPromptLines = 1 << 20
	maxPromptBytes = 512 << 20
)

// promptLine is a line of the JSONL file.
type promptLine struct {
	Prompt       *string `json:"prompt"`
	MaxTokens    *int    `json:"max_tokens"`
	InputTokens  *int    `json:"input_tokens"`
	OutputTokens *int    `json:"output_tokens"`
}

// LoadPrompts reads a JSONL prompt set; an error names the file and line.
// A line without an output length takes defaultOut.
func LoadPrompts(path string, defaultOut int) ([]Prompt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readPrompts(path, io.LimitReader(f, maxPromptBytes+1), defaultOut)
}

func readPrompts(name string, r io.Reader, defaultOut int) ([]Prompt, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var ps []Prompt
	total := 0
	for n := 1; ; n++ {
		line, err := readLine(br, maxPromptLine)
		total += len(line) + 1
		if errors.Is(err, errLineTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, n, maxPromptLine)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if total > maxPromptBytes {
			return nil, fmt.Errorf("%s:%d: the file is larger than %d MiB", name, n, maxPromptBytes>>20)
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			p, perr := parsePrompt(t, defaultOut)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, n, perr)
			}
			if len(ps) == maxPromptLines {
				return nil, fmt.Errorf("%s:%d: more than %d prompts", name, n, maxPromptLines)
			}
			ps = append(ps, p)
		}
		if err != nil {
			break
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s: no prompt in the file", name)
	}
	return ps, nil
}

func parsePrompt(b []byte, defaultOut int) (Prompt, error) {
	var l promptLine
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Prompt{}, fmt.Errorf(`not a JSON object {"prompt": "...", "max_tokens": N} or {"input_tokens": N, "output_tokens": M}: %v`, err)
	}
	if dec.More() {
		return Prompt{}, errors.New("more than one JSON value on the line")
	}
	p := Prompt{MaxTokens: defaultOut}
	switch {
	case l.Prompt != nil && l.InputTokens != nil:
		return p, errors.New("give prompt or input_tokens, not both")
	case l.Prompt != nil:
		if strings.TrimSpace(*l.Prompt) == "" {
			return p, errors.New("empty prompt")
		}
		p.Text = *l.Prompt
	case l.InputTokens != nil:
		if *l.InputTokens < 1 || *l.InputTokens > 1<<20 {
			return p, fmt.Errorf("input_tokens must be 1..1048576, got %d", *l.InputTokens)
		}
		p.Words = *l.InputTokens
	default:
		return p, errors.New(`no "prompt" and no "input_tokens"`)
	}
	if l.MaxTokens != nil && l.OutputTokens != nil {
		return p, errors.New("give max_tokens or output_tokens, not both")
	}
	for _, o := range []*int{l.MaxTokens, l.OutputTokens} {
		if o == nil {
			continue
		}
		if *o < 1 || *o > 1<<20 {
			return p, fmt.Errorf("the output length must be 1..1048576, got %d", *o)
		}
		p.MaxTokens = *o
	}
	return p, nil
}

// vocabulary of the synthetic prompts: common words, each about one token
// in the tokenizers of the usual models.
var vocabulary = strings.Fields(`the of and to in is was for on are as with his they at be this from have or
by one had not but what all were when we there can an your which their said if do will each about how up out
them then she many some so these would other into has more her two like him see time could no make than first
been its who now people my made over did down only way find use may water long little very after words called
just where most know`)

// synthetic fills a prompt of p.Words words from rng (each request its
// own, so that a prefix cache does not serve one prompt over and over).
func synthetic(rng *rand.Rand, words int) string {
	var b strings.Builder
	b.Grow(words * 6)
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}

// spread draws a length uniform within ±l.Spread of l.Mean, at least 1.
func spread(rng *rand.Rand, l Lengths) int {
	if l.Spread == 0 {
		return max(l.Mean, 1)
	}
	lo := int(float64(l.Mean) * (1 - l.Spread))
	hi := int(float64(l.Mean) * (1 + l.Spread))
	return max(lo+rng.IntN(hi-lo+1), 1)
}

var errLineTooLong = errors.New("line too long")

// readLine reads up to '\n' (dropped, with a '\r' before it), refusing a
// line longer than limit without reading it all into memory.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > limit+1 {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, err
	}
}
