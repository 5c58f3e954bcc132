// Package labtest runs whole acceptance windows on the lab: real OpenSSH
// hosts in network namespaces with stand-in GPU tools, the gpuaccept
// binary as a user runs it.
package labtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"gpuaccept/scripts/lab"
)

const (
	labName   = "wt"
	labSubnet = "10.235.0"
	labHosts  = 4
)

var (
	theLab  *lab.Lab
	binary  string // the gpuaccept binary under test
	skipWhy string
)

func TestMain(m *testing.M) {
	if why, err := lab.TestSkip(); err != nil {
		fmt.Fprintf(os.Stderr, "root on Linux, yet the lab cannot run: %v\n", err)
		os.Exit(1)
	} else if why != "" || os.Getenv("GPUACCEPT_NO_LAB") != "" {
		skipWhy = why + os.Getenv("GPUACCEPT_NO_LAB")
		os.Exit(m.Run())
	}
	code := func() int {
		tmp, err := os.MkdirTemp("", "gpuaccept-wt-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmp)
		binary = filepath.Join(tmp, "gpuaccept")
		build := exec.Command("go", "build", "-o", binary, "gpuaccept/cmd/gpuaccept")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build gpuaccept: %v\n%s", err, out)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		l, err := lab.Up(ctx, lab.Options{Name: labName, Hosts: labHosts, Subnet: labSubnet})
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "lab up: %v\n", err)
			_ = lab.Down(context.Background(), labName)
			return 1
		}
		theLab = l
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
	}()
	os.Exit(code)
}

func needLab(t *testing.T) *lab.Lab {
	t.Helper()
	if theLab == nil {
		t.Skipf("window lab tests need root on Linux: %s", skipWhy)
	}
	return theLab
}
