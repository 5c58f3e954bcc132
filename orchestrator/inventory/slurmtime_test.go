package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseSlurmTime: every form salloc --time takes, and Go's durations;
// the rest refused, naming the forms.
func TestParseSlurmTime(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90":          90 * time.Minute,
		"90:30":       90*time.Minute + 30*time.Second,
		"2:00:00":     2 * time.Hour,
		"1-12":        36 * time.Hour,
		"1-12:30":     36*time.Hour + 30*time.Minute,
		"2-00:00:00":  48 * time.Hour,
		"0-01:02:03":  time.Hour + 2*time.Minute + 3*time.Second,
		"1h30m":       90 * time.Minute,
		" 45m ":       45 * time.Minute,
		"7-00:00:00 ": 7 * 24 * time.Hour,
	} {
		got, err := ParseSlurmTime(in)
		if err != nil || got.Duration() != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1:2:3:4", "1-2:3:4:5", "-5", "5-", "1-", "a", "1:x", "1.5", "1-2-3", "10m:5", "1:-2", "99999999999"} {
		if got, err := ParseSlurmTime(in); err == nil || !strings.Contains(err.Error(), "D-HH:MM:SS as salloc --time takes them") {
			t.Errorf("%q: %v, %v; want an error naming the forms", in, got, err)
		}
	}
}

// TestSlurmAllocateTimeForms: slurm.allocate.time in the inventory, as a
// Slurm time string, a bare number of minutes, and a Go duration.
func TestSlurmAllocateTimeForms(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for yaml, want := range map[string]time.Duration{
		`"2-00:00:00"`: 48 * time.Hour,
		"90":           90 * time.Minute,
		`"1:30:00"`:    90 * time.Minute,
		"1h30m":        90 * time.Minute,
	} {
		path := filepath.Join(t.TempDir(), "slurm.yaml")
		body := "provider: fake\nssh: {user: root, config: none}\nslurm:\n  login: {address: login.example}\n" +
			"  allocate: {nodes: 2, time: " + yaml + "}\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		inv, err := load(path, noEnv)
		if err != nil {
			t.Errorf("time: %s: %v", yaml, err)
			continue
		}
		if got := inv.Slurm.Allocate.Time.Duration(); got != want {
			t.Errorf("time: %s = %v, want %v", yaml, got, want)
		}
	}
}
