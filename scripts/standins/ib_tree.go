package standins

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SysfsIBEnv names the environment variable by which the node script (scripts/node/telemetry.sh) reads IB port
// counters from a tree laid out as /sys/class/infiniband instead of that directory. The lab sets it for every
// host's ssh sessions (sshd's SetEnv) to IBTreeInHost.
const SysfsIBEnv = "GPUACCEPT_SYSFS_IB"

// IBTreeInHost is the stand-in IB tree as a lab host sees it: under its own /srv (DefaultStateDir).
const IBTreeInHost = DefaultStateDir + "/sys/class/infiniband"

// IBCounters are the port counters the tree holds, as the sampler reads them.
var IBCounters = []string{
	"symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
	"excessive_buffer_overrun_errors", "local_link_integrity_errors",
}

// ibPort is one port of the profile's ibstat sample.
type ibPort struct {
	dev, port   string
	state, phys string // sysfs wording: "4: ACTIVE", "5: LinkUp"
	layer       string
}

// ibStates maps ibstat's words to the kernel's ib_port_state / phys_state text in sysfs.
var ibStates = map[string]string{
	"Down": "1: DOWN", "Initializing": "2: INIT", "Armed": "3: ARMED", "Active": "4: ACTIVE",
	"Active_defer": "5: ACTIVE_DEFER",
}
var ibPhysStates = map[string]string{
	"Sleep": "1: Sleep", "Polling": "2: Polling", "Disabled": "3: Disabled",
	"PortConfigurationTraining": "4: PortConfigurationTraining", "LinkUp": "5: LinkUp",
	"LinkErrorRecovery": "6: LinkErrorRecovery", "Phy Test": "7: Phy Test",
}

// ibPorts reads the CAs and ports of an ibstat text ("CA 'mlx5_0'", "\tPort 1:", "\t\tState: Active", ...).
func ibPorts(text string) []ibPort {
	var out []ibPort
	dev := ""
	for line := range strings.Lines(text) {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "CA '") && strings.HasSuffix(t, "'"):
			dev = strings.TrimSuffix(strings.TrimPrefix(t, "CA '"), "'")
		case strings.HasPrefix(t, "Port ") && strings.HasSuffix(t, ":") && dev != "":
			out = append(out, ibPort{dev: dev, port: strings.TrimSuffix(strings.TrimPrefix(t, "Port "), ":")})
		case len(out) > 0:
			k, v, _ := strings.Cut(t, ": ")
			cur := &out[len(out)-1]
			switch k {
			case "State":
				cur.state = ibStates[v]
			case "Physical state":
				cur.phys = ibPhysStates[v]
			case "Link layer":
				cur.layer = v
			}
		}
	}
	return out
}

// ibTreeDir is the tree's path for the stand-ins: SysfsIBEnv, else the state directory's.
func ibTreeDir() string {
	if d := os.Getenv(SysfsIBEnv); d != "" {
		return d
	}
	if s := stateDir(); s != "" {
		return filepath.Join(s, "sys", "class", "infiniband")
	}
	return ""
}

// writeIBTree lays out dir as /sys/class/infiniband for the profile's ibstat ports, every counter 0. An old
// tree is removed first. A profile without ibstat gets no tree (the node has no IB).
func writeIBTree(dir string, p *profile) error {
	if err := errors.Join(os.RemoveAll(dir), os.RemoveAll(filepath.Join(filepath.Dir(dir), ".ib-standin"))); err != nil {
		return fmt.Errorf("standins: IB tree: %w", err)
	}
	if p.ibstat == "" {
		return nil
	}
	for _, pt := range ibPorts(string(sample(p.ibstat))) {
		pd := filepath.Join(dir, pt.dev, "ports", pt.port)
		if err := os.MkdirAll(filepath.Join(pd, "counters"), 0o755); err != nil {
			return fmt.Errorf("standins: IB tree: %w", err)
		}
		files := map[string]string{"state": pt.state, "phys_state": pt.phys, "link_layer": pt.layer}
		for _, c := range IBCounters {
			files[filepath.Join("counters", c)] = "0"
		}
		for name, v := range files {
			if err := os.WriteFile(filepath.Join(pd, name), []byte(v+"\n"), 0o644); err != nil {
				return fmt.Errorf("standins: IB tree: %w", err)
			}
		}
	}
	return nil
}

// applyIB moves the tree to what the plan says at elapsed time el: each port's link_downed counts the linkdown
// events already begun, its state is DOWN (phys_state Disabled) while one lasts and as the tree began
// otherwise. It is a function of el alone, so the loop can apply it every tick; a file is rewritten (renamed
// into place, so that a reader sees the old or the new value) only when its value changes.
func applyIB(dir string, pl plan, el time.Duration) {
	first := firstIBPort(dir)
	downs := map[string]int64{}
	down := map[string]bool{}
	for _, e := range pl {
		if e.kind != evLinkDown || el < e.at {
			continue
		}
		port := e.port
		if port == "" {
			port = first
		}
		downs[port]++
		if e.active(el) {
			down[port] = true
		}
	}
	for port, n := range downs {
		dev, num, ok := strings.Cut(port, ":")
		pd := filepath.Join(dir, dev, "ports", num)
		if !ok || !isDir(pd) {
			continue
		}
		// Kept beside the tree, not in it, so that a reader of the tree sees only sysfs's files.
		aside := filepath.Join(filepath.Dir(dir), ".ib-standin")
		os.MkdirAll(aside, 0o755)
		base := filepath.Join(aside, dev+"_"+num+".up")
		if _, err := os.Stat(base); err != nil {
			// The state and phys_state the port had before its first planted down.
			st, _ := os.ReadFile(filepath.Join(pd, "state"))
			ph, _ := os.ReadFile(filepath.Join(pd, "phys_state"))
			os.WriteFile(base, append(st, ph...), 0o644)
		}
		orig, _ := os.ReadFile(base)
		st, ph, _ := bytes.Cut(orig, []byte("\n"))
		state, phys := string(st), strings.TrimSuffix(string(ph), "\n")
		if down[port] {
			state, phys = "1: DOWN", "3: Disabled"
		}
		replaceIfChanged(aside, filepath.Join(pd, "state"), state+"\n")
		replaceIfChanged(aside, filepath.Join(pd, "phys_state"), phys+"\n")
		replaceIfChanged(aside, filepath.Join(pd, "counters", "link_downed"), strconv.FormatInt(n, 10)+"\n")
	}
}

// firstIBPort is the tree's first port, "mlx5_0:1", in name order.
func firstIBPort(dir string) string {
	devs, _ := os.ReadDir(dir)
	for _, d := range devs {
		ports, _ := os.ReadDir(filepath.Join(dir, d.Name(), "ports"))
		for _, p := range ports {
			return d.Name() + ":" + p.Name()
		}
	}
	return ""
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func replaceIfChanged(aside, path, v string) {
	if b, err := os.ReadFile(path); err == nil && string(b) == v {
		return
	}
	tmp := filepath.Join(aside, filepath.Base(path)+".tmp")
	if os.WriteFile(tmp, []byte(v), 0o644) == nil {
		os.Rename(tmp, path)
	}
}
