package phases

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// The load test's figures on one node, read from what its servers
// measured at the judged level, each held to its target: the rule both
// the verdicts and the phase's retests apply.

// judgedLevel is the level the targets hold at: acceptance.workload.at,
// else the sweep's highest (the largest of one kind; with both kinds in
// the sweep, the last one listed).
func judgedLevel(inv *inventory.Inventory) inventory.Level {
	if at, err := inventory.ParseLevel(inv.Acceptance.Workload.At); err == nil {
		return at
	}
	var levels []inventory.Level
	conc, rate := false, false
	for _, s := range inv.Phases.Workload.Inference.Levels {
		if l, err := inventory.ParseLevel(s); err == nil {
			levels = append(levels, l)
			conc, rate = conc || l.Concurrency > 0, rate || l.Rate > 0
		}
	}
	if len(levels) == 0 {
		return inventory.Level{}
	}
	best := levels[len(levels)-1]
	if conc != rate {
		for _, l := range levels {
			if l.Concurrency > best.Concurrency || l.Rate > best.Rate {
				best = l
			}
		}
	}
	return best
}

// levelOf is server sv's measurement at level l; nil when it has none.
func levelOf(sv workload.Server, l inventory.Level) *workload.Level {
	for i := range sv.Levels {
		x := &sv.Levels[i]
		if p, err := inventory.ParseLevel(x.Name); err == nil && p == l {
			return x
		}
		if x.Concurrency > 0 && x.Concurrency == l.Concurrency || x.Rate > 0 && x.Rate == l.Rate {
			return x
		}
	}
	return nil
}

// infFigures is one node's load at the judged level: latencies at the
// target's percentile (the worst of its servers', each with the server
// it is from), throughput summed over its servers, requests and
// failures counted over them.
type infFigures struct {
	level   string
	servers int // servers that measured the level
	// why the node has no figures ("" when it has).
	missing string
	// behind: why the level's figures do not stand for the load asked
	// for (the generator fell behind its schedule, or the level was cut
	// short); "" when they do. See behindSchedule.
	behind  string
	unsent  int                // open-loop arrivals the generator never sent
	lat     map[string]latency // "TTFT", "TPOT", "ITL", "E2EL"
	outTok  float64
	reqs    float64
	sent    int
	failed  int
	errors  map[string]int
	goodput *float64
}

type latency struct {
	ms     float64
	ok     bool
	server int
}

// nodeFigures reads servers at the judged level of inv.
func nodeFigures(inv *inventory.Inventory, servers []workload.Server) infFigures {
	l := judgedLevel(inv)
	p := inv.Acceptance.Workload.Percentile
	if p == 0 {
		p = inventory.DefaultPercentile
	}
	f := infFigures{level: l.String(), lat: map[string]latency{}, errors: map[string]int{}}
	var good, weight float64
	var why []string
	for _, sv := range servers {
		x := levelOf(sv, l)
		if x == nil {
			why = append(why, firstNonEmpty(firstLine(sv.Error), fmt.Sprintf("server %d: no %s measured", sv.Index, f.level)))
			continue
		}
		f.servers++
		if why := behindSchedule(x); why != "" {
			if len(servers) > 1 {
				why = fmt.Sprintf("server %d: %s", sv.Index, why)
			}
			f.behind = join(f.behind, why)
		}
		for name, d := range map[string]workload.Dist{"TTFT": x.TTFT, "TPOT": x.TPOT, "ITL": x.ITL, "E2EL": x.E2EL} {
			if v, ok := d.Percentile(p); ok && (!f.lat[name].ok || v > f.lat[name].ms) {
				f.lat[name] = latency{ms: v, ok: true, server: sv.Index}
			}
		}
		f.outTok += x.OutputTokensPerSec
		f.reqs += x.RequestsPerSec
		f.sent += x.Requests
		f.failed += x.Failed + x.TimedOut
		f.unsent += x.Unsent
		for k, c := range x.Errors {
			f.errors[k] += c
		}
		if x.Goodput != nil && x.Requests > 0 {
			good += *x.Goodput * float64(x.Requests)
			weight += float64(x.Requests)
		}
	}
	if weight > 0 {
		g := good / weight
		f.goodput = &g
	}
	if f.servers == 0 {
		f.missing = firstNonEmpty(strings.Join(why, "; "), "no server measured")
	}
	return f
}

