package parse

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The dcgmi diag table is 78 columns wide:
//
//	| Test name (25 wide)       | Result text (46 wide)                          |
//
// Long messages are cut into 45-character chunks, one per row, the name cell
// left blank on continuation rows (DATA_INFO_TAG_LEN in dcgmi's Diag.cpp).
const diagChunk = 45

var (
	// "|-----  Deployment  --------+-----...-----|" and
	// "+-----  Hardware  ----------+-----...-----+"
	reDiagCategory = regexp.MustCompile(`^[|+]-{3,}\s+(\S.*?)\s+-+\+-*[|+]$`)
	// A plain border: "+----+----+" (the "+====+" under the header has '=').
	reDiagBorder = regexp.MustCompile(`^\+-+\+-+\+$`)
	// "Pass", "Fail - All", "Pass - GPUs: 0, 1, 2", "Warn - GPU: 3"
	reDiagStatus = regexp.MustCompile(`(?i)^(pass|fail|warn|warning|skip|skipped|not run)\s*(?:-\s*(all|gpus?\s*:\s*([0-9,\s]*)))?$`)
	// DCGM 4.x per-entity continuation rows: "GPU0: Pass", "CPU1: Fail"
	reDiagEntity = regexp.MustCompile(`^([A-Za-z]+)\s*(\d+)\s*:\s*(\S.*)$`)
	// Continuation of a wrapped GPU list: "8, 9, 10"
	reDiagGPUList = regexp.MustCompile(`^[0-9][0-9,\s]*$`)
	// Note rows: "Warning", "Warning: GPU1" (4.x), "Info", "Error"
	reDiagNote = regexp.MustCompile(`(?i)^(warning|info|error)\b\s*:?\s*(?:([A-Za-z]+)\s*(\d+))?\s*$`)
	// A message that starts by naming its GPU: "GPU 0 Error using CUDA API"
	reMsgGPU = regexp.MustCompile(`^GPU\s*(\d+)\b`)
)

// note is a Warning/Info/Error row being assembled from its chunks.
type note struct {
	at     line
	kind   string // "warning", "info", "error"
	entity string // "GPU" when the row named one, else ""
	id     int
	text   strings.Builder
	full   bool // the last chunk filled its 45 columns: the next one continues the same word
}

// diagText holds the state of one pass over the table.
type diagText struct {
	d         *Diag
	category  string
	tests     []*testAcc
	cur       *testAcc
	allStatus string // status of the current test when printed as "<Status> - All"
	listed    string // status of the current test's last "- GPUs:" list, for wrapped lists
	inNote    *note
	open      bool // header seen, closing border not yet
	sawTable  bool
}

func diagFromText(lines []line) (Diag, error) {
	d := Diag{Format: "text", Tests: []DiagTest{}}
	p := &diagText{d: &d}
	for _, l := range lines {
		p.line(l)
	}
	p.flush()
	for _, t := range p.tests {
		d.Tests = append(d.Tests, t.DiagTest)
	}
	if !p.sawTable {
		if len(d.Errors) > 0 {
			return d, nil // dcgmi printed only an error ("Error: Unable to complete diagnostic ...")
		}
		return d, notRecognized(diagTool, lines, `"| Diagnostic | Result |" table or JSON`)
	}
	if p.open {
		d.Errors = append(d.Errors, "output ends before the table's closing border (truncated?): tests after the last row are missing")
	}
	if len(d.Tests) == 0 {
		d.Errors = append(d.Errors, "the table holds no test results")
	}
	return d, nil
}

func (p *diagText) line(l line) {
	t := strings.TrimSpace(l.text)
	switch {
	case t == "":
	case strings.HasPrefix(t, "Error:") || strings.HasPrefix(t, "Aborting the iterative runs"):
		// dcgmi's own failure lines: no diagnostic, or --iterations stopped early.
		p.d.Errors = append(p.d.Errors, fmt.Sprintf("line %d: %s", l.no, t))
	case reDiagCategory.MatchString(t):
		p.flush()
		p.category = reDiagCategory.FindStringSubmatch(t)[1]
		p.cur = nil
		p.sawTable = true
	case reDiagBorder.MatchString(t):
		if p.open {
			p.flush()
			p.open = false
			p.cur = nil
		}
	default:
		name, value, ok := diagCells(t)
		if !ok {
			return // text outside the table: "Successfully ran diagnostic for group."
		}
		if strings.EqualFold(name, "Diagnostic") && strings.EqualFold(strings.TrimSpace(value), "Result") {
			p.flush()
			p.open, p.sawTable, p.category, p.cur = true, true, "", nil
			return
		}
		if p.sawTable {
			p.row(l, name, value)
		}
	}
}

// diagCells splits "| name | value |" into the trimmed name and the value
// with only the separator space removed (leading spaces of a continuation
// chunk belong to the message).
func diagCells(t string) (name, value string, ok bool) {
	if len(t) < 3 || t[0] != '|' || t[len(t)-1] != '|' {
		return "", "", false
	}
	inner := t[1 : len(t)-1]
	i := strings.IndexByte(inner, '|')
	if i < 0 {
		return "", "", false
	}
	value = strings.TrimPrefix(inner[i+1:], " ")
	return strings.TrimSpace(inner[:i]), strings.TrimRight(value, " "), true
}

