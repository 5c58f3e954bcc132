package standins

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SimTelemetryEnv names the environment variable that plants events in what a simulated node's telemetry shows:
// a comma-separated list of
//
//	throttle:<reason>@<from>-<to>[:gpu=N]   clocks_event_reasons.<reason> Active, its bit set in .active
//	xid:<code>@<t>[:gpu=N]                  an NVRM Xid line in dmesg (codes with a genuine line: see xidLines)
//	ecc:+<count>@<t>[:gpu=N|:type=corrected] uncorrected (or corrected) volatile and aggregate totals rise
//	remap@<t>[:gpu=N]                       remapped_rows.uncorrectable +1 and remapped_rows.pending Yes
//	linkdown@<t>[-<to>][:port=mlx5_0:1]     the IB port's link_downed +1, its state DOWN (until <to>)
//	stall@<from>-<to>[:gpu=N]               the GPU busy (load row) but drawing its idle power
//
// Times are seconds ("90", "2.5") or Go durations ("90s", "2m") after the first start of the nvidia-smi loop on
// that node (StateDir's t0 file); gpu defaults to 0, port to the first port of the node's IB tree. The lab puts it
// in the wrappers InstallTelemetry writes. A bad list is an error naming the event; nothing is half-applied.
const SimTelemetryEnv = "GPUACCEPT_SIM_TELEMETRY"

// throttleBits are NVML's clocks event reason bits (nvmlClocksEventReason*), by the --query-gpu column suffix.
// The genuine H200 reports supported 0x1FF: these eight and the display clock setting (0x100).
var throttleBits = map[string]uint64{
	"gpu_idle":                    0x1,
	"applications_clocks_setting": 0x2,
	"sw_power_cap":                0x4,
	"hw_slowdown":                 0x8,
	"sync_boost":                  0x10,
	"sw_thermal_slowdown":         0x20,
	"hw_thermal_slowdown":         0x40,
	"hw_power_brake_slowdown":     0x80,
}

type eventKind string

const (
	evThrottle eventKind = "throttle"
	evXid      eventKind = "xid"
	evECC      eventKind = "ecc"
	evRemap    eventKind = "remap"
	evLinkDown eventKind = "linkdown"
	evStall    eventKind = "stall"
)

// planted is one event of SimTelemetryEnv. Until is zero for a moment (xid, ecc, remap, a linkdown that stays).
type planted struct {
	kind      eventKind
	spec      string // as written, for errors
	at, until time.Duration
	gpu       int
	reason    string // throttle
	code      int    // xid
	count     int64  // ecc
	corrected bool   // ecc
	port      string // linkdown: "mlx5_0:1", "" = the tree's first
}

// plan is a parsed SimTelemetryEnv.
type plan []planted

func (p plan) has(k eventKind) bool {
	return slices.ContainsFunc(p, func(e planted) bool { return e.kind == k })
}

// maxGPU is the highest gpu= of the plan's GPU events (-1 when none), checked against the profile's GPU count.
func (p plan) maxGPU() int {
	m := -1
	for _, e := range p {
		if e.kind != evLinkDown {
			m = max(m, e.gpu)
		}
	}
	return m
}

// active says whether a ranged event covers elapsed time e: [at, until).
func (e planted) active(el time.Duration) bool { return el >= e.at && el < e.until }