// Send lag bounds: an open-loop level whose requests were sent later
// than sendLagBound at p99 did not offer the load asked for.
const (
	sendLagGapShare = 0.10
	sendLagFloorMs  = 10.0
	sendLagCapMs    = 100.0
)

// sendLagBound is the p99 send lag (ms) past which a level at rate per
// second counts as behind its schedule: a tenth of the mean gap between
// its Poisson arrivals (a lag under that barely moves the arrivals of a
// process whose gaps spread over the whole exponential, so the server
// still met the bursts asked for), but at least 10 ms (at high rates a
// tenth of the gap is under a millisecond, the jitter of any busy host's
// timers, and the generator's latencies run from the actual send, so a
// few milliseconds late distort none of them) and at most 100 ms (a
// generator a tenth of a second late is stalled, whatever the rate).
func sendLagBound(rate float64) float64 {
	b := sendLagCapMs
	if rate > 0 {
		b = sendLagGapShare * 1000 / rate
	}
	return min(max(b, sendLagFloorMs), sendLagCapMs)
}

// behindSchedule says why level x's figures do not stand for the load
// asked for ("" when they do): it was cut short, or its generator could
// not keep the open loop's schedule (arrivals it never sent, or sends
// later than sendLagBound). Such a level's figures are NOT MEASURED,
// never PASS: a generator that fell behind offered the server less load
// than the level names.
func behindSchedule(x *workload.Level) string {
	var why []string
	if x.Partial {
		why = append(why, fmt.Sprintf("the level was cut short (the load generator was stopped) after %s of its measured time",
			record.Figure(x.Seconds, record.UnitSeconds)))
	}
	var late []string
	if x.Unsent > 0 {
		late = append(late, fmt.Sprintf("%d arrivals of the measured time never sent", x.Unsent))
	}
	if x.SendLag != nil && *x.SendLag > sendLagBound(x.Rate) {
		late = append(late, fmt.Sprintf("requests sent up to %s late at p99, over the %s bound",
			record.Figure(*x.SendLag, record.UnitMilliseconds), record.Figure(sendLagBound(x.Rate), record.UnitMilliseconds)))
	}
	if len(late) > 0 {
		why = append(why, "the load generator fell behind its schedule at "+x.Name+": "+strings.Join(late, ", "))
	}
	return strings.Join(why, "; ")
}

// fig is one requirement's figure on a node and its target.
type fig struct {
	value    *float64
	unit     string
	measured string
	detail   string
	quoted   string // "" when no target is set
	failed   string // why it misses the target; "" when it meets it
	missing  string // why there is no figure
	// incomplete: the figure's target is set and nothing could measure it
	// (a missing tool, a target that needs another): INCOMPLETE.
	incomplete bool
}

func num(x float64) *float64 { return &x }

