package phases

import (
	"maps"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// TestSecurityVerdictsFailWhenPlanted: each of the card's security checks
// fails on a node that shows what it looks for, and passes on a sound one.
func TestSecurityVerdictsFailWhenPlanted(t *testing.T) {
	inv := fakeInventory(t, 5, `phases:
  staging: {enabled: true, dir: /scratch, fio: false, sources: [{name: d, size: 4KiB}]}
`)
	f := fakeFleet(inv)
	for _, h := range f.Hosts() {
		onScript(h, "stage.sh", func(c *fake.Call, a []string) fake.Reply { return fake.Reply{Stdout: "avail 900000000000\n"} })
	}
	with := func(change map[string]string) map[string]string {
		p := maps.Clone(soundPosture)
		maps.Copy(p, change)
		return p
	}
	answerSecurity(f.Host("h2"), with(map[string]string{
		"sshd":       "source config /etc/ssh/sshd_config\nkbdinteractiveauthentication no\nusepam yes\n", // PasswordAuthentication left at sshd's default
		"authorized": "256 SHA256:provider0staff0key0fingerprint0000000000000 support@provider (ED25519)\n",
	}))
	answerSecurity(f.Host("h3"), with(map[string]string{
		"foreign":  "1003 tenant    4242 python3\n",
		"gpu-apps": "4242, python3, 30120 MiB\n",
	}))
	answerSecurity(f.Host("h4"), with(map[string]string{
		"residue": "/scratch entries=2 others=2\n  drwxr-xr-x tenant 4096 /scratch/llama-70b\n  -rw-r--r-- tenant 88 /scratch/HF_TOKEN.txt\n",
	}))
	answerSecurity(f.Host("h5"), with(map[string]string{
		"authorized": "256 SHA256:provider0staff0key0fingerprint0000000000000 support@provider (ED25519)\n",
	}))
	f.Host("h4").Reply(`(?s)^bash -c .* left `, fake.Reply{Stdout: "file /scratch/gpuaccept-x\nkey /root/.ssh/authorized_keys:3\nchecked\n"})
	r := runFake(t, inv, f, Security, Staging, Deletion)

	for _, id := range []string{"SEC-001", "SEC-002", "SEC-003", "SEC-004"} {
		if v := verdictOf(t, r, id, "h1"); v.Status != record.Pass {
			t.Errorf("%s h1 (sound): %+v", id, v)
		}
	}
	if v := verdictOf(t, r, "SEC-001", "h2"); v.Status != record.Fail || !strings.Contains(v.Measured, "password login enabled") || !strings.Contains(v.Detail, "config files") {
		t.Errorf("SEC-001 h2 (passwords by sshd's default): %+v", v)
	}
	if v := verdictOf(t, r, "SEC-001", "h5"); v.Status != record.Warn || !strings.Contains(v.Measured, "support@provider") {
		t.Errorf("SEC-001 h5 (another key): %+v", v)
	}
	if v := verdictOf(t, r, "SEC-002", "h3"); v.Status != record.Fail || !strings.Contains(v.Measured, "tenant") || !strings.Contains(v.Measured, "on the GPUs") {
		t.Errorf("SEC-002 h3: %+v", v)
	}
	if v := verdictOf(t, r, "SEC-003", "h4"); v.Status != record.Fail || !strings.Contains(v.Measured, "2 entries in /scratch") || !strings.Contains(v.Detail, "GPU memory residue: not checked") {
		t.Errorf("SEC-003 h4: %+v", v)
	}
	if v := verdictOf(t, r, "SEC-004", "h4"); v.Status != record.Fail || !strings.Contains(v.Detail, "key /root/.ssh/authorized_keys:3") {
		t.Errorf("SEC-004 h4: %+v", v)
	}
	// The deletion check dials afresh, after teardown.
	if got := f.Dials("h1"); got != 2 {
		t.Errorf("h1 dialled %d times, want 2 (connect, the deletion check)", got)
	}
	var l Left
	if err := jsonOf(resultOf(t, r, "deletion", 0), &l); err != nil || !strings.Contains(strings.Join(l.Checked, " "), "/scratch/gpuaccept-"+r.ID) {
		t.Errorf("h1's deletion check looked at %q (%v)", l.Checked, err)
	}
}