var rePort = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}:[0-9]{1,3}$`)

// parsePlan reads SimTelemetryEnv's value strictly: an unknown kind, reason, option, a bad time or a range that
// ends before it starts is an error naming the event.
func parsePlan(s string) (plan, error) {
	var p plan
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		e, err := parseEvent(item)
		if err != nil {
			return nil, fmt.Errorf("%s: event %q: %w", SimTelemetryEnv, item, err)
		}
		p = append(p, e)
	}
	return p, nil
}

func parseEvent(item string) (planted, error) {
	e := planted{spec: item}
	head, rest, ok := strings.Cut(item, "@")
	if !ok {
		return e, fmt.Errorf("no @<time>")
	}
	kind, arg, hasArg := strings.Cut(head, ":")
	e.kind = eventKind(kind)
	when, opt, hasOpt := strings.Cut(rest, ":")
	ranged := e.kind == evThrottle || e.kind == evStall
	var err error
	switch e.kind {
	case evThrottle:
		if _, known := throttleBits[arg]; !hasArg || !known {
			return e, fmt.Errorf("throttle reason %q: want one of %s", arg, strings.Join(sortedKeys(throttleBits), ", "))
		}
		e.reason = arg
	case evXid:
		if e.code, err = strconv.Atoi(arg); err != nil || !hasArg {
			return e, fmt.Errorf("xid code %q: want a number", arg)
		}
		if _, known := xidText(e.code); !known {
			return e, fmt.Errorf("xid %d: no genuine line of it to replay (codes: %v)", e.code, xidCodes())
		}
	case evECC:
		n, err := strconv.ParseInt(strings.TrimPrefix(arg, "+"), 10, 64)
		if !hasArg || !strings.HasPrefix(arg, "+") || err != nil || n < 1 || n > 1<<31 {
			return e, fmt.Errorf("ecc count %q: want +N, N from 1", arg)
		}
		e.count = n
	case evRemap, evLinkDown, evStall:
		if hasArg {
			return e, fmt.Errorf("%s takes no argument before @", kind)
		}
	default:
		return e, fmt.Errorf("unknown event %q (throttle, xid, ecc, remap, linkdown, stall)", kind)
	}
	from, to, isRange := strings.Cut(when, "-")
	if ranged != isRange && !(e.kind == evLinkDown && isRange) {
		if ranged {
			return e, fmt.Errorf("%s wants @<from>-<to>", kind)
		}
		return e, fmt.Errorf("%s wants @<time>, not a range", kind)
	}
	if e.at, err = parseOffset(from); err != nil {
		return e, err
	}
	e.until = 1<<63 - 1
	if isRange {
		if e.until, err = parseOffset(to); err != nil {
			return e, err
		}
		if e.until <= e.at {
			return e, fmt.Errorf("range %s ends before it starts", when)
		}
	}
	for hasOpt {
		// port= takes the rest: its value has a colon of its own.
		if strings.HasPrefix(opt, "port=") {
			rest, opt, hasOpt = opt, "", false
		} else {
			rest, opt, hasOpt = strings.Cut(opt, ":")
		}
		if err := e.option(kind, rest); err != nil {
			return e, err
		}
	}
	return e, nil
}

func (e *planted) option(kind, opt string) error {
	var err error
	name, val, _ := strings.Cut(opt, "=")
	switch {
	case name == "gpu" && e.kind != evLinkDown:
		if e.gpu, err = strconv.Atoi(val); err != nil || e.gpu < 0 || e.gpu > 1023 {
			return fmt.Errorf("gpu=%q: want an index", val)
		}
	case name == "type" && e.kind == evECC:
		if val != "corrected" && val != "uncorrected" {
			return fmt.Errorf("type=%q: want corrected or uncorrected", val)
		}
		e.corrected = val == "corrected"
	case name == "port" && e.kind == evLinkDown:
		if !rePort.MatchString(val) {
			return fmt.Errorf("port=%q: want <device>:<port>", val)
		}
		e.port = val
	default:
		return fmt.Errorf("option %q is not one of %s's", opt, kind)
	}
	return nil
}

// parseOffset reads "90", "2.5" (seconds) or a Go duration ("90s", "2m"); never negative, at most 30 days.
func parseOffset(s string) (time.Duration, error) {
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("time %q: want seconds or a duration like 90s", s)
	}
	if d < 0 || d > 30*24*time.Hour {
		return 0, fmt.Errorf("time %q: want 0 to 30 days", s)
	}
	return d, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
