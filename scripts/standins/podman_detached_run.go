package standins

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Starting a detached container: run -d's command line, the container created in the store, its monitor started.

// runOptions are the parts of a `podman run` command line the stand-in acts on.
type runOptions struct {
	detach, remove, gpus bool
	name                 string
	labels               map[string]string
	env                  []string
	image                string
	command              []string
}

// runValueFlags take a value (the next argument, or after "="); the ones not in the switch below are accepted
// and do not change what the simulated container does.
var runValueFlags = map[string]bool{"--device": true, "--gpus": true, "--name": true, "-e": true, "--env": true,
	"--network": true, "--net": true, "-v": true, "--volume": true, "-u": true, "--user": true, "-w": true,
	"--workdir": true, "--security-opt": true, "--ipc": true, "--shm-size": true, "--ulimit": true,
	"--entrypoint": true, "--label": true, "-l": true, "--pull": true, "--stop-timeout": true, "--pid": true,
	"--cap-add": true, "--hostname": true, "--log-driver": true, "--cgroupns": true, "--userns": true}

var runBoolFlags = map[string]bool{"-d": true, "--detach": true, "--rm": true, "-i": true, "-t": true,
	"-it": true, "--init": true, "--privileged": true}

func parseRun(args []string) (runOptions, error) {
	o := runOptions{labels: map[string]string{}}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a, v, hasV := strings.Cut(args[i], "=")
		switch {
		case runBoolFlags[a] && !hasV:
			switch a {
			case "-d", "--detach":
				o.detach = true
			case "--rm":
				o.remove = true
			}
		case runValueFlags[a]:
			if !hasV {
				if i+1 >= len(args) {
					return o, fmt.Errorf("flag needs an argument: %s", a)
				}
				i++
				v = args[i]
			}
			switch a {
			case "--device":
				o.gpus = o.gpus || strings.HasPrefix(v, "nvidia.com/gpu=")
			case "--gpus":
				o.gpus = true
			case "--name":
				o.name = v
			case "--label", "-l":
				k, lv, _ := strings.Cut(v, "=")
				o.labels[k] = lv
			case "-e", "--env":
				if !strings.Contains(v, "=") {
					// -e NAME passes the variable through; unset, it is left out.
					continue
				}
				o.env = append(o.env, v)
			}
		default:
			return o, fmt.Errorf("unknown flag: %s", a)
		}
	}
	if i >= len(args) {
		return o, errors.New("requires at least 1 arg(s), only received 0")
	}
	o.image, o.command = args[i], args[i+1:]
	return o, nil
}

// runDetached says whether a run command line asks for a detached container.
func runDetached(args []string) bool {
	o, err := parseRun(args)
	return err == nil && o.detach
}

// podmanRunDetached creates the container, starts its monitor and prints its ID once the process runs.
func podmanRunDetached(store string, args, env []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\nSee 'podman run --help'\n", err)
		return 125
	}
	img, err := findImage(store, o.image)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	command := o.command
	if len(command) == 0 {
		var c struct {
			Config struct{ Cmd []string } `json:"config"`
		}
		_ = json.Unmarshal(img.Config, &c)
		command = c.Config.Cmd
	}
	if len(command) == 0 {
		fmt.Fprintln(stderr, "Error: no command or entrypoint provided, and no CMD or ENTRYPOINT from image")
		return 125
	}
	command = withLoopbackHost(command, lookupEnv(env, LoopbackEnv))
	self, err := selfArgv(append([]string{"run"}, args...))
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	// The simulated image holds standin (as the lab's test image does, at /usr/local/bin) and nothing else
	// runnable; the GPU tools come with the GPUs, as with CDI devices.
	var exe string
	if o.gpus || command[0] == StandinCommand {
		exe, err = lookPath(command[0], lookupEnv(env, "PATH"))
	} else {
		err = errors.New("not in the simulated image")
	}
	// Created first, as podman does: a name in use is said before a command that is not found.
	c, code := createContainer(store, o, img, command, exe, env, stderr)
	if c == nil {
		return code
	}
	if err != nil {
		if c.AutoRemove {
			removeContainer(store, c)
		}
		fmt.Fprintf(stderr, "Error: crun: executable file `%s` not found in $PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found\n", command[0])
		return 127
	}
	mon := exec.Command(self[0], append(self[1:], podmanMonitorVerb, c.ID)...)
	mon.Env, mon.Dir = env, c.dir
	// Its own session: the container outlives the SSH session that started it, as a real one does.
	mon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := mon.Start(); err != nil {
		fmt.Fprintf(stderr, "Error: starting the container's monitor: %v\n", err)
		return 125
	}
	go mon.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := readContainer(c.dir)
		if err == nil && cur.state.Status != ctrCreated || err != nil && c.AutoRemove {
			if err == nil && cur.state.Error != "" {
				fmt.Fprintf(stderr, "Error: %s\n", cur.state.Error)
				return 126
			}
			fmt.Fprintln(stdout, c.ID)
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(stderr, "Error: container %s did not start within 10s\n", c.ID)
	return 125
}

