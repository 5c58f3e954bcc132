package parse

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Top-level keys of a whole `dcgmi diag -j` document: "DCGM GPU Diagnostic"
// up to DCGM 3.x, "DCGM Diagnostic" from 4.0; "iterations" wraps several
// runs when --iterations is used.
var diagDocKeys = []string{"DCGM Diagnostic", "DCGM GPU Diagnostic", "iterations"}

// jsonStart returns the index of the first line that opens a JSON value,
// provided no table line came before it.
func jsonStart(lines []line) (int, bool) {
	for i, l := range lines {
		t := strings.TrimSpace(l.text)
		switch {
		case t == "":
		case t[0] == '{' || t[0] == '[':
			return i, true
		case t[0] == '|' || t[0] == '+':
			return 0, false
		}
	}
	return 0, false
}

func diagFromJSON(lines []line, start int) (Diag, error) {
	d := Diag{Format: "json", Tests: []DiagTest{}}
	parts := make([]string, 0, len(lines)-start)
	for _, l := range lines[start:] {
		parts = append(parts, l.text)
	}
	root, notes, err := decodeLenient(strings.Join(parts, "\n"))
	if err != nil {
		return d, fmt.Errorf("%s: %w: line %d opens JSON that cannot be decoded: %v", diagTool, ErrNotRecognized, lines[start].no, err)
	}
	w := diagWalker{d: &d}
	w.walk(root, "")
	if len(d.Tests) == 0 && len(d.Errors) == 0 && d.Version == "" {
		return d, fmt.Errorf("%s: %w: JSON at line %d has no dcgmi diag tests, version or runtime error", diagTool, ErrNotRecognized, lines[start].no)
	}
	if frag := fragmentNote(root); frag != "" {
		d.Errors = append(d.Errors, frag)
	}
	d.Errors = append(d.Errors, notes...)
	if w.overallFail && !anyFail(d.Tests) {
		d.Errors = append(d.Errors, `"Overall Result" is Fail`)
	}
	return d, nil
}

// decodeLenient decodes the first JSON value in s. When s is not a complete
// document (cut short, or followed by the rest of a larger document it was
// pasted out of), the value is decoded as far as it goes and notes say what
// was lost.
func decodeLenient(s string) (any, []string, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err == nil {
		return v, nil, nil
	}
	fixed, r := repairJSON(s)
	if fixed == "" {
		return nil, nil, fmt.Errorf("no complete JSON object or array")
	}
	if err := json.Unmarshal([]byte(fixed), &v); err != nil {
		return nil, nil, err
	}
	var notes []string
	if r.unclosed > 0 {
		notes = append(notes, fmt.Sprintf("JSON ends before %d closing brackets (truncated at byte %d of %d): entries after that point are missing", r.unclosed, r.cut, len(s)))
	}
	// Trailing prompts and banners are noise, but a second document (runs
	// printed one after another) would be lost, so say so.
	if tail := strings.TrimSpace(r.trailing); strings.ContainsAny(tail, "{[") {
		notes = append(notes, fmt.Sprintf("only the first JSON value was read; ignored after it: %q", clip(tail)))
	}
	return v, notes, nil
}

// repairResult says what repairJSON had to do.
type repairResult struct {
	cut      int    // bytes of s kept
	unclosed int    // brackets that were still open at the cut and got closed
	trailing string // text after a complete root value
}

// repairJSON keeps s up to the end of the last complete object or array
// (tracking strings so brackets inside them do not count) and closes the
// brackets still open there. Cutting right after a closing bracket always
// leaves a valid prefix: the closed value completes an array element or an
// object member, after which closing the enclosing containers is legal.
func repairJSON(s string) (string, repairResult) {
	var (
		stack    []byte
		inStr    bool
		esc      bool
		lastGood = -1
		good     []byte
		r        repairResult
	)
	start := strings.IndexAny(s, "{[")
	if start < 0 {
		return "", r
	}
scan:
	for i := start; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			stack = append(stack, c)
		case '}', ']':
			if len(stack) == 0 || (stack[len(stack)-1] == '{') != (c == '}') {
				break scan // a bracket the fragment never opened: stop here
			}
			stack = stack[:len(stack)-1]
			lastGood, good = i+1, append(good[:0], stack...)
			if len(stack) == 0 {
				r.trailing = s[i+1:]
				break scan
			}
		}
	}
	if lastGood < 0 {
		return "", r
	}
	var b strings.Builder
	b.WriteString(s[start:lastGood])
	for i := len(good) - 1; i >= 0; i-- {
		if good[i] == '{' {
			b.WriteByte('}')
		} else {
			b.WriteByte(']')
		}
	}
	r.cut, r.unclosed = lastGood, len(good)
	return b.String(), r
}

// fragmentNote describes a decoded root that is not a whole dcgmi document.
func fragmentNote(root any) string {
	m, ok := root.(map[string]any)
	if ok {
		for _, k := range diagDocKeys {
			if _, has := m[k]; has {
				return ""
			}
		}
	}
	what := "a JSON value"
	switch {
	case ok && isDiagTest(m):
		what = fmt.Sprintf("a single test object (%q)", str(m["name"]))
	case ok && m["category"] != nil:
		what = fmt.Sprintf("a single test category (%q)", str(m["category"]))
	case ok:
		what = "an object"
	}
	return fmt.Sprintf("JSON fragment: the text holds %s, not a whole dcgmi diag -j document; other tests, the DCGM version and any runtime error are not in it", what)
}

// diagWalker collects tests wherever they sit in the decoded JSON, so the
// 3.x document, the 4.x document, iterations and fragments share one path.
type diagWalker struct {
	d           *Diag
	overallFail bool
}

