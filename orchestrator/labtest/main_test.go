// Package labtest runs whole acceptance windows on the lab: real OpenSSH
// hosts in network namespaces with stand-in GPU tools, the gpuaccept
// binary as a user runs it.
package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gpuaccept/scripts/lab"
)

const labHosts = 6

// The package's lab: its name and subnet, and the window label of its
// inventories (in every run ID), another set for the second shard
// (scripts/test.sh runs two parts of this package at once, each on a lab
// of its own, GPUACCEPT_LABTEST_SHARD=2 in the second). The lab hosts
// share the machine's process table: a test that finds its window by
// `ps` must not find the other shard's.
var labName, labSubnet, labWindow = "wt", "10.235.0", "labtest"

func init() {
	if os.Getenv("GPUACCEPT_LABTEST_SHARD") == "2" {
		labName, labSubnet, labWindow = "wt2", "10.236.0", "labtestb"
	}
}

var (
	theLab  *lab.Lab
	binary  string // the gpuaccept binary under test
	skipWhy string
)

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "gpuaccept-wt-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := func() error {
		binary = filepath.Join(tmp, "gpuaccept")
		out, err := exec.Command("go", "build", "-o", binary, "gpuaccept/cmd/gpuaccept").CombinedOutput()
		if err != nil {
			return fmt.Errorf("build gpuaccept: %v\n%s", err, out)
		}
		return nil
	}
	code := lab.RunTests(m, lab.Options{Name: labName, Hosts: labHosts, Subnet: labSubnet}, build,
		func(l *lab.Lab, why string) { theLab, skipWhy = l, why })
	os.RemoveAll(tmp)
	os.Exit(code)
}

func needLab(t *testing.T) *lab.Lab {
	t.Helper()
	if theLab == nil {
		t.Skipf("window lab tests need root on Linux: %s", skipWhy)
	}
	return theLab
}
