package inventory

import (
	"errors"
	"fmt"
	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/redact"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The image and the phases: what validate checks of them and the
// defaults it fills.

// RuntimePyxis is image.runtime's value for a Slurm cluster's Pyxis: the
// image is imported and started by srun --container-image on each node
// (Pyxis hands it to enroot there), never by a runtime the window calls
// on the node itself. It is named for Pyxis, not enroot: the window
// speaks only to srun, and "enroot" stays the runtime a node would run.
const RuntimePyxis = "pyxis"

// pyxis checks what image.runtime pyxis needs: a Slurm login node to run
// srun from, and a reference every node's Pyxis pulls (there is no
// archive to push: enroot imports from a registry).
func (v *validator) pyxis() {
	im := &v.inv.Image
	if !v.inv.Slurm.Enabled() {
		v.problem("image.runtime", "pyxis runs the image through srun --container-image, which needs a Slurm login node: set slurm.login.address")
	}
	if v.given("image.archive") || im.Mode == "push" {
		v.problem("image.mode", "image.runtime pyxis imports the image from its registry on each node (enroot): there is no archive to push; use mode pull")
	}
	if im.Reference != "" && pinnedImage.MatchString(im.Reference) {
		if _, err := EnrootURI(im.Reference); err != nil {
			v.problem("image.reference", "%v", err)
		}
	}
}

var pinnedImage = regexp.MustCompile(`^[^\s@]+@sha256:[0-9a-f]{64}$`)

func (v *validator) image() {
	im := &v.inv.Image
	if im.Reference != "" && !pinnedImage.MatchString(im.Reference) {
		v.problem("image.reference", "%s", imageMessage(im.Reference))
	}
	if im.Runtime != "" {
		switch rt := strings.ToLower(im.Runtime); rt {
		case "docker", "podman", "enroot":
			im.Runtime = rt
		case RuntimePyxis:
			im.Runtime = rt
			v.pyxis()
		default:
			v.problem("image.runtime", "must be docker, podman, enroot or pyxis, got %q", short(im.Runtime))
		}
	} else {
		im.Runtime = "docker"
	}
	if v.given("image.archive") {
		im.Archive = v.path("image.archive", im.Archive)
		if fi, err := os.Stat(im.Archive); err != nil {
			v.problem("image.archive", "cannot read %s: %v", im.Archive, errors.Unwrap(err))
		} else if fi.IsDir() {
			v.problem("image.archive", "%s is a directory: give the docker-archive or oci-archive tarball (docker save / podman save -o)", im.Archive)
		}
	}
	switch im.Mode {
	case "":
		im.Mode = "pull"
		if im.Archive != "" {
			im.Mode = "push"
		}
	case "pull":
	case "push":
		if im.Archive == "" {
			v.problem("image.mode", "push needs image.archive: the tarball the coordinator distributes")
		}
	default:
		v.problem("image.mode", "must be pull or push, got %q", short(im.Mode))
	}
	if im.Reference == "" && (im.Archive != "" || v.given("image.mode")) {
		v.problem("image.reference", "required with an image: NAME[:TAG]@sha256:<64 hex digits>, the pin every node's image must match")
	}
	srun := v.inv.Transport == TransportSrun
	if im.Relay == "" && srun {
		// The chain goes node to node over SSH with the window key; nodes
		// that srun reaches are in the window's job, which sbcast sends to
		// (without one, transport srun is refused already).
		im.Relay = "direct"
		if v.inv.Slurm.Allocate != nil {
			im.Relay = "sbcast"
		}
	}
	switch im.Relay {
	case "":
		im.Relay = "chain"
	case "chain":
		if srun {
			v.problem("image.relay", "chain passes the image from node to node over SSH, which transport srun does not give the nodes: use sbcast or direct")
		}
	case "sbcast":
		if v.inv.Slurm.Allocate == nil {
			v.problem("image.relay", "sbcast sends to the nodes of the window's own Slurm job, and there is none: set slurm.allocate, or use chain or direct")
		}
		if im.Dir != "" && !strings.HasPrefix(im.Dir, "/") {
			// sbcast would put a relative path under its own directory
			// (or BcastParameters' DestDir), the nodes under their home.
			v.problem("image.dir", "%q: sbcast needs an absolute path", short(im.Dir))
		}
	case "direct":
	default:
		v.problem("image.relay", "must be chain, sbcast or direct, got %q", short(im.Relay))
	}
	switch im.GPUs {
	case "":
		im.GPUs = "all"
	case "all", "none":
	default:
		v.problem("image.gpus", "must be all or none, got %q", short(im.GPUs))
	}
	if len(im.Smoke) == 0 {
		im.Smoke = []string{"nvidia-smi", "-L"}
	}
	if im.Dir == "" {
		im.Dir = "/var/tmp"
	} else if strings.ContainsAny(im.Dir, "'\"\n$`") {
		v.problem("image.dir", "%q: no quotes, $ or backquotes in a path", short(im.Dir))
	}
}

// imageMessage explains why a reference is not pinned. A tag can be moved
// to another image between two runs; only a digest names one image.
func imageMessage(ref string) string {
	name, digest, pinned := strings.Cut(ref, "@")
	switch {
	case !pinned:
		return fmt.Sprintf("%q is not pinned: a tag can be moved to another image; pin it by digest as NAME@sha256:<64 hex digits> (docker buildx imagetools inspect %s prints it)",
			short(ref), short(ref))
	case strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t"):
		return fmt.Sprintf("%q: expected NAME[:TAG]@sha256:<64 hex digits>", short(ref))
	}
	if hex, ok := strings.CutPrefix(digest, "sha256:"); ok {
		return fmt.Sprintf("bad digest: expected sha256: and 64 lowercase hex digits, got %d characters %q", len(hex), short(hex))
	}
	return fmt.Sprintf("bad digest %q: expected sha256: and 64 lowercase hex digits", short(digest))
}

func (v *validator) phases() {
	p := &v.inv.Phases
	v.nonNegativeDuration("phases.deadline", p.Deadline)
	v.nonNegativeDuration("phases.preflight.timeout", p.Preflight.Timeout)
	v.nonNegativeDuration("phases.security.timeout", p.Security.Timeout)
	v.nonNegativeDuration("phases.diag.timeout", p.Diag.Timeout)
	if !v.given("phases.diag.level") {
		p.Diag.Level = DefaultDiagLevel
	} else if p.Diag.Level < 1 || p.Diag.Level > 4 {
		v.problem("phases.diag.level", "must be 1..4 (dcgmi diag -r: 1 quick, 2 medium, 3 long, 4 extended), got %d", p.Diag.Level)
	}
	v.diagImage(p.Diag.Image)
	v.allReduce(&p.AllReduce)
	v.nonNegativeDuration("phases.image.timeout", p.ImagePh.Timeout)
	v.staging(&p.Staging)
	v.checkpoint(&p.Checkpoint)
	v.failure(&p.Failure, &p.Checkpoint)
	v.workload(&p.Workload)
	v.burnin(&p.Burnin)
	if b := p.Burnin; b.Enabled && b.ClusterAllReduce && !p.AllReduce.Enabled {
		v.problem("phases.burnin.cluster_allreduce", "loops phases.allreduce's collective (its binary, launcher and sizes), "+
			"which is disabled: enable phases.allreduce (--skip allreduce leaves out its own phase) or set this false")
	}
	if b := p.Burnin; b.Enabled && b.Workload && !(p.Workload.Enabled && p.Workload.Kind == "training") {
		v.problem("phases.burnin.workload", "loops the training phase's job, and phases.workload is not an enabled training "+
			"(kind: training): enable it (--skip training leaves out its own phase) or set this false")
	}
}

var (
	sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// staging checks the sources: each has a file-safe name and exactly one
// origin.
func (v *validator) staging(st *Staging) {
	const k = "phases.staging."
	v.nonNegativeDuration(k+"timeout", st.Timeout)
	v.nonNegativeDuration(k+"window", st.Window)
	if !st.Enabled {
		return
	}
	if strings.TrimSpace(st.Dir) == "" {
		v.problem(k+"dir", "required: the node-local directory to stage into, e.g. /scratch/gpuaccept")
	} else if strings.ContainsAny(st.Dir, "'\"\n$`") {
		v.problem(k+"dir", "%q: no quotes, $ or backquotes in a path", short(st.Dir))
	}
	if len(st.Sources) == 0 {
		v.problem(k+"sources", "at least one source is required: {name, path | url | size}")
	}
	names := map[string]int{}
	for i := range st.Sources {
		src := &st.Sources[i]
		key := fmt.Sprintf("%ssources[%d]", k, i)
		switch {
		case !sourceName.MatchString(src.Name):
			v.problem(key+".name", "%q: a file-safe name is required (letters, digits, '.', '_', '-')", short(src.Name))
		default:
			if j, dup := names[src.Name]; dup {
				v.problem(key+".name", "duplicate name: sources[%d] is also called %q", j, src.Name)
			}
			names[src.Name] = i
		}
		n := 0
		for _, set := range []bool{src.Path != "", src.URL != "", v.given(key + ".size")} {
			if set {
				n++
			}
		}
		if n != 1 {
			v.problem(key, "give exactly one of path (shared storage), url (http, https, s3, gs, az) or size (synthetic data), got %d", n)
			continue
		}
		switch {
		case src.URL != "":
			// A URL is shown everywhere without credentials or query
			// (redact.URL): so are the messages about it.
			scheme, _, ok := strings.Cut(src.URL, "://")
			u, err := url.Parse(src.URL)
			switch {
			case !ok || !slices.Contains([]string{"http", "https", "s3", "gs", "az"}, scheme):
				v.problem(key+".url", "%q: expected http://, https://, s3://, gs:// or az://", short(redact.URL(src.URL)))
			case err != nil || u.Host == "":
				v.problem(key+".url", "%q: not a URL with a host", short(redact.URL(src.URL)))
			case u.User != nil:
				v.problem(key+".url", "%q: credentials in a URL (user:password@) would be copied into the evidence and shown in ps on every node; give the node's tool its credentials (~/.netrc, aws configure, gcloud auth) or use a signed URL", short(redact.URL(src.URL)))
			case strings.ContainsAny(src.URL, "\n\r"):
				v.problem(key+".url", "%q: no line breaks in a URL", short(redact.URL(src.URL)))
			case scheme == "az" && u.RawQuery != "" && strings.HasSuffix(u.Path, "/"):
				// azcopy copies a prefix and takes its URL only in argv.
				v.problem(key+".url", "%q: a SAS token for a prefix would be in azcopy's command line, which every user of the nodes can read; give azcopy its credentials on the nodes (azcopy login, AZCOPY_AUTO_LOGIN_TYPE) or name the blobs one by one", short(redact.URL(src.URL)))
			}
		case src.Path != "":
			if !strings.HasPrefix(src.Path, "/") {
				v.problem(key+".path", "%q: an absolute path on the nodes' shared storage", short(src.Path))
			}
		default:
			if src.Size <= 0 {
				v.problem(key+".size", "must be more than 0 bytes, got %s", src.Size)
			}
		}
		if src.Endpoint != "" {
			switch u, err := url.Parse(src.Endpoint); {
			case !strings.HasPrefix(src.URL, "s3://"):
				v.problem(key+".endpoint", "only for an s3:// url (an S3-compatible store's address); this source is not one")
			case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
				v.problem(key+".endpoint", "%q: expected the store's http:// or https:// address without credentials or query, e.g. https://object.example.com", short(redact.URL(src.Endpoint)))
			case strings.ContainsAny(src.Endpoint, "'\"\n$`\\ "):
				v.problem(key+".endpoint", "%q: no quotes, spaces, $ or backquotes in an address", short(redact.URL(src.Endpoint)))
			}
		}
		if src.SHA256 != "" && !sha256Hex.MatchString(src.SHA256) {
			v.problem(key+".sha256", "expected 64 lowercase hex digits, got %q", short(src.SHA256))
		}
	}
	if st.Window <= 0 && v.given(k+"window") {
		v.problem(k+"window", "must be more than 0")
	}
}

// checkpoint fills the defaults: 1 GiB per node, one shard per GPU, a
// shared directory.
func (v *validator) checkpoint(c *Checkpoint) {
	const k = "phases.checkpoint."
	v.nonNegativeDuration(k+"timeout", c.Timeout)
	if !v.given(k + "size") {
		c.Size = 1 << 30
	} else if c.Size <= 0 {
		v.problem(k+"size", "must be more than 0 bytes, got %s", c.Size)
	}
	if !v.given(k + "shards") {
		c.Shards = max(v.inv.Quote.GPUsPerNode, 1)
	} else if c.Shards < 1 {
		v.problem(k+"shards", "must be at least 1, got %d", c.Shards)
	}
	if !c.Enabled {
		return
	}
	if strings.TrimSpace(c.Dir) == "" {
		v.problem(k+"dir", "required: where the checkpoint is written (a shared filesystem, or a local disk with shared: false)")
	} else if strings.ContainsAny(c.Dir, "'\"\n$`") {
		v.problem(k+"dir", "%q: no quotes, $ or backquotes in a path", short(c.Dir))
	} else if v.anyPods() {
		where := "one that every node shares (a host_path of a shared mount, or a claim)"
		if c.Shared != nil && !*c.Shared {
			where = "the node's disk (a host_path)"
		}
		v.podVolume(k+"dir", c.Dir, "its container layer, which goes with the pod and no other node sees; mount a volume there with kubernetes.volumes: "+where)
	}
}

// podVolume reports dir (at key), which the window writes in every pod,
// when it lies in each pod's own filesystem (why says what that costs and
// what to mount) or on a volume mounted read-only.
func (v *validator) podVolume(key, dir, why string) {
	switch vol := v.inv.Kubernetes.OnKubeVolume(dir); {
	case vol == nil:
		v.problem(key, "%s lies in each pod's own filesystem (transport kubernetes): %s", short(dir), why)
	case vol.ReadOnly:
		v.problem(key, "%s lies on the volume mounted read-only at %s (kubernetes.volumes): the window writes there", short(dir), vol.MountPath)
	}
}

// failure fills the failure test's defaults and checks its choices.
// anyPods: some node is reached through a cluster's API, in a pod (named,
// or to be chosen by kubernetes.node_selector when the window starts).
func (v *validator) anyPods() bool {
	if v.inv.Kubernetes.NodeSelector != "" {
		return true
	}
	for _, n := range v.inv.Nodes {
		if v.inv.TransportOf(n) == TransportKubernetes {
			return true
		}
	}
	return false
}

func (v *validator) failure(f *Failure, c *Checkpoint) {
	const k = "phases.failure."
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"timeout", f.Timeout}, {"cut_for", f.CutFor}, {"collective_timeout", f.CollectiveTimeout}, {"resume_within", f.ResumeWithin}, {"step_time", f.StepTime}} {
		v.nonNegativeDuration(k+d.key, d.d)
	}
	if f.Inject == "" {
		f.Inject = "kill-node"
	}
	if srun := v.inv.Transport == TransportSrun; srun && (f.Inject == "cut" || f.Inject == "reboot") {
		// Both leave a timer behind the command (the link's restore, the
		// reboot), which Slurm ends with the step that started it.
		v.problem(k+"inject", "%s leaves a timer on the node past its command, which a Slurm step does not outlive (transport srun): use kill-node or kill-worker", f.Inject)
	}
	if f.Inject == "delete-pod" && !v.anyPods() {
		v.problem(k+"inject", "delete-pod deletes the victim's pod through the Kubernetes API: only for nodes reached by transport kubernetes; use kill-node")
	}
	if v.anyPods() && (f.Inject == "cut" || f.Inject == "reboot") {
		// A pod on the host network would cut or reboot the node under
		// the cluster (and the other tenants' pods) from inside a
		// container, which it has no right to and must not.
		v.problem(k+"inject", "%s acts on the node under a pod (transport kubernetes), which a window's pod must not touch: use kill-node or kill-worker", f.Inject)
	}
	switch f.Inject {
	case "kill-worker", "kill-node", "cut", "delete-pod":
	case "reboot":
		if !f.AllowReboot {
			v.problem(k+"inject", "reboot restarts a rented machine: set phases.failure.allow_reboot: true to mean it")
		}
	default:
		v.problem(k+"inject", "must be kill-worker, kill-node, cut, reboot or delete-pod, got %q", short(f.Inject))
	}
	if f.Recovery == "" {
		f.Recovery = "elastic"
	} else if f.Recovery != "elastic" && f.Recovery != "relaunch" {
		v.problem(k+"recovery", "must be elastic or relaunch, got %q", short(f.Recovery))
	}
	if f.CutFor == 0 {
		f.CutFor = 30 * time.Second
	}
	if !v.given(k + "step_time") {
		f.StepTime = 500 * time.Millisecond
	}
	if f.CollectiveTimeout == 0 {
		f.CollectiveTimeout = 30 * time.Second
	}
	if f.ResumeWithin == 0 {
		f.ResumeWithin = 5 * time.Minute
	}
	if f.Python == "" {
		f.Python = "python3"
	}
	for _, d := range []struct {
		key      string
		n        *int
		def, min int
	}{{"checkpoint_every", &f.CheckpointEvery, 5, 1}, {"hidden", &f.Hidden, 1024, 1}, {"steady_steps", &f.SteadySteps, 5, 1},
		{"resume_steps", &f.ResumeSteps, 3, 1}, {"procs_per_node", &f.ProcsPerNode, max(v.inv.Quote.GPUsPerNode, 1), 1}} {
		if !v.given(k + d.key) {
			*d.n = d.def
		} else if *d.n < d.min {
			v.problem(k+d.key, "must be at least %d, got %d", d.min, *d.n)
		}
	}
	if f.InImage == nil {
		on := v.inv.Image.Reference != ""
		f.InImage = &on
	} else if *f.InImage && v.inv.Image.Reference == "" {
		v.problem(k+"in_image", "there is no image to run in: set image.reference (and image.mode)")
	}
	if *f.InImage && v.inv.Image.Runtime == "enroot" {
		v.problem(k+"in_image", "the job runs in the image with docker or podman, not enroot")
	}
	if v.inv.Image.Runtime == RuntimePyxis {
		if v.given(k+"in_image") && *f.InImage {
			v.problem(k+"in_image", "the job runs in the image with docker or podman; under image.runtime pyxis torchrun runs on the nodes themselves: set this false")
		}
		off := false
		f.InImage = &off
	}
	if f.MaxStepsLost == nil {
		n := f.CheckpointEvery
		f.MaxStepsLost = &n
	} else if *f.MaxStepsLost < 0 {
		v.problem(k+"max_steps_lost", "must not be negative, got %d", *f.MaxStepsLost)
	}
	if v.given(k+"port") && (f.Port < 1024 || f.Port > 65535) {
		v.problem(k+"port", "must be between 1024 and 65535, got %d", f.Port)
	}
	if !f.Enabled {
		return
	}
	inherited := f.Dir == ""
	if inherited {
		f.Dir = c.Dir
	}
	switch {
	case strings.TrimSpace(f.Dir) == "":
		v.problem(k+"dir", "required: a directory every node sees, for the job's checkpoints (or set phases.checkpoint.dir)")
	case strings.ContainsAny(f.Dir, "'\"\n$`"):
		v.problem(k+"dir", "%q: no quotes, $ or backquotes in a path", short(f.Dir))
	case inherited && c.Shared != nil && !*c.Shared:
		// Every rank loads the checkpoint rank 0 found: on a disk of its
		// own the others find none.
		v.problem(k+"dir", "left out, it is phases.checkpoint.dir %s, a disk of each node's own there (shared: false): give a directory every node sees", short(f.Dir))
	case v.anyPods():
		// A pod's own filesystem is no other node's, and a deleted pod's
		// is gone.
		v.podVolume(k+"dir", f.Dir, "no other node sees it and it goes with the pod: mount a volume every node shares there with kubernetes.volumes (a host_path of a shared mount, or a claim)")
	}
	v.deletePodVictim(f)
	if v.nodesLost || v.nodesLater {
		return
	}
	if n := v.inv.PlannedNodes(); n < 2 {
		v.problem(k+"enabled", "the failure test needs at least 2 nodes (one to fail, one to go on), got %d", n)
	}
	if f.Victim != "" {
		found := false
		for i, n := range v.inv.Nodes {
			if n.Name == f.Victim {
				found = true
				if i == 0 {
					v.problem(k+"victim", "%s is the first node, which holds the job's rendezvous: failing it ends the job for good; choose another", f.Victim)
				}
			}
		}
		if !found {
			v.problem(k+"victim", "no node named %q in nodes", short(f.Victim))
		}
	}
}

