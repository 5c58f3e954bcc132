// Package redact keeps secrets out of the evidence. A node's environment
// and its tools' output may carry credentials (an HF_TOKEN in rank 0's
// environment that nccl-tests' -J report copies, an AWS key in a tool's
// error, a signed URL); everything the window writes (raw logs, the
// journal, run.json, reports, stderr) passes through String or a Writer
// first.
package redact

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Redacted stands where a secret was.
const Redacted = "[redacted]"

// measured are the prefixes of the environment variables a measurement
// needs (which NCCL, CUDA, MPI and UCX settings shaped it); every other
// variable of an environment dump is left out.
var measured = []string{"NCCL_", "CUDA_", "OMPI_", "PMIX_", "UCX_", "NVIDIA_", "TORCH_NCCL_", "GPUACCEPT_RUN"}

// Env says whether the variable name is one a measurement needs to be
// understood (and so is kept in an environment dump).
func Env(name string) bool {
	for _, p := range measured {
		if strings.HasPrefix(name, p) {
			return !secretName.MatchString(name)
		}
	}
	return false
}

// secretName is a variable or field name that says it holds a secret.
var secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSW(OR)?D|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH)`)

type rule struct {
	re   *regexp.Regexp
	repl string
	// quoted: the rule's last group is a value that may be quoted; the
	// quotes are kept around Redacted (a JSON or Python string stays one).
	quoted bool
	// needles: the rule can only match text that holds one of these (in
	// lower case). Most text holds none, and is passed over at memory
	// speed instead of the regexp engine's few MB/s.
	needles []string
}

// secretWord is what a name (a variable, a field, a flag) ends with when
// it holds a secret. It must end the name: max_tokens or --token-file is
// not a secret, --token and "password" are.
const secretWord = `(?:TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|PWD|API[_-]?KEY|ACCESS[_-]?KEY|SECRET[_-]?KEY|PRIVATE[_-]?KEY|ACCOUNT[_-]?KEY|CREDENTIALS?)`

// secretNeedles are secretWord's needles.
var secretNeedles = []string{"token", "secret", "passw", "passphrase", "pwd", "api_key", "api-key", "apikey",
	"access_key", "access-key", "accesskey", "secret_key", "secret-key", "secretkey", "private_key",
	"private-key", "privatekey", "account_key", "account-key", "accountkey", "credential"}

// quotedValue is a value as a config file, JSON, Python or a shell writes
// it: a double-quoted string (escapes included), a single-quoted one, or
// a bare word. A quote left open runs to the end of the line, so the
// rest of a value cut short is not left behind.
const quotedValue = `("(?:[^"\\\n]|\\.)*"?|'[^'\n]*'?|[^\s"'\\,}]+)`