// ms is a duration target in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyFig holds latency figures to their targets (one or two, as
// WORK-003 holds TPOT and ITL): the value is the one furthest over its
// target, else the first set, else the first measured.
func latencyFig(f infFigures, p int, names []string, targets []time.Duration) fig {
	g := fig{unit: record.UnitMilliseconds}
	if f.missing != "" {
		g.missing = f.missing
	}
	var quoted, measured []string
	worst := -1.0
	for i, name := range names {
		l := f.lat[name]
		t := targets[i]
		if t > 0 {
			q := "≤ " + record.Figure(ms(t), record.UnitMilliseconds)
			if len(names) > 1 {
				q = name + " " + q
			}
			quoted = append(quoted, q)
		}
		if !l.ok {
			continue
		}
		m := fmt.Sprintf("p%d %s %s", p, name, record.Figure(l.ms, record.UnitMilliseconds))
		if f.servers > 1 {
			m += fmt.Sprintf(" (server %d)", l.server)
		}
		measured = append(measured, m)
		over := 0.0
		if t > 0 {
			over = l.ms / ms(t)
			if l.ms > ms(t) {
				// Measured and Quoted already give both figures: say by
				// how much, and which figure when two are held.
				by := fmt.Sprintf("%.1f× the target", over)
				if len(names) > 1 {
					by = fmt.Sprintf("%s %.1f× its target", name, over)
				}
				g.failed = join(g.failed, by)
			}
		}
		if g.value == nil || over > worst {
			g.value, worst = num(l.ms), over
		}
	}
	if len(quoted) > 0 {
		g.quoted = strings.Join(quoted, ", ") + fmt.Sprintf(" at p%d, %s", p, f.level)
	}
	g.measured = strings.Join(measured, ", ")
	if g.value == nil && g.missing == "" {
		g.missing = "no request completed at " + f.level
	}
	return g
}

// workFigure is requirement id's figure of f against inv's targets. On
// a level behind its schedule (f.behind) a figure is not measured (SKIP,
// INCOMPLETE when a target is set), never PASS; only WORK-006 may still
// fail, as its failures, the arrivals never sent among them, were the
// server's whatever the schedule.
func workFigure(inv *inventory.Inventory, id string, f infFigures) fig {
	g := measuredFigure(inv, id, f)
	switch {
	case f.behind == "" || f.missing != "":
		return g
	case id == "WORK-006" && g.failed != "":
		g.detail = join(g.detail, f.behind)
		return g
	}
	return fig{unit: g.unit, quoted: g.quoted, missing: f.behind, incomplete: true}
}

