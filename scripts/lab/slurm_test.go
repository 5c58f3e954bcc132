package lab_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuaccept/scripts/lab"
)

// This test owns lab name "slurmt" and subnet 10.239.0; other tests that run labs must pick others.
const (
	slurmName   = "slurmt"
	slurmSubnet = "10.239.0"
)

// the stand-in's "#  Rank" line (scripts/standins/nccl): rank and host
var slurmRankRe = regexp.MustCompile(`(?m)^#  Rank +(\d+) Group +\d+ Pid +\d+ on +(\S+) device`)

func TestSlurm(t *testing.T) {
	if why, err := lab.TestSkip(); err != nil {
		t.Fatalf("root on Linux, yet the lab cannot run: %v", err)
	} else if why != "" {
		t.Skipf("lab not supported here: %s (run as root on Linux: sudo go test ./scripts/lab/)", why)
	}
	for _, c := range []string{"ssh", "slurmctld", "slurmd", "srun", "munged", "mpicc"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("the slurm lab test needs %s: %v (bash scripts/deps.sh)", c, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	l, err := lab.Up(ctx, lab.Options{Name: slurmName, Hosts: 3, Subnet: slurmSubnet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), slurmName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	// the MPI stand-in builds (into the lab dir, which Down removes) while Slurm comes up
	bin := filepath.Join(l.Dir, "mpibin")
	var buildErr error
	built := make(chan struct{})
	go func() {
		defer close(built)
		if out, err := exec.CommandContext(ctx, "bash", "../standins/nccl/build.sh", bin).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build.sh: %w\n%s", err, out)
		}
	}()
	t.Cleanup(func() { <-built }) // before the lab goes
	waitBuilt := func() {
		t.Helper()
		<-built
		if buildErr != nil {
			t.Fatal(buildErr)
		}
	}
	t0 := time.Now()
	if err := l.Slurm(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("slurm up: %v", time.Since(t0))
	if b, err := os.ReadFile(l.SlurmConf()); err != nil || !strings.Contains(string(b), "ClusterName="+slurmName+"\n") {
		t.Fatalf("slurm.conf: %v\n%s", err, b)
	}

	t.Run("srun hostname", func(t *testing.T) {
		t0 := time.Now()
		out, err := l.Exec(ctx, "h1", "srun", "-N3", "hostname")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("srun -N3 hostname: %v", time.Since(t0))
		got := strings.Fields(out)
		slices.Sort(got)
		if !slices.Equal(got, []string{"h1", "h2", "h3"}) {
			t.Fatalf("h1: srun -N3 hostname = %q, want h1 h2 h3", out)
		}
	})

	t.Run("over ssh without SLURM_CONF", func(t *testing.T) {
		// /etc/slurm on every host is the lab's config dir: a plain ssh session needs nothing set
		out, err := sshTo(ctx, l, l.KnownHosts, 15, l.Hosts[1], `echo "conf=${SLURM_CONF-unset}"; srun -N3 -l hostname | sort`)
		if want := "conf=unset\n0: h1\n1: h2\n2: h3"; err != nil || out != want {
			t.Fatalf("ssh h2 srun = %q, %v; want %q", out, err, want)
		}
	})

	t.Run("MPI under srun", func(t *testing.T) {
		waitBuilt()
		for _, h := range l.Hosts {
			if err := copyFile(filepath.Join(bin, "all_reduce_perf"), filepath.Join(l.BinDir(h.Name), "all_reduce_perf")); err != nil {
				t.Fatal(err)
			}
		}
		// Debian's Open MPI 4.1.4 now and then crashes a rank in MPI_Init on
		// a loaded machine: a core dump of one (two busy loops, 2 of 30
		// runs) shows a NULL call from mca_btl_tcp's event handler under
		// opal_progress in ompi_mpi_init, its TCP BTL's race of a peer's
		// connect with add_procs (open-mpi/ompi#3035), with or without
		// PMIX_MCA_gds=hash. That is the lab's MPI, not the lab: such a run
		// ends at once (--kill-on-bad-exit) and is tried once more.
		var out string
		var err error
		for try := 1; try <= 2; try++ {
			t0 := time.Now()
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			out, err = l.Exec(rctx, "h1", "srun", "-N3", "--ntasks-per-node=1", "--mpi=pmix", "--kill-on-bad-exit=1",
				"all_reduce_perf", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-w", "1", "-g", "1")
			cancel()
			if err != nil && try == 1 && strings.Contains(err.Error(), "Segmentation fault") {
				t.Logf("try %d: a rank's segmentation fault (the lab's Open MPI), once more: %v", try, err)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("srun --mpi=pmix all_reduce_perf: %v", time.Since(t0))
			break
		}
		hosts := map[string]string{}
		for _, m := range slurmRankRe.FindAllStringSubmatch(out, -1) {
			hosts[m[1]] = m[2]
		}
		if len(hosts) != 3 || hosts["0"] == hosts["1"] || hosts["1"] == hosts["2"] || hosts["0"] == hosts["2"] ||
			!strings.Contains(out, "# Out of bounds values : 0 OK") {
			t.Fatalf("want ranks 0-2 on 3 distinct hosts (one 3-rank job, not 3 single-rank ones), got %v in:\n%s", hosts, out)
		}
	})

	// srun --input=all goes on passing its stdin to every task after one of them ended: a shared job step of
	// gpuaccept's (remote/srun_step.go) carries its heartbeats so for as long as a window-long command runs, and
	// a node whose task ends early must not stall the others. 2,000 frames, each on its own, past the 1024
	// buffers srun keeps.
	t.Run("stdin after a task ended", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		task := `if [ "$SLURM_PROCID" = 0 ]; then exit 0; fi; n=0; while IFS= read -r l; do n=$((n+1)); done; echo "got $n"`
		out, err := l.Exec(rctx, "h1", "bash", "-c", `for i in $(seq 2000); do echo h; sleep 0.002; done | srun -N2 --input=all --label bash -c `+
			"'"+task+"'")
		if err != nil || !strings.Contains(out, "1: got 2000") {
			t.Fatalf("srun --input=all with task 0 ended at once: %q %v", out, err)
		}
	})

	// slurm --pyxis: srun takes Pyxis's options (the stand-in SPANK plugin) and a failed import says what Pyxis
	// says; plain slurm takes them away again.
	t.Run("pyxis", func(t *testing.T) {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Fatalf("slurm --pyxis needs gcc (bash scripts/deps.sh): %v", err)
		}
		if err := l.SlurmPyxis(ctx); err != nil {
			t.Fatal(err)
		}
		help, err := l.Exec(ctx, "h1", "srun", "--help")
		if err != nil || !strings.Contains(help, "Options provided by plugins:") ||
			!strings.Contains(help, "--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH") ||
			!strings.Contains(help, "--container-name=NAME   [pyxis] name to use") {
			t.Fatalf("srun --help with Pyxis: %v\n%s", err, help)
		}
		out, err := l.Exec(ctx, "h1", "sh", "-c", "srun -N1 -w h2 --container-image=nosuch:1 true 2>&1")
		for _, want := range []string{"pyxis: importing docker image: nosuch:1\n", "error: pyxis: failed to import docker image\n",
			"error: pyxis: printing enroot log file:\n", "error: pyxis:     [ERROR] ", "error: pyxis: couldn't start container\n"} {
			if err == nil || !strings.Contains(out, want) {
				t.Errorf("a failed import (err %v) does not say %q:\n%s", err, want, out)
			}
		}
		if err := l.Slurm(ctx); err != nil {
			t.Fatal(err)
		}
		if help, err := l.Exec(ctx, "h1", "srun", "--help"); err != nil || strings.Contains(help, "--container-image") {
			t.Errorf("srun --help after plain slurm still lists --container-image: %v", err)
		}
	})

	t.Run("down ends every daemon", func(t *testing.T) {
		var pids []int
		for _, h := range l.Hosts {
			out, err := l.Ps(ctx, h.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line) // PID PPID PGID ARGS
				if len(f) < 4 {
					continue
				}
				name := filepath.Base(f[3])
				if name == ":" && len(f) > 4 { // slurmctld's ": slurmscriptd"
					name = f[4]
				}
				if !strings.HasPrefix(name, "slurm") && name != "munged" {
					continue
				}
				pid, err := strconv.Atoi(f[0])
				if err == nil {
					pids = append(pids, pid)
				}
			}
		}
		// munged and slurmd on each host, slurmctld (and its slurmscriptd) on h1
		if len(pids) < 2*len(l.Hosts)+1 {
			t.Fatalf("only %d slurm/munge processes on the hosts before down: %v", len(pids), pids)
		}
		if err := l.Down(ctx); err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			// a zombie is dead already (init reaps it in its own time)
			if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
				if s := string(st); !strings.Contains(s[strings.LastIndexByte(s, ')')+1:], " Z ") {
					t.Errorf("pid %d survived down: %s", pid, st)
				}
			}
		}
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), l.Dir+"/") {
				t.Errorf("a process of the lab survived down: %s: %s", p, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	})
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
