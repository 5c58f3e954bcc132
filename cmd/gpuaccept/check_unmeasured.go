package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
)

// haveProbe lists which of the staging sources' tools a node has, and
// whether it has an sshd (a pod's image needs one for mpirun between the
// pods); only their presence is read: they are not listed among the tools.
const haveProbe = `printf '@@ have\n'; for t in aws gcloud gsutil azcopy curl wget; do command -v "$t" >/dev/null 2>&1 && echo "$t"; done
{ command -v sshd || [ -x /usr/sbin/sshd ] || [ -x /usr/local/sbin/sshd ] || [ -x /sbin/sshd ]; } >/dev/null 2>&1 && echo sshd
command -v ssh >/dev/null 2>&1 && echo ssh
`

// haveTools reads the probe's "have" section: the names it asked for that
// the node has.
func haveTools(out []byte) map[string]bool {
	have := map[string]bool{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "@@ ") {
			in = line == "@@ have"
			continue
		}
		switch t := strings.TrimSpace(line); {
		case !in:
		case t == "aws", t == "gcloud", t == "gsutil", t == "azcopy", t == "curl", t == "wget", t == "sshd", t == "ssh":
			have[t] = true
		}
	}
	return have
}

// willNotMeasure says, for one node's tool answers (toolAnswers) and the
// staging tools it has, what each phase the plan runs cannot measure
// there, as the window would say it: a tool the node lacks is NOT
// MEASURED and such a window can only end INCOMPLETE. A pod (transport
// kubernetes) is the window's image: it runs no container of its own and
// a job "in the image" runs in it, and mpirun reaches it only through the
// image's sshd.
func willNotMeasure(inv *inventory.Inventory, ps []orchestrator.Phase, tools map[string]string, have map[string]bool, pod bool) []string {
	on := map[string]bool{}
	for i := range ps {
		p := &ps[i]
		on[p.Name] = p.Enabled == nil || p.Enabled(inv)
	}
	lacks := func(t string) bool { return tools[t] == "missing" }
	var out []string
	if on["telemetry"] && lacks("nvidia-smi") {
		// The kernel's Xid lines and the IB counters are still read.
		out = append(out, "no nvidia-smi: telemetry's HEALTH-011, -013, -014 and -016 will not be measured")
	}
	if on["diag"] && lacks("dcgmi") {
		switch {
		case pod && lacks("podman") && lacks("docker"):
			out = append(out, "no dcgmi in the pod's image, and a pod runs no phases.diag.image: DIAG-001 will not be measured")
		case inv.Phases.Diag.Image == "":
			out = append(out, "no dcgmi and phases.diag.image not set: DIAG-001 will not be measured")
		case lacks("podman") && lacks("docker"):
			out = append(out, "no dcgmi, and neither podman nor docker to run phases.diag.image: DIAG-001 will not be measured")
		}
	}
	a := inv.Phases.AllReduce
	if on["intranode"] && lacks("all_reduce_perf") {
		out = append(out, fmt.Sprintf("no %s (phases.allreduce.binary): NCCL-001, NCCL-003 and NCCL-007 (intra-node) will not be measured", a.Binary))
	}
	if on["allreduce"] {
		var no []string
		if a.Launcher != "srun" && lacks("mpirun") {
			no = append(no, "no mpirun")
		}
		if lacks("all_reduce_perf") {
			no = append(no, "no "+a.Binary)
		}
		if pod && a.Launcher != "srun" && len(inv.Nodes) > 1 {
			// podsshd.sh's first needs (it then logs in to find orted).
			switch {
			case !have["sshd"]:
				no = append(no, "no sshd in the pod's image (mpirun reaches the other pods through it)")
			case !have["ssh"]:
				no = append(no, "no ssh client in the pod's image (mpirun's)")
			}
		}
		ids := "NCCL-001, NCCL-002 and NCCL-006"
		if on["bisect"] {
			ids = "NCCL-001, NCCL-002, NCCL-004 and NCCL-006"
		}
		if len(no) > 0 {
			out = append(out, fmt.Sprintf("%s: %s will not be measured (the collectives need it on every node)", strings.Join(no, ", "), ids))
		}
	}
	rt := inv.Image.Runtime
	if on["image"] && !pod && (rt == "docker" || rt == "podman") && lacks(rt) {
		out = append(out, fmt.Sprintf("no %s (image.runtime): IMG-001 and IMG-002 will not be measured", rt))
	}
	if f := inv.Phases.Failure; on["failure"] {
		inImage := inventory.On(f.InImage) && inv.Image.Reference != "" && !pod
		switch {
		case inImage && (rt == "docker" || rt == "podman") && lacks(rt):
			out = append(out, fmt.Sprintf("no %s to run the job in the image: RECOV-001..003 will not be measured", rt))
		case !inImage && lacks("python3"):
			out = append(out, fmt.Sprintf("no %s (phases.failure.python): RECOV-001..003 will not be measured", f.Python))
		case !inImage && (lacks("torch") || strings.HasPrefix(tools["torch"], "fails")):
			out = append(out, fmt.Sprintf("%s cannot import torch: RECOV-001..003 will not be measured", f.Python))
		}
	}
	if wl := inv.Phases.Workload; on["training"] {
		inImage := inventory.On(wl.Training.InImage) && (wl.Image != "" || inv.Image.Reference != "")
		switch {
		case pod && inImage && wl.Image != "" && wl.Image != inv.Image.Reference:
			out = append(out, "a pod runs image.reference, not phases.workload.image: WORK-001, WORK-008..011 will not be measured")
		case pod && (lacks("torchrun") || strings.HasPrefix(tools["torchrun"], "fails")):
			out = append(out, fmt.Sprintf("%s cannot run torchrun in the pod: WORK-001, WORK-008..011 will not be measured", wl.Training.Python))
		case pod:
		case inImage && (rt == "docker" || rt == "podman") && lacks(rt):
			out = append(out, fmt.Sprintf("no %s to run the training job in the image: WORK-001, WORK-008..011 will not be measured", rt))
		case !inImage && (lacks("torchrun") || strings.HasPrefix(tools["torchrun"], "fails")):
			out = append(out, fmt.Sprintf("%s cannot run torchrun: WORK-001, WORK-008..011 will not be measured", wl.Training.Python))
		}
	}
	switch {
	case !on["inference"]:
	case pod && lacks("podman") && lacks("docker"):
		out = append(out, "a pod starts no container of its own for the inference server: WORK-001..007 and WORK-010 will not be measured")
	case lacks("podman") && lacks("docker"):
		out = append(out, "neither podman nor docker to start the inference server: WORK-001..007 and WORK-010 will not be measured")
	}
	if on["staging"] {
		seen := map[string]bool{}
		for _, src := range inv.Phases.Staging.Sources {
			scheme, _, _ := strings.Cut(src.URL, "://")
			var need []string
			switch scheme {
			case "s3":
				need = []string{"aws"}
			case "gs":
				need = []string{"gcloud", "gsutil"}
			case "az":
				// One blob with a SAS token is fetched as any https URL
				// (the token must stay out of azcopy's command line).
				need = []string{"azcopy"}
				if strings.Contains(src.URL, "?") {
					need = []string{"curl", "wget"}
				}
			case "http", "https":
				need = []string{"curl", "wget"}
			}
			found := len(need) == 0
			for _, t := range need {
				found = found || have[t]
			}
			if !found && !seen[strings.Join(need, " ")+scheme] {
				seen[strings.Join(need, " ")+scheme] = true
				out = append(out, fmt.Sprintf("no %s for %s:// sources: STAGE-001 and STAGE-002 will not be measured", strings.Join(need, " or "), scheme))
			}
		}
	}
	return out
}

