package telemetry

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Width is what one verdict's detail may take: the terminal's 100 columns.
const Width = 100

// moment is when t fell, as the verdict says it: the offset from the
// window's start and the phase, "+12m05s (burnin)".
func (j *judge) moment(t time.Time) string {
	return "+" + offset(t.Sub(j.t0)) + " (" + j.phaseAt(t) + ")"
}

func (j *judge) phaseAt(t time.Time) string {
	for _, sp := range j.spans {
		if sp.contains(t) {
			return clean(sp.Phase, 24)
		}
	}
	return "between phases"
}

// offset: 5s, 12m05s, 3h02m05s (a burn-in of days counts hours on).
func offset(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	h, m, s := int64(d/time.Hour), int64(d/time.Minute)%60, int64(d/time.Second)%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// span says how long the samples covered, for a verdict that found nothing.
func span(d time.Duration) string {
	if d < time.Minute {
		return offset(d)
	}
	return strings.TrimSuffix(offset(d.Round(time.Minute)), "00s")
}

// thousands writes x rounded, with a comma every three digits: 1,530.
func thousands(x float64) string {
	n := int64(math.Round(x))
	neg := n < 0
	if neg {
		n = -n
	}
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// clean makes node text safe to print: control and invisible characters
// become '?', and it is cut to n bytes.
func clean(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= n {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// list joins items after head within Width columns; what does not fit is
// counted: "...; (+3 more)".
func list(head string, items []string) string {
	out := head
	for i, it := range items {
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		more := fmt.Sprintf("; (+%d more)", len(items)-i-1)
		if i == len(items)-1 {
			more = ""
		}
		if utf8.RuneCountInString(out+sep+it+more) > Width {
			return fit(out + fmt.Sprintf("%s(+%d more)", sep, len(items)-i))
		}
		out += sep + it
	}
	return fit(out)
}

// fit cuts s to Width columns.
func fit(s string) string {
	if utf8.RuneCountInString(s) <= Width {
		return s
	}
	r := []rune(s)
	return string(r[:Width-1]) + "…"
}

func pct(n, of int) string {
	if of == 0 {
		return "0%"
	}
	return strconv.Itoa(int(math.Round(100*float64(n)/float64(of)))) + "%"
}

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(float64(n)) + " " + one + "s"
}
