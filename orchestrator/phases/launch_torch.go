package phases

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// torchLauncher starts a torchrun launcher on each node of a multi-node
// job (the failure test's, the training load test's), on the host or in
// the pinned image, and streams what each says, line by line, to its
// observers as it arrives: both phases time what they measure by the
// arrival of a line at the coordinator, whose clock is the only one
// they share.
type torchLauncher struct {
	w *orchestrator.Window
	// python runs torch.distributed.run; procs workers per node.
	python string
	procs  int
	// inImage, image and containerArgs: when the job runs in the pinned
	// image (inventory.On(inImage) and an image is set), and what more
	// the container is given.
	inImage       *bool
	image         string
	containerArgs []string
	// basePort: the inventory's rendezvous port; 0 derives one from the
	// run ID and salt, so that two phases of one window never share a
	// store.
	basePort int
	salt     string
	// names: the prefix of the containers' names and of the rendezvous
	// IDs; labels: extra container labels beside gpuaccept.run.
	names  string
	labels []string
	// onLine gets every stdout line; onErrLine every stderr line (the
	// launcher's own log), when set. onEnd runs when a launcher ended.
	onLine    func(node, line string, at time.Time)
	onErrLine func(node, line string, at time.Time)
	onEnd     func()
	// launcherTorch: each node's launcher PyTorch, where it was probed
	// before the launches (the failure test's); "" where not known.
	launcherTorch map[string]string

	mu       sync.Mutex
	launches map[string]*launch
	wg       sync.WaitGroup
	// containers numbers the job's container runs: every one needs a
	// name of its own (see inImageArgs).
	containers atomic.Int64
}

// launch is one torchrun launcher on a node.
type launch struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// port is the rendezvous port of a launch generation: an old store on a
// reused port would be joined silently.
func (t *torchLauncher) port(gen int) int {
	base := t.basePort
	if base == 0 {
		h := fnv.New32a()
		h.Write([]byte(t.w.RunID() + t.salt))
		base = 29500 + int(h.Sum32()%2000)
	}
	return base + gen
}

// torchrunArgs is the torchrun launch of n in generation gen, up to the
// script or command (which the caller appends): nnodes is torchrun's
// --nnodes ("3", or "2:3" for an elastic job), logDir where the launcher
// keeps its workers' logs.
func (t *torchLauncher) torchrunArgs(n *orchestrator.Node, nnodes string, restarts, gen int, logDir string) []string {
	first := t.w.Active()[0]
	rdzv := t.w.FabricHost(first)
	// Which launcher serves the rendezvous store is said, not guessed:
	// torchrun guesses by matching the endpoint to the machine's host
	// name and its addresses, and a fabric or pod address that the host
	// name does not resolve to left every launcher a client of a store
	// no one served (the lab's Kubernetes nodes, each an address of one
	// machine: every launcher timed out connecting).
	isHost := 0
	if n == first {
		isHost = 1
	}
	args := []string{remote.Quote(t.python), "-m", "torch.distributed.run",
		"--nnodes=" + nnodes, fmt.Sprintf("--nproc_per_node=%d", t.procs),
		"--rdzv_backend=c10d", fmt.Sprintf("--rdzv_endpoint=%s:%d", remote.Quote(rdzv), t.port(gen)),
		fmt.Sprintf("--rdzv_id=%s-g%d", t.names, gen), fmt.Sprintf("--max_restarts=%d", restarts),
		// Found in the lab: a 1 s monitor and a 5 s last call re-form an
		// elastic group in ~20 s instead of ~45 s; torch 1.13's torchrun
		// needs --redirects/--tee to start at all on Python 3.11.
		"--monitor_interval=1", fmt.Sprintf("--rdzv_conf=last_call_timeout=5,join_timeout=60,is_host=%d", isHost),
		"--redirects=1", "--tee=1", "--log_dir=" + remote.Quote(logDir)}
	if v := t.launcherTorch[n.Name]; v != "" && !strings.HasPrefix(v, "0.") && !strings.HasPrefix(v, "1.") {
		// The rendezvous tells nodes apart by address and PID, the
		// address by default the host name's: two nodes of one name (the
		// lab's pods on one machine, whose PIDs matched under load) were
		// one node, and each formed a job of its own. 2.x takes the
		// node's address (1.13 refuses the option); it is also the one
		// published for the workers' store.
		args = append(args, "--local_addr="+remote.Quote(t.w.FabricHost(n)))
	}
	return args
}

