package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/ledger"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
)

// probeTimeout bounds one node of check --connect, dial included: every
// tool has 20 s (a wedged driver makes nvidia-smi hang for minutes).
const probeTimeout = 3 * time.Minute

// toolsProbe asks a node which tools it has, each under its own section;
// it writes nothing on the node. The binary all-reduce runs and the
// Pythons the failure test and the training load test run (the latter's
// torchrun) are the inventory's, quoted by the caller.
const toolsProbe = `t() { if command -v timeout >/dev/null 2>&1; then timeout 20 "$@"; else "$@"; fi; }
p() { n=$1; shift; printf '@@ %s\n' "$n"
  if command -v "$1" >/dev/null 2>&1; then t "$@" </dev/null 2>&1 | head -c 4096; printf '\n@@ rc %s\n' "${PIPESTATUS[0]}"
  else printf '@@ missing\n'; fi; }
p nvidia-smi nvidia-smi --query-gpu=driver_version,name --format=csv,noheader
p dcgmi dcgmi -v
p mpirun mpirun --version
printf '@@ all_reduce_perf\n'; command -v "$1" || printf '@@ missing\n'
p podman podman --version
p docker docker --version
p python3 "$2" --version
p torch "$2" -c 'import torch; print(torch.__version__, torch.version.cuda or "no CUDA")'
p torchrun "$3" -c 'import torch, torch.distributed.run; print(torch.__version__)'
p kernel uname -r
printf '@@ os\n'; sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"'
` + haveProbe

// toolOrder is the order the tools are listed in.
var toolOrder = []string{"nvidia-smi", "dcgmi", "mpirun", "all_reduce_perf", "podman", "docker", "python3", "torch", "torchrun", "kernel", "os"}

// checkConnect reaches every node, lists what each has, grouped by
// answer, and says how long the window may take and what that costs. Its
// error is for the coordinator's own failures; nodes not reached are
// said, and make the exit status 3 (the window could not measure them).
func checkConnect(ctx context.Context, out, progress io.Writer, inv *inventory.Inventory, ps []orchestrator.Phase, asJSON *connectJSON,
	access kubeAccessed) (unreached int, err error) {
	if inv.Slurm.Allocates() {
		return checkAllocation(ctx, out, progress, inv, ps, asJSON)
	}
	fmt.Fprintf(progress, "check: reaching %d node(s), %s\n", len(inv.Nodes), atATime(inv.FanOut()))
	start := time.Now()
	python := inv.Phases.Failure.Python
	if python == "" {
		python = "python3"
	}
	trainPython := inv.Phases.Workload.Training.Python
	if trainPython == "" {
		trainPython = "python3"
	}
	cmd := "bash -c " + remote.Quote(toolsProbe) + " probe " + remote.Quote(inv.Phases.AllReduce.Binary) + " " + remote.Quote(python) +
		" " + remote.Quote(trainPython)
	res, err := orchestrator.Probe(ctx, inv, orchestrator.Options{Progress: orchestrator.NewProgress(progress, false)}, cmd, probeTimeout)
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	for _, r := range res {
		if !r.Dialled || r.Err != nil {
			unreached++
		}
	}
	groups := notMeasuredGroups(inv, ps, res)
	// What no window can run without is the check's failure, whatever
	// the probe found.
	var refused error
	if no := kubeDenied(access.list); no != "" {
		refused = fmt.Errorf("check --connect: the Kubernetes credential may not %s: no window can run", no)
	}
	if asJSON != nil {
		asJSON.KubeAccess = kubeAccessOf(access.list)
		if access.err != nil {
			asJSON.KubeAccessError = oneLine(access.err.Error())
		}
		if err := asJSON.print(out, inv, ps, res, groups, took); err != nil {
			return unreached, err
		}
		return unreached, refused
	}
	printReach(out, inv, res, took)
	fmt.Fprintln(out)
	if printKubeAccess(out, inv, access) {
		fmt.Fprintln(out)
	}
	printTools(out, res)
	fmt.Fprintln(out)
	if len(groups) > 0 {
		printNotMeasured(out, groups)
		fmt.Fprintln(out)
	}
	printEstimate(out, inv, ps)
	return unreached, refused
}

