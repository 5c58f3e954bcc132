package phases

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// stageRun is one node's recorded staging.
type stageRun struct {
	node *orchestrator.Node
	pr   record.PhaseResult
	res  *Staged // nil: no data (not run, or failed before staging began)
	why  string  // when res is nil: why
	// absent: the node took no part (quarantined before, the phase was
	// skipped or interrupted): its verdicts are SKIP, it counts nowhere.
	absent bool
	// unmeasured: absent because the node lacks a tool (why says which).
	unmeasured bool
}

// judgeStaging: per node, the checksums (STAGE-001) and the throughput
// against the quote (STAGE-002); for the cluster, the aggregate throughput
// (STAGE-002) and the slowest node against the setup window (STAGE-003).
func judgeStaging(w *orchestrator.Window) []record.Verdict {
	st := w.Inv.Phases.Staging
	if !st.Enabled {
		return nil
	}
	var runs []stageRun
	for _, n := range w.Nodes {
		r := stageRun{node: n}
		var res Staged
		pr, ok := w.Result("staging", n.Index, &res)
		r.pr = pr
		switch {
		case !ok:
			r.why, r.absent = "not run", true
			if q, why := n.Quarantined(); q {
				r.why = why
			}
		case pr.Outcome == record.Skipped:
			r.why, r.absent = firstNonEmpty(pr.Error, "skipped"), true
		case pr.Outcome == record.NotMeasured:
			// The node lacks a source's tool: it took no part in the
			// figures, and its verdicts say what was not measured.
			r.why, r.absent, r.unmeasured = pr.Error, true, true
		case pr.Outcome == record.Interrupted:
			r.why, r.absent = "interrupted: "+firstNonEmpty(pr.Error, "the window was stopped"), true
		case len(pr.Data) == 0:
			r.why = firstNonEmpty(pr.Error, string(pr.Outcome))
		default:
			r.res = &res
		}
		runs = append(runs, r)
	}
	var out []record.Verdict
	agree := stagedAgreement(runs)
	names := make([]string, len(w.Nodes))
	for _, n := range w.Nodes {
		names[n.Index] = n.Name
	}
	for _, r := range runs {
		out = append(out, checksumVerdict(r, agree, names), throughputVerdict(w, r))
	}
	// The aggregate and the setup window are of every node staging at
	// once: the first runs. A node's retest runs alone, and its own
	// throughput is all it speaks for.
	first := slices.Clone(runs)
	for i, r := range first {
		if r.res != nil && len(r.res.Earlier) > 0 {
			first[i].res = &r.res.Earlier[0]
		}
	}
	out = append(out, aggregateVerdict(w, first), windowVerdict(st.Window, first))
	return out
}

// stagedAgreement: per source, the sha256 each node staged (by node
// index) where the staging of that source succeeded.
func stagedAgreement(runs []stageRun) map[string]map[int]string {
	out := map[string]map[int]string{}
	for _, r := range runs {
		if r.res == nil {
			continue
		}
		for _, s := range r.res.Sources {
			if s.Error != "" || s.SHA256 == "" {
				continue
			}
			if out[s.Name] == nil {
				out[s.Name] = map[int]string{}
			}
			out[s.Name][r.node.Index] = s.SHA256
		}
	}
	return out
}

// majority is the sha256 more than half of the nodes that staged a
// source have, and how many have it; "" when no value has a majority.
func majority(sums map[int]string) (string, int) {
	count := map[string]int{}
	for _, s := range sums {
		count[s]++
	}
	for s, c := range count {
		if 2*c > len(sums) {
			return s, c
		}
	}
	return "", 0
}

