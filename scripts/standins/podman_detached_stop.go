package standins

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ending detached containers: stop, kill, rm, and the demo's last word, PodmanKillAll.

// stopContainer sends SIGTERM to the container's process group and SIGKILL after timeout, then waits for
// the monitor to record the exit.
func stopContainer(c *container, timeout time.Duration) {
	if !c.alive() {
		return
	}
	syscall.Kill(-c.state.Pid, syscall.SIGTERM)
	if !waitGone(c, timeout) {
		syscall.Kill(-c.state.Pid, syscall.SIGKILL)
		waitGone(c, 5*time.Second)
	}
	c.settle()
}

func waitGone(c *container, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for c.alive() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func podmanStop(store string, args []string, stdout, stderr io.Writer) int {
	timeout := 10 * time.Second
	ignore := false
	var refs []string
	for i := 0; i < len(args); {
		if v, n, ok, err := cutFlag(args, i, "-t", "--time"); ok {
			secs, perr := strconv.Atoi(v)
			if err == nil && (perr != nil || secs < 0) {
				err = fmt.Errorf("invalid argument %q for \"-t, --time\" flag: want seconds", v)
			}
			if err != nil {
				return usageError(stderr, "stop", err)
			}
			timeout, i = time.Duration(secs)*time.Second, i+n
			continue
		}
		switch a := args[i]; {
		case a == "-i" || a == "--ignore":
			ignore = true
		case strings.HasPrefix(a, "-"):
			return usageError(stderr, "stop", fmt.Errorf("unknown flag: %s", a))
		default:
			refs = append(refs, a)
		}
		i++
	}
	if len(refs) == 0 {
		fmt.Fprintln(stderr, "Error: you must provide at least one name or id")
		return 125
	}
	code := 0
	for _, r := range refs {
		c, err := findContainer(store, r)
		if err != nil {
			if !ignore {
				fmt.Fprintf(stderr, "Error: %v\n", err)
				code = 125
			}
			continue
		}
		stopContainer(c, timeout)
		fmt.Fprintln(stdout, r)
	}
	return code
}

var signals = map[string]syscall.Signal{"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT,
	"HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2}

func podmanKill(store string, args []string, stdout, stderr io.Writer) int {
	sig := syscall.SIGKILL
	var refs []string
	for i := 0; i < len(args); {
		if v, n, ok, err := cutFlag(args, i, "-s", "--signal"); ok {
			if err != nil {
				return usageError(stderr, "kill", err)
			}
			s, known := signals[strings.TrimPrefix(strings.ToUpper(v), "SIG")]
			if num, err := strconv.Atoi(v); err == nil && num > 0 && num < 65 {
				s, known = syscall.Signal(num), true
			}
			if !known {
				fmt.Fprintf(stderr, "Error: invalid signal: %s\n", v)
				return 125
			}
			sig, i = s, i+n
			continue
		}
		if strings.HasPrefix(args[i], "-") {
			return usageError(stderr, "kill", fmt.Errorf("unknown flag: %s", args[i]))
		}
		refs, i = append(refs, args[i]), i+1
	}
	if len(refs) == 0 {
		fmt.Fprintln(stderr, "Error: you must provide at least one name or id")
		return 125
	}
	code := 0
	for _, r := range refs {
		c, err := findContainer(store, r)
		if err != nil {
			fmt.Fprintf(stderr, "Error: %v\n", err)
			code = 125
			continue
		}
		if !c.alive() {
			fmt.Fprintf(stderr, "Error: can only kill running containers. %s is in state %s: container state improper\n", c.ID, c.state.Status)
			code = 125
			continue
		}
		syscall.Kill(-c.state.Pid, sig)
		fmt.Fprintln(stdout, r)
	}
	return code
}

func podmanRm(store string, args []string, stdout, stderr io.Writer) int {
	force, ignore, all := false, false, false
	timeout := 10 * time.Second
	var refs, filters []string
	for i := 0; i < len(args); {
		if v, n, ok, err := cutFlag(args, i, "-t", "--time"); ok {
			secs, perr := strconv.Atoi(v)
			if err == nil && (perr != nil || secs < 0) {
				err = fmt.Errorf("invalid argument %q for \"-t, --time\" flag: want seconds", v)
			}
			if err != nil {
				return usageError(stderr, "rm", err)
			}
			timeout, i = time.Duration(secs)*time.Second, i+n
			continue
		}
		if v, n, ok, err := cutFlag(args, i, "--filter"); ok {
			if err != nil {
				return usageError(stderr, "rm", err)
			}
			filters, i = append(filters, v), i+n
			continue
		}
		switch a := args[i]; a {
		case "-f", "--force":
			force = true
		case "-i", "--ignore":
			ignore = true
		case "-a", "--all":
			all = true
		case "-v", "--volumes", "-fv", "-vf":
			force = force || strings.Contains(a, "f")
		default:
			if strings.HasPrefix(a, "-") {
				return usageError(stderr, "rm", fmt.Errorf("unknown flag: %s", a))
			}
			refs = append(refs, a)
		}
		i++
	}
	type target struct {
		c     *container
		label string // what is printed: the argument as typed, or the ID
	}
	var targets []target
	code := 0
	if all || len(filters) > 0 {
		match, err := ctrFilter(filters)
		if err != nil {
			fmt.Fprintf(stderr, "Error: %v\n", err)
			return 125
		}
		for _, c := range containers(store) {
			if match(c) {
				targets = append(targets, target{c, c.ID})
			}
		}
	} else if len(refs) == 0 {
		fmt.Fprintln(stderr, "Error: you must provide at least one name or id")
		return 125
	}
	for _, r := range refs {
		c, err := findContainer(store, r)
		if err != nil {
			// --force implies --ignore (podman 4).
			if !force && !ignore {
				fmt.Fprintf(stderr, "Error: %v\n", err)
				code = max(code, 1)
			}
			continue
		}
		targets = append(targets, target{c, r})
	}
	for _, t := range targets {
		if t.c.alive() {
			if !force {
				fmt.Fprintf(stderr, "Error: cannot remove container %s as it is running - running or paused containers cannot be removed without force: container state improper\n", t.c.ID)
				code = 2
				continue
			}
			stopContainer(t.c, timeout)
		}
		if err := removeContainer(store, t.c); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "Error: %v\n", err)
			code = 125
			continue
		}
		fmt.Fprintln(stdout, t.label)
	}
	return code
}

func removeContainer(store string, c *container) error {
	unlock, err := lockContainers(store)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(c.dir); err != nil {
		return err
	}
	return os.RemoveAll(c.dir)
}

// PodmanKillAll kills every running container of the store (their whole process groups) and returns their
// names: the demo's last word on its nodes, whatever the window's teardown managed.
func PodmanKillAll(store string) []string {
	var killed []string
	for _, c := range containers(store) {
		if c.alive() {
			syscall.Kill(-c.state.Pid, syscall.SIGKILL)
			killed = append(killed, c.Name)
		}
	}
	return killed
}
