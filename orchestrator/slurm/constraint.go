package slurm

import (
	"regexp"
	"strings"
)

// Wanted is what a --constraint expression asks of each node, where that
// can be said of one node alone: every one of Features (h100&ib, or one
// feature), or at least one of them (h100|h200).
type Wanted struct {
	Features []string
	Any      bool
}

// feature is one node feature as slurm.conf may name it.
var feature = regexp.MustCompile(`^[A-Za-z0-9_.:+-]+$`)

// ParseConstraint reads a --constraint expression; ok is false for one
// whose meaning spans the job's nodes or needs Slurm's own reading:
// matching OR and counts ([rack1|rack2], ib*2), parentheses, "&" and "|"
// together (Slurm gives them no precedence a reader can rely on), or a
// word no feature is made of.
func ParseConstraint(expr string) (w Wanted, ok bool) {
	expr = strings.TrimSpace(expr)
	if expr == "" || strings.ContainsAny(expr, "[]()*!") {
		return Wanted{}, false
	}
	and, or := strings.Contains(expr, "&"), strings.Contains(expr, "|")
	if and && or {
		return Wanted{}, false
	}
	sep := "&"
	if or {
		sep = "|"
	}
	for _, f := range strings.Split(expr, sep) {
		if !feature.MatchString(f) {
			return Wanted{}, false
		}
		w.Features = append(w.Features, f)
	}
	w.Any = or
	return w, true
}

// Lacks is what of w a node whose active features are active (Slurm's
// comma-separated ActiveFeatures) does not have: the features missing,
// or, where any one would do, all of them when it has none.
func (w Wanted) Lacks(active string) []string {
	has := map[string]bool{}
	for _, f := range strings.Split(active, ",") {
		if f = strings.TrimSpace(f); f != "" {
			has[f] = true
		}
	}
	var missing []string
	for _, f := range w.Features {
		if !has[f] {
			missing = append(missing, f)
		}
	}
	if w.Any && len(missing) < len(w.Features) {
		return nil
	}
	return missing
}
