package phases

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote"
)

// The inference load test, in three steps, one file each: this one starts
// the servers and waits for them (WORK-001), inference_load.go drives them
// with the load generator gpuaccept ships (uploaded to the node, run there
// over loopback so that neither the coordinator's link nor its CPU shapes
// the figures), inference_judge.go holds the figures to the buyer's
// targets.

// inferencePhase is the phase's name in run.json.
const inferencePhase = "inference"

// containerLabel marks every container a workload phase starts, so that
// teardown removes them, stopped or not, after a Ctrl-C or on --resume.
const containerLabel = "gpuaccept.window"

// Inference runs the buyer's OpenAI-compatible server on every node (one
// per GPU group), measures its start, and drives it with the load
// generator: one workload.Inference per node.
var Inference = orchestrator.Phase{
	Name:    inferencePhase,
	Loads:   true,
	Enabled: inferenceEnabled,
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.Workload.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return orDefault(inv.Phases.Workload.Timeout, inferenceBound(inv))
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		s, err := newInfNode(ctx, w, n)
		if err != nil {
			return nil, err
		}
		return s.run(ctx)
	},
	Judge: judgeInference,
}

func inferenceEnabled(inv *inventory.Inventory) bool {
	wl := inv.Phases.Workload
	return wl.Enabled && wl.Kind == "inference"
}

// inferenceBound is the phase's built-in bound on a node: the upload and
// the start, the servers' ready timeout, then every run of the sweep
// (each level's warm-up, measured time and a request's timeout to drain)
// as many times as retests allow, and a minute a run to fetch its logs.
func inferenceBound(inv *inventory.Inventory) time.Duration {
	return 2*time.Minute + orDefault(inv.Phases.Workload.Inference.ReadyTimeout, 10*time.Minute) +
		time.Duration(record.MaxRuns(inv.Acceptance.RetestOr()))*infRunBound(inv)
}

// infRunBound bounds one run of the sweep on a node.
func infRunBound(inv *inventory.Inventory) time.Duration {
	in := inv.Phases.Workload.Inference
	per := orDefault(in.Warmup, 0) + orDefault(in.Duration, time.Minute) + orDefault(in.RequestTimeout, time.Minute) + 10*time.Second
	levels := max(len(in.Levels), 1)
	return time.Duration(levels)*per + time.Minute
}

// infNode is the load test on one node while it runs.
type infNode struct {
	w       *orchestrator.Window
	n       *orchestrator.Node
	e       remote.Executor
	in      inventory.WorkloadInference
	rt      string // podman or docker
	image   string // what `run` starts: sha256:ID, checked against the pin
	state   string // the window's private directory on the node
	loadgen string // the uploaded generator's path there
	sum     string // its sha256
	prompts string // the uploaded prompt set's path there, "" for synthetic prompts
	smi     bool   // the node has nvidia-smi: GPU memory is sampled
	gpus    int    // GPUs the node has (nvidia-smi), else the quote's, 0 unknown
	servers []workload.Server
	names   []string // the servers' container names
	started []time.Time
	// since is each server's start on the node's clock (nodeStarted).
	since []string
}

