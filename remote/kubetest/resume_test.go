package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// The child process of TestWindowKilledThenResumed: a window run by this
// test binary, SIGKILLed by its parent while its hold phase runs.
const childEnv = "GPUACCEPT_KUBETEST_WINDOW"

// connectDone is the journal's line saying connect is done.
var connectDone = regexp.MustCompile(`"type":"done","at":"[^"]*","phase":"connect"`)

// hold is a phase that runs command in every node's pod.
func hold(command string) orchestrator.Phase {
	return orchestrator.Phase{
		Name:     "hold",
		Deadline: func(*inventory.Inventory) time.Duration { return 15 * time.Minute },
		PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
			return nil, n.Exec().Run(ctx, remote.Cmd{Command: command})
		},
	}
}

// labDial reaches the lab's pods with the lab's own image, never pulled.
func labDial(image string, also func(remote.Executor)) remote.Dialer {
	return func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		kc := *c.Kube
		kc.Image, kc.PullPolicy, kc.StartTimeout = image, "Never", time.Minute
		c.Kube = &kc
		e, err := remote.DialNode(ctx, c)
		if err == nil && also != nil {
			also(e)
		}
		return e, err
	}
}

// runChild is the child's window: KUBETEST_WINDOW is INVENTORY|RUNS|IMAGE.
func runChild(spec string) int {
	parts := strings.Split(spec, "|")
	inv, err := inventory.Load(parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if inv, err = inv.WithKubeNodes(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, _, err = orchestrator.Start(context.Background(), inv, []orchestrator.Phase{phases.Connect, hold("sleep 600"), phases.Teardown},
		orchestrator.Options{RunsDir: parts[1], Dial: labDial(parts[2], nil)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A window's coordinator SIGKILLed mid-phase leaves its pod running (its
// activeDeadlineSeconds bounds it); `run --resume` finds that same pod by
// the run's label, finishes the window in it, and deletes it: the API lists
// no pod with the label, run.json says so (KUBE-003) and the resume.
func TestWindowKilledThenResumed(t *testing.T) {
	k := needKube(t)
	cs := clientset(t, k)
	dir := t.TempDir()
	path := writeInventory(t, dir, k, "image: {reference: \""+zeroPin+"\"}\nquote: {gpus_per_node: 1}\n",
		"  node_selector: kubernetes.io/hostname="+k.Node+"\n")
	runs := filepath.Join(dir, "runs")
	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+path+"|"+runs+"|"+k.Image)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var runDir string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if ds, _ := filepath.Glob(filepath.Join(runs, "*", orchestrator.JournalFile)); len(ds) == 1 {
			if b, _ := os.ReadFile(ds[0]); connectDone.Match(b) {
				runDir = filepath.Dir(ds[0])
				break
			}
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatal("the child's window did not get past connect in 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the hold phase's sleep started
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	label := orchestrator.KubeRunLabel + "=" + filepath.Base(runDir)
	list, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: label})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("after the SIGKILL the API lists %d pods with %s (%v)", len(list.Items), label, err)
	}
	before := list.Items[0]
	if before.Spec.ActiveDeadlineSeconds == nil || *before.Spec.ActiveDeadlineSeconds <= 0 {
		t.Errorf("the pod left behind has no deadline: %v", before.Spec.ActiveDeadlineSeconds)
	}
	var same []string
	dial := labDial(k.Image, func(e remote.Executor) {
		if p, ok := e.(interface{ Pod() (string, string) }); ok {
			_, name := p.Pod()
			same = append(same, name)
		}
	})
	rec, _, err := orchestrator.Resume(t.Context(), runDir, inventory.Load, []orchestrator.Phase{phases.Connect, hold("true"), phases.Teardown},
		orchestrator.Options{Dial: dial})
	if rec == nil {
		t.Fatalf("resume: %v", err)
	}
	if len(same) == 0 || same[0] != before.Name {
		t.Errorf("the resumed window's pods %v, want the one the killed coordinator left, %s", same, before.Name)
	}
	if len(rec.Resumed) != 1 || rec.Kubernetes == nil || len(rec.Kubernetes.PodsDeleted) != 1 || rec.Kubernetes.PodsDeleted[0] != before.Name {
		t.Errorf("resumed %v, run.json kubernetes %+v", rec.Resumed, rec.Kubernetes)
	}
	judged, held := false, false
	for _, v := range rec.Verdicts {
		if v.ID == "KUBE-003" {
			judged = true
			if v.Status != record.Pass {
				t.Errorf("KUBE-003 %s %s | %s", v.Status, v.Measured, v.Detail)
			}
		}
	}
	for _, p := range rec.Phases {
		if p.Phase == "hold" {
			held = true
			if p.Outcome != record.OK {
				t.Errorf("hold on %s after the resume: %s %s", p.Node, p.Outcome, p.Error)
			}
		}
	}
	if !judged || !held {
		t.Errorf("KUBE-003 judged %v, the hold phase run %v", judged, held)
	}
	if list, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: label}); err != nil || len(list.Items) != 0 {
		t.Errorf("after the resumed window the API lists %d pods with %s (%v)", len(list.Items), label, err)
	}
}
