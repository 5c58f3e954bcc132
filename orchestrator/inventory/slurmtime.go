package inventory

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SlurmTime is a job's time limit (slurm.allocate.time) as salloc --time
// takes it, or as a Go duration: a buyer copies it from the site's
// documentation, which writes Slurm's forms ("2-00:00:00"), and the window
// gives salloc whole minutes either way.
type SlurmTime time.Duration

// Duration is t as a time.Duration.
func (t SlurmTime) Duration() time.Duration { return time.Duration(t) }

func (t SlurmTime) String() string { return time.Duration(t).String() }

const slurmTimeExample = `minutes ("90"), MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS as salloc --time takes ` +
	`them, or a duration such as "1h30m"`

// ParseSlurmTime reads s as salloc --time does (minutes, MM:SS,
// HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS), else as a Go duration ("1h30m").
func ParseSlurmTime(s string) (SlurmTime, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil && !isDigits(s) {
		return SlurmTime(d), nil
	}
	num := func(p string) (int64, bool) {
		if p == "" || !isDigits(p) || len(p) > 9 {
			return 0, false
		}
		n, err := strconv.ParseInt(p, 10, 64)
		return n, err == nil
	}
	bad := fmt.Errorf("expected %s, got %q", slurmTimeExample, short(s))
	days, rest, dashed := strings.Cut(s, "-")
	parts := strings.Split(rest, ":")
	if !dashed {
		rest, days = days, ""
		parts = strings.Split(rest, ":")
	}
	if len(parts) > 3 {
		return 0, bad
	}
	var n []int64
	for _, p := range parts {
		v, ok := num(p)
		if !ok {
			return 0, bad
		}
		n = append(n, v)
	}
	var d time.Duration
	switch {
	case dashed:
		dd, ok := num(days)
		if !ok {
			return 0, bad
		}
		// D-HH, D-HH:MM, D-HH:MM:SS: the hours come first after the day.
		units := []time.Duration{time.Hour, time.Minute, time.Second}
		d = time.Duration(dd) * 24 * time.Hour
		for i, v := range n {
			d += time.Duration(v) * units[i]
		}
	case len(n) == 1:
		d = time.Duration(n[0]) * time.Minute
	case len(n) == 2:
		d = time.Duration(n[0])*time.Minute + time.Duration(n[1])*time.Second
	default:
		d = time.Duration(n[0])*time.Hour + time.Duration(n[1])*time.Minute + time.Duration(n[2])*time.Second
	}
	return SlurmTime(d), nil
}

// toSlurmTime is the decode hook's: YAML's bare integer is minutes, as
// salloc --time=90 is.
func toSlurmTime(data any) (any, error) {
	switch d := data.(type) {
	case string:
		return ParseSlurmTime(d)
	case int:
		if d < 0 {
			return nil, fmt.Errorf("expected %s, got %d", slurmTimeExample, d)
		}
		return ParseSlurmTime(strconv.Itoa(d))
	case float64, uint64:
		return nil, fmt.Errorf("expected %s, got %v", slurmTimeExample, d)
	}
	return data, nil
}
