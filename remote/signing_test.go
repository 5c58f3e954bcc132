package remote

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Geteuid() == 0 && os.Getenv("GPUACCEPT_NO_LAB") == "" {
			t.Fatalf("%s missing: bash scripts/deps.sh installs openssh-client", name)
		}
		t.Skipf("no %s on this machine", name)
	}
	return p
}

func run(t *testing.T, stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// What Sign makes, the real ssh-keygen -Y verify accepts (ed25519 and RSA,
// a key file and a key in ssh-agent); what ssh-keygen -Y sign makes,
// VerifySignature accepts; a changed byte, another namespace, a key the
// allowed-signers file does not allow or allows for git only: refused by
// both.
func TestSignaturesAgainstSSHKeygen(t *testing.T) {
	keygen := needTool(t, "ssh-keygen")
	dir := t.TempDir()
	data := []byte("0123abcd  run.json\n4567ef01  raw/gpu-01/diag.log\n")
	dataFile := filepath.Join(dir, "MANIFEST.sha256")
	os.WriteFile(dataFile, data, 0o644)
	var allowed strings.Builder
	keys := map[string]string{}
	for _, kind := range []string{"ed25519", "rsa"} {
		key := filepath.Join(dir, "id_"+kind)
		if out, err := run(t, nil, keygen, "-q", "-t", kind, "-N", "", "-C", "buyer", "-f", key); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		pub, _ := os.ReadFile(key + ".pub")
		allowed.WriteString(kind + "@buyer.example " + string(pub))
		keys[kind] = key
	}
	stranger := filepath.Join(dir, "id_stranger")
	if out, err := run(t, nil, keygen, "-q", "-t", "ed25519", "-N", "", "-f", stranger); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	allowedFile := filepath.Join(dir, "allowed_signers")
	os.WriteFile(allowedFile, []byte(allowed.String()), 0o644)

	for kind, key := range keys {
		sig, fp, err := Sign(data, SignOptions{KeyFile: key})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		sigFile := filepath.Join(dir, kind+".sig")
		os.WriteFile(sigFile, sig, 0o644)
		if out, err := run(t, data, keygen, "-Y", "verify", "-f", allowedFile, "-I", kind+"@buyer.example", "-n", SignatureNamespace, "-s", sigFile); err != nil {
			t.Errorf("%s: ssh-keygen -Y verify refused our signature: %v\n%s", kind, err, out)
		} else if !strings.Contains(out, fp) {
			t.Errorf("%s: ssh-keygen verified another key than %s:\n%s", kind, fp, out)
		}
		if out, err := run(t, append(data, 'x'), keygen, "-Y", "verify", "-f", allowedFile, "-I", kind+"@buyer.example", "-n", SignatureNamespace, "-s", sigFile); err == nil {
			t.Errorf("%s: ssh-keygen accepted changed data:\n%s", kind, out)
		}

		// ssh-keygen's own signature, checked by us.
		os.Remove(dataFile + ".sig")
		if out, err := run(t, nil, keygen, "-Y", "sign", "-f", key, "-n", SignatureNamespace, dataFile); err != nil {
			t.Fatalf("%s: ssh-keygen -Y sign: %v\n%s", kind, err, out)
		}
		theirs, _ := os.ReadFile(dataFile + ".sig")
		who, err := VerifySignature(data, theirs, allowed.String(), "allowed_signers", kind+"@buyer.example", time.Now())
		if err != nil || len(who.Principals) != 1 || who.Principals[0] != kind+"@buyer.example" {
			t.Errorf("%s: ssh-keygen's signature: %+v, %v", kind, who, err)
		}
		if _, err := VerifySignature(append(data, 'x'), theirs, allowed.String(), "allowed_signers", "", time.Now()); err == nil {
			t.Errorf("%s: changed data verified", kind)
		}
		if _, err := VerifySignature(data, theirs, allowed.String(), "allowed_signers", "someone@else", time.Now()); err == nil || !strings.Contains(err.Error(), "not someone@else's") {
			t.Errorf("%s: another principal: %v", kind, err)
		}
	}

	// A key the file does not name, a namespace the file does not allow,
	// a signature for git.
	sig, _, err := Sign(data, SignOptions{KeyFile: stranger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifySignature(data, sig, allowed.String(), "allowed_signers", "", time.Now()); err == nil || !strings.Contains(err.Error(), "allows no such key") {
		t.Errorf("a stranger's key: %v", err)
	}
	gitOnly := strings.Replace(allowed.String(), "ed25519@buyer.example ", `ed25519@buyer.example namespaces="git" `, 1)
	edSig, _, _ := Sign(data, SignOptions{KeyFile: keys["ed25519"]})
	if _, err := VerifySignature(data, edSig, gitOnly, "allowed_signers", "", time.Now()); err == nil || !strings.Contains(err.Error(), `namespaces="git"`) {
		t.Errorf("a key allowed for git only: %v", err)
	}
	os.Remove(dataFile + ".sig")
	if out, err := run(t, nil, keygen, "-Y", "sign", "-f", keys["ed25519"], "-n", "git", dataFile); err != nil {
		t.Fatalf("ssh-keygen -Y sign -n git: %v\n%s", err, out)
	}
	forGit, _ := os.ReadFile(dataFile + ".sig")
	if _, err := VerifySignature(data, forGit, allowed.String(), "allowed_signers", "", time.Now()); err == nil || !strings.Contains(err.Error(), `namespace "git"`) {
		t.Errorf("a signature for git: %v", err)
	}
	if _, err := VerifySignature(data, edSig, "ed25519@x bogus-option ssh-ed25519 AAAA\n", "allowed_signers", "", time.Now()); err == nil || !strings.Contains(err.Error(), "allowed_signers line 1") {
		t.Errorf("a bad line is not named: %v", err)
	}
	expired := strings.Replace(allowed.String(), "ed25519@buyer.example ", `ed25519@buyer.example valid-before="20200101" `, 1)
	if _, err := VerifySignature(data, edSig, expired, "allowed_signers", "", time.Now()); err == nil || !strings.Contains(err.Error(), "valid only before") {
		t.Errorf("an expired signer: %v", err)
	}
}

// The key in ssh-agent, named by its .pub (ssh-keygen -Y sign -f key.pub).
func TestSignWithTheAgent(t *testing.T) {
	keygen := needTool(t, "ssh-keygen")
	agentBin := needTool(t, "ssh-agent")
	add := needTool(t, "ssh-add")
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if out, err := run(t, nil, keygen, "-q", "-t", "ed25519", "-N", "", "-f", key); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "agent.sock")
	ag := exec.Command(agentBin, "-D", "-a", sock)
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ag.Process.Kill(); ag.Wait() }()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := Sign([]byte("x"), SignOptions{AgentSocket: sock}); err == nil || !strings.Contains(err.Error(), "holds no key") {
		t.Errorf("an empty agent: %v", err)
	}
	cmd := exec.Command(add, key)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
	pub, _ := os.ReadFile(key + ".pub")
	sig, fp, err := Sign([]byte("manifest\n"), SignOptions{KeyFile: key + ".pub", AgentSocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifySignature([]byte("manifest\n"), sig, "me "+string(pub), "allowed_signers", "me", time.Now()); err != nil {
		t.Errorf("the agent's signature (%s): %v", fp, err)
	}
}