// printReach says how many nodes were reached, and why the others were
// not, each reason once with its nodes.
func printReach(w io.Writer, inv *inventory.Inventory, res []orchestrator.Probed, took time.Duration) {
	why, reached := unreachedBy(inv, res)
	fmt.Fprintf(w, "reached %d of %d node(s) in %.1f s\n", reached, len(res), took.Seconds())
	for _, reason := range sortedByCount(why) {
		fmt.Fprintf(w, "  not reached  %s: %s\n", hostlist.Compress(why[reason]), clip(reason, 160))
	}
}

// unreachedBy groups the nodes not reached by why (each reason without
// the node's own name and address), and counts those reached.
func unreachedBy(inv *inventory.Inventory, res []orchestrator.Probed) (why map[string][]string, reached int) {
	why = map[string][]string{}
	for i, r := range res {
		if r.Err == nil {
			reached++
			continue
		}
		// The node's own name and address out, so that nodes failing
		// alike share a line.
		n := inv.Nodes[i]
		port := n.Port
		if port == 0 {
			port = inventory.DefaultPort
		}
		reason := oneLine(redact.Shown(strings.TrimPrefix(r.Err.Error(), r.Node+": ")))
		reason = record.Impersonal(reason, r.Node, net.JoinHostPort(n.Address, strconv.Itoa(port)), n.Address)
		if r.Cause.Kind != "" {
			reason = r.Cause.Kind + ": " + reason
		}
		why[reason] = append(why[reason], r.Node)
	}
	return why, reached
}

// printTools lists each tool's answers, each with the nodes that gave
// it, the most common first.
func printTools(w io.Writer, res []orchestrator.Probed) {
	by := map[string]map[string][]string{}
	for _, r := range res {
		if !r.Dialled {
			continue
		}
		for tool, answer := range toolAnswers(r.Out) {
			if by[tool] == nil {
				by[tool] = map[string][]string{}
			}
			by[tool][answer] = append(by[tool][answer], r.Node)
		}
	}
	groups := toolGroups(by)
	if len(groups) == 0 {
		fmt.Fprintln(w, "tools: no node answered")
		return
	}
	fmt.Fprintln(w, "tools:")
	last := ""
	for _, g := range groups {
		name := g.Tool
		if name == last {
			name = ""
		}
		last = g.Tool
		// An answer too long for its column is shown whole, its nodes on
		// the line after (a cut reason hid what was wrong).
		if len([]rune(g.Answer)) > 46 {
			fmt.Fprintf(w, "  %-16s %s\n  %-16s on %s\n", name, g.Answer, "", g.Nodes)
			continue
		}
		fmt.Fprintf(w, "  %-16s %-46s %s\n", name, g.Answer, g.Nodes)
	}
}

// toolGroup is one tool's answer and the nodes that gave it.
type toolGroup struct {
	Tool   string `json:"tool"`
	Answer string `json:"answer"`
	Nodes  string `json:"nodes"` // a host range
	Count  int    `json:"count"`
}

// toolGroups is by (tool → answer → nodes) in toolOrder, each tool's
// answers the most common first.
func toolGroups(by map[string]map[string][]string) []toolGroup {
	var out []toolGroup
	for _, tool := range toolOrder {
		for _, a := range sortedByCount(by[tool]) {
			out = append(out, toolGroup{Tool: tool, Answer: a, Nodes: hostlist.Compress(by[tool][a]), Count: len(by[tool][a])})
		}
	}
	return out
}

// toolAnswers reads the probe's sections into one short answer a tool.
func toolAnswers(out []byte) map[string]string {
	got := map[string]string{}
	var tool string
	var body []string
	rc := ""
	flush := func() {
		if tool != "" {
			got[tool] = summarize(tool, body, rc)
		}
		body, rc = nil, ""
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "@@ missing":
			rc = "missing"
		case strings.HasPrefix(line, "@@ rc "):
			// Only an exit status: anything else a node prints here is
			// text of its own.
			rc = strings.TrimPrefix(line, "@@ rc ")
			if !exitStatus.MatchString(rc) {
				rc = "?"
			}
		case strings.HasPrefix(line, "@@ "):
			flush()
			tool = strings.TrimPrefix(line, "@@ ")
			if !knownTool(tool) {
				tool = ""
			}
		default:
			if l := strings.TrimSpace(line); l != "" {
				body = append(body, l)
			}
		}
	}
	flush()
	return got
}

func knownTool(t string) bool {
	for _, k := range toolOrder {
		if k == t {
			return true
		}
	}
	return false
}

