package phases

import (
	"strings"

	"gpuaccept/orchestrator/slurm"
)

// What Pyxis says, read from srun's output. Pyxis (NVIDIA's SPANK plugin
// for srun) registers --container-image, which `srun --help` lists under
// "Options provided by plugins:"; a step with it prints, on srun's
// stderr, "pyxis: importing docker image: REF" (a step of one task),
// "pyxis: imported docker image: REF" (each node, once imported), and on
// failure slurmstepd's "error: pyxis: ..." lines: "failed to import docker
// image", "printing enroot log file:", enroot's log indented by four
// spaces, "couldn't start container".

// pyxisWords is what Pyxis said in one step's output, and the rest.
type pyxisWords struct {
	Imported []string // the references of "pyxis: imported docker image: REF"
	// Errors are the error lines of Pyxis and of Slurm about it (the
	// plugin's task_init failing), without slurmstepd's prefix, enroot's
	// log lines trimmed of their indent.
	Errors []string
	// Slurm are srun's and slurmstepd's other error lines (a step that
	// did not start: "Unable to create step", "Can not execute"), bounded.
	Slurm []string
	// Output is what is neither Pyxis's nor srun's or slurmstepd's: the
	// command's own output.
	Output string
}

// maxPyxisLines bounds what is kept of a step's Pyxis errors (an enroot
// log may run long, and a node's output is not trusted).
const maxPyxisLines = 40

// parsePyxis splits a step's output (stdout and stderr together, any
// --label prefix "N: " included) into Pyxis's words and the command's.
func parsePyxis(out string) pyxisWords {
	var w pyxisWords
	var rest []string
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimRight(raw, "\r")
		body := strings.TrimSpace(line)
		if i := strings.Index(body, ": "); i > 0 && strings.Trim(body[:i], " 0123456789") == "" {
			body = strings.TrimSpace(body[i+2:]) // srun --label
		}
		switch {
		case strings.HasPrefix(body, "pyxis: imported docker image: "):
			// Anywhere in the output: srun passes the container's stdout
			// and Pyxis's stderr on in no fixed order (the smoke's line
			// came first in the lab). The judge takes only the exact
			// reference it gave.
			if ref := strings.TrimSpace(strings.TrimPrefix(body, "pyxis: imported docker image: ")); ref != "" && len(w.Imported) < maxPyxisLines {
				w.Imported = append(w.Imported, ref)
			}
		case strings.HasPrefix(body, "pyxis:"):
			// importing, reusing, starting: progress
		case strings.HasPrefix(body, "slurmstepd") && strings.Contains(body, "error: "):
			_, msg, _ := strings.Cut(body, "error: ")
			if strings.HasPrefix(msg, "pyxis:") || strings.Contains(msg, "spank") {
				msg = strings.TrimPrefix(msg, "pyxis:")
				msg = strings.TrimSpace(msg)
				if msg != "" && len(w.Errors) < maxPyxisLines {
					w.Errors = append(w.Errors, msg)
				}
			}
		case strings.HasPrefix(body, "srun:") || strings.HasPrefix(body, "slurmstepd"):
			if strings.Contains(body, "error") && len(w.Slurm) < maxPyxisLines {
				w.Slurm = append(w.Slurm, slurm.Printable(body, 300))
			}
		default:
			rest = append(rest, line)
		}
	}
	w.Output = strings.TrimSpace(strings.Join(rest, "\n"))
	return w
}

// failure is what a failed step's Pyxis said, in one line: the enroot
// log's [ERROR] line where there is one, else Pyxis's first error.
func (w pyxisWords) failure() string {
	for _, e := range w.Errors {
		if strings.HasPrefix(e, "[ERROR] ") {
			return strings.TrimPrefix(e, "[ERROR] ")
		}
	}
	for _, e := range w.Errors {
		if !strings.HasPrefix(e, "child ") && !strings.HasPrefix(e, "printing ") {
			return e
		}
	}
	if len(w.Errors) > 0 {
		return w.Errors[0]
	}
	return ""
}

// digestOf is the 64 hex digits a reference names its manifest by:
// enroot's TAG sha256:HEX or docker's @sha256:HEX; "" when none.
func digestOf(ref string) string {
	i := strings.LastIndex(ref, "sha256:")
	if i < 1 || (ref[i-1] != ':' && ref[i-1] != '@') {
		return ""
	}
	h := ref[i+len("sha256:"):]
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return ""
	}
	return h
}

// notStarted is srun's line saying the step never ran its command (it
// could not be created, or the command could not be executed), "" when
// none does: nothing was imported, nothing of the node measured.
func (w pyxisWords) notStarted() string {
	for _, l := range w.Slurm {
		for _, m := range []string{"Unable to create step", "Can not execute", "Job step creation", "execve():"} {
			if strings.Contains(l, m) {
				return l
			}
		}
	}
	return ""
}
