// Package parse turns the text that GPU and fabric tools print into typed
// values: nvidia-smi (-L, --query-gpu csv, topo -m, -q), dcgmi (discovery -l,
// diag text and -j JSON), ibstat and ibv_devinfo.
//
// Every parser takes the whole captured output as one string, never panics,
// and tolerates what captures over SSH and copy-paste do to text: CRLF line
// ends, tabs turned into spaces (and back), ANSI colour/underline escapes,
// backspace overstrikes, trailing spaces and unrelated lines before or after
// the tool's own output.
//
// Errors are layered so callers can tell three situations apart:
//   - ErrNotRecognized: the text is not this tool's output at all (empty,
//     another tool, random text). Nothing useful was parsed.
//   - ErrMalformed: it is this tool's output but a line or section could not
//     be understood; the message names the line.
//   - ErrToolFailed: the tool itself reported a failure (ibpanic, "NVIDIA-SMI
//     has failed", ...). Whatever was printed before the failure is still
//     returned next to the error, so the evidence is not lost.
package parse

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotRecognized means the text is not output of the tool the parser
	// was asked for.
	ErrNotRecognized = errors.New("not recognized as this tool's output")
	// ErrMalformed means the text is the tool's output but part of it could
	// not be parsed (truncated, hand-edited, unknown layout).
	ErrMalformed = errors.New("malformed tool output")
	// ErrToolFailed means the tool reported its own failure in the output.
	ErrToolFailed = errors.New("tool reported a failure")
)

// line is one line of normalized input with its 1-based number in the
// original text, so errors can point at it.
type line struct {
	no   int
	text string
}

// splitLines normalizes text (see normalize) and splits it into lines,
// dropping trailing spaces and tabs. Leading whitespace is kept because
// several formats (nvidia-smi -q, ibstat) encode structure in indentation.
func splitLines(text string) []line {
	raw := strings.Split(normalize(text), "\n")
	out := make([]line, 0, len(raw))
	for i, s := range raw {
		out = append(out, line{no: i + 1, text: strings.TrimRight(s, " \t")})
	}
	return out
}

// normalize removes what terminals and captures add around the tool's bytes:
// a UTF-8 BOM, ANSI escape sequences (nvidia-smi underlines the topo header
// when stdout is a TTY), backspace overstrikes ("_\bX" underline, "X\bX"
// bold, as man-style pagers print) and CR line endings.
func normalize(text string) string {
	text = strings.TrimPrefix(text, "\ufeff")
	if !strings.ContainsAny(text, "\x1b\b\r") {
		return text
	}
	out := make([]byte, 0, len(text))
	crDropped, crScanEnd := false, 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch c {
		case '\x1b':
			i = skipEscape(text, i)
		case '\b':
			// Overstrike: the backspace erases the byte before it.
			if n := len(out); n > 0 && out[n-1] != '\n' {
				out = out[:n-1]
			}
		case '\r':
			// CRLF ends a line, and so does a lone CR (progress output
			// redrawing a line) - unless only spaces and escape sequences
			// stand between it and the LF, where it is a CRLF that a colour
			// reset or padding got wedged into.
			if i >= crScanEnd { // one look-ahead answers a whole run of CRs
				crDropped, crScanEnd = crBeforeLF(text, i)
			}
			if !crDropped {
				out = append(out, '\n')
			}
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// crBeforeLF reports whether the CR at text[i] is followed by a line feed,
// possibly after spaces, tabs, further CRs and escape sequences, and where
// that look-ahead stopped (every CR before that point gets the same answer).
func crBeforeLF(text string, i int) (bool, int) {
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\n':
			return true, j
		case ' ', '\t', '\r':
		case '\x1b':
			j = skipEscape(text, j)
		default:
			return false, j
		}
	}
	return true, len(text) // CR at the very end
}

// skipEscape returns the index of the last byte of the escape sequence that
// starts at text[i] (an ESC byte).
func skipEscape(text string, i int) int {
	if i+1 >= len(text) {
		return i
	}
	switch text[i+1] {
	case '[': // CSI: parameters and intermediates, then one final byte 0x40-0x7E.
		j := i + 2
		for j < len(text) && (text[j] < 0x40 || text[j] > 0x7e) {
			if text[j] == '\n' { // never swallow a line break
				return j - 1
			}
			j++
		}
		if j >= len(text) {
			return len(text) - 1
		}
		return j
	case ']': // OSC: ends with BEL or ESC \.
		for j := i + 2; j < len(text); j++ {
			switch {
			case text[j] == '\a':
				return j
			case text[j] == '\n': // unterminated: stop before the line break
				return j - 1
			}
			if text[j] == '\x1b' && j+1 < len(text) && text[j+1] == '\\' {
				return j + 1
			}
		}
		return len(text) - 1
	default: // two-byte sequence such as ESC ( B
		if text[i+1] == '\n' {
			return i
		}
		return i + 1
	}
}

// notRecognized builds the error for text that is not the tool's output,
// quoting the first non-blank line so a log shows what was received instead.
func notRecognized(tool string, lines []line, want string) error {
	for _, l := range lines {
		if t := strings.TrimSpace(l.text); t != "" {
			return fmt.Errorf("%s: %w: no %s found (first line %d: %q)", tool, ErrNotRecognized, want, l.no, clip(t))
		}
	}
	return fmt.Errorf("%s: %w: empty output", tool, ErrNotRecognized)
}

// malformed builds an ErrMalformed error that names the offending line.
func malformed(tool string, l line, format string, args ...any) error {
	return fmt.Errorf("%s: %w: line %d: %s: %q", tool, ErrMalformed, l.no, fmt.Sprintf(format, args...), clip(strings.TrimSpace(l.text)))
}

// clip shortens a quoted line for an error message.
func clip(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// indentWidth measures leading whitespace, counting a tab as four columns
// (nvidia-smi -q indents by four spaces; a tab-converted capture should nest
// the same way).
func indentWidth(s string) int {
	w := 0
	for _, r := range s {
		switch r {
		case ' ':
			w++
		case '\t':
			w += 4
		default:
			return w
		}
	}
	return w
}

// cutKV splits "key : value" at the first colon, trimming both sides.
func cutKV(s string) (key, value string, ok bool) {
	k, v, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", false
	}
	return strings.TrimSpace(k), strings.TrimSpace(v), true
}