func checksumVerdict(r stageRun, agree map[string]map[int]string, names []string) record.Verdict {
	v := record.NewVerdict("STAGE-001", r.node.Name)
	if r.res == nil {
		stageMissing(r, &v)
		return v
	}
	var problems, checked []string
	unchecked := 0
	for _, s := range r.res.Sources {
		switch {
		case s.Error != "":
			problems = append(problems, fmt.Sprintf("%s (%s) not staged: %s", s.Name, s.From, s.Error))
		case s.Expected != "" && s.SHA256 != s.Expected:
			problems = append(problems, fmt.Sprintf("%s: sha256 %s, expected %s (from the %s)", s.Name, s.SHA256, s.Expected, s.ExpectedFrom))
		case s.Expected != "":
			checked = append(checked, fmt.Sprintf("%s %s (= %s)", s.Name, shortSum(s.SHA256), s.ExpectedFrom))
		default:
			sums := agree[s.Name]
			want, same := majority(sums)
			switch {
			case len(sums) < 2:
				unchecked++
				checked = append(checked, fmt.Sprintf("%s %s (no sha256 given, no other node to compare with)", s.Name, shortSum(s.SHA256)))
			case want == "":
				problems = append(problems, fmt.Sprintf("%s: sha256 %s; the nodes disagree (%s) and the inventory gives no sha256 to settle it",
					s.Name, s.SHA256, sumsByNode(sums, r.node.Index, names)))
			case s.SHA256 != want:
				problems = append(problems, fmt.Sprintf("%s: sha256 %s, expected %s (what %d of %d nodes staged)", s.Name, s.SHA256, want, same, len(sums)))
			default:
				checked = append(checked, fmt.Sprintf("%s %s (same on %d of %d nodes)", s.Name, shortSum(s.SHA256), same, len(sums)))
			}
		}
	}
	total := len(r.res.Sources)
	switch {
	case len(problems) > 0:
		v.Status = record.Fail
		v.Measured = fmt.Sprintf("%d of %d sources bad", len(problems), total)
		v.Detail = strings.Join(problems, "; ")
	case unchecked > 0:
		v.Status = record.Warn
		v.Measured = fmt.Sprintf("%d of %d sources not verifiable", unchecked, total)
		v.Detail = strings.Join(checked, "; ")
	default:
		v.Status = record.Pass
		v.Measured = fmt.Sprintf("%d of %d sources verified", total, total)
		v.Detail = strings.Join(checked, "; ")
	}
	if total == 0 {
		v.Status, v.Detail = record.Fail, firstNonEmpty(r.pr.Error, "nothing staged")
	}
	return v
}

// sumsByNode lists the sha256s (short) the nodes staged, this one first.
func sumsByNode(sums map[int]string, self int, names []string) string {
	idx := make([]int, 0, len(sums))
	for i := range sums {
		idx = append(idx, i)
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case a == self:
			return -1
		case b == self:
			return 1
		}
		return a - b
	})
	var parts []string
	for _, i := range idx {
		parts = append(parts, fmt.Sprintf("%s %s", names[i], shortSum(sums[i])))
	}
	return strings.Join(parts, ", ")
}

func throughputVerdict(w *orchestrator.Window, r stageRun) record.Verdict {
	v := record.NewVerdict("STAGE-002", r.node.Name)
	if r.res == nil {
		stageMissing(r, &v)
		return v
	}
	res := r.res
	v.Measured = fmt.Sprintf("%s (%s in %.2f s)", gbsText(res.GBs), sizeText(res.Bytes), res.Seconds)
	if res.Complete {
		v.Measure(res.GBs, record.UnitGBs)
	}
	var detail []string
	for _, s := range res.Sources {
		if s.Error == "" {
			detail = append(detail, fmt.Sprintf("%s %s", s.Name, gbsText(s.GBs)))
		}
	}
	detail = append(detail, diskText(res))
	q := w.Inv.Quote.StagingGBs
	tol := w.Inv.Acceptance.ToleranceFor("STAGE-002")
	switch {
	case !res.Complete:
		v.Status = record.Fail
		v.Detail = "staging did not complete: " + firstNonEmpty(r.pr.Error, "a source failed") + "; " + strings.Join(detail, "; ")
		return v
	case q <= 0:
		v.Status = record.Skip
		v.Detail = "not stated in the quote (quote.staging_gbs); " + strings.Join(detail, "; ")
		return v
	}
	ratio := res.GBs / q
	v.Quoted, v.Ratio, v.Tolerance = fmt.Sprintf("%g GB/s", q), &ratio, &tol
	v.Retest = retestOf(append(slices.Clone(res.Earlier), *res), record.UnitGBs, func(s Staged) (*float64, string) {
		return &s.GBs, stagingFailed(&s, q, tol)
	})
	v.Status = record.Pass
	if ratio < tol || v.Retest.Failed() {
		v.Status = record.Fail
	}
	v.Detail = strings.Join(detail, "; ")
	return v
}

func diskText(res *Staged) string {
	d := res.Disk
	if d == nil {
		return "local disk baseline " + firstNonEmpty(res.DiskNote, "not measured")
	}
	mode := "O_DIRECT"
	if !d.Direct {
		mode = "buffered"
	}
	return fmt.Sprintf("local disk baseline (fio, %s): write %s, read %s", mode, gbsText(d.WriteGBs), gbsText(d.ReadGBs))
}