// deletePodVictim: delete-pod's victim must be in a pod. The default one,
// the last node, is known only where no selector adds nodes at the end.
func (v *validator) deletePodVictim(f *Failure) {
	if f.Inject != "delete-pod" {
		return
	}
	victim := f.Victim
	if victim == "" && len(v.inv.Nodes) > 0 && !v.nodesLater {
		victim = v.inv.Nodes[len(v.inv.Nodes)-1].Name
	}
	for _, n := range v.inv.Nodes {
		if n.Name == victim && v.inv.TransportOf(n) != TransportKubernetes {
			v.problem("phases.failure.inject", "delete-pod: the victim %s is reached by transport %s, not in a pod: name a node of transport kubernetes in phases.failure.victim",
				victim, v.inv.TransportOf(n))
		}
	}
}

// allReduce fills the sweep's defaults (those of a typical acceptance run:
// 1 MiB to 8 GiB, doubling) and checks that the sweep makes sense.
func (v *validator) allReduce(a *AllReduce) {
	const k = "phases.allreduce."
	v.nonNegativeDuration(k+"timeout", a.Timeout)
	if a.Binary == "" {
		a.Binary = "all_reduce_perf"
	}
	defaults := []struct {
		key string
		n   *int
		def int
		min int
	}{{"step_factor", &a.Factor, 2, 2}, {"iters", &a.Iters, 20, 1}, {"warmup", &a.Warmup, 5, 0}, {"repeats", &a.Repeats, 3, 1}}
	for _, d := range defaults {
		if !v.given(k + d.key) {
			*d.n = d.def
		} else if *d.n < d.min {
			v.problem(k+d.key, "must be at least %d, got %d", d.min, *d.n)
		}
	}
	if !v.given(k + "ranks_per_node") {
		a.RanksPerNode = max(v.inv.Quote.GPUsPerNode, 1)
	} else if a.RanksPerNode < 1 {
		v.problem(k+"ranks_per_node", "must be at least 1, got %d", a.RanksPerNode)
	}
	if !v.given(k + "min_bytes") {
		a.MinBytes = 1 << 20
	}
	if !v.given(k + "max_bytes") {
		a.MaxBytes = 8 << 30
	}
	if a.MinBytes <= 0 || a.MaxBytes < a.MinBytes {
		v.problem(k+"max_bytes", "the sweep must go from min_bytes > 0 up to max_bytes ≥ min_bytes, got %s..%s", a.MinBytes, a.MaxBytes)
	}
	if a.Launcher == "" && v.inv.Transport == TransportSrun {
		a.Launcher = "srun"
	}
	switch a.Launcher {
	case "":
		a.Launcher = "mpirun"
	case "mpirun":
		if v.inv.Transport == TransportSrun {
			v.problem(k+"launcher", "mpirun starts its ranks over SSH between the nodes, which transport srun does not give them: use srun")
		}
	case "srun":
		if !v.inv.Slurm.Enabled() {
			v.problem(k+"launcher", "srun needs the Slurm login node: set slurm.login.address")
		}
		// Under srun the --mca pairs become OMPI_MCA_ variables; nothing
		// else of mpirun's applies.
		for i := 0; i < len(a.MPIArgs); i += 3 {
			m := a.MPIArgs
			if (m[i] != "--mca" && m[i] != "-mca") || i+2 >= len(m) || !mcaName.MatchString(m[i+1]) {
				v.problem(fmt.Sprintf("%smpi_args[%d]", k, i), "with launcher srun only --mca KEY VALUE triples apply (passed as OMPI_MCA_KEY=VALUE); got %q", short(strings.Join(m[i:min(i+3, len(m))], " ")))
				break
			}
		}
	default:
		v.problem(k+"launcher", "must be mpirun or srun, got %q", short(a.Launcher))
	}
	seen := map[string]bool{}
	for i, c := range a.Collectives {
		key := fmt.Sprintf("%scollectives[%d]", k, i)
		switch {
		case !slices.Contains(Collectives, c):
			v.problem(key, "unknown collective %q: one of %s (all_reduce always runs)", short(c), strings.Join(Collectives, ", "))
		case seen[c]:
			v.problem(key, "%q is listed twice", c)
		}
		seen[c] = true
	}
	b := &a.Bisection
	if !v.given(k + "bisection.max_rounds") {
		b.MaxRounds = 3
	} else if b.MaxRounds < 1 {
		v.problem(k+"bisection.max_rounds", "must be at least 1, got %d", b.MaxRounds)
	}
	if !v.given(k + "bisection.slow_ratio") {
		b.SlowRatio = 0.8
	} else if !(b.SlowRatio > 0 && b.SlowRatio < 1) {
		v.problem(k+"bisection.slow_ratio", "must be between 0 and 1 (a pair below this fraction of the typical pair is slow), got %v", b.SlowRatio)
	}
	if !v.given(k + "bisection.iters") {
		b.Iters = a.Iters
	} else if b.Iters < 1 {
		v.problem(k+"bisection.iters", "must be at least 1, got %d", b.Iters)
	}
	if !v.given(k + "bisection.min_bytes") {
		b.MinBytes = a.MinBytes
	}
	if !v.given(k + "bisection.max_bytes") {
		b.MaxBytes = a.MaxBytes
	}
	if b.MinBytes <= 0 || b.MaxBytes < b.MinBytes {
		v.problem(k+"bisection.max_bytes", "the pair sweep must go from min_bytes > 0 up to max_bytes ≥ min_bytes, got %s..%s", b.MinBytes, b.MaxBytes)
	}
}