// measuredFigure is requirement id's figure of f, its schedule aside.
func measuredFigure(inv *inventory.Inventory, id string, f infFigures) fig {
	t := inv.Acceptance.Workload
	p := t.Percentile
	if p == 0 {
		p = inventory.DefaultPercentile
	}
	switch id {
	case "WORK-002":
		return latencyFig(f, p, []string{"TTFT"}, []time.Duration{t.TTFT})
	case "WORK-003":
		return latencyFig(f, p, []string{"TPOT", "ITL"}, []time.Duration{t.TPOT, t.ITL})
	case "WORK-004":
		return latencyFig(f, p, []string{"E2EL"}, []time.Duration{t.E2EL})
	}
	g := fig{missing: f.missing}
	switch id {
	case "WORK-005":
		g.unit = record.UnitTokensPerSec
		var quoted []string
		if t.OutputTokensPerSec > 0 {
			quoted = append(quoted, "≥ "+record.Figure(t.OutputTokensPerSec, "tokens/s"))
		}
		if t.RequestsPerSec > 0 {
			quoted = append(quoted, "≥ "+record.Figure(t.RequestsPerSec, "requests/s"))
		}
		if len(quoted) > 0 {
			g.quoted = strings.Join(quoted, " and ") + " per node at " + f.level
		}
		if f.missing != "" {
			return g
		}
		g.value = num(f.outTok)
		g.measured = fmt.Sprintf("%s, %s", record.Figure(f.outTok, "output tokens/s"), record.Figure(f.reqs, "requests/s"))
		if t.OutputTokensPerSec > 0 && f.outTok < t.OutputTokensPerSec {
			g.failed = join(g.failed, fmt.Sprintf("%s < %s", record.Figure(f.outTok, "tokens/s"), record.Figure(t.OutputTokensPerSec, "")))
		}
		if t.RequestsPerSec > 0 && f.reqs < t.RequestsPerSec {
			g.failed = join(g.failed, fmt.Sprintf("%s < %s", record.Figure(f.reqs, "requests/s"), record.Figure(t.RequestsPerSec, "")))
		}
	case "WORK-006":
		g.unit = record.UnitPercentFailed
		if t.ErrorRate != nil {
			g.quoted = fmt.Sprintf("≤ %s%% of requests at %s", record.Figure(*t.ErrorRate*100, ""), f.level)
		}
		if f.missing != "" {
			return g
		}
		// An arrival the generator could not send (too many in flight: a
		// server so stalled that requests cannot be sent is failing them)
		// counts as a request that failed.
		failed, sent := f.failed+f.unsent, f.sent+f.unsent
		if sent == 0 {
			g.missing = "no request was sent at " + f.level
			return g
		}
		rate := float64(failed) / float64(sent)
		g.value = num(rate * 100)
		g.measured = fmt.Sprintf("%s%% failed (%d of %d)", record.Figure(rate*100, ""), failed, sent)
		if f.unsent > 0 {
			g.measured = fmt.Sprintf("%s%% failed (%d of %d, %d of them never sent)", record.Figure(rate*100, ""), failed, sent, f.unsent)
		}
		g.detail = errorKinds(f.errors)
		if t.ErrorRate != nil && rate > *t.ErrorRate {
			g.failed = fmt.Sprintf("%s%% failed > %s%%", record.Figure(rate*100, ""), record.Figure(*t.ErrorRate*100, ""))
		}
	case "WORK-007":
		g.unit = record.UnitPercentGood
		if t.Goodput > 0 {
			g.quoted = fmt.Sprintf("≥ %s%% of requests within every latency target at %s", record.Figure(t.Goodput*100, ""), f.level)
		}
		if f.missing != "" {
			return g
		}
		if f.goodput == nil {
			g.missing = "goodput counts requests against the latency targets, and acceptance.workload sets none (ttft, tpot, itl, e2el)"
			g.incomplete = true
			return g
		}
		g.value = num(*f.goodput * 100)
		g.measured = "goodput " + record.Figure(*f.goodput*100, "") + "%"
		if t.Goodput > 0 && *f.goodput < t.Goodput {
			g.failed = fmt.Sprintf("goodput %s%% < %s%%", record.Figure(*f.goodput*100, ""), record.Figure(t.Goodput*100, ""))
		}
	}
	return g
}

// errorKinds lists the failures by kind, the most frequent first.
func errorKinds(errs map[string]int) string {
	if len(errs) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(errs))
	for k := range errs {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(a, b int) bool {
		if errs[kinds[a]] != errs[kinds[b]] {
			return errs[kinds[a]] > errs[kinds[b]]
		}
		return kinds[a] < kinds[b]
	})
	var parts []string
	for i, k := range kinds {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("%d more kinds", len(kinds)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", k, errs[k]))
	}
	return strings.Join(parts, ", ")
}

// retestedIDs are the figures a failure of which earns a retest (the
// start and the memory are not measured again).
var retestedIDs = []string{"WORK-002", "WORK-003", "WORK-004", "WORK-005", "WORK-006", "WORK-007"}

// infFails says why one run on a node misses a target ("" when it meets
// every one): the rule the verdicts apply, so a retest runs exactly when
// a verdict would fail.
func infFails(inv *inventory.Inventory, servers []workload.Server) string {
	f := nodeFigures(inv, servers)
	var why []string
	for _, id := range retestedIDs {
		g := workFigure(inv, id, f)
		switch {
		case g.quoted == "":
		case g.failed != "":
			// The progress line names the figure: "WORK-002 p95 TTFT
			// 338 ms: 3.4× the target".
			label := id
			if g.measured != "" {
				label += " " + g.measured
			}
			why = append(why, label+": "+g.failed)
		case g.missing != "" && !g.incomplete:
			return g.missing
		}
	}
	return strings.Join(why, "; ")
}