// shellLine is the whole command for a node: the job's directory made
// private (its name is predictable and it may sit on a shared
// filesystem: it is written in only when it is this user's alone), mkdir
// made in it, check run (the pushed script's check, or ""), env exported,
// and args exec'd.
func shellLine(dir, mkdir, check string, env, args []string) string {
	return fmt.Sprintf("cd && %s && mkdir -p %s && %sexport %s; exec %s",
		remote.PrivateDirCmd(path.Dir(dir), false), remote.Quote(mkdir), check, strings.Join(env, " "), strings.Join(args, " "))
}

// noSharedStore turns off what made the elastic test hang on PyTorch 2.x
// (2.4 and later; field run on 2.11, lab on 2.6): each agent shares one
// TCPStore with its workers, and which host runs it (MASTER_ADDR/PORT) is
// published in the rendezvous store only on an agent's first round
// (DynamicRendezvousHandler caches _bootstrap_store_info). A node that
// joins a later round (the victim relaunched) is a fresh agent: it waits
// for that round's MASTER_ADDR, which the survivors' rank 0 never writes
// again, and rank 0 waits for the newcomer's role_info, both until their
// 60 s store timeout. With it off, rank 0 publishes them every round, as
// 1.13 did; 1.13 ignores the variable.
const noSharedStore = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"

// imageID is the pinned image as loaded on n, when the job runs in a
// container of it there. A pod's container is the window's image already
// (trainingUnmeasured leaves a pod no other): torchrun runs in it as on a
// host, "".
func (t *torchLauncher) imageID(n *orchestrator.Node) string {
	if !inventory.On(t.inImage) || t.image == "" || podImager(n) != nil {
		return ""
	}
	if t.image == t.w.Inv.Image.Reference {
		var im Imaged
		if _, ok := t.w.Result("image", -1, &im); ok {
			if ni := im.Nodes[n.Name]; ni != nil && ni.Match && ni.ID != "" {
				return ni.ID
			}
		}
	}
	return pinOf(t.image)
}

// inImageArgs wraps the torchrun words in a container run of the pinned
// image: host network and IPC (NCCL and the rendezvous see the node's
// own), the GPUs, the job's directory and script mounted, the window's
// mark and a label on it (failure.sh and teardown find it by them). The
// runtime's signal proxy passes a TERM from the guard on to torchrun.
func (t *torchLauncher) inImageArgs(n *orchestrator.Node, gen int, id, dir string, env, torchrun []string) []string {
	im := t.w.Inv.Image
	// The host's PIDs too: the c10d rendezvous tells nodes apart by host
	// name and PID, and in a container of its own every torchrun is PID 1,
	// so two nodes on one machine (the H200 field run's set-up) were one
	// node to it and each formed a job alone.
	run := []string{remote.Quote(im.Runtime), "run", "--rm", "--network", "host", "--ipc", "host", "--pid", "host",
		// A name per run, not per node and generation: the victim's
		// relaunch reused its killed container's name, and under load
		// podman had not removed that one yet ("the container name ... is
		// already in use", exit 125; the victim never came back).
		"--name", remote.Quote(fmt.Sprintf("gpuaccept-%s-%s-g%d-%d", t.names, n.Name, gen, t.containers.Add(1))),
		"--label", remote.Quote("gpuaccept.run=" + t.w.RunID())}
	for _, l := range t.labels {
		run = append(run, "--label", remote.Quote(l))
	}
	run = append(run, "-e", "GPUACCEPT_RUN="+remote.Quote(t.w.RunID()), "-v", remote.Quote(dir+":"+dir))
	for _, e := range env {
		run = append(run, "-e", e)
	}
	if im.GPUs == "all" {
		run = append(run, gpuFlags(im.Runtime)...)
	}
	for i, a := range torchrun {
		if a == `"$f"` {
			// The checked script, mounted where the container sees it.
			run = append(run, "-v", `"$f":/gpuaccept/ddp_train.py:ro`)
			torchrun[i] = "/gpuaccept/ddp_train.py"
		}
	}
	for _, a := range t.containerArgs {
		run = append(run, remote.Quote(a))
	}
	// The window's image runs by the ID the image phase loaded; an image
	// of the workload's own by its pinned reference, which the runtime
	// pulls when the node lacks it.
	target := "sha256:" + id
	if t.image != "" && t.image != t.w.Inv.Image.Reference {
		target = remote.Quote(t.image)
	}
	return append(append(run, target), torchrun...)
}

