package parse

import (
	"fmt"
	"regexp"
	"strings"
)

// CSV is the output of `nvidia-smi --query-gpu=... --format=csv`.
// Header holds the field names without their unit suffix ("memory.total",
// not "memory.total [MiB]"); each row maps those names to the trimmed cell,
// units kept in the value ("81559 MiB", "[N/A]").
type CSV struct {
	Header []string            `json:"header"`
	Rows   []map[string]string `json:"rows"`
}

const csvTool = "nvidia-smi --query-gpu"

var (
	// A header cell is a query field name, optionally with its unit:
	// "index", "memory.total [MiB]", "clocks_event_reasons_counters.sw_power_cap [us]".
	// Field names start lower-case; mixed case appears inside
	// ("encoder.stats.sessionCount"). Requiring this shape keeps noise lines
	// and value rows ("0, 16.48 W, ...") from being taken for a header.
	reCSVHeaderCell = regexp.MustCompile(`^[a-z][a-zA-Z0-9_.]*(\s*\[[^\][]+\])?$`)
	reUnitSuffix    = regexp.MustCompile(`\s*\[[^\][]+\]$`)
)

// NvidiaSmiQueryCSV parses `nvidia-smi --query-gpu=<fields> --format=csv`
// (also --query-compute-apps and other --query-* forms, which share the
// layout). The header row is required: without it the cells have no names.
// Lines before the header are ignored; lines after the last row that contain
// no comma are taken for trailing noise, any other row whose cell count does
// not match the header is an error naming the line.
func NvidiaSmiQueryCSV(text string) (CSV, error) {
	lines := splitLines(text)
	if msgs := nvsmiFailures(lines); len(msgs) > 0 {
		return CSV{}, nvsmiFailureError(csvTool, msgs)
	}
	h := csvHeaderIndex(lines)
	if h < 0 {
		if hasNoDevices(lines) {
			return CSV{Rows: []map[string]string{}}, nil
		}
		return CSV{}, notRecognized(csvTool, lines, "CSV header row of query field names")
	}
	out := CSV{Header: csvHeader(lines[h].text), Rows: []map[string]string{}}
	rows := lines[h+1:]
	for i, l := range rows {
		if strings.TrimSpace(l.text) == "" {
			continue
		}
		cells := splitCSV(l.text, len(out.Header))
		if len(cells) != len(out.Header) {
			if isTrailingNoise(rows[i:]) {
				break
			}
			return out, malformed(csvTool, l, "%d cells, header has %d", len(cells), len(out.Header))
		}
		row := make(map[string]string, len(cells))
		for j, c := range cells {
			row[out.Header[j]] = c
		}
		out.Rows = append(out.Rows, row)
	}
	if len(out.Rows) == 0 {
		// A lone line of field-like words is as likely noise as a header.
		return CSV{}, fmt.Errorf("%s: %w: line %d looks like a header but no data rows follow: %q",
			csvTool, ErrNotRecognized, lines[h].no, clip(strings.TrimSpace(lines[h].text)))
	}
	return out, nil
}

// csvHeaderIndex returns the index of the first line that looks like a
// header row, or -1.
func csvHeaderIndex(lines []line) int {
	for i, l := range lines {
		t := strings.TrimSpace(l.text)
		if t == "" {
			continue
		}
		ok := true
		for _, c := range strings.Split(t, ",") {
			if !reCSVHeaderCell.MatchString(strings.TrimSpace(c)) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

func csvHeader(s string) []string {
	cells := strings.Split(strings.TrimSpace(s), ",")
	for i, c := range cells {
		cells[i] = reUnitSuffix.ReplaceAllString(strings.TrimSpace(c), "")
	}
	return cells
}

// splitCSV splits a value row. nvidia-smi separates cells with ", " and does
// not quote; a value could in principle contain a bare comma, so ", " is
// tried first and a plain "," split is the fallback when ", " does not give
// the header's cell count (captures that lost the spaces).
func splitCSV(s string, want int) []string {
	s = strings.TrimSpace(s)
	cells := strings.Split(s, ", ")
	if len(cells) != want {
		if alt := strings.Split(s, ","); len(alt) == want {
			cells = alt
		}
	}
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
}

// isTrailingNoise reports whether the remaining lines are all comma-free or
// blank, i.e. a prompt or banner after the table rather than a broken row.
func isTrailingNoise(rest []line) bool {
	for _, l := range rest {
		if strings.Contains(l.text, ",") {
			return false
		}
	}
	return true
}
