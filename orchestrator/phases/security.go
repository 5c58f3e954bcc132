package phases

import (
	"context"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// Posture is what the security check read of a node before the window
// wrote anything of its own: the evidence behind SEC-001..003.
type Posture struct {
	// SSHD: sshd's settings that decide who logs in how (keyword →
	// value, lower case), from sshd -T where permitted, else from its
	// config files (SSHDSource says which); SSHDUnread: why neither.
	SSHD       map[string]string `json:"sshd,omitempty"`
	SSHDSource string            `json:"sshd_source,omitempty"`
	SSHDUnread string            `json:"sshd_unread,omitempty"`
	// Accounts that can log in (a shell that is one): name:uid:shell.
	Accounts []string `json:"accounts,omitempty"`
	// Keys: every key that may log in as the window's user.
	Keys       []AuthorizedKey `json:"authorized_keys,omitempty"`
	KeysUnread string          `json:"authorized_keys_unread,omitempty"`
	// Foreign: other (non-system) users' processes; GPUApps: processes
	// on the GPUs of a node that should be idle; Containers running.
	Foreign          []string `json:"foreign_processes,omitempty"`
	GPUApps          []string `json:"gpu_processes,omitempty"`
	GPUAppsUnread    string   `json:"gpu_processes_unread,omitempty"`
	Containers       []string `json:"containers,omitempty"`
	ContainersUnread string   `json:"containers_unread,omitempty"`
	Mounts           []string `json:"mounts,omitempty"`
	// Residue: what the staging and checkpoint directories held before
	// the window wrote there.
	Residue []ResidueDir `json:"residue,omitempty"`
}

// AuthorizedKey is one line of the user's authorized_keys.
type AuthorizedKey struct {
	Fingerprint string `json:"fingerprint"`
	Comment     string `json:"comment,omitempty"`
	// Ours: the coordinator's own login key, or the window's.
	Ours bool `json:"ours,omitempty"`
}

// ResidueDir is one directory as an earlier tenant left it.
type ResidueDir struct {
	Dir     string `json:"dir"`
	Absent  bool   `json:"absent,omitempty"`
	Entries int    `json:"entries"`
	// Others: how many belong to another user than root and the window's
	// (another tenant's files).
	Others int      `json:"others"`
	Listed []string `json:"listed,omitempty"` // the first 20, "MODE OWNER SIZE PATH"
}

// Security reads access, isolation and residue on every node before the
// window writes anything of its own (it runs right after preflight).
// Never gating: what it finds is a verdict, and the window goes on.
var Security = orchestrator.Phase{
	Name:    "security",
	Enabled: securityEnabled,
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.Security.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return orDefault(inv.Phases.Security.Timeout, 2*time.Minute)
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		var dirs []string
		if st := w.Inv.Phases.Staging; st.Enabled && st.Dir != "" {
			dirs = append(dirs, remote.Quote(st.Dir))
		}
		if c := w.Inv.Phases.Checkpoint; c.Enabled && c.Dir != "" {
			dirs = append(dirs, remote.Quote(c.Dir))
		}
		// The window's private directory is its own, not an earlier
		// tenant's residue: security.sh leaves out exactly that path.
		cmd := toolCheck(w.RunID(), n.Name, "security.sh") + " GPUACCEPT_OWN=" + remote.Quote(stateDir(n)) +
			` bash "$f" ` + strings.Join(append([]string{remote.Quote(w.RunID())}, dirs...), " ")
		out, err := runOn(ctx, w, n, cmd)
		if err != nil {
			return nil, err
		}
		p := postureFrom(splitSections(string(out)), KeyMark(w.RunID()), remote.IdentityFingerprints(n.Config))
		return p, nil
	},
	Judge: judgeSecurity,
}

func securityEnabled(inv *inventory.Inventory) bool { return inventory.On(inv.Phases.Security.Enabled) }

// postureFrom reads security.sh's sections; ours are the fingerprints of
// the coordinator's login keys, mark the window key's comment.
func postureFrom(s map[string]section, mark string, ours []string) Posture {
	var p Posture
	lines := func(name string, max int) ([]string, string) {
		sec, ok := s[name]
		switch {
		case !ok:
			return nil, "no output (the check was cut short?)"
		case sec.rc == 127:
			return nil, "not installed on the node"
		case sec.rc != 0:
			return nil, "exit " + itoa(sec.rc) + ": " + lastLine(sec.out)
		}
		var out []string
		for _, l := range strings.Split(sec.out, "\n") {
			if l = strings.TrimSpace(l); l != "" && len(out) < max {
				out = append(out, clip(l, 200))
			}
		}
		return out, ""
	}
	var sshd []string
	sshd, p.SSHDUnread = lines("sshd", 50)
	for _, l := range sshd {
		if src, ok := strings.CutPrefix(l, "source "); ok {
			p.SSHDSource = src
			continue
		}
		k, v, _ := strings.Cut(l, " ")
		if p.SSHD == nil {
			p.SSHD = map[string]string{}
		}
		p.SSHD[strings.ToLower(k)] = strings.ToLower(strings.TrimSpace(v))
	}
	if p.SSHDUnread == "" && p.SSHDSource == "" {
		p.SSHDUnread = firstNonEmpty(strings.Join(sshd, "; "), "sshd's settings not found")
		p.SSHD = nil
	}
	p.Accounts, _ = lines("accounts", 100)
	var keys []string
	keys, p.KeysUnread = lines("authorized", 100)
	for _, l := range keys {
		// ssh-keygen -l: "256 SHA256:... comment (ED25519)".
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(f[1], "SHA256:") {
			continue
		}
		k := AuthorizedKey{Fingerprint: f[1]}
		if len(f) > 3 {
			k.Comment = strings.Join(f[2:len(f)-1], " ")
		}
		k.Ours = k.Comment == mark || contains(ours, k.Fingerprint)
		p.Keys = append(p.Keys, k)
	}
	p.Foreign, _ = lines("foreign", 50)
	p.GPUApps, p.GPUAppsUnread = lines("gpu-apps", 50)
	var cs []string
	cs, p.ContainersUnread = lines("containers", 50)
	for _, c := range cs {
		// "RUNTIME ID IMAGE NAMES": anything else is the runtime talking
		// (no daemon, no permission).
		if f := strings.Fields(c); len(f) >= 3 && (f[0] == "docker" || f[0] == "podman") {
			p.Containers = append(p.Containers, c)
		}
	}
	p.Mounts, _ = lines("mounts", 200)
	res, _ := lines("residue", 500)
	for _, l := range res {
		if dir, ok := strings.CutSuffix(l, " absent"); ok {
			p.Residue = append(p.Residue, ResidueDir{Dir: dir, Absent: true})
			continue
		}
		if i := strings.LastIndex(l, " entries="); i > 0 {
			r := ResidueDir{Dir: l[:i]}
			counts := l[i+len(" entries="):]
			n, others, _ := strings.Cut(counts, " others=")
			r.Entries, r.Others = atoi(n), atoi(others)
			p.Residue = append(p.Residue, r)
			continue
		}
		if k := len(p.Residue) - 1; k >= 0 && len(p.Residue[k].Listed) < 20 {
			p.Residue[k].Listed = append(p.Residue[k].Listed, l)
		}
	}
	return p
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}
