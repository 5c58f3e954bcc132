// Package lab drives the local multi-host test lab: Linux network namespaces on a private bridge, each
// running a real OpenSSH sshd (see lab.sh, embedded here, and LAB.md in the shared notes). It needs Linux and
// root; Supported says whether this machine can run it.
//
// Every method runs the embedded lab.sh, so a lab can also be driven by hand while a test runs
// (bash scripts/lab/lab.sh status --name NAME). Methods that change a lab are serialized per lab by the
// script; Exec and Ps are not, so a long Exec does not block a Kill.
package lab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed lab.sh
var script []byte

//go:embed testimage.sh
var testImageScript []byte

//go:embed pyxis/spank_pyxis.c
var pyxisSource []byte

//go:embed pyxis/enroot
var enrootStandin []byte

// Defaults of Options.
const (
	DefaultName   = "lab"
	DefaultHosts  = 4
	DefaultSubnet = "10.231.0"
	MaxHosts      = 128
)

// Options of Up. Zero values take the defaults: name "lab", 4 hosts, subnet 10.231.0 (host i is
// SUBNET.(10+i), the coordinator's side of the bridge SUBNET.1), no shaping.
type Options struct {
	Name   string // lab name: netns NAME-hI, bridge br-NAME, dir /tmp/gpuaccept-lab-NAME
	Hosts  int    // 1..128 (an idle host's sshd is ~1.5 MB)
	Subnet string // three octets, e.g. "10.232.0"; unique per lab running at the same time
	Cap    string // tbf rate for both directions of every host, e.g. "200mbit"; "" for none
	// StaticNeigh gives every host a permanent neighbour entry for every
	// other (lab.sh up --neigh static). Every namespace shares the machine's
	// one neighbour table (gc_thresh3, 1024 by default), so past ~31 ARP
	// hosts an all-to-all overflows it and first connections fail;
	// permanent entries are not counted against it.
	StaticNeigh bool
}

// Host is one lab host.
type Host struct {
	Name  string // "h1"
	Addr  string // "10.231.0.11"
	Index int    // 0-based
}

// Lab is a running lab.
type Lab struct {
	Name, Dir  string
	Hosts      []Host
	KnownHosts string // path of an OpenSSH known_hosts file naming every host as "hI,ADDR" and "ADDR"
	ClientKey  string // path of the ed25519 private key root@every host accepts (public key: ClientKey+".pub")
}

