package inventory

import (
	"context"
	"fmt"
	"os"
	"time"
)

// maxDepth bounds how deeply an inventory may nest (flow collections, [
// and {, inside block mappings and sequences): a real one needs five or
// six levels, and the YAML reader's time grows with the cube of the depth
// (5,000 nested flow maps, 25 KB: 332 s; 1 MiB of them 60 deep: 5 s).
// Checked on the bytes, before anything parses them.
const maxDepth = 32

// tooDeep is the line on which data first nests deeper than maxDepth, or
// 0. It follows YAML only as far as depth needs: brackets inside quoted
// scalars and comments do not count; each deeper indentation and each
// "- " that opens a sequence on a line count one level. What it cannot
// tell apart it counts (a false depth costs a clear error, a missed one
// is caught by maxParse).
func tooDeep(data []byte) int {
	var (
		line    = 1
		flow    int   // open [ and {
		indents []int // the block levels open, by indentation
		quote   byte  // the quoted scalar we are in: ' or ", else 0
		prev    byte  = '\n'
		comment bool
	)
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			line, prev, comment = line+1, '\n', false
			continue
		}
		if comment {
			continue
		}
		switch {
		case quote == '"' && c == '\\':
			i++ // an escaped character, a quote among them
		case quote != 0 && c == quote:
			if quote == '\'' && i+1 < len(data) && data[i+1] == '\'' {
				i++ // '' is a quote inside single quotes
			} else {
				quote = 0
			}
		case quote != 0:
		case prev == '\n' && flow == 0:
			// A line's start in block context: its indentation (and its
			// "- " entries) open or close block levels.
			col := 0
			for i < len(data) && data[i] == ' ' {
				i, col = i+1, col+1
			}
			if i >= len(data) || data[i] == '\n' || data[i] == '#' {
				i--
				prev = ' '
				continue
			}
			for len(indents) > 0 && indents[len(indents)-1] >= col {
				indents = indents[:len(indents)-1]
			}
			indents = append(indents, col)
			for i+1 < len(data) && data[i] == '-' && (data[i+1] == ' ' || data[i+1] == '\t') {
				i, col = i+2, col+2
				for i < len(data) && data[i] == ' ' {
					i, col = i+1, col+1
				}
				indents = append(indents, col)
			}
			if len(indents)+flow > maxDepth {
				return line
			}
			i--
			prev = ' '
			continue
		case c == '#' && (prev == ' ' || prev == '\t' || prev == '\n'):
			comment = true
		case (c == '"' || c == '\'') && isScalarStart(prev):
			quote = c
		case c == '[' || c == '{':
			if flow++; len(indents)+flow > maxDepth {
				return line
			}
		case (c == ']' || c == '}') && flow > 0:
			flow--
		}
		if c != ' ' && c != '\t' {
			prev = c
		} else if prev != '\n' {
			prev = ' '
		}
	}
	return 0
}

// isScalarStart: a quote after prev begins a quoted scalar (it is
// literal inside a plain one: it's).
func isScalarStart(prev byte) bool {
	switch prev {
	case '\n', ' ', '\t', '[', '{', ',', ':', '?', '-':
		return true
	}
	return false
}

// maxParse bounds one inventory's reading, whatever tooDeep missed: a
// real one takes milliseconds.
var maxParse = 20 * time.Second

// LoadContext is Load that gives up when ctx ends (Ctrl-C, SIGTERM) or
// after maxParse, with an error naming the file.
func LoadContext(ctx context.Context, path string) (*Inventory, error) {
	return bounded(ctx, path, func() (*Inventory, error) { return load(path, os.LookupEnv) })
}

// bounded runs a load on its own goroutine and waits for it at most until
// ctx ends or maxParse passes. A load given up keeps running until it
// ends, but nothing waits for it: the command that asked is told why and
// can exit.
func bounded(ctx context.Context, path string, load func() (*Inventory, error)) (*Inventory, error) {
	ctx, cancel := context.WithTimeout(ctx, maxParse)
	defer cancel()
	type result struct {
		inv *Inventory
		err error
	}
	done := make(chan result, 1)
	go func() {
		inv, err := load()
		done <- result{inv, err}
	}()
	select {
	case r := <-done:
		return r.inv, r.err
	case <-ctx.Done():
		why := fmt.Sprintf("reading it took longer than %s (is it nested very deeply?)", maxParse)
		if ctx.Err() == context.Canceled {
			why = "reading it was interrupted"
		}
		return nil, &Error{File: path, Problems: []Problem{{Message: why}}, cause: ctx.Err()}
	}
}