var (
	versionToken = regexp.MustCompile(`\d+(\.\d+)+`)
	exitStatus   = regexp.MustCompile(`^[0-9]{1,3}$`)
)

// summarize is a tool's answer in a few words: its version (and, for the
// GPUs, their count, model and driver), "missing", or what went wrong.
func summarize(tool string, body []string, rc string) string {
	switch {
	case rc == "missing":
		return "missing"
	case rc == "124":
		return "did not answer in 20 s"
	case rc != "" && rc != "0":
		// The last line: where a traceback or a usage says what is wrong.
		last := "no output"
		if len(body) > 0 {
			last = body[len(body)-1]
		}
		return fmt.Sprintf("fails (exit %s): %s", rc, shown(last))
	case len(body) == 0:
		return "no output"
	}
	switch tool {
	case "nvidia-smi":
		models := map[string]int{}
		drivers := map[string]bool{}
		for _, l := range body {
			d, m, ok := strings.Cut(l, ",")
			if !ok {
				return "unreadable: " + shown(l)
			}
			drivers[strings.TrimSpace(d)] = true
			models[strings.TrimSpace(m)]++
		}
		var parts []string
		for m, n := range models {
			parts = append(parts, fmt.Sprintf("%d × %s", n, m))
		}
		sort.Strings(parts)
		var ds []string
		for d := range drivers {
			ds = append(ds, d)
		}
		sort.Strings(ds)
		return shown("driver " + strings.Join(ds, "/") + ", " + strings.Join(parts, ", "))
	case "dcgmi":
		for _, l := range body {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "version") {
				return shown(strings.TrimSpace(v))
			}
		}
	case "all_reduce_perf":
		return shown(body[0])
	case "torch":
		if f := strings.Fields(body[len(body)-1]); len(f) >= 2 && versionToken.MatchString(f[0]) {
			return shown("torch " + f[0] + ", CUDA " + strings.Join(f[1:], " "))
		}
		return "fails: " + shown(body[len(body)-1])
	case "torchrun":
		// The training load test's launcher: torch.distributed.run
		// imported by its Python (phases.workload.training.python).
		if f := strings.Fields(body[len(body)-1]); len(f) >= 1 && versionToken.MatchString(f[0]) {
			return shown("torch.distributed.run, torch " + f[0])
		}
		return "fails: " + shown(body[len(body)-1])
	case "kernel", "os":
		return shown(body[0])
	}
	if v := versionToken.FindString(body[0]); v != "" {
		if tool == "mpirun" {
			if i := strings.Index(body[0], "("); i >= 0 {
				if j := strings.Index(body[0][i:], ")"); j > 0 {
					return shown(body[0][i+1:i+j] + " " + v)
				}
			}
		}
		return v
	}
	return shown(body[0])
}

// printEstimate bounds the window's length by its phases' deadlines (the
// runner ends a phase there) and prices that bound at the quote.
func printEstimate(w io.Writer, inv *inventory.Inventory, ps []orchestrator.Phase) {
	b := orchestrator.Bound(inv, ps)
	fmt.Fprintf(w, "window: at most %s, the deadlines of the %d phase(s) that run", roughly(b.Total), b.Phases)
	if b.Waves > 1 {
		fmt.Fprintf(w, " (per-node phases in %d waves of %d nodes)", b.Waves, inv.FanOut())
	}
	fmt.Fprintln(w)
	if len(b.Longest) > 0 {
		fmt.Fprintf(w, "  longest: %s\n", strings.Join(b.Longest, ", "))
	}
	cost, what, ok := boundCost(inv, b)
	if !ok {
		fmt.Fprintln(w, "cost: the quote states no price_per_gpu_hour (or no gpus_per_node)")
		return
	}
	cur := ""
	if inv.Quote.Currency != "" {
		cur = " " + inv.Quote.Currency
	}
	fmt.Fprintf(w, "cost: at most %.2f%s (%s)\n", cost, cur, what)
}