// Supported reports whether this machine can run a lab, and why not.
func Supported() (ok bool, why string) {
	if runtime.GOOS != "linux" {
		return false, "the lab needs Linux (network namespaces), this is " + runtime.GOOS
	}
	if os.Geteuid() != 0 {
		return false, fmt.Sprintf("the lab needs root (network namespaces, bridges, mounts), euid is %d", os.Geteuid())
	}
	if caps, err := effectiveCaps(); err == nil {
		const capNetAdmin, capSysAdmin = 12, 21
		if caps&(1<<capNetAdmin) == 0 || caps&(1<<capSysAdmin) == 0 {
			return false, "the lab needs CAP_NET_ADMIN and CAP_SYS_ADMIN (an unprivileged container?)"
		}
	}
	var missing []string
	for _, c := range []string{"bash", "ip", "tc", "nsenter", "unshare", "flock", "ssh-keygen"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	sshd := os.Getenv("LAB_SSHD") // lab.sh's override
	if sshd == "" {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil {
		missing = append(missing, sshd)
	}
	if len(missing) > 0 {
		return false, "the lab needs " + strings.Join(missing, ", ") +
			" (apt-get install openssh-server iproute2 util-linux)"
	}
	return true, ""
}

// TestSkip decides for a test suite: a reason to skip when this machine is
// not root on Linux (a developer's laptop), or an error when it is but the
// lab still cannot run (a missing package): there the tests must fail, not
// quietly skip, or CI would pass without proving anything.
func TestSkip() (skip string, err error) {
	if os.Getenv("GPUACCEPT_NO_LAB") != "" {
		return "GPUACCEPT_NO_LAB is set (make unit)", nil
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		_, why := Supported()
		return why, nil
	}
	if ok, why := Supported(); !ok {
		return "", errors.New(why)
	}
	return "", nil
}

func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// DirOf is where the lab of this name keeps its files.
func DirOf(name string) string {
	if name == "" {
		name = DefaultName
	}
	return "/tmp/gpuaccept-lab-" + name
}

// Up brings up a lab, tearing down any lab of the same name first, and returns when every sshd accepts TCP
// on port 22. On failure the half-built lab is torn down.
func Up(ctx context.Context, o Options) (*Lab, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Hosts == 0 {
		o.Hosts = DefaultHosts
	}
	if o.Subnet == "" {
		o.Subnet = DefaultSubnet
	}
	if o.Hosts < 1 || o.Hosts > MaxHosts {
		return nil, fmt.Errorf("lab %s: up: hosts must be 1..%d, got %d", o.Name, MaxHosts, o.Hosts)
	}
	dir := DirOf(o.Name)
	args := []string{"up", "--name", o.Name, "--hosts", strconv.Itoa(o.Hosts), "--subnet", o.Subnet, "--dir", dir}
	if o.Cap != "" {
		args = append(args, "--cap", o.Cap)
	}
	if o.StaticNeigh {
		args = append(args, "--neigh", "static")
	}
	if _, err := runScript(ctx, o.Name, "up", args...); err != nil {
		return nil, err
	}
	l := &Lab{
		Name:       o.Name,
		Dir:        dir,
		KnownHosts: filepath.Join(dir, "known_hosts"),
		ClientKey:  filepath.Join(dir, "client_ed25519"),
	}
	tsv, err := os.ReadFile(filepath.Join(dir, "hosts.tsv"))
	if err != nil {
		return nil, fmt.Errorf("lab %s: up: %w", o.Name, err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(tsv)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			return nil, fmt.Errorf("lab %s: up: bad line %d in hosts.tsv: %q", o.Name, i+1, line)
		}
		l.Hosts = append(l.Hosts, Host{Name: f[0], Addr: f[1], Index: i})
	}
	if len(l.Hosts) != o.Hosts {
		return nil, fmt.Errorf("lab %s: up: hosts.tsv lists %d hosts, want %d", o.Name, len(l.Hosts), o.Hosts)
	}
	return l, nil
}

// Down tears the lab down: every process of its hosts, namespaces, interfaces, mounts, its dir. Safe to repeat.
func (l *Lab) Down(ctx context.Context) error { return Down(ctx, l.Name) }

// Down tears down the lab of this name (see Lab.Down); fine when it does not exist or was half built.
func Down(ctx context.Context, name string) error {
	if name == "" {
		name = DefaultName
	}
	_, err := runScript(ctx, name, "down", "down", "--name", name)
	return err
}

// Kill kill -9s every process of the host, as if it lost power. Its namespace and link stay; Start revives it.
func (l *Lab) Kill(ctx context.Context, host string) error { return l.hostOp(ctx, "kill", host) }

// Start (re)starts the host's sshd and waits until it accepts TCP on port 22 (checked inside the host, so it
// works while the link is cut). Sessions of a running sshd survive a restart.
func (l *Lab) Start(ctx context.Context, host string) error { return l.hostOp(ctx, "start", host) }

// Cut takes the host's link down (bridge side): packets vanish, connections hang rather than fail.
func (l *Lab) Cut(ctx context.Context, host string) error { return l.hostOp(ctx, "cut", host) }

// Restore brings the host's link back up.
func (l *Lab) Restore(ctx context.Context, host string) error { return l.hostOp(ctx, "restore", host) }

// Cap shapes both directions of the host's link with tbf at rate (tc syntax: "200mbit", "1gbit").
func (l *Lab) Cap(ctx context.Context, host, rate string) error {
	_, err := runScript(ctx, l.hostLabel(host), "cap", "cap", "--name", l.Name, host, rate)
	return err
}

// CapTo shapes what host sends to the peer hosts at rate, the rest at the
// host's cap: a slow link is CapTo on both its ends.
func (l *Lab) CapTo(ctx context.Context, host, rate string, peers ...string) error {
	_, err := runScript(ctx, l.hostLabel(host), "cap-to", append([]string{"cap-to", "--name", l.Name, host, rate}, peers...)...)
	return err
}

// Uncap removes the host's shaping (no error when there is none).
func (l *Lab) Uncap(ctx context.Context, host string) error { return l.hostOp(ctx, "uncap", host) }

// Ps lists the processes of the host: a header line, then "PID PPID PGID ARGS" lines.
func (l *Lab) Ps(ctx context.Context, host string) (string, error) {
	return runScript(ctx, l.hostLabel(host), "ps", "ps", "--name", l.Name, host)
}

// Rekey gives the host a new host key, restarts its sshd and rewrites the lab's known_hosts files (the
// coordinator's, KnownHosts, and the hosts' shared /root/.ssh/known_hosts). Copies made before keep the old key.
func (l *Lab) Rekey(ctx context.Context, host string) error { return l.hostOp(ctx, "rekey", host) }

// Exec runs args on the host and returns its combined output. A live host is joined through its sshd's
// network, mount and UTS namespaces (what an ssh session sees: hostname, /srv, /etc/hosts, /root); a killed
// host gets the same view built afresh. The working directory is /root.
func (l *Lab) Exec(ctx context.Context, host string, args ...string) (string, error) {
	if len(args) == 0 {
		return "", fmt.Errorf("lab %s: exec: no command", l.hostLabel(host))
	}
	a := append([]string{"exec", "--name", l.Name, host, "--"}, args...)
	out, err := runFiles(ctx, nil, a...)
	if err != nil {
		return out, fmt.Errorf("lab %s: exec %s: %w: %s", l.hostLabel(host), strings.Join(args, " "), err, tail(out, 2000))
	}
	return out, nil
}

// Slurm starts a Slurm cluster on the lab (lab.sh slurm): a munged on every host (its own socket, one key per
// lab), slurmctld on h1 and a slurmd on every host, each inside its host's view, so Kill and Down end them. It
// returns once sinfo on h1 shows every host idle in partition "lab" (the default partition), within LAB_WAIT
// seconds (default 20); otherwise the error names the first host that is not. Every host's /etc/slurm is the lab's
// config dir (SlurmConf), so srun, sinfo and friends work on any host, over ssh or Exec, without SLURM_CONF. MPI
// programs launch with srun --mpi=pmix (Open MPI 4.1 here has no PMI-2 support; MpiDefault is none). Starts only
// what is not running, so calling it again after Kill and Start revives that host's daemons. It also turns
// SlurmAdopt's mode off, and SlurmGRES's (restarting the daemons once to drop the GRES).
func (l *Lab) Slurm(ctx context.Context) error {
	_, err := runScript(ctx, l.Name, "slurm", "slurm", "--name", l.Name)
	return err
}

// AdoptUser is the lab's user held to pam_slurm_adopt under SlurmAdopt (uid 4242; root is exempt by the module).
const AdoptUser = "labuser"

// SlurmAdopt is Slurm with lab.sh slurm --adopt: every host's sshd runs with UsePAM yes, and the compute hosts
// (h2..hN) admit AdoptUser over SSH only while it holds a job on them (pam_slurm_adopt in the account phase,
// PrologFlags=Contain); h1, the login host, admits it always. Root stays admitted everywhere. Slurm turns it off.
func (l *Lab) SlurmAdopt(ctx context.Context) error {
	_, err := runScript(ctx, l.Name, "slurm --adopt", "slurm", "--name", l.Name, "--adopt")
	return err
}

// SlurmPyxis is Slurm with lab.sh slurm --pyxis: a stand-in for NVIDIA's Pyxis (pyxis/spank_pyxis.c, a real SPANK
// plugin built with gcc against libslurm-dev's spank.h) in the hosts' plugstack.conf, so srun takes
// --container-image=[REGISTRY#]IMAGE[:TAG] (enroot's URI) as with Pyxis: each node's podman pulls the image (from
// the lab's Registry), the tasks run chrooted into its filesystem, and srun prints Pyxis's lines. Slurm turns it off.
func (l *Lab) SlurmPyxis(ctx context.Context) error {
	src, err := pyxisEmbed.path()
	if err != nil {
		return err
	}
	_, err = runScript(ctx, l.Name, "slurm --pyxis", "slurm", "--name", l.Name, "--pyxis-src", src)
	return err
}

// InstallEnroot puts the stand-in's enroot (pyxis/enroot: list and remove -f, over the containers the Pyxis
// stand-in keeps on the host) in host's /usr/local/bin, as a cluster with Pyxis has enroot beside it: what a
// window's teardown removes its named container with. A test installs it after it has emptied the bin directory.
func (l *Lab) InstallEnroot(host string) error {
	return os.WriteFile(filepath.Join(l.BinDir(host), "enroot"), enrootStandin, 0o755)
}

// SlurmGRES is Slurm with lab.sh slurm --gres: every host's Slurm node says it has perNode GPUs (GresTypes=gpu,
// Gres=gpu:N in slurm.conf, a gres.conf counting them), but those in on, by host name ("h3"), the count given
// there (0: none). The lab has no GPUs: gres.conf's File= are stand-in character devices (what /dev/null is), so
// Slurm schedules and counts them, sets CUDA_VISIBLE_DEVICES for a step that asks for them, and nothing more. A
// change restarts slurmctld and every slurmd (slurmd reads gres.conf only when it starts) and returns once every
// host has registered again and is idle. perNode 0 and no on is Slurm: no GRES. It turns SlurmAdopt's mode off.
func (l *Lab) SlurmGRES(ctx context.Context, perNode int, on map[string]int) error {
	args := []string{"slurm", "--name", l.Name}
	if perNode > 0 {
		args = append(args, "--gres", fmt.Sprintf("gpu:%d", perNode))
	}
	hosts := make([]string, 0, len(on))
	for h := range on {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		args = append(args, "--gres-on", fmt.Sprintf("%s=gpu:%d", l.hostLabel(h), on[h]))
	}
	_, err := runScript(ctx, l.Name, "slurm --gres", args...)
	return err
}

// SlurmGRESSpec is SlurmGRES given lab.sh's own words, so that a GRES may name its GPUs' type: every host's node
// spec ("gpu:h100:8"), but those in on, by host name, theirs ("h3": "gpu:a100:8"). Turned off as SlurmGRES is, by
// Slurm.
func (l *Lab) SlurmGRESSpec(ctx context.Context, spec string, on map[string]string) error {
	args := []string{"slurm", "--name", l.Name, "--gres", spec}
	for _, h := range slices.Sorted(maps.Keys(on)) {
		args = append(args, "--gres-on", l.hostLabel(h)+"="+on[h])
	}
	_, err := runScript(ctx, l.Name, "slurm --gres", args...)
	return err
}

// SlurmConf is the path of the lab's slurm.conf as the coordinator sees it (written by Slurm; on the hosts it is
// /etc/slurm/slurm.conf).
func (l *Lab) SlurmConf() string { return filepath.Join(l.Dir, "slurm", "etc", "slurm.conf") }

// Host returns the host named "h3" (or "3"); the zero Host when there is none.
func (l *Lab) Host(name string) Host {
	n := strings.TrimPrefix(name, "h")
	for _, h := range l.Hosts {
		if h.Name == name || h.Name == "h"+n {
			return h
		}
	}
	return Host{}
}

func (l *Lab) hostOp(ctx context.Context, op, host string) error {
	_, err := runScript(ctx, l.hostLabel(host), op, op, "--name", l.Name, host)
	return err
}

// hostLabel is how errors name a host: "h3" for "3" too.
func (l *Lab) hostLabel(host string) string {
	if _, err := strconv.Atoi(host); err == nil {
		return "h" + host
	}
	return host
}

// Command returns a command that runs the embedded lab.sh with args (for labctl and the Makefile).
func Command(ctx context.Context, args ...string) (*exec.Cmd, error) {
	path, err := labScript.path()
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, "bash", append([]string{path}, args...)...), nil
}

// runScript runs lab.sh and returns its stdout; errors read "lab WHO: OP: exit status N: <stderr>".
func runScript(ctx context.Context, who, op string, args ...string) (string, error) {
	var stderr string
	out, err := runFiles(ctx, &stderr, args...)
	if err != nil {
		msg := strings.TrimSpace(stderr)
		if msg == "" {
			msg = strings.TrimSpace(tail(out, 2000))
		}
		return out, fmt.Errorf("lab %s: %s: %w: %s", who, op, err, msg)
	}
	return out, nil
}

// runFiles runs the script with its output in temp files rather than pipes, so a process it leaves behind
// (sshd, a backgrounded command under Exec) cannot hold Wait up. With errOut nil stderr joins stdout.
func runFiles(ctx context.Context, errOut *string, args ...string) (string, error) {
	cmd, err := Command(ctx, args...)
	if err != nil {
		return "", err
	}
	return runCmdFiles(ctx, cmd, errOut)
}

// runCmdFiles is runFiles for any script's command (made with ctx).
func runCmdFiles(ctx context.Context, cmd *exec.Cmd, errOut *string) (string, error) {
	outF, err := os.CreateTemp("", "gpuaccept-lab-out-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(outF.Name())
	defer outF.Close()
	cmd.Stdout = outF
	cmd.Stderr = outF
	var errF *os.File
	if errOut != nil {
		if errF, err = os.CreateTemp("", "gpuaccept-lab-err-*"); err != nil {
			return "", err
		}
		defer os.Remove(errF.Name())
		defer errF.Close()
		cmd.Stderr = errF
	}
	// its own process group, killed whole when ctx ends (sshd daemonizes into its own session and survives)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	out, err := os.ReadFile(outF.Name())
	if err != nil && runErr == nil {
		runErr = err
	}
	if errF != nil {
		b, _ := os.ReadFile(errF.Name())
		*errOut = string(b)
	}
	if runErr != nil && ctx.Err() != nil {
		runErr = fmt.Errorf("%w (%v)", ctx.Err(), runErr)
	}
	return string(out), runErr
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// embedded is a script embedded in the package, written out once per process.
type embedded struct {
	name    string // "lab": files lab-HASH.sh
	ext     string // ".sh" when empty
	content []byte
	once    sync.Once
	file    string
	err     error
}

var (
	labScript      = &embedded{name: "lab", content: script}
	testImageEmbed = &embedded{name: "testimage", content: testImageScript}
	pyxisEmbed     = &embedded{name: "spank_pyxis", ext: ".c", content: pyxisSource}
)

// path writes the script once per process to a private dir, named by its content hash so processes built
// from different versions do not clash: $TMPDIR/gpuaccept-labscript-UID/NAME-HASH.sh.
func (e *embedded) path() (string, error) {
	e.once.Do(func() {
		sum := sha256.Sum256(e.content)
		dir, err := privateDir(filepath.Join(os.TempDir(), fmt.Sprintf("gpuaccept-labscript-%d", os.Geteuid())))
		if err != nil {
			e.err = fmt.Errorf("lab: writing %s.sh: %w", e.name, err)
			return
		}
		ext := e.ext
		if ext == "" {
			ext = ".sh"
		}
		path := filepath.Join(dir, e.name+"-"+hex.EncodeToString(sum[:6])+ext)
		if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, e.content) {
			e.file = path
			return
		}
		f, err := os.CreateTemp(dir, "."+e.name+"-*"+ext)
		if err == nil {
			_, err = f.Write(e.content)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Chmod(f.Name(), 0o700)
			}
			if err == nil {
				err = os.Rename(f.Name(), path) // atomic: concurrent test binaries may race here
			}
			if err != nil {
				os.Remove(f.Name())
			}
		}
		if err != nil {
			e.err = fmt.Errorf("lab: writing %s.sh: %w", e.name, err)
			return
		}
		e.file = path
	})
	return e.file, e.err
}

// privateDir makes dir (0700) or checks that an existing one is a real directory of ours that nobody else
// can write; otherwise it falls back to a fresh temp dir.
func privateDir(dir string) (string, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return os.MkdirTemp("", "gpuaccept-labscript-*")
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || (ok && int(st.Uid) != os.Geteuid()) {
		return os.MkdirTemp("", "gpuaccept-labscript-*")
	}
	return dir, nil
}

// BinDir is the host's own /usr/local/bin, seen from the coordinator: what
// is put there is on that host's PATH only (GPU tool stand-ins, say).
func (l *Lab) BinDir(host string) string {
	return filepath.Join(l.Dir, "hosts", l.Host(host).Name, "bin")
}

// StorageHost names the lab's storage host where a host is expected (Kill, Cut, Restore, Cap, Uncap, Ps);
// Storage starts it.
const StorageHost = "storage"

// DefaultStoragePort is the storage host's HTTP port unless StorageOn says otherwise.
const DefaultStoragePort = 8080

// Storage serves dir over HTTP from the lab's storage host, a namespace of its own at SUBNET.2 on the bridge
// (named "storage" in every host's /etc/hosts), on DefaultStoragePort, and returns the base URL
// ("http://SUBNET.2:8080"): URL+"/a/b" is dir/a/b, for every host and the coordinator. It returns once the
// server accepts connections. Calling it again (another dir) restarts the server; Down stops it. The storage
// host can be killed, cut and capped like a host (StorageHost), but has no sshd: Storage revives it.
// The server is busybox httpd (Range requests, sendfile), or python3 -m http.server without busybox.
func (l *Lab) Storage(ctx context.Context, dir string) (url string, err error) {
	return l.StorageOn(ctx, dir, DefaultStoragePort)
}

// StorageOn is Storage on another port.
func (l *Lab) StorageOn(ctx context.Context, dir string, port int) (url string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("lab %s: storage: %w", l.Name, err)
	}
	if _, err := runScript(ctx, l.Name, "storage", "storage", "--name", l.Name, "--port", strconv.Itoa(port), abs); err != nil {
		return "", err
	}
	env, err := l.Env()
	if err != nil {
		return "", fmt.Errorf("lab %s: storage: %w", l.Name, err)
	}
	if env["LAB_STORAGE_URL"] == "" {
		return "", fmt.Errorf("lab %s: storage: no LAB_STORAGE_URL in %s", l.Name, filepath.Join(l.Dir, "env"))
	}
	return env["LAB_STORAGE_URL"], nil
}

