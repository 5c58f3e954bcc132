package reports

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// DiffSchema names the layout of a Diff's JSON form (`gpuaccept diff -o
// json`); a change that would break a reader of it gets a new version.
const DiffSchema = "gpuaccept.diff/v1"

// Diff compares two runs of the same cluster, a baseline and a candidate
// (say, before and after a driver upgrade): what changed on the nodes
// (driver, CUDA, NCCL, image, kernel, firmware, GPU serials), every figure
// both runs measured, and the verdicts whose status changed. A change of
// version is shown, not judged; a figure worse than the baseline's by more
// than the threshold, or a verdict that passed and now fails, is a
// regression.
type Diff struct {
	Schema    string  `json:"schema"`
	Baseline  DiffRun `json:"baseline"`
	Candidate DiffRun `json:"candidate"`
	// Threshold is how much worse than the baseline's a figure may be
	// (0.05: 5%); ThresholdByID overrides it per requirement ID.
	// ThresholdFrom says whose they are: "candidate" or "baseline" (the
	// run.json that recorded them) or "default".
	Threshold     float64            `json:"threshold"`
	ThresholdByID map[string]float64 `json:"threshold_by_id,omitempty"`
	ThresholdFrom string             `json:"threshold_from"`

	// Nodes: what each run recorded of every node both have (and of the
	// cluster, Node "cluster"), item by item.
	Nodes []NodeItems `json:"nodes"`
	// Changed: the items both runs recorded, with different values (for a
	// list, such as the GPU serials, only what differs). OneSided: the
	// items only one run recorded. NotRecorded: the items neither did.
	Changed     []Change      `json:"changed"`
	OneSided    []Change      `json:"recorded_in_one_run"`
	NotRecorded []NotRecorded `json:"not_recorded"`

	// Metrics: every figure (verdict ID and node) both runs measured, in
	// the same unit. Missing: the figures only one run measured.
	Metrics  []Metric        `json:"metrics"`
	Missing  []MissingMetric `json:"missing_metrics"`
	Statuses []StatusChange  `json:"status_changes"`

	NodesOnlyInBaseline  []string `json:"nodes_only_in_baseline,omitempty"`
	NodesOnlyInCandidate []string `json:"nodes_only_in_candidate,omitempty"`
	// Notes: what the reader should know before trusting the comparison
	// (simulated runs, different providers, a run cut short...).
	Notes []string `json:"notes,omitempty"`
	// Regressions names each regression in one line; Regressed is true
	// when there is any.
	Regressions []string `json:"regressions"`
	Regressed   bool     `json:"regressed"`
}

