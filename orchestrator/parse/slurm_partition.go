package parse

import (
	"fmt"
	"strconv"
	"strings"
)

// SlurmPartition is one partition as `scontrol show partition -o` prints
// it (Slurm 22.05; the fields are the same since 17.x), its limits in
// Slurm's own words: "UNLIMITED", "NONE", "1-00:00:00". SlurmMinutes and
// SlurmCount read them.
type SlurmPartition struct {
	Name    string
	Default bool
	// State: UP, DOWN (takes jobs, starts none), DRAIN (takes none new),
	// INACTIVE (neither).
	State       string
	MaxTime     string
	DefaultTime string
	MaxNodes    string
	MinNodes    string
	TotalNodes  string
	// AllowAccounts and AllowQos are "ALL" unless the partition names
	// some; scontrol prints DenyAccounts and DenyQos instead where those
	// are set.
	AllowAccounts string
	DenyAccounts  string
	AllowQOS      string
	DenyQOS       string
	// QOS is the partition's own QOS ("N/A": none), whose limits a
	// user cannot read with scontrol.
	QOS string
}

// SlurmPartitions is every partition record in out, a login shell's
// greeting and blank lines skipped.
func SlurmPartitions(out string) []SlurmPartition {
	var ps []SlurmPartition
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "PartitionName=") {
			continue
		}
		r := ScontrolRecord(line)
		ps = append(ps, SlurmPartition{Name: r["PartitionName"], Default: r["Default"] == "YES", State: r["State"],
			MaxTime: r["MaxTime"], DefaultTime: r["DefaultTime"], MaxNodes: r["MaxNodes"], MinNodes: r["MinNodes"],
			TotalNodes: r["TotalNodes"], AllowAccounts: r["AllowAccounts"], DenyAccounts: r["DenyAccounts"],
			AllowQOS: r["AllowQos"], DenyQOS: r["DenyQos"], QOS: r["QoS"]})
	}
	return ps
}

// unlimited are the words Slurm prints for a limit not set: UNLIMITED
// (scontrol, sinfo), INFINITE (slurm.conf's spelling), NONE (DefaultTime).
func unlimited(s string) bool {
	switch strings.ToUpper(s) {
	case "UNLIMITED", "INFINITE", "NONE":
		return true
	}
	return false
}

// maxSlurmMinutes bounds a time a record may state: 1,000 years, far past
// any limit Slurm keeps (a 32-bit count of minutes).
const maxSlurmMinutes = 1000 * 366 * 24 * 60

// SlurmMinutes reads a time as Slurm prints and takes it: "UNLIMITED",
// "D-HH:MM:SS" and "HH:MM:SS" (scontrol's), and the forms a user may
// give, "M", "M:S", "D-H", "D-H:M". Seconds count as a whole minute, as
// Slurm counts them.
func SlurmMinutes(s string) (minutes int, unlimit bool, err error) {
	if unlimited(s) {
		return 0, true, nil
	}
	days, rest, hasDays := strings.Cut(s, "-")
	if !hasDays {
		days, rest = "0", s
	}
	d, err := slurmNumber(days)
	if err != nil {
		return 0, false, fmt.Errorf("time %q: %w", s, err)
	}
	var parts []int
	for _, p := range strings.Split(rest, ":") {
		n, err := slurmNumber(p)
		if err != nil {
			return 0, false, fmt.Errorf("time %q: %w", s, err)
		}
		parts = append(parts, n)
	}
	var h, m, sec int
	switch {
	case len(parts) > 3:
		return 0, false, fmt.Errorf("time %q: more than hours:minutes:seconds", s)
	case hasDays && len(parts) == 1: // D-H
		h = parts[0]
	case hasDays && len(parts) == 2: // D-H:M
		h, m = parts[0], parts[1]
	case len(parts) == 3:
		h, m, sec = parts[0], parts[1], parts[2]
	case len(parts) == 2: // M:S
		m, sec = parts[0], parts[1]
	default: // M
		m = parts[0]
	}
	total := ((d*24+h)*60 + m)
	if sec > 0 {
		total++
	}
	if total > maxSlurmMinutes {
		return 0, false, fmt.Errorf("time %q: beyond any limit Slurm keeps", s)
	}
	return total, false, nil
}

// SlurmCount reads a count as scontrol prints it: a number or UNLIMITED.
func SlurmCount(s string) (n int, unlimit bool, err error) {
	if unlimited(s) {
		return 0, true, nil
	}
	n, err = slurmNumber(s)
	if err != nil {
		return 0, false, fmt.Errorf("count %q: %w", s, err)
	}
	return n, false, nil
}

// slurmNumber is a plain decimal of at most 9 digits: nothing a record
// says can overflow what is made of it.
func slurmNumber(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return strconv.Atoi(s)
}