// SharedPath is where every host sees the lab's shared filesystem (SharedDir): a file written there on one
// host is read on any other at once, as on a cluster's shared checkpoint filesystem.
const SharedPath = "/shared"

// SharedDir is the lab's shared filesystem (every host's SharedPath) as the coordinator sees it.
func (l *Lab) SharedDir() string { return filepath.Join(l.Dir, "shared") }

// ContainerDriver is the storage driver of the hosts' podman stores ("overlay", or "vfs" where the lab dir's
// filesystem cannot hold overlay layers), or "" when podman was not installed when the lab came up: then the
// hosts have no container setup. Where it is set, plain podman commands on a host (over ssh or Exec, no flags
// needed) use the host's own image store (ContainerStore): an image loaded on h1 is not on h2.
func (l *Lab) ContainerDriver() string {
	env, err := l.Env()
	if err != nil {
		return ""
	}
	return env["LAB_CONTAINERS"]
}

// ContainerStore is the host's podman image store (its graphroot, /srv/node/containers/storage on the host)
// as the coordinator sees it.
func (l *Lab) ContainerStore(host string) string {
	return filepath.Join(l.Dir, "hosts", l.Host(host).Name, "srv", "node", "containers", "storage")
}

// Env reads the lab's DIR/env (LAB_NAME, LAB_SUBNET, ..., LAB_STORAGE_URL once Storage ran).
func (l *Lab) Env() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(l.Dir, "env"))
	if err != nil {
		return nil, err
	}
	return parseEnv(b), nil
}