func (w *diagWalker) walk(v any, category string) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			w.walk(e, category)
		}
	case map[string]any:
		w.object(x, category)
	}
}

func (w *diagWalker) object(m map[string]any, category string) {
	if e := str(m["runtime_error"]); e != "" {
		w.d.Errors = append(w.d.Errors, "runtime_error: "+e)
	}
	for _, k := range []string{"version", "DCGM Version"} {
		if v := str(m[k]); v != "" && w.d.Version == "" {
			w.d.Version = v
		}
	}
	if st, ok := normStatus(str(m["Overall Result"])); ok && st == StatusFail {
		w.overallFail = true
	}
	if isDiagTest(m) {
		w.test(m, category)
		return
	}
	if c := str(m["category"]); c != "" {
		category = c
	}
	// Map order is random; walk keys sorted so the test order is stable
	// (the order that matters, inside test_categories, comes from arrays).
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.walk(m[k], category)
	}
}

// isDiagTest reports whether m is a test entry: a name with results or a
// test summary.
func isDiagTest(m map[string]any) bool {
	if str(m["name"]) == "" {
		return false
	}
	_, results := m["results"].([]any)
	_, summary := m["test_summary"].(map[string]any)
	return results || summary
}

func (w *diagWalker) test(m map[string]any, category string) {
	t := newTest(str(m["name"]), category)
	results, _ := m["results"].([]any)
	for i, r := range results {
		rm, ok := r.(map[string]any)
		if !ok {
			w.d.Errors = append(w.d.Errors, fmt.Sprintf("test %q: result %d is not an object", t.Name, i))
			continue
		}
		w.result(t, rm)
	}
	if sum, ok := m["test_summary"].(map[string]any); ok {
		// 4.x: the summary is the test's verdict; keep the worse of it and
		// the per-entity results so a failing GPU is never hidden.
		if raw := str(sum["status"]); raw != "" {
			t.Status = worse(t.Status, w.status(t.Name, raw))
		}
		for _, msg := range messages(sum["warnings"]) {
			if !t.warned[msg] {
				t.warnInfo("Warning: ", msg)
			}
		}
		t.Info = append(t.Info, messages(sum["info"])...)
	}
	if t.Status == "" {
		t.Status = StatusNotRun
	}
	w.d.Tests = append(w.d.Tests, t.DiagTest)
}

// result files one entry of a test's "results" array: a GPU entity (4.x
// entity_group/entity_id, 3.x gpu_ids/gpu_id), another entity kind (CPU,
// switch: kept as info), or a test-wide result.
func (w *diagWalker) result(t *testAcc, r map[string]any) {
	st := StatusNotRun
	if raw := str(r["status"]); raw != "" {
		st = w.status(t.Name, raw)
	}
	gpus, other := resultEntities(r)
	for _, n := range gpus {
		t.setGPU(n, st)
	}
	if other != "" {
		t.Info = append(t.Info, other+": "+st)
	}
	if len(gpus) == 0 {
		t.Status = worse(t.Status, st)
	}
	prefix := ""
	if len(gpus) == 1 {
		prefix = fmt.Sprintf("GPU%d: ", gpus[0])
	} else if other != "" {
		prefix = other + ": "
	}
	for _, msg := range messages(r["warnings"]) {
		if len(gpus) == 1 {
			t.warnGPU(gpus[0], st, msg)
		} else {
			t.warnInfo("Warning: "+prefix, msg)
		}
	}
	for _, msg := range messages(r["info"]) {
		t.Info = append(t.Info, prefix+msg)
	}
}

// resultEntities returns the GPU indexes a result applies to, or a label
// ("CPU0") for a non-GPU entity.
func resultEntities(r map[string]any) ([]int, string) {
	if eg := str(r["entity_group"]); eg != "" {
		id, ok := intValue(r["entity_id"])
		if !ok {
			return nil, eg + "?"
		}
		if strings.EqualFold(eg, "GPU") {
			return []int{id}, ""
		}
		return nil, fmt.Sprintf("%s%d", eg, id)
	}
	for _, k := range []string{"gpu_ids", "gpu_id"} {
		switch v := r[k].(type) {
		case string:
			var out []int
			for _, f := range strings.Split(v, ",") {
				if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n >= 0 {
					out = append(out, n)
				}
			}
			return out, ""
		case float64:
			if n, ok := intValue(v); ok {
				return []int{n}, ""
			}
		}
	}
	return nil, ""
}

func (w *diagWalker) status(test, raw string) string {
	if st, ok := normStatus(raw); ok {
		return st
	}
	return w.d.unknownStatus("JSON", test, raw)
}

// messages flattens the shapes DCGM has used for warnings and info: a
// string, a list of strings, or a list of objects whose text is under
// "warning" (3.x/4.x), "warnings" (3.x deployment tests), "message" or "msg".
func messages(v any) []string {
	switch x := v.(type) {
	case string:
		if s := strings.TrimSpace(x); s != "" {
			return []string{s}
		}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, messages(e)...)
		}
		return out
	case map[string]any:
		for _, k := range []string{"warning", "warnings", "message", "msg"} {
			if s := strings.TrimSpace(str(x[k])); s != "" {
				return []string{s}
			}
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// intValue converts a JSON number (or numeric string) to a non-negative int.
func intValue(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		if x < 0 || x > math.MaxInt32 || x != math.Trunc(x) {
			return 0, false
		}
		return int(x), true
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil && n >= 0
	}
	return 0, false
}

func anyFail(tests []DiagTest) bool {
	for _, t := range tests {
		if t.Status == StatusFail {
			return true
		}
	}
	return false
}
