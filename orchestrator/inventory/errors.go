package inventory

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Problem is one thing wrong with an inventory, located in its file.
type Problem struct {
	// Line is 1-based. For a missing key it is the line of the key's
	// parent; 0 when no line applies (the file as a whole).
	Line int
	// Key is the key path, e.g. nodes[2].address or ssh.known_hosts[0];
	// empty for a problem with the file as a whole (a YAML syntax error).
	Key     string
	Message string
}

// Error is every problem found in one inventory, not just the first, so a
// user fixes a file in one pass. The CLI exits 2 on it.
type Error struct {
	File     string
	Problems []Problem
	// cause is the I/O error when the file could not be read at all.
	cause error
}

// Unwrap returns the I/O error behind "cannot read", if any.
func (e *Error) Unwrap() error { return e.cause }

// Error renders one problem a line: FILE:LINE: KEY: message.
func (e *Error) Error() string {
	if len(e.Problems) == 0 {
		return e.File + ": invalid inventory"
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.format(e.File)
	}
	return strings.Join(lines, "\n")
}

func (p Problem) format(file string) string {
	loc := file
	if p.Line > 0 {
		loc += ":" + strconv.Itoa(p.Line)
	}
	if p.Key == "" {
		return loc + ": " + p.Message
	}
	return loc + ": " + p.Key + ": " + p.Message
}

// collector gathers problems from every stage. It knows where each key is
// in the file and which values came from the environment, so that every
// stage only names the key and the message.
type collector struct {
	file string
	idx  *docIndex
	// env maps a key path to the environment variable that set it; a
	// problem with that key says so, since the file then is not at fault.
	env  map[string]string
	list []Problem
	// keys holds the lower-cased key of every problem, for blocked.
	keys map[string]bool
}

func newCollector(file string) *collector {
	return &collector{file: file, idx: newDocIndex(), env: map[string]string{}, keys: map[string]bool{}}
}

// add records a problem with key, at the key's line (or its nearest
// ancestor's when the key is not in the file).
func (c *collector) add(key, msg string) {
	key = c.idx.canonical(key)
	if v, ok := c.env[strings.ToLower(key)]; ok {
		msg += fmt.Sprintf(" (value from environment variable %s)", v)
	}
	c.addAt(c.idx.line(key), key, msg)
}

// addf is add with formatting.
func (c *collector) addf(key, format string, args ...any) {
	c.add(key, fmt.Sprintf(format, args...))
}

// addAt records a problem at a known line, for problems found before the
// key index exists (syntax errors).
func (c *collector) addAt(line int, key, msg string) {
	c.list = append(c.list, Problem{Line: line, Key: key, Message: msg})
	if key != "" {
		c.keys[strings.ToLower(key)] = true
	}
}

// addSyntax records a YAML syntax error.
func (c *collector) addSyntax(err error) {
	p := syntaxProblem(err)
	c.addAt(p.Line, "", p.Message)
}

// blocked reports whether key, or a key above it, already has a problem:
// a later stage then stays quiet about it, so one mistake is reported
// once ("expected an integer" and not also "must be 1..65535").
func (c *collector) blocked(key string) bool {
	for k := strings.ToLower(key); k != ""; k = parentPath(k) {
		if c.keys[k] {
			return true
		}
	}
	return false
}

func (c *collector) empty() bool { return len(c.list) == 0 }

// err returns the problems in file order, duplicates removed, or nil.
func (c *collector) err() error {
	if len(c.list) == 0 {
		return nil
	}
	list := append([]Problem(nil), c.list...)
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Message < b.Message
	})
	out := list[:0]
	for _, p := range list {
		if len(out) > 0 && p == out[len(out)-1] {
			continue
		}
		out = append(out, p)
	}
	return &Error{File: c.file, Problems: out}
}