// parseEnv reads KEY='value' lines (values free of quotes, as lab.sh and testimage.sh write them).
func parseEnv(b []byte) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t") || strings.HasPrefix(k, "#") {
			continue
		}
		env[k] = strings.Trim(v, "'")
	}
	return env
}

// TestImageRef is the tag testimage.sh gives the test image.
const TestImageRef = "localhost/gpuaccept-lab:1"

// TestImageGPULine is what the test image's stand-in nvidia-smi prints (for -L and anything else).
const TestImageGPULine = "GPU 0: gpuaccept lab container (UUID: GPU-00000000-0000-0000-0000-000000000000)"

// TestImage is an image built by BuildTestImage (testimage.sh), read back from its image.env.
type TestImage struct {
	Dir           string // where the archives are
	Ref           string // TestImageRef
	ID            string // "sha256:" + 64 hex: the config digest, the ID podman shows after loading either archive
	OCIDigest     string // "sha256:" + 64 hex: the manifest digest the oci-archive's index.json lists
	DockerArchive string // path of the docker-archive (podman load -i; docker load)
	OCIArchive    string // path of the oci-archive
	DockerSHA256  string // hex sha256 of the docker-archive file
	OCISHA256     string // hex sha256 of the oci-archive file
	DockerSize    int64
	OCISize       int64
	Pad           int64 // bytes of random data in /pad.bin in the image (0: none)
}

