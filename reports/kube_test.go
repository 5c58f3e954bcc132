package reports

import (
	"fmt"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// kubeVerdicts are a window's verdicts on a managed Kubernetes cluster's
// nodes as the window words them: one node's device plugin offers 7 of
// its 8 GPUs, one is cordoned, the pods are gone at the end.
func kubeVerdicts(nodes []record.Node) []record.Verdict {
	v := func(id, node string, s record.Status, measured, detail string) record.Verdict {
		x := record.NewVerdict(id, node)
		x.Status, x.Measured, x.Detail = s, measured, detail
		return x
	}
	plugin := "device plugin nvcr.example/nvidia/k8s-device-plugin:v0.17.0"
	out := []record.Verdict{v("KUBE-003", "", record.Pass, fmt.Sprintf("%d pod(s) deleted", len(nodes)),
		"the API lists none with gpuaccept/run=20261201T080000Z-vendor-a-4")}
	for i, n := range nodes {
		ready := v("KUBE-001", n.Name, record.Pass, "Ready", "Ready and schedulable, no pressure; taints nvidia.com/gpu=present:NoSchedule; kubelet v1.31.4, containerd://1.7.24")
		gpus := v("KUBE-002", n.Name, record.Pass, "nvidia.com/gpu: 8 allocatable of 8", "as quoted, all allocatable; the pod's 8 as nvidia-smi saw them; "+plugin)
		switch i {
		case 1:
			gpus = v("KUBE-002", n.Name, record.Fail, "nvidia.com/gpu: 7 allocatable of 8",
				"pods can ask for 7; 1 of the 8 its device plugin found are not allocatable (unhealthy or held back), the quote says 8; "+plugin)
		case 2:
			ready = v("KUBE-001", n.Name, record.Fail, "cordoned", "unschedulable: the scheduler places no new pod on it")
		}
		out = append(out, ready, gpus)
	}
	return out
}

// The summary of a window on a managed Kubernetes cluster: the node
// whose device plugin holds back a GPU and the cordoned one are named with
// the API's figures, and the summary fits every width from 60 to 160.
func TestSummaryOfAKubernetesWindow(t *testing.T) {
	run := fleet{n: 4, interQuoted: 370}.run()
	run.Verdicts = append(run.Verdicts, kubeVerdicts(run.Nodes)...)
	if got := run.Result(); got.Outcome != record.OutcomeNotAccepted || !strings.Contains(strings.Join(got.Failed, " "), "KUBE-002") {
		t.Fatalf("result %+v", got)
	}
	s := summaryOf(t, run, SummaryOptions{})
	golden(t, "summary-4-kube.txt", []byte(s))
	flat := strings.Join(strings.Fields(s), " ")
	for _, want := range []string{"gpu-02: KUBE-002 nvidia.com/gpu: 7 allocatable of 8: pods can ask for 7", "gpu-03: KUBE-001 cordoned: unschedulable: the scheduler places no new pod on it"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the summary does not say %q:\n%s", want, s)
		}
	}
	for w := 60; w <= 160; w += 7 {
		fits(t, fmt.Sprintf("kubernetes at %d", w), summaryOf(t, run, SummaryOptions{Width: w}), w)
	}
}