// rules are the known shapes of secrets, most specific first. Values
// stop at white space, quotes and backslashes so that a secret inside a
// JSON string is replaced without breaking the JSON.
var rules = []rule{
	// PEM private keys, whole; one whose END never comes (a log cut short)
	// is replaced to the end of the text.
	{re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*)`), repl: pemRedacted, needles: []string{"private key"}},
	// Credentials in a URL: scheme://user:password@host, scheme://:password@host
	// (redis) and scheme://token@host (a token as the user): the whole
	// user part goes.
	{re: regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@"'\\<>]+@`), repl: "${1}" + Redacted + "@", needles: []string{"://"}},
	// A URL's query string (signed URLs carry their signature there).
	{re: regexp.MustCompile(`(?i)\b((?:https?|s3|gs|az|wss?)://[^\s?"'\\]+)\?[^\s"'\\<>]*`), repl: "${1}?…", needles: []string{"://"}},
	// A signature out of its URL: an Azure SAS token given on its own
	// (sv=...&sig=...), an S3 or GCS presigned query in a tool's message.
	{re: regexp.MustCompile(`(?i)\b((?:sig|signature|x-amz-signature|x-goog-signature)=)[^\s&"'\\<>]{8,}`), repl: "${1}" + Redacted, needles: []string{"sig=", "signature="}},
	// Authorization headers (also as a JSON field) and bearer tokens.
	// Neither crosses a line: what String does to a text, a Writer does
	// to its lines.
	{re: regexp.MustCompile(`(?i)\b(authorization["']?[ \t]*[:=][ \t]*["']?)((?:basic|bearer|token|digest|negotiate)[ \t]+)?[^\s"'\\]+`), repl: "${1}${2}" + Redacted, needles: []string{"authoriz"}},
	{re: regexp.MustCompile(`(?i)\b(bearer[ \t]+)[A-Za-z0-9\-._~+/]{8,}=*`), repl: "${1}" + Redacted, needles: []string{"bearer"}},
	// Cloud and forge key formats.
	{re: regexp.MustCompile(`\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b`), repl: "${1}" + Redacted, needles: []string{"akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"}},
	{re: regexp.MustCompile(`\bhf_[A-Za-z0-9]{20,}\b`), repl: "hf_" + Redacted, needles: []string{"hf_"}},
	{re: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}\b`), repl: "gh_" + Redacted, needles: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
	{re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}\b`), repl: "github_pat_" + Redacted, needles: []string{"github_pat_"}},
	{re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}\b`), repl: "glpat-" + Redacted, needles: []string{"glpat-"}},
	{re: regexp.MustCompile(`\b(xox[abprs]|xapp)-[A-Za-z0-9-]{10,}\b`), repl: "${1}-" + Redacted, needles: []string{"xox", "xapp-"}},
	{re: regexp.MustCompile(`(?i)\b(hooks\.slack\.com/services/)[A-Za-z0-9/_-]+`), repl: "${1}" + Redacted, needles: []string{"hooks.slack.com"}},
	{re: regexp.MustCompile(`\b(sk|rk)(-|_live_|_test_)[A-Za-z0-9_-]{20,}\b`), repl: "${1}${2}" + Redacted, needles: []string{"sk-", "sk_live_", "sk_test_", "rk_live_", "rk_test_"}},
	{re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), repl: "AIza" + Redacted, needles: []string{"aiza"}},
	// A JSON web token (a session or an OIDC token pasted into a log).
	{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`), repl: Redacted, needles: []string{"eyj"}},
	// A command-line flag whose name ends in a secret word, its value
	// after = or a space: --password X, --token=X, --api-key "x y".
	{re: regexp.MustCompile(`(?i)(--?[A-Za-z0-9_-]*` + secretWord + `)(=|[ \t]+)` + quotedValue), repl: "${1}${2}", quoted: true, needles: secretNeedles},
	// NAME=value, NAME: value, "NAME": "value" and 'name': 'value' where
	// the name says it is a secret (HF_TOKEN=..., aws_secret_access_key =
	// ..., password="x y", a JSON or Python field, an env dump line).
	{re: regexp.MustCompile(`(?i)\b([A-Za-z0-9_.-]*` + secretWord + `)(["']?[ \t]*[:=][ \t]*)` + quotedValue), repl: "${1}${2}", quoted: true, needles: secretNeedles},
}

// pemRedacted stands where a private key block was.
const pemRedacted = "-----BEGIN PRIVATE KEY----- " + Redacted + " -----END PRIVATE KEY-----"

// String is s with every known shape of secret replaced.
func String(s string) string {
	if s == "" {
		return s
	}
	lower := lowerASCII(s)
	for i, r := range rules {
		if !r.applies(lower) {
			continue
		}
		var out string
		if i == 0 {
			// The private key rule spans lines: it sees the whole text.
			out = r.replace(s)
		} else {
			out = r.onLines(s, lower)
		}
		if out != s {
			s, lower = out, lowerASCII(out)
		}
	}
	return s
}

func (r rule) replace(s string) string {
	if r.quoted {
		return r.replaceQuoted(s)
	}
	return r.re.ReplaceAllString(s, r.repl)
}

