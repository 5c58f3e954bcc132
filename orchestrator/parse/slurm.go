package parse

import (
	"regexp"
	"strings"
)

// Slurm's one-line records: `scontrol show job -o ID` and `scontrol show
// node -o NODES` print one record a line, as Key=Value pairs split by
// blanks. A value may hold blanks of its own (OS=Linux 6.1.0 #1 SMP ...,
// a node's Reason=bad gpu 3 [root@2026-12-06T08:25:10]), so a word that
// does not begin like a key belongs to the value before it; a node's
// Reason is its record's last field and keeps the rest of the line.
// The records come from the login node: bounded like any node's output.

// scontrolKey is how a field begins: Slurm's keys are words with the odd
// ':' or '/' (AllocNode:Sid, CPUs/Task, NtasksPerN:B:S:C).
var scontrolKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_:/.]*=`)

// maxScontrolFields and maxScontrolLine bound one record (a job has ~60
// fields, a node ~40; a line is about 1.5 KB).
const (
	maxScontrolFields = 256
	maxScontrolLine   = 64 << 10
)

// ScontrolRecord is one line of scontrol's -o output as its fields; keys
// in rest take the remainder of the line.
func ScontrolRecord(line string, rest ...string) map[string]string {
	out := map[string]string{}
	if len(line) > maxScontrolLine {
		line = line[:maxScontrolLine]
	}
	line = normalize(line)
	words := strings.Fields(line)
	key := ""
	for i, w := range words {
		if loc := scontrolKey.FindStringIndex(w); loc != nil && len(out) < maxScontrolFields {
			key = w[:loc[1]-1]
			if _, seen := out[key]; seen {
				// A later field of the same name is text inside an
				// earlier value (a job's Comment=): the first stands.
				key = ""
				continue
			}
			out[key] = w[loc[1]:]
			for _, r := range rest {
				if key == r {
					out[key] = strings.Join(append([]string{w[loc[1]:]}, words[i+1:]...), " ")
					return out
				}
			}
			continue
		}
		if key != "" {
			out[key] += " " + w
		}
	}
	return out
}

// ScontrolRecords is every record of a multi-line -o output (one per
// node of `scontrol show node -o h[1-4]`), blank lines skipped.
func ScontrolRecords(text string, rest ...string) []map[string]string {
	var out []map[string]string
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if r := ScontrolRecord(line, rest...); len(r) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// sallocJob is salloc's word on the job it asked for: "salloc: Pending
// job allocation 2", "salloc: Granted job allocation 1", "salloc: job 2
// queued and waiting for resources" (Slurm 22.05; the same since 2.x).
var sallocJob = regexp.MustCompile(`^salloc: (?:(Pending|Granted) job allocation|job) ([0-9]{1,12})(?:$| )`)

// SallocJob reads the job ID from one line salloc wrote to stderr, and
// whether the line says the allocation was granted; "" for other lines.
func SallocJob(line string) (id string, granted bool) {
	m := sallocJob.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return "", false
	}
	return m[2], m[1] == "Granted"
}
