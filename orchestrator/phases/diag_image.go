package phases

import (
	"context"
	"fmt"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// hasProbe reads tool names, one a line, on stdin and prints those the
// node has on its PATH. The names travel on stdin, not in the command
// line, so no name is ever read by the shell as anything but a name.
const hasProbe = `while IFS= read -r t; do [ -n "$t" ] && command -v -- "$t" >/dev/null 2>&1 && printf '%s\n' "$t"; done; true`

// nodeHas asks the node which of tools it has, in one command that
// writes nothing: a tool is looked for before it is run, so a node
// without it is NOT MEASURED, not failed. Only the names asked for are
// read back from what the node prints.
func nodeHas(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, tools ...string) (map[string]bool, error) {
	out, err := runIn(ctx, w, n, hasProbe, strings.NewReader(strings.Join(tools, "\n")+"\n"))
	if err != nil {
		return nil, fmt.Errorf("look for %s: %w", strings.Join(tools, ", "), err)
	}
	has := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		for _, t := range tools {
			if line == t {
				has[t] = true
			}
		}
	}
	return has, nil
}

// containerRuntime is the runtime a node runs a helper image with: the
// inventory's image.runtime when the node has it, else podman, else
// docker; "" when it has neither.
func containerRuntime(preferred string, has map[string]bool) string {
	for _, rt := range []string{preferred, "podman", "docker"} {
		if (rt == "podman" || rt == "docker") && has[rt] {
			return rt
		}
	}
	return ""
}

// gpuFlags give a container every GPU of the node: docker's --gpus, or
// podman's CDI device.
func gpuFlags(runtime string) []string {
	if runtime == "podman" {
		return []string{"--device", "nvidia.com/gpu=all"}
	}
	return []string{"--gpus", "all"}
}

// diagScript runs inside the DCGM image: dcgmi talks to a host engine,
// which the image has but does not start when its entry point is
// replaced, so it is started first (it daemonizes once it listens) and
// waited for, briefly. The level is the script's one argument, never
// part of its text.
const diagScript = `nv-hostengine >/dev/null 2>&1; i=0
until dcgmi discovery -l >/dev/null 2>&1 || [ "$i" -ge 20 ]; do i=$((i + 1)); sleep 1; done
exec dcgmi diag -r "$1" -j`

// diagInImage is the command that runs dcgmi diag at level inside the
// inventory's pinned DCGM image, through the node's podman or docker,
// with the GPUs, after pulling the image and checking it against the pin
// with the image phase's own code (the pull is listed for teardown to
// remove, as the image phase's is). Without an image, or without a
// runtime to run it, or when the image cannot be pulled, the diagnostic
// is NOT MEASURED.
func diagInImage(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, has map[string]bool, level int) (string, error) {
	ref := w.Inv.Phases.Diag.Image
	if podImager(n) != nil && !has["podman"] && !has["docker"] {
		// A pod is the window's image, and the transport starts no other
		// container beside it.
		return "", orchestrator.Unmeasured("dcgmi", "dcgmi not in the pod's image (image.reference), and a pod runs no image of DCGM's (phases.diag.image): DCGM diagnostic not measured")
	}
	if ref == "" {
		return "", orchestrator.Unmeasured("dcgmi", "dcgmi not installed and phases.diag.image not set: DCGM diagnostic not measured")
	}
	rt := containerRuntime(w.Inv.Image.Runtime, has)
	if rt == "" {
		return "", orchestrator.Unmeasured("dcgmi", "dcgmi not installed, and neither podman nor docker to run phases.diag.image: DCGM diagnostic not measured")
	}
	res := &Imaged{Mode: "pull", Reference: ref, Pin: pinOf(ref), Runtime: rt}
	ni := &NodeImage{}
	loadAndCheck(ctx, w, n, res, ni)
	switch {
	case ni.ID != "" && !ni.Match:
		// The node's runtime gave another image than the digest asked
		// for: nothing it would run there is DCGM's diagnostic.
		return "", fmt.Errorf("phases.diag.image: %s", ni.Error)
	case ni.Error != "":
		return "", orchestrator.Unmeasured("dcgmi", "dcgmi not installed, and phases.diag.image could not be used (%s): DCGM diagnostic not measured", firstLine(ni.Error))
	}
	args := []string{remote.Quote(rt), "run", "--rm", "--label", remote.Quote("gpuaccept.run=" + w.RunID())}
	args = append(args, gpuFlags(rt)...)
	args = append(args, "--entrypoint", "/bin/sh", remote.Quote("sha256:"+ni.ID), "-c", remote.Quote(diagScript), "dcgm-diag", fmt.Sprint(level))
	return strings.Join(args, " "), nil
}

// notMeasured makes v the verdict of a requirement the node's tools could
// not measure (a record.NotMeasured result, its reason why): SKIP, with
// why as its Incomplete, so the window is INCOMPLETE and says which
// nodes lack what.
func notMeasured(v *record.Verdict, why string) {
	v.Status, v.Measured, v.Detail, v.Incomplete = record.Skip, "not measured", why, why
}