// DiffRun identifies one of the two runs.
type DiffRun struct {
	ID        string    `json:"id"`
	Path      string    `json:"path,omitempty"` // the run.json read
	Tool      string    `json:"tool,omitempty"`
	Provider  string    `json:"provider,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	Simulated bool      `json:"simulated"`
	Result    string    `json:"result"` // the run's own outcome, as its summary says it
}

// NodeItems is what the two runs recorded of one node.
type NodeItems struct {
	Node  string     `json:"node"`
	Items []ItemDiff `json:"items"`
}

// ItemDiff is one item of a node in both runs; an empty value is "not
// recorded" (and left out of the JSON).
type ItemDiff struct {
	Item      string `json:"item"`
	Baseline  string `json:"baseline,omitempty"`
	Candidate string `json:"candidate,omitempty"`
	Changed   bool   `json:"changed"`
}

// Change is one item that differs between the runs; an empty side was
// not recorded.
type Change struct {
	Node      string `json:"node"`
	Item      string `json:"item"`
	Baseline  string `json:"baseline,omitempty"`
	Candidate string `json:"candidate,omitempty"`
}

// NotRecorded is an item neither run recorded, and on which nodes; Every
// is set when that is every node compared (or the cluster, for a
// cluster-wide item).
type NotRecorded struct {
	Item string `json:"item"`
	// Field is where run.json would keep it: "<phase> data.<field>" of
	// the phase results (SCHEMA.md).
	Field string   `json:"field"`
	Nodes []string `json:"nodes"`
	Every bool     `json:"every"`
}

// Metric is one figure both runs measured.
type Metric struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	// Figure names a figure of the phase's evidence no verdict holds
	// ("p99 TTFT at concurrency:32"); empty for the verdict's own Value.
	Figure        string  `json:"figure,omitempty"`
	Node          string  `json:"node,omitempty"` // empty: the cluster
	Unit          string  `json:"unit,omitempty"`
	LowerIsBetter bool    `json:"lower_is_better"`
	Baseline      float64 `json:"baseline"`
	Candidate     float64 `json:"candidate"`
	// DeltaPct is (candidate - baseline) / baseline in percent; absent
	// when the baseline is 0.
	DeltaPct  *float64 `json:"delta_pct,omitempty"`
	Threshold float64  `json:"threshold"`
	// Change: "regression" (worse by more than the threshold), "worse"
	// (within it), "better" or "same".
	Change     string `json:"change"`
	Regression bool   `json:"regression"`
	// Spread is the larger of the two runs' own spread over their repeats
	// of the figure ((max - min) / median; absent when each measured it
	// once): a change within it is noise, and is a regression only past
	// the larger of it and Threshold.
	Spread float64 `json:"spread,omitempty"`
	// Note says why a change past the threshold is not a regression.
	Note string `json:"note,omitempty"`
}

// withinInterval: the steps a failure loses are where it fell after the
// last checkpoint, anywhere from 0 to the interval (every steps) — one
// sample of a position, not a speed. Two runs that both lost no more than
// the interval differ by chance, not by a regression; a run that lost more
// fails RECOV-002 and shows as a status change.
func (m *Metric) withinInterval(every int) {
	if !m.Regression || m.Unit != record.UnitSteps || every <= 0 || m.Candidate > float64(every) {
		return
	}
	m.Regression, m.Change = false, ChangeWorse
	m.Note = fmt.Sprintf("%g then %g step(s), both within the checkpoint interval of %d: where the failure fell, not a regression",
		m.Baseline, m.Candidate, every)
}

// timingFloor is the smallest change in a duration that is a
// regression: the coordinator times commands over SSH, whose round trips
// jitter by tens of milliseconds (an image loaded in 0.02 s, then 0.05 s,
// is no slower image).
const timingFloor = 0.25

// withSpread holds the change to the larger of the threshold and the
// runs' own spread, a duration's to timingFloor, and a throughput timed
// over secs (the baseline's, the candidate's seconds; 0 unknown) to
// timingFloor of the time it took: 16 MiB at 0.3 GB/s, then at 0.15 GB/s,
// is 0.05 s more, no slower disk.
func (m *Metric) withSpread(s float64, secs [2]float64) {
	m.Spread = s
	if m.Regression && m.Unit == record.UnitSeconds && math.Abs(m.Candidate-m.Baseline) < timingFloor {
		m.Regression, m.Change = false, ChangeWorse
		m.Note = fmt.Sprintf("%s slower, less than the %g s a timing over SSH resolves", figure(m.Candidate-m.Baseline, "s"), timingFloor)
		return
	}
	if m.Regression && secs[0] > 0 && secs[1] > 0 && math.Abs(secs[1]-secs[0]) < timingFloor {
		m.Regression, m.Change = false, ChangeWorse
		m.Note = fmt.Sprintf("timed over %s, then %s: less than the %g s a timing over SSH resolves",
			figure(secs[0], "s"), figure(secs[1], "s"), timingFloor)
		return
	}
	if !m.Regression || s <= m.Threshold {
		return
	}
	worse := m.worseBy()
	if worse <= s {
		m.Regression, m.Change = false, ChangeWorse
		m.Note = fmt.Sprintf("worse by %s, within the %s the runs' own repeats spread over", percent(worse), percent(s))
	}
}

// worseBy is the fraction of the baseline the candidate is worse by.
func (m *Metric) worseBy() float64 {
	if m.Baseline == 0 {
		return math.Inf(1)
	}
	if m.LowerIsBetter {
		return (m.Candidate - m.Baseline) / math.Abs(m.Baseline)
	}
	return (m.Baseline - m.Candidate) / math.Abs(m.Baseline)
}

// MissingMetric is a figure only one run measured (or measured in other
// units); it is listed, never a regression. A side without a figure has
// neither value nor unit.
type MissingMetric struct {
	ID            string   `json:"id"`
	Node          string   `json:"node,omitempty"`
	Baseline      *float64 `json:"baseline,omitempty"`
	BaselineUnit  string   `json:"baseline_unit,omitempty"`
	Candidate     *float64 `json:"candidate,omitempty"`
	CandidateUnit string   `json:"candidate_unit,omitempty"`
	Why           string   `json:"why"`
}

// StatusChange is a verdict whose status differs between the runs.
type StatusChange struct {
	ID        string        `json:"id"`
	Title     string        `json:"title,omitempty"`
	Node      string        `json:"node,omitempty"`
	Baseline  record.Status `json:"baseline"`
	Candidate record.Status `json:"candidate"`
	// Measured is what the candidate's verdict says it measured.
	Measured   string `json:"measured,omitempty"`
	Note       string `json:"note,omitempty"`
	Regression bool   `json:"regression"`
}

// Metric changes.
const (
	ChangeRegression = "regression"
	ChangeWorse      = "worse"
	ChangeBetter     = "better"
	ChangeSame       = "same"
)

// clusterNode names the cluster-wide items and verdicts.
const clusterNode = "cluster"

// LoadRun reads a run's run.json: path is the run directory or the file
// itself. Errors name the path.
func LoadRun(path string) (*record.Run, string, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "run.json")
	}
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist) && file != path:
		return nil, file, fmt.Errorf("%s: no run.json: not a run directory", path)
	case errors.Is(err, fs.ErrNotExist):
		return nil, file, fmt.Errorf("%s: no such file or directory", path)
	case err != nil:
		return nil, file, fmt.Errorf("%s: cannot read: %w", file, err)
	}
	var run record.Run
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, file, fmt.Errorf("%s: not a gpuaccept run.json: %w", file, err)
	}
	switch {
	case run.Schema == 0 && run.ID == "":
		return nil, file, fmt.Errorf("%s: not a gpuaccept run.json (no schema, no id)", file)
	case run.Schema < record.OldestSchema || run.Schema > record.Schema:
		return nil, file, fmt.Errorf("%s: run.json schema %d; this gpuaccept reads schemas %d to %d", file, run.Schema, record.OldestSchema, record.Schema)
	}
	return &run, file, nil
}

// Compare diffs candidate against baseline. It reads both runs and
// modifies neither.
func Compare(baseline, candidate *record.Run) *Diff {
	d := &Diff{Schema: DiffSchema, Baseline: diffRun(baseline), Candidate: diffRun(candidate)}
	reg, from := candidate.Regression, "candidate"
	if reg == nil {
		reg, from = baseline.Regression, "baseline"
	}
	if reg == nil {
		reg, from = &record.Regression{Threshold: record.DefaultRegression}, "default"
	}
	d.Threshold, d.ThresholdByID, d.ThresholdFrom = reg.Threshold, reg.ByID, from

	nodes := d.matchNodes(baseline, candidate)
	d.compareItems(baseline, candidate, nodes)
	d.compareVerdicts(baseline, candidate, reg)
	d.notes(baseline, candidate)
	d.Regressed = len(d.Regressions) > 0
	// Lists are [] in the JSON, never null: a reader need not tell "none"
	// from "not there".
	d.Changed, d.OneSided, d.NotRecorded = orEmpty(d.Changed), orEmpty(d.OneSided), orEmpty(d.NotRecorded)
	d.Metrics, d.Missing, d.Statuses = orEmpty(d.Metrics), orEmpty(d.Missing), orEmpty(d.Statuses)
	d.Regressions = orEmpty(d.Regressions)
	return d
}

func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

func diffRun(r *record.Run) DiffRun {
	return DiffRun{ID: r.ID, Tool: r.Tool, Provider: r.Provider, Started: r.Started, Simulated: r.Simulated, Result: windowOutcome(r)}
}

// matchNodes pairs the nodes by name, in the candidate's order, and notes
// the ones only one run has.
func (d *Diff) matchNodes(b, c *record.Run) []string {
	inB := map[string]bool{}
	for _, n := range b.Nodes {
		inB[n.Name] = true
	}
	inC := map[string]bool{}
	var both []string
	for _, n := range c.Nodes {
		inC[n.Name] = true
		if inB[n.Name] {
			both = append(both, n.Name)
		} else {
			d.NodesOnlyInCandidate = append(d.NodesOnlyInCandidate, n.Name)
		}
	}
	for _, n := range b.Nodes {
		if !inC[n.Name] {
			d.NodesOnlyInBaseline = append(d.NodesOnlyInBaseline, n.Name)
		}
	}
	return both
}

// What run.json records of a node, read by JSON field name from the
// phases' data: preflight's facts, the image phase, the NCCL runs.
type (
	diffFacts struct {
		Kernel string `json:"kernel"`
		Driver string `json:"driver"`
		CUDA   string `json:"cuda"`
		GPUs   []struct {
			Index  int    `json:"index"`
			Serial string `json:"serial"`
			VBIOS  string `json:"vbios"`
		} `json:"gpus"`
		NICs []struct {
			Device   string `json:"device"`
			Firmware string `json:"firmware"`
		} `json:"nics"`
	}
	diffImage struct {
		Reference string `json:"reference"`
		Pin       string `json:"pin"`
		Nodes     map[string]struct {
			ID          string   `json:"image_id"`
			RepoDigests []string `json:"repo_digests"`
		} `json:"nodes"`
	}
	diffSweeps struct {
		Repeats []struct {
			NCCLVersion string `json:"nccl_version"`
		} `json:"repeats"`
	}
)

// The items compared, in the order shown.
type itemKind int

const (
	scalarItem itemKind = iota // one value
	keyedItem                  // a value per component (GPU, adapter)
	setItem                    // a set of values (serials, digests)
)

type itemDef struct {
	name  string
	kind  itemKind
	label string // keyedItem: what a component key is, e.g. "GPU "
	// field is where run.json keeps it: a phase's result's data field.
	field string
}

var (
	nodeItemDefs = []itemDef{
		{name: "driver", field: "preflight data.driver"}, {name: "CUDA", field: "preflight data.cuda"},
		{name: "NCCL (intra-node)", field: "intranode data.repeats[].nccl_version"}, {name: "kernel", field: "preflight data.kernel"},
		{name: "image ID", field: "image data.nodes{}.image_id"}, {name: "image digest", kind: setItem, field: "image data.nodes{}.repo_digests"},
		{name: "VBIOS", kind: keyedItem, label: "GPU ", field: "preflight data.gpus[].vbios"},
		{name: "IB firmware", kind: keyedItem, field: "preflight data.nics[].firmware"},
		{name: "GPU serials", kind: setItem, field: "preflight data.gpus[].serial"},
	}
	clusterItemDefs = []itemDef{{name: "NCCL (all-reduce)", field: "allreduce data.repeats[].nccl_version"},
		{name: "image reference", field: "image data.reference"}, {name: "image pin", field: "image data.pin"}}
)

// items is what one run recorded of one node: item name → component →
// value (a scalar has the one component ""). Absent: not recorded.
type items map[string]map[string]string

func (it items) set(item, key, value string) {
	if strings.TrimSpace(value) == "" {
		return
	}
	if it[item] == nil {
		it[item] = map[string]string{}
	}
	it[item][key] = value
}

// nodeItems reads what r recorded of node.
func nodeItems(r *record.Run, node string) items {
	it := items{}
	var f diffFacts
	// The latest preflight result with data, passed or failed (a failed
	// one keeps what the node did say: often the node that matters), else
	// the facts of a run recorded before they were kept once.
	ok := hasData(r, record.FactsPhase, node, &f)
	if !ok {
		if facts := r.NodeFacts(node); len(facts) > 0 {
			ok = json.Unmarshal(facts, &f) == nil
		}
	}
	if ok {
		it.set("driver", "", f.Driver)
		it.set("CUDA", "", f.CUDA)
		it.set("kernel", "", f.Kernel)
		for _, g := range f.GPUs {
			it.set("VBIOS", strconv.Itoa(g.Index), g.VBIOS)
			it.set("GPU serials", g.Serial, g.Serial)
		}
		for _, n := range f.NICs {
			it.set("IB firmware", n.Device, n.Firmware)
		}
	}
	var s diffSweeps
	if hasData(r, "intranode", node, &s) {
		it.set("NCCL (intra-node)", "", ncclVersion(s))
	}
	var im diffImage
	if hasData(r, "image", "", &im) {
		if ni, ok := im.Nodes[node]; ok {
			it.set("image ID", "", ni.ID)
			for _, dg := range ni.RepoDigests {
				it.set("image digest", dg, dg)
			}
		}
	}
	return it
}

func clusterItems(r *record.Run) items {
	it := items{}
	var s diffSweeps
	if hasData(r, "allreduce", "", &s) {
		it.set("NCCL (all-reduce)", "", ncclVersion(s))
	}
	var im diffImage
	if hasData(r, "image", "", &im) {
		it.set("image reference", "", im.Reference)
		it.set("image pin", "", im.Pin)
	}
	return it
}

func ncclVersion(s diffSweeps) string {
	for _, r := range s.Repeats {
		if r.NCCLVersion != "" {
			return r.NCCLVersion
		}
	}
	return ""
}

func (d *Diff) compareItems(b, c *record.Run, nodes []string) {
	notRec := map[string]*NotRecorded{}
	var order []string
	add := func(node string, defs []itemDef, bi, ci items, scope int) {
		ni := NodeItems{Node: node}
		for _, def := range defs {
			bv, cv := bi[def.name], ci[def.name]
			id := ItemDiff{Item: def.name, Baseline: itemText(def, bv), Candidate: itemText(def, cv), Changed: !maps.Equal(bv, cv)}
			ni.Items = append(ni.Items, id)
			switch {
			case len(bv) == 0 && len(cv) == 0:
				nr := notRec[def.name]
				if nr == nil {
					nr = &NotRecorded{Item: def.name, Field: def.field}
					notRec[def.name] = nr
					order = append(order, def.name)
				}
				nr.Nodes = append(nr.Nodes, node)
				nr.Every = len(nr.Nodes) == scope
			case len(bv) == 0 || len(cv) == 0:
				d.OneSided = append(d.OneSided, Change{Node: node, Item: def.name, Baseline: id.Baseline, Candidate: id.Candidate})
			case id.Changed:
				bt, ct := changeText(def, bv, cv)
				d.Changed = append(d.Changed, Change{Node: node, Item: def.name, Baseline: bt, Candidate: ct})
			}
		}
		d.Nodes = append(d.Nodes, ni)
	}
	add(clusterNode, clusterItemDefs, clusterItems(b), clusterItems(c), 1)
	for _, n := range nodes {
		add(n, nodeItemDefs, nodeItems(b, n), nodeItems(c, n), len(nodes))
	}
	for _, name := range order {
		d.NotRecorded = append(d.NotRecorded, *notRec[name])
	}
}

// itemText is an item's value in words: a scalar as it is, components
// that all agree as their one value, else each component's.
func itemText(def itemDef, v map[string]string) string {
	if len(v) == 0 {
		return ""
	}
	keys := slices.SortedFunc(maps.Keys(v), natural)
	if def.kind == setItem {
		return strings.Join(keys, ", ")
	}
	if u, ok := uniform(v); ok {
		return u
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, def.label+k+": "+v[k])
	}
	return strings.Join(parts, ", ")
}

// changeText says what differs: for a set, what each side has that the
// other has not; for components, the ones that differ (or the one value
// each side has, when every component agrees).
func changeText(def itemDef, b, c map[string]string) (string, string) {
	keys := slices.SortedFunc(maps.Keys(union(b, c)), natural)
	switch def.kind {
	case scalarItem:
		return b[""], c[""]
	case setItem:
		var onlyB, onlyC []string
		for _, k := range keys {
			_, inB := b[k]
			_, inC := c[k]
			switch {
			case inB && !inC:
				onlyB = append(onlyB, k)
			case inC && !inB:
				onlyC = append(onlyC, k)
			}
		}
		return orWord(strings.Join(onlyB, ", "), "none"), orWord(strings.Join(onlyC, ", "), "none")
	}
	ub, okB := uniform(b)
	uc, okC := uniform(c)
	if okB && okC && slices.Equal(slices.Sorted(maps.Keys(b)), slices.Sorted(maps.Keys(c))) {
		return ub, uc
	}
	var pb, pc []string
	for _, k := range keys {
		if b[k] != c[k] {
			pb = append(pb, def.label+k+": "+orWord(b[k], "none"))
			pc = append(pc, def.label+k+": "+orWord(c[k], "none"))
		}
	}
	return strings.Join(pb, ", "), strings.Join(pc, ", ")
}

func uniform(v map[string]string) (string, bool) {
	var first string
	n := 0
	for _, x := range v {
		if n > 0 && x != first {
			return "", false
		}
		first, n = x, n+1
	}
	return first, n > 0
}

func union(a, b map[string]string) map[string]string {
	u := maps.Clone(a)
	if u == nil {
		u = map[string]string{}
	}
	maps.Copy(u, b)
	return u
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}

// natural orders strings with their numbers by value: GPU 2 before GPU
// 10, mlx5_2 before mlx5_10.
func natural(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), cmp.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// verdictKey identifies a verdict across runs: ID, node, and which of
// that pair it is (a run may judge one ID on one node more than once).
type verdictKey struct {
	id, node string
	nth      int
}

func keyed(r *record.Run) ([]verdictKey, map[verdictKey]record.Verdict) {
	var keys []verdictKey
	byKey := map[verdictKey]record.Verdict{}
	seen := map[[2]string]int{}
	for _, v := range verdicts(r) {
		k := verdictKey{v.ID, v.Node, seen[[2]string{v.ID, v.Node}]}
		seen[[2]string{v.ID, v.Node}]++
		keys = append(keys, k)
		byKey[k] = v
	}
	return keys, byKey
}

func (d *Diff) compareVerdicts(b, c *record.Run, reg *record.Regression) {
	bKeys, bv := keyed(b)
	cKeys, cv := keyed(c)
	var metricRegs, statusRegs []string
	// A requirement judged once in each run is the same verdict even when
	// one run keyed it by the node it named and the other by the cluster
	// (NCCL-004 names its slow node, or none).
	once := func(keys []verdictKey) map[string]verdictKey {
		n, at := map[string]int{}, map[string]verdictKey{}
		for _, k := range keys {
			n[k.id]++
			at[k.id] = k
		}
		for id, c := range n {
			if c != 1 {
				delete(at, id)
			}
		}
		return at
	}
	bOnce, cOnce := once(bKeys), once(cKeys)
	for id, ck := range cOnce {
		if bk, ok := bOnce[id]; ok && bk != ck {
			if _, clash := bv[ck]; !clash {
				bv[ck] = bv[bk]
				delete(bv, bk)
				for i := range bKeys {
					if bKeys[i] == bk {
						bKeys[i] = ck
					}
				}
			}
		}
	}

	// The figures: in the candidate's order, then what only the baseline
	// measured.
	for _, k := range cKeys {
		x := cv[k]
		y, inB := bv[k]
		switch {
		case x.Value == nil && (!inB || y.Value == nil):
		case x.Value == nil:
			d.Missing = append(d.Missing, MissingMetric{ID: k.id, Node: k.node, Baseline: y.Value, BaselineUnit: y.Unit, Why: "not measured in the candidate"})
		case !inB || y.Value == nil:
			d.Missing = append(d.Missing, MissingMetric{ID: k.id, Node: k.node, Candidate: x.Value, CandidateUnit: x.Unit, Why: "not measured in the baseline"})
		case x.Unit != y.Unit:
			d.Missing = append(d.Missing, MissingMetric{ID: k.id, Node: k.node, Baseline: y.Value, BaselineUnit: y.Unit,
				Candidate: x.Value, CandidateUnit: x.Unit, Why: "not comparable: measured in other units"})
		default:
			m := compareMetric(x, *y.Value, *x.Value, reg.For(k.id))
			m.withSpread(max(spread(b, y), spread(c, x)), [2]float64{timedOver(b, y), timedOver(c, x)})
			m.withinInterval(min(checkpointEvery(b, y), checkpointEvery(c, x)))
			m.withFloor()
			d.Metrics = append(d.Metrics, m)
			if m.Regression {
				metricRegs = append(metricRegs, metricLine(m))
			}
		}
	}
	for _, k := range bKeys {
		if y := bv[k]; y.Value != nil {
			if _, inC := cv[k]; !inC {
				d.Missing = append(d.Missing, MissingMetric{ID: k.id, Node: k.node, Baseline: y.Value, BaselineUnit: y.Unit, Why: "not measured in the candidate"})
			}
		}
	}
	slices.SortStableFunc(d.Missing, func(a, b MissingMetric) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), natural(a.Node, b.Node))
	})

	// The statuses. A failure in the candidate on a node the baseline has
	// no verdict for (NCCL-004 names the slow node it finds) is still a
	// regression when every verdict of that ID passed in the baseline.
	onlyC := map[string]bool{}
	for _, n := range d.NodesOnlyInCandidate {
		onlyC[n] = true
	}
	allPassed := map[string]bool{}
	for _, k := range bKeys {
		p, seen := allPassed[k.id]
		allPassed[k.id] = (p || !seen) && bv[k].Status == record.Pass
	}
	for _, k := range cKeys {
		x := cv[k]
		y, inB := bv[k]
		sc := StatusChange{ID: k.id, Title: record.TitleOf(k.id, x.Title), Node: k.node, Candidate: x.Status, Measured: x.Measured}
		switch {
		case inB && y.Status == x.Status:
			continue
		case inB:
			sc.Baseline = y.Status
			sc.Regression = y.Status == record.Pass && x.Status == record.Fail
		case x.Status == record.Fail && allPassed[k.id] && !anyNode(k.node, onlyC):
			sc.Baseline, sc.Regression = record.Pass, true
			sc.Note = fmt.Sprintf("the baseline has no %s verdict for %s; every %s verdict it has passed", k.id, nodeLabel(k.node), k.id)
		default:
			continue
		}
		d.Statuses = append(d.Statuses, sc)
		if sc.Regression {
			statusRegs = append(statusRegs, fmt.Sprintf("%s %s: %s → %s", sc.ID, nodeLabel(sc.Node), sc.Baseline, sc.Candidate))
		}
	}
	metricRegs = append(metricRegs, d.compareWorkload(b, c, reg)...)
	d.Regressions = append(append(d.Regressions, metricRegs...), statusRegs...)
}

// anyNode: whether any of the nodes a verdict names (comma-separated) is
// in set.
func anyNode(nodes string, set map[string]bool) bool {
	for _, n := range strings.Split(nodes, ",") {
		if set[n] {
			return true
		}
	}
	return false
}

// compareMetric: how much worse the candidate is, in the unit's
// direction; worse by more than threshold is a regression. From a
// baseline of 0 any worsening is one (there is no relative change).
func compareMetric(v record.Verdict, base, cand, threshold float64) Metric {
	m := Metric{ID: v.ID, Title: record.TitleOf(v.ID, v.Title), Node: v.Node, Unit: v.Unit, LowerIsBetter: lowerIsBetter(v.ID, v.Unit),
		Baseline: base, Candidate: cand, Threshold: threshold}
	if base != 0 {
		pct := (cand - base) / math.Abs(base) * 100
		m.DeltaPct = &pct
	}
	var worse float64 // the fraction of the baseline the candidate is worse by
	switch {
	case cand == base:
	case base == 0:
		worse = math.Inf(1)
		if m.LowerIsBetter != (cand > base) {
			worse = math.Inf(-1)
		}
	case m.LowerIsBetter:
		worse = (cand - base) / math.Abs(base)
	default:
		worse = (base - cand) / math.Abs(base)
	}
	switch {
	case worse > threshold:
		m.Change, m.Regression = ChangeRegression, true
	case worse > 0:
		m.Change = ChangeWorse
	case worse < 0:
		m.Change = ChangeBetter
	default:
		m.Change = ChangeSame
	}
	return m
}

func metricLine(m Metric) string {
	limit := percent(m.Threshold)
	if m.Spread > m.Threshold {
		limit += fmt.Sprintf(" and the runs' own spread of %s", percent(m.Spread))
	}
	return fmt.Sprintf("%s %s: %s → %s (%s; more than %s worse)", metricName(m), nodeLabel(m.Node),
		figure(m.Baseline, ""), figure(m.Candidate, m.Unit), deltaText(m.DeltaPct), limit)
}

// metricName is the metric's ID, with the figure of the evidence it is
// when it is not the verdict's.
func metricName(m Metric) string { return joinNonEmpty(" ", m.ID, m.Figure) }

// figure writes a measured value: four significant digits, whole
// numbers from 1000 up.
func figure(x float64, unit string) string {
	s := strconv.FormatFloat(x, 'g', 4, 64)
	if math.Abs(x) >= 1000 {
		s = strconv.FormatFloat(x, 'f', 0, 64)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

func deltaText(pct *float64) string {
	if pct == nil {
		return "from 0"
	}
	return fmt.Sprintf("%+.1f%%", *pct)
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'g', 4, 64) + "%" }

// notes: what makes the comparison less than like for like.
func (d *Diff) notes(b, c *record.Run) {
	switch {
	case b.Simulated && c.Simulated:
		d.Notes = append(d.Notes, "both runs ran on SIMULATED nodes: their figures are not evidence about real hardware")
	case b.Simulated || c.Simulated:
		which := "baseline"
		if c.Simulated {
			which = "candidate"
		}
		d.Notes = append(d.Notes, fmt.Sprintf("the %s ran on SIMULATED nodes, the other did not: its figures are not evidence about real hardware", which))
	}
	for _, x := range []struct {
		name string
		r    *record.Run
	}{{"baseline", b}, {"candidate", c}} {
		if o := windowOutcome(x.r); strings.HasPrefix(o, "ABORTED") || o == "INTERRUPTED" {
			d.Notes = append(d.Notes, fmt.Sprintf("the %s did not run to its end (%s): what it did not measure is missing", x.name, o))
		}
		if len(x.r.Verdicts) > 0 && !slices.ContainsFunc(x.r.Verdicts, func(v record.Verdict) bool { return v.Value != nil }) {
			d.Notes = append(d.Notes, fmt.Sprintf("the %s recorded no measured values (made before gpuaccept recorded them?): no figure of it is compared", x.name))
		}
	}
	if b.Provider != c.Provider {
		d.Notes = append(d.Notes, fmt.Sprintf("different providers: %s and %s", orNone(b.Provider), orNone(c.Provider)))
	}
	if len(d.Nodes) == 1 && (len(b.Nodes) > 0 || len(c.Nodes) > 0) {
		d.Notes = append(d.Notes, "no node in common: are these runs of the same cluster?")
	}
	if !b.Started.IsZero() && c.Started.Before(b.Started) {
		d.Notes = append(d.Notes, "the candidate started before the baseline: are the two the right way round?")
	}
}