// boundCost prices the bound b at the quote as the invoice will: each
// node's time rounded up to quote.billing_granularity (as the ledger
// bills it), × GPUs × the GPU-hour price, plus hosts × hours × the
// host-hour price where there is one; false when the quote states no
// price or no GPUs per node.
func boundCost(inv *inventory.Inventory, b orchestrator.WindowBound) (float64, string, bool) {
	q := inv.Quote
	n := len(inv.Nodes)
	gpus := n * q.GPUsPerNode
	if q.PricePerGPUHr <= 0 || gpus == 0 {
		return 0, "", false
	}
	billed := b.Total
	step, err := ledger.Granularity(q.Billing)
	if err == nil {
		billed = ledger.RoundUp(b.Total, step)
	}
	hours := billed.Hours()
	cost := hours * float64(gpus) * q.PricePerGPUHr
	cur := ""
	if q.Currency != "" {
		cur = " " + q.Currency
	}
	rounded := ""
	if billed != b.Total {
		rounded = fmt.Sprintf(" (to whole %s)", strings.TrimSpace(q.Billing))
	}
	what := fmt.Sprintf("%d GPUs × %.2f h%s × %.2f%s per GPU-hour", gpus, hours, rounded, q.PricePerGPUHr, cur)
	if q.PriceHostPerNodeHour != nil && *q.PriceHostPerNodeHour > 0 {
		cost += hours * float64(n) * *q.PriceHostPerNodeHour
		what += fmt.Sprintf(" + %d hosts × %.2f%s per host-hour", n, *q.PriceHostPerNodeHour, cur)
	}
	return cost, what, true
}

// roughly is d to the minute, or to the second under a minute.
func roughly(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}

// sortedByCount is m's keys, the most nodes first, then by name.
func sortedByCount(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(m[keys[i]]) != len(m[keys[j]]) {
			return len(m[keys[i]]) > len(m[keys[j]])
		}
		return keys[i] < keys[j]
	})
	return keys
}

// shown is a node's text made safe to print and short.
func shown(s string) string { return clip(redact.Shown(s), 120) }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// checkAllocation is check --connect for a window whose nodes are its
// own Slurm allocation's, unknown until Slurm grants it: the login node is
// reached and its Slurm asked whether it would grant the allocation
// (sbatch --test-only), and the window's length and cost are bounded.
func checkAllocation(ctx context.Context, out, progress io.Writer, inv *inventory.Inventory, ps []orchestrator.Phase, asJSON *connectJSON) (int, error) {
	fmt.Fprintf(progress, "check: reaching the Slurm login node %s\n", inv.Slurm.Login.Address)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	said, part, err := orchestrator.CheckAllocation(ctx, inv, ps)
	pyxis := checkPyxis(ctx, inv, ps)
	if asJSON != nil {
		a := &allocationJSON{Login: inv.Slurm.Login.Address, Slurm: said, Partition: part, Pyxis: pyxis}
		if err != nil {
			a.Error = err.Error()
		}
		asJSON.Allocation = a
		if perr := asJSON.print(out, inv, ps, nil, nil, 0); perr != nil {
			return 0, perr
		}
	} else {
		// The partition first: a limit that cuts the window is what
		// Slurm's own answer leaves out.
		printPartition(out, part)
		if err != nil {
			fmt.Fprintf(out, "the allocation: %s\n\n", clip(err.Error(), 300))
		} else {
			fmt.Fprintf(out, "the allocation: the login node %s answered; Slurm would grant it:\n  %s\n\n", inv.Slurm.Login.Address, said)
		}
	}
	if asJSON == nil && pyxis != "" {
		fmt.Fprintf(out, "the image: %s\n\n", pyxis)
	}
	if asJSON == nil {
		printEstimate(out, inv, ps)
	}
	if err != nil || part != nil && len(part.Cuts) > 0 {
		return 1, nil
	}
	return 0, nil
}

// checkPyxis is what check --connect says of image.runtime pyxis before
// the window: whether the login node's srun has Pyxis, and so whether the
// image phase imports through it or is SKIP; "" when the image phase is
// not on, or its runtime is another.
func checkPyxis(ctx context.Context, inv *inventory.Inventory, ps []orchestrator.Phase) string {
	if inv.Image.Runtime != inventory.RuntimePyxis || !slices.ContainsFunc(ps, func(p orchestrator.Phase) bool {
		return p.Name == "image" && (p.Enabled == nil || p.Enabled(inv))
	}) {
		return ""
	}
	found, err := orchestrator.CheckPyxis(ctx, inv)
	switch {
	case err != nil:
		return "could not ask srun for Pyxis: " + clip(err.Error(), 200)
	case !found:
		return slurm.NoPyxis + ": IMG-001..003 will be NOT MEASURED (the window INCOMPLETE); it runs without the container"
	}
	return "srun on the login node lists --container-image (Pyxis): each node imports the pin with srun --container-image"
}