func (p *diagText) row(l line, name, value string) {
	v := strings.TrimSpace(value)
	switch {
	case name == "":
		p.continuation(l, value, v)
	case strings.EqualFold(p.category, "Metadata"):
		p.flush()
		if strings.EqualFold(name, "DCGM Version") {
			p.d.Version = v
		}
	case reDiagNote.MatchString(name):
		p.flush()
		m := reDiagNote.FindStringSubmatch(name)
		n := &note{at: l, kind: strings.ToLower(m[1]), id: -1, full: len(value) >= diagChunk}
		n.text.WriteString(strings.TrimLeft(value, " "))
		if m[3] != "" {
			n.entity = strings.ToUpper(m[2])
			n.id, _ = strconv.Atoi(m[3])
		}
		p.inNote = n
	default:
		p.flush()
		p.cur = newTest(name, p.category)
		p.tests = append(p.tests, p.cur)
		p.allStatus, p.listed = "", ""
		if !p.status(v) {
			p.cur.Status = p.d.unknownStatus(fmt.Sprintf("line %d", l.no), name, v)
		}
	}
}

// continuation handles a row with an empty name cell: the next chunk of a
// note, or another status line of the current test.
func (p *diagText) continuation(l line, raw, v string) {
	if v == "" {
		return
	}
	if n := p.inNote; n != nil {
		// A per-GPU result row after a note's last chunk ("GPU1: Pass",
		// "Pass - GPU: 1") ends the note: it is the test's, not more of the
		// message. A chunk that continues a cut word (the last one filled
		// its 45 columns) is the message's whatever it says.
		if !n.full && p.cur != nil && (reDiagStatus.MatchString(v) || reDiagEntity.MatchString(v)) {
			p.flush()
			p.status(v)
			return
		}
		if n.full {
			n.text.WriteString(raw)
		} else {
			n.text.WriteString(" " + strings.TrimLeft(raw, " "))
		}
		n.full = len(raw) >= diagChunk
		return
	}
	if p.cur == nil {
		return // metadata value wrapped onto a second row
	}
	if p.status(v) {
		return
	}
	if p.listed != "" && reDiagGPUList.MatchString(v) {
		p.gpuList(p.listed, v)
		return
	}
	// "  Code: (000000000000)" after "Diagnostic | Warn - All" and the like.
	p.cur.Info = append(p.cur.Info, v)
}

// status applies one status line to the current test and reports whether
// the line was one.
func (p *diagText) status(v string) bool {
	if m := reDiagStatus.FindStringSubmatch(v); m != nil {
		st, _ := normStatus(m[1])
		p.cur.Status = worse(p.cur.Status, st)
		switch {
		case strings.EqualFold(m[2], "all"):
			p.allStatus = st
		case m[2] != "":
			p.listed = st
			p.gpuList(st, m[3])
		}
		return true
	}
	if m := reDiagEntity.FindStringSubmatch(v); m != nil {
		st, ok := normStatus(m[3])
		if !ok {
			return false
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return false
		}
		if strings.EqualFold(m[1], "GPU") {
			p.cur.setGPU(n, st)
		} else {
			p.cur.Info = append(p.cur.Info, fmt.Sprintf("%s%d: %s", m[1], n, st))
			p.cur.Status = worse(p.cur.Status, st)
		}
		return true
	}
	return false
}

func (p *diagText) gpuList(st, list string) {
	for _, f := range strings.Split(list, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n >= 0 {
			p.cur.setGPU(n, st)
		}
	}
}

// flush files the note being assembled under its GPU or test.
func (p *diagText) flush() {
	n := p.inNote
	p.inNote = nil
	if n == nil {
		return
	}
	msg := strings.TrimSpace(n.text.String())
	if p.cur == nil {
		p.d.Errors = append(p.d.Errors, fmt.Sprintf("line %d: %s outside any test: %s", n.at.no, n.kind, msg))
		return
	}
	fileNote(p.cur, n.kind, n.entity, n.id, msg, p.allStatus)
}

// fileNote attaches a warning/info/error message to a test. Warnings go to
// the GPU they name (by the row name in DCGM 4.x, by the message's "GPU n"
// prefix before) when that GPU has a result; otherwise they become
// "Warning: ..." info lines of the test so nothing is dropped.
func fileNote(t *testAcc, kind, entity string, id int, msg, allStatus string) {
	if kind == "info" {
		if entity != "" {
			msg = fmt.Sprintf("%s%d: %s", entity, id, msg)
		}
		t.Info = append(t.Info, msg)
		return
	}
	if entity == "" {
		if m := reMsgGPU.FindStringSubmatch(msg); m != nil {
			entity = "GPU"
			id, _ = strconv.Atoi(m[1])
		}
	}
	if entity == "GPU" && (t.hasGPU(id) || allStatus != "") {
		t.warnGPU(id, allStatus, msg)
		return
	}
	label := "Warning: "
	if kind == "error" {
		label = "Error: "
	}
	if entity != "" {
		label += fmt.Sprintf("%s%d: ", entity, id)
	}
	t.warnInfo(label, msg)
}
