package reports

import (
	"fmt"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
)

// cardPartly is a card row whose judged requirements passed while a
// requirement of it went unjudged: the row cannot say its pass condition
// holds, and neither did anything fail.
const cardPartly = "PARTLY JUDGED"

// cardNamed are the requirements each row's pass condition names (DESIGN
// .md's card): a row is not passed while one of them went unjudged,
// skipped or absent from the run. CKPT-004 is "without long GPU idle",
// CKPT-001 "restore verified".
var cardNamed = map[string][]string{
	record.CardContainer:  {"IMG-001", "IMG-002"},
	record.CardGPU:        {"GPU-001", "GPU-003", "GPU-005", "GPU-006"},
	record.CardHealth:     {"DIAG-001"},
	record.CardNCCL:       {"NCCL-002"},
	record.CardStaging:    {"STAGE-001", "STAGE-003"},
	record.CardCheckpoint: {"CKPT-001", "CKPT-004"},
	record.CardFailure:    {"RECOV-001", "RECOV-002", "RECOV-003"},
	record.CardSecurity:   {"SEC-001", "SEC-002", "SEC-004"},
}

// verdictCounts are the verdicts of some requirements by what they said:
// passed (a WARN is a pass with a caveat), failed and not judged add up
// to every verdict counted.
type verdictCounts struct{ passed, failed, notJudged int }

func countVerdicts(reqs []requirement) verdictCounts {
	var c verdictCounts
	for _, r := range reqs {
		c.passed += r.Passed
		c.notJudged += r.NotJudged
		c.failed += r.Total - r.Passed - r.NotJudged
	}
	return c
}

// String is "3 passed, 10 not judged": only what was judged is counted
// as passed or failed.
func (c verdictCounts) String() string {
	var parts []string
	if c.passed > 0 || c.failed == 0 {
		parts = append(parts, fmt.Sprintf("%d passed", c.passed))
	}
	if c.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", c.failed))
	}
	if c.notJudged > 0 {
		parts = append(parts, fmt.Sprintf("%d not judged", c.notJudged))
	}
	return strings.Join(parts, ", ")
}

// cardJudge is a row's status and figure from its requirements: the worst
// of those judged (FAIL, INCOMPLETE, WARN); PASS only when every
// requirement of the row, and every one its pass condition names, was
// judged and passed; PARTLY JUDGED when what was judged passed and
// something was not; SKIP when nothing was.
func cardJudge(name string, reqs []requirement) (status, figure string) {
	worst := reqs[0]
	for _, r := range reqs[1:] {
		if cardRank(r.Status) < cardRank(worst.Status) {
			worst = r
		}
	}
	unjudged := unjudgedOf(name, reqs)
	switch worst.Status {
	case string(record.Pass):
		if unjudged == "" {
			return worst.Status, cardFigure(worst, figureOrder(name, reqs))
		}
		var passed []string
		for _, r := range reqs {
			if !r.unjudged() {
				passed = append(passed, r.ID)
			}
		}
		return cardPartly, fmt.Sprintf("%s: %s; not judged: %s", hostlist.Compress(passed), countVerdicts(reqs), unjudged)
	case string(record.Skip):
		return worst.Status, cardFigure(worst, reqs)
	}
	figure = cardFigure(worst, reqs)
	if unjudged != "" {
		figure += "; not judged: " + unjudged
	}
	return worst.Status, figure
}

// unjudgedOf names the requirements of a row that nothing judged, and
// why the first was not ("CKPT-[002-004], not stated in the quote"):
// those of its verdicts that all were skipped or could not be measured,
// and those its pass condition names that the run has no verdict of. ""
// when every one was judged.
func unjudgedOf(name string, reqs []requirement) string {
	var ids []string
	why := ""
	have := map[string]bool{}
	for _, r := range reqs {
		have[r.ID] = true
		if r.unjudged() {
			ids = append(ids, r.ID)
			if why == "" {
				why = briefly(r.Worst)
			}
		}
	}
	for _, id := range namedOf(name, reqs) {
		if !have[id] {
			ids = append(ids, id)
			if why == "" {
				why = "the run has no verdict of it"
			}
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, %s", hostlist.Compress(ids), firstOf(why, "not judged"))
}

// Load-test requirements its pass condition names, by the workload's
// kind: the workload got ready, then an inference server's tail latency
// and errors, or a training job's throughput and straggler.
var (
	loadInference = []string{"WORK-001", "WORK-002", "WORK-006"}
	loadTraining  = []string{"WORK-001", "WORK-008", "WORK-009"}
)

// namedOf is what a row's pass condition names; for the load test, what
// the kind of workload the run has measured names.
func namedOf(name string, reqs []requirement) []string {
	if name != record.CardLoad {
		return cardNamed[name]
	}
	for _, r := range reqs {
		switch r.ID {
		case "WORK-002", "WORK-003", "WORK-004", "WORK-005", "WORK-006", "WORK-007":
			return loadInference
		case "WORK-008", "WORK-009", "WORK-011":
			return loadTraining
		}
	}
	return []string{"WORK-001"}
}

// loadFirst is the order in which the load test row looks for the figure
// that decided it, when every requirement passed: the worst node's tail
// latency against its target, else the training throughput, the
// straggler, the output throughput.
var loadFirst = []string{"WORK-002", "WORK-008", "WORK-009", "WORK-005", "WORK-004", "WORK-003", "WORK-006", "WORK-007", "WORK-010", "WORK-001"}

// figureOrder is reqs in the order a row's passing figure is looked for
// in.
func figureOrder(name string, reqs []requirement) []requirement {
	if name != record.CardLoad {
		return reqs
	}
	at := func(id string) int {
		if i := slices.Index(loadFirst, id); i >= 0 {
			return i
		}
		return len(loadFirst)
	}
	out := slices.Clone(reqs)
	slices.SortStableFunc(out, func(a, b requirement) int { return at(a.ID) - at(b.ID) })
	return out
}
