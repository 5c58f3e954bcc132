package remote_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

const localHelperEnv = "GPUACCEPT_TEST_LOCAL_COORDINATOR"

// A coordinator that dies (SIGKILL: nothing of it runs to clean up) takes
// its local commands with it: the guard's control stream ends with the
// process that held it, as an SSH channel ends with the connection.
func TestLocalCommandsEndWithTheCoordinator(t *testing.T) {
	if cmd := os.Getenv(localHelperEnv); cmd != "" {
		l := remote.NewLocal(remote.Config{Name: "here", KeepaliveInterval: 500 * time.Millisecond, GuardLease: 30 * time.Second})
		_ = l.Run(context.Background(), remote.Cmd{Command: cmd})
		return
	}
	marker := fmt.Sprintf("sleep 600.%06d", time.Now().UnixNano()%1000000)
	alive := func() bool {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		return strings.TrimSpace(string(out)) != ""
	}
	// A child that ignores TERM too: the guard's KILL after the grace
	// must reach it.
	helper := exec.Command(os.Args[0], "-test.run=^TestLocalCommandsEndWithTheCoordinator$")
	helper.Env = append(os.Environ(), localHelperEnv+"=trap '' TERM; "+marker+" & "+marker+"; wait")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 10*time.Second, "the command started", alive)
	helper.Process.Kill()
	helper.Wait()
	// The lease is 30 s: the end of the control stream, not silence, must
	// stop the command, within the default grace of 5 s.
	lab.Eventually(t, 10*time.Second, "the command ended with its coordinator", func() bool { return !alive() })
}
