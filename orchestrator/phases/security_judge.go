package phases

import (
	"fmt"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// sshdDefaults are sshd's own defaults for the settings that decide how
// one logs in, for a node whose settings came from its config files (a
// keyword the files leave out takes its default).
var sshdDefaults = map[string]string{
	"passwordauthentication": "yes", "kbdinteractiveauthentication": "yes", "permitrootlogin": "prohibit-password",
	"permitemptypasswords": "no", "usepam": "no", "pubkeyauthentication": "yes",
}

// judgeSecurity: per node, access (SEC-001), isolation (SEC-002) and
// residue of an earlier tenant (SEC-003), from what the node showed before
// the window wrote anything.
func judgeSecurity(w *orchestrator.Window) []record.Verdict {
	if !securityEnabled(w.Inv) {
		return nil
	}
	var vs []record.Verdict
	for _, n := range w.Nodes {
		var p Posture
		r, ok := w.Result("security", n.Index, &p)
		if !ok || r.Outcome != record.OK {
			reason := "not run"
			switch {
			case ok:
				reason = firstNonEmpty(r.Error, string(r.Outcome))
			case n.Noted(stateKey) == "":
				if q, why := n.Quarantined(); q {
					reason = why
				}
			}
			for _, id := range []string{"SEC-001", "SEC-002", "SEC-003"} {
				v := record.NewVerdict(id, n.Name)
				v.Status, v.Detail = record.Skip, reason
				if ok {
					// It ran and could not answer: nothing shown is no pass.
					v.Status = record.Warn
				}
				vs = append(vs, v)
			}
			continue
		}
		access := accessVerdict(n.Name, p)
		if !n.Config.SSHLogin() {
			access = noLoginVerdict(n.Name, n.Config.Via())
		}
		vs = append(vs, access, isolationVerdict(n.Name, p), residueVerdict(n.Name, p))
	}
	return vs
}

func accessVerdict(node string, p Posture) record.Verdict {
	v := record.NewVerdict("SEC-001", node)
	if p.SSHDUnread != "" {
		v.Status, v.Detail = record.Warn, "sshd's settings could not be read: "+p.SSHDUnread
		return v
	}
	get := func(k string) string {
		if s, ok := p.SSHD[k]; ok {
			return s
		}
		if strings.HasPrefix(p.SSHDSource, "config") {
			return sshdDefaults[k]
		}
		return ""
	}
	var bad []string
	if get("passwordauthentication") == "yes" {
		bad = append(bad, "password login enabled (PasswordAuthentication yes)")
	}
	if get("permitemptypasswords") == "yes" {
		bad = append(bad, "empty passwords accepted (PermitEmptyPasswords yes)")
	}
	if get("permitrootlogin") == "yes" {
		bad = append(bad, "root may log in with a password (PermitRootLogin yes)")
	}
	if kbd := firstNonEmpty(p.SSHD["kbdinteractiveauthentication"], p.SSHD["challengeresponseauthentication"], get("kbdinteractiveauthentication")); kbd == "yes" && get("usepam") == "yes" {
		bad = append(bad, "keyboard-interactive login through PAM enabled (KbdInteractiveAuthentication yes, UsePAM yes)")
	}
	var others []string
	for _, k := range p.Keys {
		if !k.Ours {
			others = append(others, strings.TrimSpace(k.Fingerprint+" "+k.Comment))
		}
	}
	from := "sshd -T"
	if strings.HasPrefix(p.SSHDSource, "config") {
		from = "its config files (sshd -T not permitted)"
	}
	evidence := fmt.Sprintf("settings from %s; %d account(s) with a login shell: %s", from, len(p.Accounts), accountNames(p.Accounts))
	switch {
	case len(bad) > 0:
		v.Status, v.Measured = record.Fail, strings.Join(bad, "; ")
		v.Detail = evidence
	case len(others) > 0:
		v.Status = record.Warn
		v.Measured = fmt.Sprintf("%d other key(s) may log in as the window's user: %s", len(others), strings.Join(others, ", "))
		v.Detail = evidence
	default:
		v.Status, v.Measured, v.Detail = record.Pass, "key login only; no other key for the window's user", evidence
	}
	return v
}

// noLoginVerdict: the node was reached without logging in over SSH (the
// machine gpuaccept runs on), so no login of the window's is there to
// judge. Not applicable, not unmeasured: a SKIP that leaves the window
// complete, and says why in the transport's words.
func noLoginVerdict(node, via string) record.Verdict {
	v := record.NewVerdict("SEC-001", node)
	v.Status, v.Measured = record.Skip, "not applicable"
	v.Detail = "not applicable: reached " + via + "; no SSH login of the window to judge"
	return v
}

func accountNames(accounts []string) string {
	var names []string
	for _, a := range accounts {
		name, _, _ := strings.Cut(a, ":")
		names = append(names, name)
	}
	if len(names) > 12 {
		names = append(names[:12], fmt.Sprintf("and %d more", len(names)-12))
	}
	return strings.Join(names, ", ")
}

func isolationVerdict(node string, p Posture) record.Verdict {
	v := record.NewVerdict("SEC-002", node)
	var bad []string
	if len(p.Foreign) > 0 {
		bad = append(bad, fmt.Sprintf("%d process(es) of other users: %s", len(p.Foreign), strings.Join(first(p.Foreign, 5), "; ")))
	}
	if len(p.GPUApps) > 0 {
		bad = append(bad, fmt.Sprintf("%d process(es) on the GPUs of an idle node: %s", len(p.GPUApps), strings.Join(first(p.GPUApps, 5), "; ")))
	}
	notes := []string{}
	if p.GPUAppsUnread != "" {
		notes = append(notes, "GPU processes not listed: nvidia-smi "+p.GPUAppsUnread)
	}
	switch {
	case len(bad) > 0:
		v.Status, v.Measured, v.Detail = record.Fail, strings.Join(bad, "; "), strings.Join(notes, "; ")
	case len(p.Containers) > 0:
		v.Status = record.Warn
		v.Measured = fmt.Sprintf("%d container(s) running before the window: %s", len(p.Containers), strings.Join(first(p.Containers, 5), "; "))
		v.Detail = strings.Join(notes, "; ")
	default:
		v.Status, v.Measured = record.Pass, "no other user's process, nothing on the GPUs, no container running"
		v.Detail = strings.Join(notes, "; ")
	}
	return v
}

func residueVerdict(node string, p Posture) record.Verdict {
	v := record.NewVerdict("SEC-003", node)
	var theirs, unowned, clean []string
	for _, r := range p.Residue {
		listed := fmt.Sprintf("%d entr%s in %s: %s", r.Entries, plural(r.Entries, "y", "ies"), r.Dir, strings.Join(first(r.Listed, 3), "; "))
		switch {
		case r.Absent:
			clean = append(clean, r.Dir+" (absent)")
		case r.Others > 0:
			theirs = append(theirs, fmt.Sprintf("%d of another user's; %s", r.Others, listed))
		case r.Entries > 0:
			unowned = append(unowned, listed)
		default:
			clean = append(clean, r.Dir+" (empty)")
		}
	}
	// GPU memory residue needs a CUDA tool the window does not carry: said,
	// never passed over.
	gpu := "GPU memory residue: not checked (no CUDA tool on the node to read it)"
	switch {
	case len(theirs) > 0:
		// Another user's files where this window writes: an earlier
		// tenant's data, left for the next one to read.
		v.Status, v.Measured, v.Detail = record.Fail, "left before the window: "+strings.Join(theirs, "; "), join(strings.Join(unowned, "; "), gpu)
	case len(unowned) > 0:
		// Root's or the window user's own: the provider's, perhaps; the
		// buyer decides.
		v.Status, v.Measured, v.Detail = record.Warn, "there before the window (root's or this user's): "+strings.Join(unowned, "; "), gpu
	case len(p.Residue) == 0:
		v.Status, v.Detail = record.Skip, "no staging or checkpoint directory to look in; "+gpu
	default:
		v.Status, v.Measured, v.Detail = record.Pass, "nothing before the window in "+strings.Join(clean, ", "), gpu
	}
	return v
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
