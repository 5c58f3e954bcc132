package parse

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The captures gpuaccept gets back over SSH are rarely byte-identical to
// what the tool printed. Each transform below damages a sample the way a
// capture path does; the parse must not change.
var captureTransforms = map[string]func(string) string{
	"CRLF": func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
	},
	"noise around": func(s string) string {
		return "$ ssh gpu-01 run-tool\nWarning: Permanently added 'gpu-01' (ED25519) to the list of known hosts.\n\n" +
			s + "\nConnection to gpu-01 closed.\n"
	},
	"trailing spaces": func(s string) string {
		return strings.ReplaceAll(s, "\n", "   \n")
	},
	"ANSI colour per line": func(s string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			lines[i] = "\x1b[1;32m" + l + "\x1b[0m\x1b[K"
		}
		return strings.Join(lines, "\n")
	},
	"underlined first line": func(s string) string {
		if strings.Contains(s, "\x1b") {
			return s // overstrike inside escape sequences is not a capture that happens
		}
		first, rest, _ := strings.Cut(s, "\n")
		var b strings.Builder
		for _, r := range first {
			if r != '\r' {
				b.WriteString("_\b")
			}
			b.WriteRune(r)
		}
		return b.String() + "\n" + rest
	},
	"tabs expanded": expandTabs,
}

// expandTabs replaces tabs with spaces up to the next multiple of 8, as a
// terminal, an editor or a web page does when the text is copied from it.
func expandTabs(s string) string {
	var b strings.Builder
	col := 0
	for _, r := range s {
		switch r {
		case '\t':
			n := 8 - col%8
			b.WriteString(strings.Repeat(" ", n))
			col += n
		case '\n':
			b.WriteRune(r)
			col = 0
		default:
			b.WriteRune(r)
			col++
		}
	}
	return b.String()
}

func TestCaptureTransformsKeepTheParse(t *testing.T) {
	checks := allSampleChecks()
	for _, s := range loadSamples(t) {
		c := checks[s.key]
		run := parsers[c.parser]
		if run == nil {
			continue // files no parser owns
		}
		want, wantErr := run(s.text)
		for name, transform := range captureTransforms {
			t.Run(s.key+"/"+name, func(t *testing.T) {
				got, err := run(transform(s.text))
				if !sameErrorKind(err, wantErr) {
					t.Fatalf("err = %v, want %v", err, wantErr)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("parse changed:\n got %+v\nwant %+v", got, want)
				}
			})
		}
	}
}

// sameErrorKind compares errors by sentinel, not by text (line numbers in
// messages legitimately move when noise lines are added).
func sameErrorKind(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	for _, s := range []error{ErrNotRecognized, ErrMalformed, ErrToolFailed} {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return true
}

// TestGarbageIsNotRecognized: empty and unrelated text must give
// ErrNotRecognized from every parser, never a result or another error.
func TestGarbageIsNotRecognized(t *testing.T) {
	inputs := map[string]string{
		"empty":          "",
		"blank lines":    "\n\n   \n\t\n",
		"crlf only":      "\r\n\r\n",
		"prose":          "The quick brown fox jumps over the lazy dog.\nNothing to see here.\n",
		"shell error":    "bash: nvidia-smi: command not found\n",
		"random json":    `{"foo": [1, 2, {"bar": "baz"}]}`,
		"broken json":    "{\"DCGM Diagnostic\": [",
		"binary":         "\x00\x01\x02\xff\xfe\x1b[31m\x1b]0;title\a",
		"markdown table": "| a | b |\n|---|---|\n| 1 | 2 |\n",
		"single word":    "index\n",
	}
	for name, in := range inputs {
		for pname, run := range parsers {
			if _, err := run(in); !errors.Is(err, ErrNotRecognized) {
				t.Errorf("%s(%s): err = %v, want ErrNotRecognized", pname, name, err)
			}
		}
	}
}

func TestNormalize(t *testing.T) {
	cases := map[string]string{
		"a\r\nb\rc\n":                  "a\nb\nc\n",
		"\ufeffx":                      "x",
		"\x1b[4mGPU0\x1b[0m":           "GPU0",
		"\x1b[38;5;208mhot\x1b[m":      "hot",
		"\x1b]0;title\x07text":         "text",
		"\x1b]0;title\x1b\\text":       "text",
		"_\bA_\bB":                     "AB",
		"B\bBo\bold":                   "Bold",
		"\bstart":                      "start",
		"line\n\bnext":                 "line\nnext", // a backspace never eats a line break
		"a\r\x1b[0m\x1b[K\nb":          "a\nb",
		"a  \r  \nb":                   "a    \nb",
		"progress 10%\rprogress 20%\n": "progress 10%\nprogress 20%\n",
		"esc at end\x1b":               "esc at end",
		"unterminated \x1b[12":         "unterminated ",
		"csi across lines \x1b[1\nok":  "csi across lines \nok",
	}
	for in, want := range cases {
		if got := normalize(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLargeInputsStayLinear guards against quadratic blow-ups (one was a
// look-ahead per CR in a run of CRs). The budget is generous - a linear parse
// of these takes well under a second even with -race; a quadratic one takes
// minutes.
func TestLargeInputsStayLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	var gpuList strings.Builder
	for i := 0; i < 30000; i++ {
		fmt.Fprintf(&gpuList, "%d, ", i)
	}
	inputs := map[string]string{
		"CR run":            strings.Repeat("\r", 1<<18) + "x",
		"backspaces":        strings.Repeat("a\b", 1<<17),
		"escapes":           strings.Repeat("\x1b[", 1<<17),
		"nested JSON":       strings.Repeat("[", 1<<18),
		"long warning":      "| Diagnostic | Result |\n| t | Pass |\n| Warning | x |\n" + strings.Repeat("|  | a chunk of a long warning message, 45 chars |\n", 5000),
		"long GPU list":     "| Diagnostic | Result |\n| t | Pass - GPUs: " + gpuList.String() + " |\n",
		"many JSON entries": `{"name":"t","results":[` + strings.Repeat(`{"entity_group":"GPU","entity_id":1,"status":"Fail","warnings":[{"warning":"w"}]},`, 5000) + `{}]}`,
		"many tabs":         "\tGPU0\tCPU Affinity\nGPU0" + strings.Repeat("\t", 1<<18) + "X\n",
	}
	deadline := time.Now().Add(20 * time.Second)
	for name, in := range inputs {
		for pname, run := range parsers {
			run(in)
			if time.Now().After(deadline) {
				t.Fatalf("still parsing at %s / %s: something is not linear", name, pname)
			}
		}
	}
}