// withLoopbackHost gives `standin openai-server` the node's loopback address (LoopbackEnv) to listen on,
// unless the command names a --host of its own.
func withLoopbackHost(command []string, loopback string) []string {
	if loopback == "" || len(command) < 2 || command[0] != StandinCommand || command[1] != "openai-server" {
		return command
	}
	for _, a := range command[2:] {
		if a == "--host" || strings.HasPrefix(a, "--host=") {
			return command
		}
	}
	out := append([]string{}, command[:2]...)
	return append(append(out, "--host", loopback), command[2:]...)
}

// selfArgv is the command line that runs this program's podman again: os.Args up to "podman" (gpuaccept
// standin podman, or standin podman). args must be what PodmanMain was given, the tail of os.Args.
func selfArgv(args []string) ([]string, error) {
	n := len(os.Args) - len(args) - 1
	if n < 1 || os.Args[n] != Podman || !slices.Equal(os.Args[n+1:], args) {
		return nil, errors.New("podman run -d: the simulated podman must be run as a program (its monitor runs it again)")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return append([]string{exe}, os.Args[1:n+1]...), nil
}

func createContainer(store string, o runOptions, img *storedImage, command []string, exe string, env []string, stderr io.Writer) (*container, int) {
	unlock, err := lockContainers(store)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return nil, 125
	}
	defer unlock()
	existing := containers(store)
	if o.name != "" {
		for _, c := range existing {
			if c.Name == o.name {
				fmt.Fprintf(stderr, "Error: creating container storage: the container name %q is already in use by %s. You have to remove that container to be able to reuse that name: that name is already in use\n", o.name, c.ID)
				return nil, 125
			}
		}
	}
	var raw [32]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	name := o.name
	for name == "" || slices.ContainsFunc(existing, func(c *container) bool { return c.Name == name }) {
		name = randomName()
	}
	imageName := o.image
	if len(img.Names) > 0 {
		imageName = img.Names[0]
	}
	// The container's working directory: the node's home, where the demo puts what a container is given.
	dir := lookupEnv(env, "HOME")
	if dir == "" {
		dir, _ = os.Getwd()
	}
	c := &container{dir: filepath.Join(containersDir(store), id), ctrConfig: ctrConfig{ID: id, Name: name,
		Image: o.image, ImageID: img.ID, ImageName: imageName, Command: command, Exe: exe, Env: o.env, Dir: dir,
		Labels: o.labels, AutoRemove: o.remove, Created: time.Now()}, state: ctrState{Status: ctrCreated}}
	err = os.Mkdir(c.dir, 0o700)
	if err == nil {
		err = writeJSON(filepath.Join(c.dir, "config.json"), c.ctrConfig)
	}
	if err == nil {
		err = writeJSON(filepath.Join(c.dir, "state.json"), c.state)
	}
	if err != nil {
		os.RemoveAll(c.dir)
		fmt.Fprintf(stderr, "Error: creating container storage: %v\n", err)
		return nil, 125
	}
	return c, 0
}

var (
	nameLeft  = []string{"admiring", "brave", "clever", "eager", "focused", "gallant", "happy", "jolly", "keen", "nifty", "quirky", "serene"}
	nameRight = []string{"babbage", "curie", "darwin", "euler", "feynman", "gauss", "hopper", "kepler", "lovelace", "noether", "shannon", "turing"}
)

func randomName() string {
	var b [2]byte
	rand.Read(b[:])
	return nameLeft[int(b[0])%len(nameLeft)] + "_" + nameRight[int(b[1])%len(nameRight)]
}