// aggregateVerdict: all the bytes the nodes staged over the wall time
// from the first node's start to the last one's end, against the quote
// times the number of nodes.
func aggregateVerdict(w *orchestrator.Window, runs []stageRun) record.Verdict {
	v := record.NewVerdict("STAGE-002", "")
	var bytes int64
	var first, last time.Time
	var done, incomplete []string
	for _, r := range runs {
		if r.absent {
			continue
		}
		if r.res == nil || !r.res.Complete {
			incomplete = append(incomplete, r.node.Name)
			continue
		}
		done = append(done, r.node.Name)
		bytes += r.res.Bytes
		if first.IsZero() || r.res.Started.Before(first) {
			first = r.res.Started
		}
		if r.res.Ended.After(last) {
			last = r.res.Ended
		}
	}
	if len(done) == 0 {
		v.Status, v.Detail = record.Fail, "no node completed staging"
		if len(incomplete) == 0 {
			v.Status, v.Detail = record.Skip, "no node staged"
		}
		return v
	}
	secs := last.Sub(first).Seconds()
	gbs := rate(bytes, secs)
	v.Measured = fmt.Sprintf("%s over %d node(s) (%s in %.2f s)", gbsText(gbs), len(done), sizeText(bytes), secs)
	v.Measure(gbs, record.UnitGBs)
	var detail []string
	if len(incomplete) > 0 {
		detail = append(detail, "did not complete (not counted): "+strings.Join(incomplete, ", "))
	}
	q := w.Inv.Quote.StagingGBs
	if q <= 0 {
		v.Status = record.Skip
		v.Detail = strings.Join(append([]string{"not stated in the quote (quote.staging_gbs)"}, detail...), "; ")
		return v
	}
	tol := w.Inv.Acceptance.ToleranceFor("STAGE-002")
	ratio := gbs / (q * float64(len(done)))
	v.Quoted, v.Ratio, v.Tolerance = fmt.Sprintf("%d × %g GB/s", len(done), q), &ratio, &tol
	v.Status = record.Pass
	if ratio < tol {
		v.Status = record.Fail
	}
	v.Detail = strings.Join(detail, "; ")
	return v
}

// windowVerdict: the setup is done when the slowest node is; a node that
// did not finish staging misses the window.
func windowVerdict(window time.Duration, runs []stageRun) record.Verdict {
	v := record.NewVerdict("STAGE-003", "")
	slowest, slowSecs := "", -1.0
	var failed, failedNames, absent, over []string
	for _, r := range runs {
		switch {
		case r.absent:
			absent = append(absent, fmt.Sprintf("%s (%s)", r.node.Name, r.why))
			continue
		case r.res == nil || !r.res.Complete:
			failed = append(failed, fmt.Sprintf("%s: %s", r.node.Name, firstLine(firstNonEmpty(r.pr.Error, r.why, "did not complete"))))
			failedNames = append(failedNames, r.node.Name)
			continue
		}
		if r.res.Seconds > slowSecs {
			slowest, slowSecs = r.node.Name, r.res.Seconds
		}
		if window > 0 && r.res.Seconds > window.Seconds() {
			over = append(over, fmt.Sprintf("%s %.1f s", r.node.Name, r.res.Seconds))
		}
	}
	if slowest != "" {
		v.Measured = fmt.Sprintf("slowest node %s: %.2f s", slowest, slowSecs)
		v.Measure(slowSecs, record.UnitSeconds)
	}
	var detail []string
	if len(failed) > 0 {
		detail = append(detail, "did not complete staging: "+strings.Join(failed, "; "))
	}
	if len(over) > 0 {
		detail = append(detail, "over the window: "+strings.Join(over, ", "))
	}
	if len(absent) > 0 {
		detail = append(detail, "not staged: "+strings.Join(absent, ", "))
	}
	switch {
	case window <= 0:
		// Nothing to judge: the figures, and who did not finish (named
		// only; STAGE-001 says why).
		v.Status = record.Skip
		detail = []string{"no planned setup window (phases.staging.window)"}
		if len(failedNames) > 0 {
			detail = append(detail, "did not complete staging: "+strings.Join(failedNames, ", "))
		}
	case len(failed) > 0 || len(over) > 0:
		v.Status = record.Fail
		v.Quoted = window.String() + " setup window"
	case slowest == "":
		v.Status = record.Skip
		v.Quoted = window.String() + " setup window"
	default:
		v.Status = record.Pass
		v.Quoted = window.String() + " setup window"
	}
	v.Detail = strings.Join(detail, "; ")
	return v
}

// stageMissing: the verdict for a node without staging data.
func stageMissing(r stageRun, v *record.Verdict) {
	v.Status, v.Detail = stageMissingStatus(r)
	if r.unmeasured {
		notMeasured(v, r.why)
	}
}

func stageMissingStatus(r stageRun) (record.Status, string) {
	if r.absent {
		return record.Skip, r.why
	}
	return record.Fail, "staging failed: " + r.why
}