// BuildTestImage builds the lab's test image offline into dir (testimage.sh, embedded here): FROM scratch
// with a static busybox, a stand-in nvidia-smi printing TestImageGPULine and the stand-in binary at
// TestImageStandin (built by BuildStandin to dir/standin), pad bytes of random data added (0 for none; the
// archives are then about 9 MB, 7 of them the stand-in), tagged TestImageRef, saved as dir/image.docker.tar and
// dir/image.oci.tar (layers uncompressed), described by dir/image.env. podman runs with a throwaway store under
// dir, so the machine's image store is not touched. Needs root, podman, busybox-static and go; about a second
// unpadded. The ID differs from build to build (the config records the build time).
func BuildTestImage(ctx context.Context, dir string, pad int64) (*TestImage, error) {
	path, err := testImageEmbed.path()
	if err != nil {
		return nil, err
	}
	standin := filepath.Join(dir, "standin")
	if err := BuildStandin(ctx, standin); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "bash", path, "--standin", standin, "--pad", strconv.FormatInt(pad, 10), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("lab: testimage.sh: %w: %s", err, tail(string(out), 2000))
	}
	return ReadTestImage(dir)
}

// ReadTestImage reads dir/image.env, as written by testimage.sh.
func ReadTestImage(dir string) (*TestImage, error) {
	b, err := os.ReadFile(filepath.Join(dir, "image.env"))
	if err != nil {
		return nil, fmt.Errorf("lab: test image: %w", err)
	}
	env := parseEnv(b)
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(env[k], 10, 64)
		return n
	}
	im := &TestImage{
		Dir:           dir,
		Ref:           env["IMAGE_REF"],
		ID:            env["IMAGE_ID"],
		OCIDigest:     env["IMAGE_OCI_DIGEST"],
		DockerArchive: filepath.Join(dir, env["IMAGE_DOCKER_ARCHIVE"]),
		OCIArchive:    filepath.Join(dir, env["IMAGE_OCI_ARCHIVE"]),
		DockerSHA256:  env["IMAGE_DOCKER_SHA256"],
		OCISHA256:     env["IMAGE_OCI_SHA256"],
		DockerSize:    num("IMAGE_DOCKER_SIZE"),
		OCISize:       num("IMAGE_OCI_SIZE"),
		Pad:           num("IMAGE_PAD"),
	}
	if len(im.ID) != len("sha256:")+64 || !strings.HasPrefix(im.ID, "sha256:") || im.Ref == "" ||
		env["IMAGE_DOCKER_ARCHIVE"] == "" || env["IMAGE_OCI_ARCHIVE"] == "" {
		return nil, fmt.Errorf("lab: test image: %s is incomplete: %q", filepath.Join(dir, "image.env"), b)
	}
	return im, nil
}
