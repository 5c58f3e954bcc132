package phases

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
	"gpuaccept/scripts"
)

// ToolsPushed is what the tools phase left on a node: the window's
// scripts, each checked there against the sha256 of the copy embedded in
// this gpuaccept binary.
type ToolsPushed struct {
	Dir string `json:"dir"`
	// State is the window's private directory on the node's own disk
	// (mktemp -d, 0700): what teardown and the failure test must find
	// again and no other user may have written (the images the window
	// added, a cut's restore).
	State string       `json:"state_dir"`
	Files []PushedFile `json:"files"`
}

// PushedFile is one script on a node.
type PushedFile struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Tools pushes every script the window runs on the nodes, once, at the
// start: the later phases run the node's copy only after checking its
// sha256 again (toolCmd), so the evidence names exactly what ran. It runs
// again on --resume: the binary resuming may carry other scripts.
var Tools = orchestrator.Phase{
	Name:       "tools",
	Gating:     true,
	AlwaysRun:  true,
	Provisions: true,
	Enabled:    func(*inventory.Inventory) bool { return true },
	Deadline:   func(*inventory.Inventory) time.Duration { return 2 * time.Minute },
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		res := ToolsPushed{Dir: toolsDir(w.RunID(), n.Name)}
		e, err := execOf(n)
		if err != nil {
			return res, err
		}
		if res.State, err = privateDir(ctx, w, n); err != nil {
			return res, err
		}
		// One archive a node, checked once, then unpacked and every file
		// hashed there in one command: a transfer per script made this
		// the slowest phase at 1,000 nodes.
		v, err := w.Shared("tools-archive", func() (any, error) { return scriptsArchive() })
		if err != nil {
			return res, err
		}
		archive := v.([]byte)
		dir := toolsDir(w.RunID(), n.Name)
		if _, err := e.UploadFrom(ctx, bytes.NewReader(archive), int64(len(archive)), dir+"/"+archiveName,
			remote.TransferOptions{Mode: 0o600, SHA256: scripts.SHA256(string(archive))}); err != nil {
			return res, fmt.Errorf("push the scripts: %w", err)
		}
		var names []string
		for _, f := range scripts.Pushed() {
			names = append(names, remote.Quote(f.Name))
		}
		out, err := runOn(ctx, w, n, "cd && cd "+remote.Quote(dir)+" && tar -x -o -f "+archiveName+" && rm -f "+archiveName+
			" && sha256sum -- "+strings.Join(names, " ")+" && wc -c -- "+strings.Join(names, " "))
		if err != nil {
			return res, fmt.Errorf("unpack the scripts: %w", err)
		}
		if res.Files, err = checkUnpacked(out); err != nil {
			return res, err
		}
		return res, nil
	},
}

// archiveName is the scripts' archive in a node's tools directory, until
// it is unpacked.
const archiveName = "scripts.tar"

// scriptsArchive is every pushed script in one tar, 0644, owned by no one
// in particular, with no time: the same bytes from every build of the
// same scripts.
func scriptsArchive() ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range scripts.Pushed() {
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o644, Size: int64(len(f.Body)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, f.Body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// checkUnpacked reads what the node's sha256sum and wc -c said of the
// unpacked scripts: each must be this binary's copy.
func checkUnpacked(out []byte) ([]PushedFile, error) {
	sums, sizes := map[string]string{}, map[string]int64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			sizes[f[1]] = n
		} else {
			sums[f[1]] = f[0]
		}
	}
	var files []PushedFile
	for _, f := range scripts.Pushed() {
		want := scripts.SHA256(f.Body)
		if sums[f.Name] != want {
			return files, fmt.Errorf("push %s: the node's copy has sha256 %.64q, not %s", f.Name, sums[f.Name], want)
		}
		files = append(files, PushedFile{Name: f.Name, Bytes: sizes[f.Name], SHA256: sums[f.Name]})
	}
	return files, nil
}

// stateKey is the node note that holds its private directory.
const stateKey = "state_dir"

// privateDir makes the window's private directory on the node (or, on a
// resumed window, checks that the one the journal names is still its own:
// this user's, 0700, not a link), and makes sure the window's home
// directory is this user's alone. The path is journaled before any phase
// writes into it.
func privateDir(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (string, error) {
	prefix := "/var/tmp/gpuaccept-" + w.RunID() + "."
	script := `umask 077; b="$HOME/.gpuaccept"; mkdir -p "$b" && chmod 700 "$b" || exit 97
[ -O "$b" ] && [ ! -L "$b" ] || { echo "gpuaccept: $b is not this user's own directory" >&2; exit 97; }
p=$1; case $p in "$2"??????????) ;; *) p= ;; esac
if [ -n "$p" ] && [ -d "$p" ] && [ ! -L "$p" ] && [ -O "$p" ] && [ "$(stat -c %a "$p")" = 700 ]; then echo "$p"; else mktemp -d "$2"XXXXXXXXXX; fi`
	out, err := runOn(ctx, w, n, "bash -c "+remote.Quote(script)+" private "+remote.Quote(n.Noted(stateKey))+" "+remote.Quote(prefix))
	if err != nil {
		return "", fmt.Errorf("the window's private directory: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if !strings.HasPrefix(dir, prefix) || len(dir) != len(prefix)+10 || strings.Trim(dir[len(prefix):], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		return "", fmt.Errorf("the window's private directory: the node answered %.80q, not %sXXXXXXXXXX", dir, prefix)
	}
	if dir != n.Noted(stateKey) {
		if err := w.Note(n, stateKey, dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// stateDir is the node's private directory (shell-quoted), "" when the
// tools phase made none.
func stateDir(n *orchestrator.Node) string { return n.Noted(stateKey) }

// toolsDir is where a node's scripts land, relative to the login
// directory: one per node, because homes may be one NFS export for all.
func toolsDir(runID, node string) string { return ".gpuaccept/" + runID + "/bin/" + node }

// toolCmd is the shell command that runs a pushed script with args (each
// already a shell word): it refuses, with exit 96 and a line naming the
// file, a copy that is missing or not the one this binary pushed.
func toolCmd(runID, node, name string, args ...string) string {
	return toolCheck(runID, node, name) + ` bash "$f" ` + strings.Join(args, " ")
}

// toolCheck sets $f to the node's copy of a pushed file, after checking
// it; ends with "&&" for the command that uses "$f".
func toolCheck(runID, node, name string) string {
	body := ""
	for _, f := range scripts.Pushed() {
		if f.Name == name {
			body = f.Body
		}
	}
	if body == "" {
		panic("toolCheck: no pushed file " + name)
	}
	sum := scripts.SHA256(body)
	file := `"$HOME/` + toolsDir(runID, node) + "/" + name + `"`
	return fmt.Sprintf(`f=%s; { printf '%%s  %%s\n' %s "$f" | sha256sum -c >/dev/null 2>&1 || { echo "gpuaccept: $f is missing or is not the copy pushed at the start of the window (sha256 %s)" >&2; exit 96; }; } &&`,
		file, sum, sum)
}
