package parse

import (
	"regexp"
	"strings"
)

// Fault is one thing Open MPI, UCX or NCCL said about a collective that failed
// or hung: which host could not reach which peer (Peer a host name,
// PeerAddr an address, as the tool said it), or which host was lost.
type Fault struct {
	Local    string `json:"local,omitempty"`
	Peer     string `json:"peer,omitempty"`
	PeerAddr string `json:"peer_addr,omitempty"`
	Lost     string `json:"lost,omitempty"`
	// Said is the tool's own words, one line.
	Said string `json:"said"`
	// Waited: Open MPI gave up on a connect that had not completed
	// ("Operation now in progress (115)"). That names where it waited, not
	// what was slow: at 128 lab hosts it was late ARP replies, and with h4
	// at 1 Mbit/s it named h2→h1.
	Waited bool `json:"waited,omitempty"`
}

var (
	// Open MPI's BTL TCP (help-mpi-btl-tcp.txt, "client connect fail"):
	//   Local host: h3 / PID: 123 / Message: connect() to 10.0.0.11:1025 failed
	ompiLocal   = regexp.MustCompile(`^\s*Local host:\s*(\S+)\s*$`)
	ompiRemote  = regexp.MustCompile(`^\s*Remote host:\s*(\S+)\s*$`)
	ompiConnect = regexp.MustCompile(`^\s*Message:\s*(connect\(\) to (\S+?):\d+ failed)\s*$`)
	ompiError   = regexp.MustCompile(`^\s*Error:\s*(.+?)\s*$`)
	// ORTE lost a daemon: "Remote daemon: [[1234,0],2] on node h3".
	orteLost = regexp.MustCompile(`^\s*Remote daemon:\s*\S+ on node (\S+)\s*$`)
	// NCCL's socket transport, "HOST:PID:TID [DEV] NCCL WARN Net : Connect
	// to 10.0.0.2<43215> failed : Connection refused" (any spelling of the
	// transport name).
	// UCX's TCP transport (sock.c, UCX 1.13 under Open MPI's pml ucx):
	// "[1796231823.969109] [h110:13082:0]   sock.c:325  UCX  ERROR
	// connect(fd=32, dest_addr=10.246.0.124:59879) failed: No route to host".
	ucxConnect  = regexp.MustCompile(`^\[[\d.]+\]\s+\[([^\s:\]]+):\d+:\d+\]\s+\S+:\d+\s+UCX\s+ERROR\s+connect\(fd=\d+, dest_addr=([0-9A-Fa-f.:]+?):(\d+)\) failed: (.*?)\s*$`)
	ncclConnect = regexp.MustCompile(`^(?:\[[^\]]*\]\s*)?([^\s:]+):\d+:\d+ \[\d+\] NCCL WARN .*?Connect to ([0-9A-Fa-f.:]+)<\d+> failed\s*:\s*(.*?)\s*$`)
)

// CollectiveFaults reads what Open MPI, UCX and NCCL said in a collective's
// output (stdout and stderr) about the peers a host could not reach, or a
// host lost. Each fault once, in the order said. A node may print
// anything: a host name is at most 253 characters, and the words kept
// are one line.
func CollectiveFaults(out string) []Fault {
	var faults []Fault
	seen := map[Fault]bool{}
	add := func(f Fault) {
		if len(f.Local) > 253 || len(f.Peer) > 253 || len(f.PeerAddr) > 253 || len(f.Lost) > 253 {
			return
		}
		if len(f.Said) > 200 {
			f.Said = f.Said[:200] + "…"
		}
		key := f
		key.Said = ""
		if !seen[key] {
			seen[key] = true
			faults = append(faults, f)
		}
	}
	lines := strings.Split(out, "\n")
	local := ""
	for i, line := range lines {
		line = strings.TrimRight(line, "\r")
		if m := ompiLocal.FindStringSubmatch(line); m != nil {
			local = m[1]
			continue
		}
		if m := ompiRemote.FindStringSubmatch(line); m != nil && local != "" {
			add(Fault{Local: local, Peer: m[1], Said: "a process or daemon was unable to complete a TCP connection (Open MPI)"})
			continue
		}
		if m := ompiConnect.FindStringSubmatch(line); m != nil && local != "" {
			said, waited := m[1], false
			for _, next := range lines[i+1 : min(i+3, len(lines))] {
				if e := ompiError.FindStringSubmatch(next); e != nil {
					said += ": " + e[1]
					waited = strings.Contains(e[1], "Operation now in progress")
					break
				}
			}
			add(Fault{Local: local, PeerAddr: m[2], Said: said + " (Open MPI)", Waited: waited})
			continue
		}
		if m := orteLost.FindStringSubmatch(line); m != nil {
			add(Fault{Lost: m[1], Said: "Open MPI lost its daemon on " + m[1]})
			continue
		}
		if m := ucxConnect.FindStringSubmatch(line); m != nil {
			add(Fault{Local: m[1], PeerAddr: m[2], Said: "connect() to " + m[2] + ":" + m[3] + " failed: " + m[4] + " (UCX)"})
			continue
		}
		if m := ncclConnect.FindStringSubmatch(line); m != nil {
			add(Fault{Local: m[1], PeerAddr: m[2], Said: "connect to " + m[2] + " failed: " + m[3] + " (NCCL)"})
		}
		if strings.HasPrefix(strings.TrimSpace(line), "-----") {
			local = ""
		}
	}
	return faults
}