// notMeasuredGroups is every node's willNotMeasure, each reason once with
// its nodes as a host range, the most nodes first.
func notMeasuredGroups(inv *inventory.Inventory, ps []orchestrator.Phase, res []orchestrator.Probed) []reasonGroup {
	by := map[string][]string{}
	for _, r := range res {
		if r.Err != nil {
			continue
		}
		for _, why := range willNotMeasure(inv, ps, toolAnswers(r.Out), haveTools(r.Out), isPod(inv, r.Node)) {
			by[why] = append(by[why], r.Node)
		}
	}
	var out []reasonGroup
	for _, why := range sortedByCount(by) {
		out = append(out, reasonGroup{Nodes: hostlist.Compress(by[why]), Count: len(by[why]), Reason: why})
	}
	return out
}

// isPod: the inventory's node name is reached through a cluster's API, in
// a pod.
func isPod(inv *inventory.Inventory, name string) bool {
	for _, n := range inv.Nodes {
		if n.Name == name {
			return inv.TransportOf(n) == inventory.TransportKubernetes
		}
	}
	return false
}

// printNotMeasured says before the window what it could not measure.
func printNotMeasured(w io.Writer, groups []reasonGroup) {
	if len(groups) == 0 {
		return
	}
	fmt.Fprintln(w, "not measured (a tool the node lacks; the window would end INCOMPLETE):")
	for _, g := range groups {
		fmt.Fprintf(w, "  %s: %s\n", g.Nodes, g.Reason)
	}
}

// reasonGroup is one reason and the nodes that gave it.
type reasonGroup struct {
	Nodes  string `json:"nodes"` // a host range
	Count  int    `json:"count"`
	Reason string `json:"reason"`
}
