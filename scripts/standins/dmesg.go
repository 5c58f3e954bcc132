package standins

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dmesg is the kernel log stand-in: installed (InstallTelemetry) only on a node whose plan has Xid events, it
// prints those events, at their times, as the NVIDIA driver logs them, and nothing else: lab hosts share the
// machine's kernel, whose own lines say nothing about a simulated node.
const Dmesg = "dmesg"

// xidLines maps an Xid code to the text after "NVRM: Xid (PCI:....): <code>, " of its first line in the embedded
// kernel samples: a planted Xid reads exactly as a genuine one of that code did, only its GPU and time are the
// simulated node's.
var xidLines = sync.OnceValue(func() map[int]string {
	m := map[int]string{}
	entries, _ := fs.ReadDir(samples, "samples/kernel")
	for _, e := range entries {
		for line := range strings.Lines(string(sample("kernel/" + e.Name()))) {
			_, after, ok := strings.Cut(strings.TrimRight(line, "\r\n"), "NVRM: Xid (PCI:")
			if !ok {
				continue
			}
			_, after, ok = strings.Cut(after, "): ")
			codeText, rest, ok2 := strings.Cut(after, ", ")
			code, err := strconv.Atoi(codeText)
			if !ok || !ok2 || err != nil {
				continue
			}
			if _, seen := m[code]; !seen {
				m[code] = rest
			}
		}
	}
	return m
})

func xidText(code int) (string, bool) {
	t, ok := xidLines()[code]
	return t, ok
}

func xidCodes() []int {
	codes := make([]int, 0, len(xidLines()))
	for c := range xidLines() {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// xidPCI is the Xid line's device: "00000000:18:00.0" -> "0000:18:00" (a 16-bit domain, no function).
func xidPCI(busID string) string {
	parts := strings.Split(busID, ":")
	if len(parts) != 3 {
		return busID
	}
	dom := parts[0]
	if len(dom) > 4 {
		dom = dom[len(dom)-4:]
	}
	dev, _, _ := strings.Cut(parts[2], ".")
	return strings.ToLower(dom + ":" + parts[1] + ":" + dev)
}

// kernLine is one planted kernel line at wall time at.
type kernLine struct {
	at   time.Time
	text string
}

// plannedKernel is every planted Xid of the plan as the driver logs it, in time order; boot is when the
// kernel's clock started (the timestamps are seconds since then, "[%5lu.%06lu]").
func plannedKernel(l *smiLog, pl plan, t0, boot time.Time) []kernLine {
	var out []kernLine
	for _, e := range pl {
		if e.kind != evXid || e.gpu >= len(l.gpus) {
			continue
		}
		bus, _ := l.gpus[e.gpu].get("PCI/Bus Id", "")
		text, _ := xidText(e.code)
		at := t0.Add(e.at)
		ts := max(at.Sub(boot), 0)
		us := ts.Microseconds()
		out = append(out, kernLine{at, fmt.Sprintf("[%5d.%06d] NVRM: Xid (PCI:%s): %d, %s",
			us/1e6, us%1e6, xidPCI(bus), e.code, text)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// bootTime is the kernel's boot time (/proc/stat's btime, whole seconds, the same for every call), the origin
// of dmesg's timestamps; without it, now less /proc/uptime.
func bootTime(now time.Time) time.Time {
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "btime "); ok {
				if s, err := strconv.ParseInt(v, 10, 64); err == nil {
					return time.Unix(s, 0)
				}
			}
		}
	}
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return now
	}
	f, _, _ := strings.Cut(string(b), " ")
	s, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return now
	}
	return now.Add(-time.Duration(s * float64(time.Second)))
}

// runDmesg answers `dmesg`, `dmesg -w|--follow`, `dmesg -W|--follow-new` and `--since now` (only what comes
// later): the planted lines already due, then
// (following) each at its time until killed or stop closes. Before the telemetry loop first starts (no t0)
// nothing is due; a follower waits for t0.
func runDmesg(profileName string, args []string, stdout, stderr io.Writer, stop <-chan struct{}) int {
	p, err := lookup(profileName)
	if err != nil {
		fmt.Fprintf(stderr, "gpuaccept standin: %v\n", err)
		return ExitNotSimulated
	}
	follow, onlyNew := false, false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-w" || a == "--follow":
			follow = true
		case a == "-W" || a == "--follow-new":
			follow, onlyNew = true, true
		case a == "--since=now" || (a == "--since" && i+1 < len(args) && args[i+1] == "now"):
			// util-linux 2.39's --since; only "now" is simulated (other times need its date parser).
			onlyNew = true
			if a == "--since" {
				i++
			}
		default:
			return notSimulated(p, Dmesg, args, stderr)
		}
	}
	pl, err := parsePlan(os.Getenv(SimTelemetryEnv))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", standinLabel(p), err)
		return ExitNotSimulated
	}
	l, err := parseSMILog(p.queryText())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", standinLabel(p), err)
		return 1
	}
	state := stateDir()
	called := time.Now()
	var t0 time.Time
	for {
		var ok bool
		if t0, ok = peekOrigin(state); ok {
			break
		}
		if !follow || !wait(stop, time.Second) {
			return 0
		}
	}
	lines := plannedKernel(l, pl, t0, bootTime(time.Now()))
	for _, k := range lines {
		if d := time.Until(k.at); d > 0 {
			if !follow || !wait(stop, d) {
				return 0
			}
		} else if onlyNew && k.at.Before(called) {
			continue
		}
		if _, err := io.WriteString(stdout, k.text+"\n"); err != nil {
			return 0
		}
	}
	if follow {
		<-stop // nothing more is planted: follow until killed
	}
	return 0
}

// wait sleeps d; false when stop closed first.
func wait(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