// newInfNode finds what the node needs (a container runtime; nvidia-smi
// for the memory figures, optional), the image and the generator on it.
// A node without podman or docker is NOT MEASURED.
func newInfNode(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (*infNode, error) {
	e, err := execOf(n)
	if err != nil {
		return nil, err
	}
	s := &infNode{w: w, n: n, e: e, in: w.Inv.Phases.Workload.Inference, state: stateDir(n)}
	if s.state == "" {
		return nil, errors.New("the window's private directory on the node is unknown (the tools phase did not run)")
	}
	has, err := nodeHas(ctx, w, n, "podman", "docker", "nvidia-smi")
	if err != nil {
		return nil, err
	}
	if s.rt = containerRuntime(w.Inv.Image.Runtime, has); s.rt == "" && podImager(n) != nil {
		return nil, orchestrator.Unmeasured("kubernetes", "a pod starts no container of its own, and gpuaccept starts no pod of the server's (phases.workload.image): the load test not measured")
	}
	if s.rt == "" {
		return nil, orchestrator.Unmeasured("podman", "neither podman nor docker to start the inference server: the load test not measured")
	}
	s.smi = has["nvidia-smi"]
	if s.image, err = s.imageRef(ctx); err != nil {
		return nil, err
	}
	if err := s.upload(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// imageRef is the server's image as the node's runtime holds it: the one
// the image phase loaded and checked when the workload runs in the
// window's image, else the workload's own, pulled and checked against
// its pin here (and listed for teardown, as the image phase's are).
func (s *infNode) imageRef(ctx context.Context) (string, error) {
	ref := s.w.Inv.Phases.Workload.Image
	if ref == "" {
		ref = s.w.Inv.Image.Reference
		var im Imaged
		if _, ok := s.w.Result("image", -1, &im); ok && im.Runtime == s.rt {
			if ni := im.Nodes[s.n.Name]; ni != nil && ni.Match && isImageID("sha256:"+ni.ID) {
				return "sha256:" + ni.ID, nil
			}
		}
	}
	if ref == "" {
		return "", errors.New("no image to run the server in: set phases.workload.image or image.reference")
	}
	res := &Imaged{Mode: "pull", Reference: ref, Pin: pinOf(ref), Runtime: s.rt}
	ni := &NodeImage{}
	loadAndCheck(ctx, s.w, s.n, res, ni)
	if ni.Error != "" {
		return "", fmt.Errorf("the workload's image: %s", ni.Error)
	}
	return "sha256:" + ni.ID, nil
}

// run starts every server, waits for each to answer, drives them (again
// while a failed figure earns a retest), and stops them whatever
// happened: a server left running holds the node's GPUs.
func (s *infNode) run(ctx context.Context) (workload.Inference, error) {
	defer s.stop(ctx)
	if err := s.plan(ctx); err != nil {
		return workload.Inference{}, err
	}
	ready := s.start(ctx)
	res := workload.Inference{Servers: s.servers}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if ready == 0 {
		return res, fmt.Errorf("no server got ready: %s", firstLine(s.servers[0].Error))
	}
	runs, err := retested(ctx, s.w, s.n.Name, "load test", s.load, func(sv []workload.Server) string {
		return infFails(s.w.Inv, sv)
	})
	if len(runs) > 0 {
		res.Servers = runs[len(runs)-1]
	}
	if len(runs) > 1 {
		res.Runs = runs
	}
	if err != nil {
		return res, err
	}
	for _, sv := range res.Servers {
		if sv.ReadySecs != nil && len(sv.Levels) > 0 {
			return res, nil
		}
	}
	return res, fmt.Errorf("no server took the load: %s", firstLine(firstNonEmpty(res.Servers[0].Error, "no level measured")))
}

// plan names the servers and gives each its GPU group and port. With
// more than one server a node's GPUs are split evenly, which needs their
// count: nvidia-smi's, else the quote's.
func (s *infNode) plan(ctx context.Context) error {
	per := max(s.in.ServersPerNode, 1)
	if s.smi {
		if mem, err := s.sampleOnce(ctx); err == nil {
			s.gpus = len(mem)
		}
	}
	if s.gpus == 0 {
		s.gpus = s.w.Inv.Quote.GPUsPerNode
	}
	if per > 1 && s.gpus == 0 {
		return orchestrator.Unmeasured("nvidia-smi", "servers_per_node is %d, but neither nvidia-smi nor quote.gpus_per_node says how many GPUs to split among them: the load test not measured", per)
	}
	if per > 1 && s.gpus < per {
		return fmt.Errorf("servers_per_node is %d, but the node has %d GPU(s)", per, s.gpus)
	}
	for i := range per {
		sv := workload.Server{Index: i, Port: s.in.Port + i, Image: s.image}
		if per > 1 {
			lo, hi := i*s.gpus/per, (i+1)*s.gpus/per-1
			sv.GPUs = fmt.Sprint(lo)
			if hi > lo {
				sv.GPUs = fmt.Sprintf("%d-%d", lo, hi)
			}
		}
		s.servers = append(s.servers, sv)
		s.names = append(s.names, containerName(s.w.RunID(), s.n.Name, i))
	}
	s.started = make([]time.Time, per)
	s.since = make([]string, per)
	return nil
}

// containerName is server i's container on node: the window's, the
// node's and the server's, in the characters a container name may have.
func containerName(runID, node string, i int) string {
	name := []byte(fmt.Sprintf("gpuaccept-%s-%s-inf%d", runID, node, i))
	for k, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			name[k] = '-'
		}
	}
	return string(name)
}

// start starts every server, one after the other (a runtime starts one
// container at a time anyway), then waits for all of them at once: the
// health endpoint, then one completion (the generator's `ready`). It
// returns how many got ready; each server's Error says why one did not,
// with its log's last lines.
func (s *infNode) start(ctx context.Context) int {
	for i := range s.servers {
		sv := &s.servers[i]
		s.started[i] = time.Now()
		out, err := runOn(ctx, s.w, s.n, s.runCommand(i))
		secs := time.Since(s.started[i]).Seconds()
		s.since[i], out = nodeStarted(out)
		if err != nil {
			sv.Error = clipText(redact.Shown(fmt.Sprintf("%s run: %s (%v)", s.rt, lastLine(string(out)), err)), 600)
			sv.LogTail = s.logTail(ctx, i)
			continue
		}
		sv.StartedSecs = &secs
	}
	var wg sync.WaitGroup
	for i := range s.servers {
		if s.servers[i].StartedSecs == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.ready(ctx, i)
		}()
	}
	wg.Wait()
	ready := 0
	for _, sv := range s.servers {
		if sv.ReadySecs != nil {
			ready++
		}
	}
	return ready
}