// start launches cmd on n, its output streamed to the observers and into
// n's raw log of the phase; a launcher still running there is cancelled.
func (t *torchLauncher) start(ctx context.Context, n *orchestrator.Node, cmd string) {
	lctx, cancel := context.WithCancel(ctx)
	l := &launch{cancel: cancel, done: make(chan struct{})}
	t.mu.Lock()
	if t.launches == nil {
		t.launches = map[string]*launch{}
	}
	if old := t.launches[n.Name]; old != nil {
		old.cancel()
	}
	t.launches[n.Name] = l
	t.mu.Unlock()
	client := n.Exec()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(l.done)
		if t.onEnd != nil {
			defer t.onEnd()
		}
		log, _, err := t.w.Log(ctx, n)
		if err != nil {
			l.err = err
			return
		}
		defer log.Close()
		fmt.Fprintf(log, "$ %s\n", cmd)
		var stdout io.Writer = log
		var lines, errLines *lineWriter
		if t.onLine != nil {
			lines = &lineWriter{fn: func(line string) { t.onLine(n.Name, line, time.Now()) }}
			stdout = io.MultiWriter(lines, log)
		}
		var stderr io.Writer = log
		if t.onErrLine != nil {
			errLines = &lineWriter{fn: func(line string) { t.onErrLine(n.Name, line, time.Now()) }}
			stderr = io.MultiWriter(errLines, log)
		}
		if client == nil {
			l.err = fmt.Errorf("%s: not connected", n.Name)
			return
		}
		err = client.Run(lctx, remote.Cmd{
			Command: cmd,
			Env:     nodeEnv(t.w, n),
			Stdout:  stdout,
			Stderr:  stderr,
			Grace:   3 * time.Second,
		})
		if lines != nil {
			lines.flush()
		}
		if errLines != nil {
			errLines.flush()
		}
		fmt.Fprintf(log, "# launcher ended: %v\n", err)
		l.err = err
	}()
}

// ended says whether n's latest launcher has exited, and how; false for
// a node never launched.
func (t *torchLauncher) ended(n *orchestrator.Node) (bool, error) {
	t.mu.Lock()
	l := t.launches[n.Name]
	t.mu.Unlock()
	if l == nil {
		return false, nil
	}
	select {
	case <-l.done:
		return true, l.err
	default:
		return false, nil
	}
}

// stop cancels every launcher and waits for them within ctx; false when
// ctx ended first.
func (t *torchLauncher) stop(ctx context.Context) bool {
	t.mu.Lock()
	for _, l := range t.launches {
		l.cancel()
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// lineWriter calls fn with every complete line written to it.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(string)
}

// maxLine bounds one line a node may hold back: a node that prints no
// newline must not fill the coordinator's memory.
const maxLine = 64 << 10

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.fn(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	for len(l.buf) > maxLine {
		l.fn(string(l.buf[:maxLine]))
		l.buf = append(l.buf[:0], l.buf[maxLine:]...)
	}
	return len(p), nil
}

func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.fn(string(l.buf))
		l.buf = nil
	}
}
