package parse

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// NCCLChoice is what NCCL said it used (or was told to use): one per
// distinct algorithm/protocol, with the message sizes it covered.
type NCCLChoice struct {
	Algorithm string `json:"algorithm"`          // Ring, Tree, NVLS, ...; "" when only the protocol is known
	Protocol  string `json:"protocol,omitempty"` // Simple, LL, LL128
	MinBytes  int64  `json:"min_bytes,omitempty"`
	MaxBytes  int64  `json:"max_bytes,omitempty"`
	// Forced: set by the environment (NCCL_ALGO / NCCL_PROTO), not chosen.
	Forced bool `json:"forced,omitempty"`
}

var (
	// NCCL 2.21+: INFO(NCCL_TUNING, "%ld Bytes -> Algo %d proto %d time %f")
	ncclTuneRe = regexp.MustCompile(`\b(\d+) Bytes -> Algo (\d+) proto (\d+)\b`)
	// Newer: "Best tuning, algorithm, RING, protocol, SIMPLE"
	ncclBestRe = regexp.MustCompile(`Best tuning, algorithm, (\w+), protocol, (\w+)`)
	// INFO(NCCL_ENV, "%s set by environment to %s")
	ncclEnvRe = regexp.MustCompile(`\bNCCL_(ALGO|PROTO) set by environment to (\S+)`)
)

// ncclAlgoNames and ncclProtoNames are NCCL's numbering (src/include/
// device.h: NCCL_ALGO_TREE 0, RING 1, COLLNET_DIRECT 2, COLLNET_CHAIN 3,
// NVLS 4, NVLS_TREE 5, PAT 6; NCCL_PROTO_LL 0, LL128 1, SIMPLE 2).
var (
	ncclAlgoNames  = []string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}
	ncclProtoNames = []string{"LL", "LL128", "Simple"}
)

func ncclName(names []string, s string) string {
	if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < len(names) {
		return names[i]
	}
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return n
		}
	}
	return s
}

// Choices reads the algorithm lines NCCL printed: what the environment
// forced, then what was chosen, merged per algorithm/protocol.
func (n NCCL) Choices() []NCCLChoice {
	var out []NCCLChoice
	add := func(c NCCLChoice, bytes int64) {
		for i := range out {
			o := &out[i]
			if o.Algorithm == c.Algorithm && o.Protocol == c.Protocol && o.Forced == c.Forced {
				if bytes > 0 {
					if o.MinBytes == 0 || bytes < o.MinBytes {
						o.MinBytes = bytes
					}
					o.MaxBytes = max(o.MaxBytes, bytes)
				}
				return
			}
		}
		c.MinBytes, c.MaxBytes = bytes, bytes
		out = append(out, c)
	}
	for _, l := range n.Algorithms {
		if m := ncclEnvRe.FindStringSubmatch(l); m != nil {
			c := NCCLChoice{Forced: true}
			if m[1] == "ALGO" {
				c.Algorithm = ncclName(ncclAlgoNames, m[2])
			} else {
				c.Protocol = ncclName(ncclProtoNames, m[2])
			}
			add(c, 0)
		}
		if m := ncclTuneRe.FindStringSubmatch(l); m != nil {
			b, _ := strconv.ParseInt(m[1], 10, 64)
			add(NCCLChoice{Algorithm: ncclName(ncclAlgoNames, m[2]), Protocol: ncclName(ncclProtoNames, m[3])}, b)
		}
		if m := ncclBestRe.FindStringSubmatch(l); m != nil {
			add(NCCLChoice{Algorithm: ncclName(ncclAlgoNames, m[1]), Protocol: ncclName(ncclProtoNames, m[2])}, 0)
		}
	}
	return out
}

// String is "Ring/Simple (64MiB..8GiB)" or "NCCL_ALGO=Ring (environment)".
func (c NCCLChoice) String() string {
	if c.Forced {
		if c.Algorithm != "" {
			return "NCCL_ALGO=" + c.Algorithm + " (environment)"
		}
		return "NCCL_PROTO=" + c.Protocol + " (environment)"
	}
	s := c.Algorithm
	if c.Protocol != "" {
		s += "/" + c.Protocol
	}
	if c.MaxBytes > 0 {
		s += fmt.Sprintf(" (%s..%s)", humanBytes(c.MinBytes), humanBytes(c.MaxBytes))
	}
	return s
}

func humanBytes(b int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d%s", b/u.n, u.name)
		}
	}
	return fmt.Sprintf("%dB", b)
}