// runCommand starts server i detached, on the host's network, with its
// GPU group, the window's label and mark (teardown finds it by either),
// the buyer's container arguments and command ({port} is the server's).
// A container of the same name left by a coordinator that was lost goes
// first.
func (s *infNode) runCommand(i int) string {
	wl := s.w.Inv.Phases.Workload
	rt := remote.Quote(s.rt)
	name := remote.Quote(s.names[i])
	args := []string{rt, "run", "-d", "--network", "host", "--name", name,
		"--label", remote.Quote(containerLabel + "=" + s.w.RunID()), "-e", "GPUACCEPT_RUN=" + remote.Quote(s.w.RunID())}
	if s.w.Inv.Image.GPUs == "all" {
		args = append(args, gpuGroupFlags(s.rt, s.servers[i].GPUs)...)
	}
	for _, a := range wl.ContainerArgs {
		args = append(args, remote.Quote(a))
	}
	args = append(args, remote.Quote(s.image))
	port := fmt.Sprint(s.servers[i].Port)
	for _, a := range s.in.Command {
		args = append(args, remote.Quote(strings.ReplaceAll(a, "{port}", port)))
	}
	// The node's clock when the runtime is asked (startedMark): the
	// readiness counts from it on the same clock, so no exec's latency
	// between the coordinator and the node is lost from the figure.
	return rt + " rm -f " + name + " >/dev/null 2>&1; printf '" + startedMark + " %s\\n' \"$(date +%s.%N)\"; " + strings.Join(args, " ") + " 2>&1"
}

// startedMark starts the line of the server's start command that gives
// the node's clock (date +%s.%N) just before the runtime is asked.
const startedMark = "gpuaccept-started"

// nodeStarted is the Unix time the start command's output gives on its
// first line, "" when it gives none (a date without %N, a node that
// printed something else): then the coordinator's clock serves.
func nodeStarted(out []byte) (since string, rest []byte) {
	line, after, _ := bytes.Cut(out, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) != 2 || f[0] != startedMark {
		return "", out
	}
	if _, err := strconv.ParseFloat(f[1], 64); err != nil || !strings.Contains(f[1], ".") {
		return "", after
	}
	return f[1], after
}

// gpuGroupFlags give a container the GPUs of group ("0-3", "5"; "" for
// every GPU): podman's CDI devices, docker's --gpus device list.
func gpuGroupFlags(runtime, group string) []string {
	if group == "" {
		return gpuFlags(runtime)
	}
	var ids []string
	lo, hi := group, group
	if a, b, ok := strings.Cut(group, "-"); ok {
		lo, hi = a, b
	}
	var l, h int
	fmt.Sscan(lo, &l)
	fmt.Sscan(hi, &h)
	for g := l; g <= h; g++ {
		ids = append(ids, fmt.Sprint(g))
	}
	if runtime == "podman" {
		var out []string
		for _, id := range ids {
			out = append(out, "--device", "nvidia.com/gpu="+id)
		}
		return out
	}
	return []string{"--gpus", remote.Quote(`"device=` + strings.Join(ids, ",") + `"`)}
}

// logTailBytes bounds what a server's log gives its verdict.
const logTailBytes = 4 << 10

// logTail is the last lines the server's container printed (node text:
// bounded, its control characters escaped, secrets scrubbed), "" when
// the runtime gives none.
func (s *infNode) logTail(ctx context.Context, i int) string {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var out capture
	out.headMax, out.tailMax = 1, logTailBytes
	e, err := execOf(s.n)
	if err != nil {
		return ""
	}
	log, _, err := s.w.Log(ctx, s.n)
	if err != nil {
		return ""
	}
	defer log.Close()
	cmd := remote.Quote(s.rt) + " logs --tail 40 " + remote.Quote(s.names[i]) + " 2>&1"
	fmt.Fprintf(log, "$ %s\n", cmd)
	e.Run(lctx, remote.Cmd{Command: cmd, Env: nodeEnv(s.w, s.n), Stdout: &out, Stderr: log})
	b := out.Bytes()
	log.Write(b)
	return shownTail(string(b))
}

// stop removes every server's container, on a context of its own: the
// phase's may be spent (its deadline, a Ctrl-C), and teardown's label
// sweep is the second line, not the first.
func (s *infNode) stop(ctx context.Context) {
	if len(s.names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var names []string
	for _, nm := range s.names {
		names = append(names, remote.Quote(nm))
	}
	if _, err := runOn(ctx, s.w, s.n, remote.Quote(s.rt)+" rm -f "+strings.Join(names, " ")+" 2>&1"); err != nil {
		s.w.Progress.Node(s.n.Name, "inference: removing the servers: %s (teardown removes them)", firstLine(err.Error()))
	}
}