// onLines applies a rule that never matches across a line break to the
// lines that hold one of its needles only: a raw log's other lines, most
// of it, cost a search for the needles, not the regexp engine's pass
// (run.json's scrub was half a fake window's time).
func (r rule) onLines(s, lower string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b, or nothing was replaced yet
	changed := false
	// next[k]: where needle k is next found (from start on), -1 when no
	// more: each needle is searched for once past each line it is on,
	// not once a line.
	next := make([]int, len(r.needles))
	for k := range next {
		next[k] = -2
	}
	for start := 0; start < len(s); {
		at := -1
		for k, n := range r.needles {
			if next[k] == -2 || next[k] >= 0 && next[k] < start {
				next[k] = -1
				if i := strings.Index(lower[start:], n); i >= 0 {
					next[k] = start + i
				}
			}
			if next[k] >= 0 && (at < 0 || next[k] < at) {
				at = next[k]
			}
		}
		if at < 0 {
			break
		}
		from := strings.LastIndexByte(s[:at], '\n') + 1
		to := strings.IndexByte(s[at:], '\n')
		if to < 0 {
			to = len(s)
		} else {
			to += at
		}
		if out := r.replace(s[from:to]); out != s[from:to] {
			if !changed {
				b.Grow(len(s))
				changed = true
			}
			b.WriteString(s[done:from])
			b.WriteString(out)
			done = to
		}
		start = to + 1
	}
	if !changed {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// lowerASCII is s with A-Z in lower case: byte for byte the same length,
// so a needle found in it is at the same place in s (the needles are
// ASCII).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// replaceQuoted replaces the value (the last group) of every match,
// keeping the quotes it was written in.
func (r rule) replaceQuoted(s string) string {
	ms := r.re.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(s[last:m[0]])
		b.Write(r.re.ExpandString(nil, r.repl, s, m))
		v := s[m[len(m)-2]:m[len(m)-1]]
		switch q := v[0]; {
		case q == '"' || q == '\'':
			b.WriteByte(q)
			b.WriteString(Redacted)
			if len(v) > 1 && v[len(v)-1] == q {
				b.WriteByte(q)
			}
		default:
			b.WriteString(Redacted)
		}
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

func (r rule) applies(lower string) bool {
	for _, n := range r.needles {
		if strings.Contains(lower, n) {
			return true
		}
	}
	return false
}

// Bytes is String for bytes.
func Bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	return []byte(String(string(b)))
}

// URL is how a URL is shown in every record: no user or password, the
// query string (a signed URL's signature) as "?…". What does not parse as
// a URL goes through String.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return String(raw)
	}
	u.User = nil
	q := u.RawQuery != "" || u.ForceQuery
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	s := u.String()
	if q {
		s += "?…"
	}
	return s
}

// maxLine is how much of a line without its end a Writer holds before it
// passes it on (scrubbed) anyway.
const maxLine = 64 << 10

// maxKey is how much a Writer leaves out after a private key's BEGIN line
// while it waits for the END line: more than any real key, so text that
// goes on past it was not a key and is shown again.
const maxKey = 64 << 10