var mcaName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Collectives are the nccl-tests collectives a window may add to the
// all-reduce (each is the binary NAME_perf next to the all-reduce's).
var Collectives = []string{"all_gather", "reduce_scatter", "alltoall", "sendrecv"}

// slurm checks the Slurm section: all or nothing, and a login node to run
// srun from.
func (v *validator) slurm() {
	s := &v.inv.Slurm
	const k = "slurm."
	if !v.given("slurm") {
		return
	}
	if msg := checkAddress(s.Login.Address); msg != "" {
		v.problem(k+"login.address", "%s (the Slurm login node srun runs on)", msg)
	}
	if v.given(k+"login.port") && (s.Login.Port < 1 || s.Login.Port > 65535) {
		v.problem(k+"login.port", "must be 1..65535, got %d", s.Login.Port)
	}
	if s.Login.User == "" {
		s.Login.User = v.inv.SSH.User
	}
	if s.Login.User == "" {
		v.problem(k+"login.user", "required: ssh.user is not set")
	}
	if s.MPI == "" {
		s.MPI = "pmix"
	} else if strings.ContainsAny(s.MPI, " \t'\"") {
		v.problem(k+"mpi", "%q is not an srun --mpi plugin name", short(s.MPI))
	}
	switch {
	case strings.Contains(s.Partition, ","):
		// salloc takes a list and picks one; the window holds the one it
		// asks of to its limits (SLURM-004).
		v.problem(k+"partition", "%q: one partition, whose limits the window reads and holds to what it asks: not a list", short(s.Partition))
	case strings.Trim(s.Partition, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != "":
		v.problem(k+"partition", "%q is not a Slurm partition name (letters, digits, _ . -)", short(s.Partition))
	}
	v.nonNegativeDuration(k+"timeout", s.Timeout)
	v.slurmAllocate()
	v.stepArgs()
}

// managedSalloc are the salloc options the window sets itself, each with
// the inventory key that sets it ("" where the window alone does): a
// buyer who wrote --partition is told where it goes instead.
var managedSalloc = []struct{ short, long, key string }{
	{"", "--no-shell", ""}, {"", "--wait-all-nodes", ""}, {"-J", "--job-name", ""}, {"-k", "--no-kill", ""},
	{"-N", "--nodes", "slurm.allocate.nodes"}, {"-w", "--nodelist", "slurm.allocate.nodelist"},
	{"-p", "--partition", "slurm.partition"}, {"-A", "--account", "slurm.account"}, {"-q", "--qos", "slurm.allocate.qos"},
	{"", "--gres", "slurm.allocate.gres"}, {"", "--exclusive", "slurm.allocate.exclusive"},
	{"-t", "--time", "slurm.allocate.time"}, {"-C", "--constraint", "slurm.allocate.constraint"},
}

// managedSallocOption is the window's own salloc option that arg sets, as
// salloc reads it (a long option by any prefix of its name, a short one
// with its value joined: -pgpu), its long name and the key that sets it.
func managedSallocOption(arg string) (long, key string, ok bool) {
	opt, _, _ := strings.Cut(arg, "=")
	for _, m := range managedSalloc {
		switch {
		case strings.HasPrefix(opt, "--") && len(opt) > 3 && strings.HasPrefix(m.long, opt):
			return m.long, m.key, true
		case m.short != "" && !strings.HasPrefix(opt, "--") && len(opt) >= 2 && opt[:2] == m.short:
			return m.long, m.key, true
		}
	}
	return "", "", false
}

func isManagedSalloc(arg string) bool {
	_, _, ok := managedSallocOption(arg)
	return ok
}

// managedStep are the srun options transport srun sets on every step, or
// that would break the step's streams.
var managedStep = []string{"--jobid", "--overlap", "-w", "--nodelist", "-N", "--nodes", "-n", "--ntasks", "-Q", "--quiet",
	"-J", "--job-name", "-i", "--input", "-o", "--output", "-e", "--error", "-l", "--label", "--pty", "-u", "--unbuffered",
	"--ntasks-per-node", "--multi-prog", "--export", "--propagate", "--mpi", "-D", "--chdir"}

// managedStepOption is the transport's own option that arg sets, as srun
// reads it: a long option by any prefix of its name (getopt_long), a short
// one with its value joined (-wh3).
func managedStepOption(arg string) string {
	opt, _, _ := strings.Cut(arg, "=")
	for _, m := range managedStep {
		switch {
		case strings.HasPrefix(m, "--") && len(opt) > 3 && strings.HasPrefix(m, opt):
			return m
		case !strings.HasPrefix(m, "--") && !strings.HasPrefix(opt, "--") && len(opt) >= 2 && opt[:2] == m:
			return m
		}
	}
	return ""
}

// stepArgs checks slurm.step_args: srun options, each one word.
func (v *validator) stepArgs() {
	for i, arg := range v.inv.Slurm.StepArgs {
		key := fmt.Sprintf("slurm.step_args[%d]", i)
		opt, _, _ := strings.Cut(arg, "=")
		switch {
		case !strings.HasPrefix(arg, "-"):
			v.problem(key, "%q is no srun option: each entry is one option (--gres=gpu:8), never a command", short(arg))
		case managedStepOption(arg) != "":
			what := opt
			if m := managedStepOption(arg); m != opt {
				what += " (" + m + ")"
			}
			v.problem(key, "%s is transport srun's own: leave it out", what)
		}
	}
}

// slurmAllocate checks slurm.allocate: how many nodes or which, and the
// words salloc is given (each one argument, never a shell's).
func (v *validator) slurmAllocate() {
	s := &v.inv.Slurm
	const k = "slurm.allocate."
	if s.Allocate == nil {
		if v.given("slurm.allocate_timeout") && !v.given("slurm.allocate") {
			v.problem("slurm.allocate_timeout", "set without slurm.allocate: the window asks for no allocation to wait for")
		}
		return
	}
	a := s.Allocate
	switch {
	case a.Nodes == 0 && a.NodeList == "":
		v.problem("slurm.allocate", "names no nodes: set nodes (how many) or nodelist (which, e.g. gpu[01-04])")
	case a.Nodes != 0 && a.NodeList != "":
		v.problem(k+"nodelist", "set with slurm.allocate.nodes: one of them (nodelist implies the count)")
	case a.Nodes < 0 || a.Nodes > 100000:
		v.problem(k+"nodes", "must be 1 to 100000, got %d", a.Nodes)
	case a.NodeList != "":
		if names, err := hostlist.Expand(a.NodeList); err != nil || len(names) == 0 {
			v.problem(k+"nodelist", "%q is not a Slurm hostlist (e.g. gpu[01-04],gpu07): %v", short(a.NodeList), err)
		}
	}
	if len(v.inv.Nodes) > 0 {
		v.problem("nodes", "set with slurm.allocate: the window's nodes are its allocation's; leave nodes (and nodes_from) out")
	}
	for _, kv := range [][2]string{{"gres", a.GRES}, {"qos", a.QOS}, {"constraint", a.Constraint}} {
		if strings.ContainsAny(kv[1], " \t\n'\"") {
			v.problem(k+kv[0], "%q holds blanks or quotes: one salloc argument", short(kv[1]))
		}
	}
	if t := a.Time.Duration(); v.given(k+"time") && (t < time.Minute || t > 365*24*time.Hour) {
		v.problem(k+"time", "must be 1m to 365 days (Slurm counts minutes), got %s", a.Time)
	}
	for i, arg := range a.Args {
		key := fmt.Sprintf("%sargs[%d]", k, i)
		opt, _, _ := strings.Cut(arg, "=")
		switch {
		case !strings.HasPrefix(arg, "-"):
			v.problem(key, "%q is no salloc option: each entry is one option (--reservation=acceptance), never a command", short(arg))
		case isManagedSalloc(arg):
			long, use, _ := managedSallocOption(arg)
			what := opt
			if long != opt {
				what += " (" + long + ")"
			}
			if use != "" {
				v.problem(key, "%s: use %s", what, use)
			} else {
				v.problem(key, "%s is the window's own: leave it out", what)
			}
		case opt == "-Q" || opt == "--quiet":
			v.problem(key, "%s hides the job's ID, which the window journals and gives back", opt)
		}
	}
	if a.Exclusive == nil {
		t := true
		a.Exclusive = &t
	}
	switch {
	case !v.given("slurm.allocate_timeout"):
		s.AllocateTimeout = DefaultAllocateTimeout
	case s.AllocateTimeout < 10*time.Second || s.AllocateTimeout > 7*24*time.Hour:
		v.problem("slurm.allocate_timeout", "must be 10s to 7 days, got %s", s.AllocateTimeout)
	}
}
