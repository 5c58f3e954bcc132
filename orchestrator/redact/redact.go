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
	// needles: the rule can only match text that holds one of these (in
	// lower case). Most text holds none, and is passed over at memory
	// speed instead of the regexp engine's few MB/s.
	needles []string
}

// rules are the known shapes of secrets, most specific first. Values
// stop at white space, quotes and backslashes so that a secret inside a
// JSON string is replaced without breaking the JSON.
var rules = []rule{
	// PEM private keys, whole.
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`), "-----BEGIN PRIVATE KEY----- " + Redacted + " -----END PRIVATE KEY-----", []string{"private key"}},
	// Credentials in a URL: scheme://user:password@host.
	{regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@"'\\]+:[^/\s@"'\\]*@`), "${1}" + Redacted + "@", []string{"://"}},
	// A URL's query string (signed URLs carry their signature there).
	{regexp.MustCompile(`(?i)\b((?:https?|s3|gs|az|wss?)://[^\s?"'\\]+)\?[^\s"'\\<>]*`), "${1}?…", []string{"://"}},
	// Authorization headers and bearer tokens.
	{regexp.MustCompile(`(?i)\b(authorization\s*[:=]\s*)(?:(basic|bearer|token)\s+)?[^\s"'\\]+`), "${1}${2} " + Redacted, []string{"authoriz"}},
	{regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*`), "${1} " + Redacted, []string{"bearer"}},
	// Cloud and forge key formats.
	{regexp.MustCompile(`\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b`), "${1}" + Redacted, []string{"akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"}},
	{regexp.MustCompile(`\bhf_[A-Za-z0-9]{20,}\b`), "hf_" + Redacted, []string{"hf_"}},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}\b`), "gh_" + Redacted, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
	{regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}\b`), "github_pat_" + Redacted, []string{"github_pat_"}},
	{regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}\b`), "glpat-" + Redacted, []string{"glpat-"}},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}\b`), "xox-" + Redacted, []string{"xox"}},
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}\b`), "sk-" + Redacted, []string{"sk-"}},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), "AIza" + Redacted, []string{"aiza"}},
	// NAME=value, NAME: value and "NAME": "value" where the name says it
	// is a secret (HF_TOKEN=..., aws_secret_access_key = ..., a JSON
	// field, an env dump line).
	{regexp.MustCompile(`(?i)\b([A-Za-z0-9_.-]*(?:TOKEN|SECRET|PASSW(?:OR)?D|API_?KEY|ACCESS_?KEY|SECRET_?KEY|PRIVATE_?KEY|CREDENTIALS?))("?\s*[:=]\s*"?)([^\s"'\\,}]+)`), "${1}${2}" + Redacted, []string{"token", "secret", "passw", "pwd", "api_key", "apikey", "access_key", "accesskey", "secret_key", "secretkey", "private_key", "privatekey", "credential"}},
}

// String is s with every known shape of secret replaced.
func String(s string) string {
	if s == "" {
		return s
	}
	lower := strings.ToLower(s)
	for _, r := range rules {
		if !r.applies(lower) {
			continue
		}
		s = r.re.ReplaceAllString(s, r.repl)
		lower = strings.ToLower(s)
	}
	return s
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

// Writer scrubs what is written through it a line at a time (a secret
// never spans lines in what tools print) and passes it to w. Close passes
// on a last line without its newline; it does not close w. It is safe for
// concurrent use (a command's stdout and stderr are often one log).
func Writer(w io.Writer) io.WriteCloser { return &writer{w: w} }

type writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
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
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		out = append(out, Bytes(r.buf[:i+1])...)
		r.buf = r.buf[i+1:]
	}
	if len(r.buf) > maxLine {
		out = append(out, Bytes(r.buf)...)
		r.buf = r.buf[:0]
	}
	if len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			r.err = err
		}
	}
	return len(p), r.err
}

func (r *writer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 && r.err == nil {
		_, r.err = r.w.Write(Bytes(r.buf))
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
