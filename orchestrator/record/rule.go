package record

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bound is the figure a verdict judged against a tolerance of the quote
// had to reach: at least tolerance × quoted for a throughput, at most
// quoted ÷ tolerance for a duration. ok is false when the verdict holds
// no such rule or not the numbers to work it out (no Value, a ratio of 0
// or infinity).
func (v Verdict) Bound() (bound float64, atMost bool, ok bool) {
	if v.Tolerance == nil || v.Ratio == nil || v.Value == nil {
		return 0, false, false
	}
	r, tol, x := *v.Ratio, *v.Tolerance, *v.Value
	if r <= 0 || tol <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, false, false
	}
	if LowerIsBetter(v.Unit) {
		return r * x / tol, true, true // the ratio is quoted ÷ measured
	}
	return tol * x / r, false, true // the ratio is measured ÷ quoted
}

// Rule says what the verdict held its measurement to: the bound a
// tolerance of the quote makes ("≥ 333 GB/s (0.9 × 370 GB/s quoted)"), the
// quoted value an exact check compares with ("= H100 80GB HBM3"), or ""
// when the quote stated nothing it was held to (Detail says what it
// checked).
func (v Verdict) Rule() string {
	if b, atMost, ok := v.Bound(); ok {
		if atMost {
			// A duration's quote is often said with how it was worked out;
			// the figure alone reads.
			return fmt.Sprintf("≤ %s (%s quoted ÷ %s)", Figure(b, v.Unit), Figure(*v.Ratio**v.Value, v.Unit), trim(*v.Tolerance))
		}
		return fmt.Sprintf("≥ %s (%s × %s quoted)", Figure(b, v.Unit), trim(*v.Tolerance), v.Quoted)
	}
	if v.Tolerance != nil && v.Quoted != "" {
		return fmt.Sprintf("≥ %s × %s", trim(*v.Tolerance), v.Quoted)
	}
	if v.Quoted != "" {
		// A quote that is already a bound ("≤ 1m0s") is the rule as it is.
		if strings.HasPrefix(v.Quoted, "≤") || strings.HasPrefix(v.Quoted, "≥") || strings.HasPrefix(v.Quoted, "<") || strings.HasPrefix(v.Quoted, ">") {
			return v.Quoted
		}
		return "= " + v.Quoted
	}
	return ""
}

// ShortRule is Rule without the quote it was worked out from, for a
// narrow column: "≥ 333 GB/s", "= H100 80GB HBM3".
func (v Verdict) ShortRule() string {
	if b, atMost, ok := v.Bound(); ok {
		op := "≥"
		if atMost {
			op = "≤"
		}
		return op + " " + Figure(b, v.Unit)
	}
	return v.Rule()
}

// Figure is x in unit with three significant figures, as reports show a
// Value: "184 GB/s", "0.26 s", "0.5" (a score has no unit).
func Figure(x float64, unit string) string {
	s := strconv.FormatFloat(x, 'g', 3, 64)
	if f, err := strconv.ParseFloat(s, 64); err == nil && math.Abs(f) >= 1000 {
		s = strconv.FormatFloat(math.Round(x), 'f', -1, 64) // no 1.23e+03
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

func trim(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
