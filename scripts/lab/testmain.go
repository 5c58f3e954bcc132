package lab

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RunTests is a lab test package's TestMain: it brings a lab up, runs the
// tests, tears the lab down and checks that no goroutine was left behind.
// The lab is nil in the tests when this machine cannot run one (not root
// on Linux, or GPUACCEPT_NO_LAB set) and why says so; on a root Linux
// machine that should run one but cannot, the package fails instead.
// before, when set, runs first (building a binary, say) and may fail the
// package.
func RunTests(m *testing.M, o Options, before func() error, got func(l *Lab, why string)) int {
	why, err := TestSkip()
	if err != nil {
		fmt.Fprintf(os.Stderr, "root on Linux, yet the lab cannot run: %v\n", err)
		return 1
	}
	if why != "" {
		got(nil, why)
		return m.Run()
	}
	if before != nil {
		if err := before(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	l, err := Up(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab up: %v\n", err)
		_ = Down(context.Background(), o.Name)
		return 1
	}
	got(l, "")
	code := m.Run()
	if err := l.Down(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "lab down: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	return code
}

// Eventually polls cond until it holds, failing the test after within.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