var (
	pemBegin = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`)
	pemEnd   = regexp.MustCompile(`-----END [A-Z0-9 ]*PRIVATE KEY-----`)
)

// Writer scrubs what is written through it a line at a time and passes it
// to w. A secret never spans lines in what tools print, except a private
// key: its lines are left out from the BEGIN line to the END line. Close
// passes on a last line without its newline; it does not close w. It is
// safe for concurrent use (a command's stdout and stderr are often one
// log).
func Writer(w io.Writer) io.WriteCloser { return &writer{w: w} }

type writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
	// inKey: a private key's BEGIN line was seen and its END line not
	// yet; skipped is how much was left out since.
	inKey   bool
	skipped int
}

func (r *writer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.buf = append(r.buf, p...)
	// Scrubbed a line at a time, passed on once a Write: a node printing
	// a million short lines costs one write each call, not one a line.
	var out []byte
	if i := bytes.LastIndexByte(r.buf, '\n'); i >= 0 && !r.inKey && !bytes.Contains(r.buf[:i], []byte("PRIVATE KEY-----")) {
		// No key among the whole lines: every rule String applies to
		// them keeps to a line, so they are scrubbed at once (a line at
		// a time, a node's 8 MiB of short lines took seconds).
		out = Bytes(r.buf[:i+1])
		r.buf = r.buf[i+1:]
	}
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		out = r.line(out, r.buf[:i], true)
		r.buf = r.buf[i+1:]
	}
	if len(r.buf) > maxLine {
		out = r.line(out, r.buf, false)
		r.buf = r.buf[:0]
	}
	if len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			r.err = err
		}
	}
	return len(p), r.err
}

// line appends one line (without its newline) to out, scrubbed, or
// nothing of it while inside a private key.
func (r *writer) line(out, l []byte, nl bool) []byte {
	key := bytes.Contains(l, []byte("PRIVATE KEY-----"))
	if r.inKey {
		var end []int
		if key {
			end = pemEnd.FindIndex(l)
		}
		if end == nil {
			if r.skipped += len(l) + 1; r.skipped > maxKey {
				r.inKey = false
			}
			return out
		}
		r.inKey, l = false, l[end[1]:]
		key = bytes.Contains(l, []byte("PRIVATE KEY-----"))
	}
	if key {
		if b := pemBegin.FindIndex(l); b != nil && pemEnd.FindIndex(l[b[1]:]) == nil {
			r.inKey, r.skipped = true, 0
		}
	}
	out = append(out, Bytes(l)...)
	if nl {
		out = append(out, '\n')
	}
	return out
}

func (r *writer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 && r.err == nil {
		if out := r.line(nil, r.buf, false); len(out) > 0 {
			_, r.err = r.w.Write(out)
		}
		r.buf = nil
	}
	return r.err
}

// NCCLEnv keeps, of the "env" array that nccl-tests' -J report copies
// from rank 0's environment, only the variables Env says a measurement
// needs. The report is hand-written JSON that may not parse (a bare inf),
// so the array is found and rewritten as text; anything else passes
// through String.
func NCCLEnv(report string) string {
	i := strings.Index(report, `"env"`)
	if i < 0 {
		return String(report)
	}
	j := i + len(`"env"`)
	for j < len(report) && (report[j] == ' ' || report[j] == ':' || report[j] == '\n' || report[j] == '\t') {
		j++
	}
	if j >= len(report) || report[j] != '[' {
		return String(report)
	}
	var kept []string
	k := j + 1
	for k < len(report) {
		c := report[k]
		switch {
		case c == ']':
			out := report[:j] + "[" + strings.Join(kept, ", ") + "]" + report[k+1:]
			return String(out)
		case c == '"':
			end := k + 1
			for end < len(report) && report[end] != '"' {
				if report[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(report) {
				return String(report[:j]) + `[]`
			}
			entry := report[k : end+1]
			name, _, _ := strings.Cut(strings.Trim(entry, `"`), "=")
			if Env(name) {
				kept = append(kept, entry)
			}
			k = end + 1
		default:
			k++
		}
	}
	// Cut short (a run that died mid-write): nothing of the array is kept.
	return String(report[:j]) + `[]`
}

// Controls is s made safe for a terminal: control characters other than
// newline and tab (escape sequences that set a window title, move the
// cursor or colour what follows), DEL, C1 controls and invalid UTF-8 are
// shown escaped, as Go writes them (\x1b, \u009b), so a node's output can
// never drive the operator's terminal.
func Controls(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r == utf8.RuneError || r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f ||
		r == '\u2028' || r == '\u2029' || r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// Shown is s as a person may see it: secrets out, controls escaped.
func Shown(s string) string { return Controls(String(s)) }
