package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/orchestrator/telemetry"
)

func newStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status RUN_DIR",
		Short: "Where a window stands: its phase, time left, each node's last sample, findings so far",
		Long: `Read a window's run directory while it runs (from another terminal, or another machine
that sees the directory) or after: the phase under way, the time used and at most left, the
quarantined nodes, each node's burn-in time done and left (from the runs it journaled), each
node's last telemetry sample (nodes that read alike on one line, as a host range), and what
the telemetry shows so far (HEALTH-011..016 that did not pass).
It reads the journal and the telemetry files only; it never talks to the nodes.
Exit 0, or 2 when RUN_DIR holds no journal.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			st, err := orchestrator.ReadStatus(args[0], now)
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			printStatus(cmd.OutOrStdout(), args[0], st, now)
			return nil
		},
	}
}

// printStatus writes the status of the window in dir, as of now.
func printStatus(w io.Writer, dir string, st *orchestrator.Status, now time.Time) {
	run := st.Run
	sim := ""
	if run.Simulated {
		sim = " (SIMULATED)"
	}
	enabled := 0
	for _, p := range run.Plan {
		if p.Enabled {
			enabled++
		}
	}
	if st.Ended {
		fmt.Fprintf(w, "%s%s: ended (%s); %d of %d phases done\n", run.ID, sim, st.EndReason, len(st.Done), enabled)
	} else {
		fmt.Fprintf(w, "%s%s: %s for %s; %d of %d phases done\n", run.ID, sim, st.Current,
			roundDur(now.Sub(st.Since)), len(st.Done), enabled)
	}
	fmt.Fprintf(w, "started %s, %s ago", run.Started.UTC().Format("2006-01-02 15:04:05 UTC"), roundDur(now.Sub(run.Started)))
	if !st.Ended {
		fmt.Fprintf(w, "; at most %s left (the bounds of the phases to run)", roundDur(st.Left))
		if quiet := now.Sub(st.Last); quiet > 10*time.Minute {
			fmt.Fprintf(w, "\nnothing journaled for %s: is the coordinator still running?", roundDur(quiet))
		}
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(run.Nodes))
	for _, n := range run.Nodes {
		names = append(names, n.Name)
	}
	if len(names) == 0 && st.Slurm != nil {
		// The journal's header came before the grant: the nodes are the
		// allocation's.
		names = append(names, st.Slurm.Nodes...)
	}
	if sl := st.Slurm; sl != nil {
		switch {
		case sl.Cancelled:
			fmt.Fprintf(w, "slurm: job %s (%s), given back\n", sl.Job, sl.NodeList)
		case sl.NodeList != "":
			fmt.Fprintf(w, "slurm: job %s holds %s (%d node(s))\n", sl.Job, sl.NodeList, len(sl.Nodes))
		case sl.Job != "":
			fmt.Fprintf(w, "slurm: job %s asked for, not granted yet\n", sl.Job)
		}
	}
	fmt.Fprintf(w, "nodes: %d", len(names))
	if len(st.Quarantined) > 0 {
		byWhy := map[string][]string{}
		for n, why := range st.Quarantined {
			byWhy[why] = append(byWhy[why], n)
		}
		fmt.Fprintf(w, ", %d quarantined", len(st.Quarantined))
		whys := sortedKeys(byWhy)
		slices.SortStableFunc(whys, func(a, b string) int { return len(byWhy[b]) - len(byWhy[a]) })
		for i, why := range whys {
			if i == 8 {
				fmt.Fprintf(w, "\n  and %d more reason(s)", len(whys)-i)
				break
			}
			who := orchestrator.NodesWho(byWhy[why], 30)
			fmt.Fprintf(w, "\n  %s: %s", who, shownLine(why, max(20, 100-4-len(who))))
		}
	}
	fmt.Fprintln(w)
	printIdle(w, st, now)
	printBurnin(w, st, names)
	series := readSeries(dir, names)
	printLastSamples(w, names, series, now)
	printFindings(w, run, names, series)
}

// readSeries reads every node's telemetry file, a few at once; a node
// without one has none.
func readSeries(dir string, names []string) map[string]*telemetry.Series {
	out := make(map[string]*telemetry.Series, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s, err := telemetry.ReadFile(filepath.Join(dir, "raw", n, telemetry.FileName))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return
			}
			if s != nil {
				mu.Lock()
				out[n] = s
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// lastSample is one node's GPUs at its last sample, in bands, so that
// nodes that read alike share a line.
type lastSample struct {
	node                    string
	temp, power, clock, use [2]float64 // min, max over the node's GPUs
	age                     time.Duration
}

// band is what groups nodes: a node within a few degrees and watts of
// the fleet's median reads as the fleet; others by temperature (10 °C),
// power (50 W), busy or idle, and whether the sample is stale.
func (s lastSample) band(med lastSample) string {
	busy := "idle"
	switch {
	case s.use[0] >= 90:
		busy = "busy"
	case s.use[1] >= 10:
		busy = "part"
	}
	temp, power := "fleet", "fleet"
	if math.Abs(s.temp[1]-med.temp[1]) > 5 {
		temp = fmt.Sprint(math.Floor(s.temp[1] / 10))
	}
	if math.Abs(s.power[1]-med.power[1]) > max(25, med.power[1]/20) {
		power = fmt.Sprint(math.Floor(s.power[1] / 50))
	}
	return fmt.Sprintf("%s/%s/%s/%v", temp, power, busy, s.age > time.Minute)
}

// median is the fleet's typical node: the median of each node's hottest
// GPU and of its highest power.
func median(ss []lastSample) lastSample {
	var m lastSample
	if len(ss) == 0 {
		return m
	}
	ts := make([]float64, len(ss))
	ps := make([]float64, len(ss))
	for i, s := range ss {
		ts[i], ps[i] = s.temp[1], s.power[1]
	}
	slices.Sort(ts)
	slices.Sort(ps)
	m.temp[1], m.power[1] = ts[len(ts)/2], ps[len(ps)/2]
	return m
}

func printLastSamples(w io.Writer, names []string, series map[string]*telemetry.Series, now time.Time) {
	if len(series) == 0 {
		fmt.Fprintln(w, "last samples: none (telemetry off, not started yet, or no nvidia-smi on the nodes)")
		return
	}
	fmt.Fprintln(w, "last samples:")
	var all []lastSample
	var none []string
	for _, n := range names {
		s, ok := last(n, series[n], now)
		if !ok {
			none = append(none, n)
			continue
		}
		all = append(all, s)
	}
	med := median(all)
	groups := map[string][]lastSample{}
	for _, s := range all {
		groups[s.band(med)] = append(groups[s.band(med)], s)
	}
	keys := sortedKeys(groups)
	// The most alike first: at a thousand nodes the fleet's line, then its
	// outliers one small group each.
	slices.SortStableFunc(keys, func(a, b string) int { return len(groups[b]) - len(groups[a]) })
	printGroups(w, keys, func(k string) int { return len(groups[k]) }, func(k string) string { return sampleLine(groups[k]) })
	if len(none) > 0 {
		fmt.Fprintf(w, "  %s: no sample\n", orchestrator.NodesWho(none, 60))
	}
}

// last is node's GPUs at its latest sample.
func last(node string, s *telemetry.Series, now time.Time) (lastSample, bool) {
	if s == nil || len(s.GPUs) == 0 {
		return lastSample{}, false
	}
	at := s.GPUs[len(s.GPUs)-1].At
	out := lastSample{node: node, age: now.Sub(at)}
	first := true
	for i := len(s.GPUs) - 1; i >= 0 && !s.GPUs[i].At.Before(at.Add(-time.Second)); i-- {
		g := s.GPUs[i]
		for _, f := range []struct {
			v  *float64
			mm *[2]float64
		}{{g.TempC, &out.temp}, {g.PowerW, &out.power}, {g.SMClockMHz, &out.clock}, {g.UtilPct, &out.use}} {
			if f.v == nil {
				continue
			}
			if first || *f.v < f.mm[0] {
				f.mm[0] = *f.v
			}
			if first || *f.v > f.mm[1] {
				f.mm[1] = *f.v
			}
		}
		first = false
	}
	return out, true
}

// sampleLine is one group of nodes: each figure's range over them.
func sampleLine(g []lastSample) string {
	span := func(get func(lastSample) [2]float64, unit string) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range g {
			lo, hi = math.Min(lo, get(s)[0]), math.Max(hi, get(s)[1])
		}
		if lo == hi {
			return fmt.Sprintf("%.0f%s", lo, unit)
		}
		return fmt.Sprintf("%.0f-%.0f%s", lo, hi, unit)
	}
	var names []string
	oldest := time.Duration(0)
	for _, s := range g {
		names = append(names, s.node)
		oldest = max(oldest, s.age)
	}
	rest := fmt.Sprintf("%s, %s, SM %s, %s busy, %s ago",
		span(func(s lastSample) [2]float64 { return s.temp }, " °C"),
		span(func(s lastSample) [2]float64 { return s.power }, " W"),
		span(func(s lastSample) [2]float64 { return s.clock }, " MHz"),
		span(func(s lastSample) [2]float64 { return s.use }, "%"), roundDur(oldest))
	// The range takes what the figures leave of 100 columns ("  N nodes ").
	return orchestrator.NodesWho(names, max(20, 100-2-len("9999 nodes : ")-utf8.RuneCountInString(rest))) + ": " + rest
}

// printFindings judges what the telemetry holds so far, as the window's
// own judge will at its end, and lists what did not pass: one line per
// requirement and finding, the nodes that share it as a host range.
func printFindings(w io.Writer, run *record.Run, names []string, series map[string]*telemetry.Series) {
	var base float64
	var q struct {
		Base float64 `json:"gpu_base_clock_mhz"`
	}
	if json.Unmarshal(run.Quote, &q) == nil {
		base = q.Base
	}
	type key struct{ id, status, detail string }
	byFinding := map[key][]string{}
	var order []key
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		for _, v := range telemetry.Judge(n, s, phases.TelemetrySpans(run, n), base) {
			if v.Status != record.Fail && v.Status != record.Warn {
				continue
			}
			k := key{v.ID, string(v.Status), firstNonEmptyStr(v.Detail, v.Measured)}
			if _, ok := byFinding[k]; !ok {
				order = append(order, k)
			}
			byFinding[k] = append(byFinding[k], n)
		}
	}
	if len(order) == 0 {
		if len(series) > 0 {
			fmt.Fprintln(w, "findings so far: none (HEALTH-011..016)")
		}
		return
	}
	slices.SortStableFunc(order, func(a, b key) int { return strings.Compare(a.id, b.id) })
	fmt.Fprintln(w, "findings so far:")
	// Details name a GPU and a moment, so at fleet size most findings are
	// a node's own: the first few, then how many more.
	const shown = 12
	for i, k := range order {
		if i == shown {
			more := map[string]bool{}
			for _, k := range order[shown:] {
				for _, n := range byFinding[k] {
					more[n] = true
				}
			}
			fmt.Fprintf(w, "  and %d more finding(s) on %d node(s): the report lists them when the window ends\n",
				len(order)-shown, len(more))
			break
		}
		who := orchestrator.NodesWho(byFinding[k], 30)
		fmt.Fprintf(w, "  %s %s %s: %s\n", k.id, k.status, who, shownLine(k.detail, max(20, 100-2-len(k.id)-len(k.status)-4-len(who))))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// shownLine is node-made text on one line, escaped and short.
func shownLine(s string, n int) string {
	return clip(strings.Join(strings.Fields(redact.Shown(s)), " "), n)
}

func firstNonEmptyStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// roundDur is d to the second, past an hour to the minute.
func roundDur(d time.Duration) string {
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// groupsShown is how many groups of alike nodes a section of status
// prints: at a thousand nodes the fleet's line and its outliers.
const groupsShown = 8

// printGroups prints a line per group of nodes, in keys' order, the first
// groupsShown of them, then how many nodes the rest hold.
func printGroups(w io.Writer, keys []string, size func(string) int, line func(string) string) {
	for i, k := range keys {
		if i == groupsShown {
			more := 0
			for _, k := range keys[groupsShown:] {
				more += size(k)
			}
			fmt.Fprintf(w, "  and %d more node(s) in %d other group(s)\n", more, len(keys)-groupsShown)
			return
		}
		fmt.Fprintf(w, "  %s\n", line(k))
	}
}
