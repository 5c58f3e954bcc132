// Command labctl runs the lab script embedded in package lab with its arguments, e.g.
//
//	go run ./scripts/lab/cmd/labctl up --hosts 4
//	go run ./scripts/lab/cmd/labctl down
//
// It is the same as bash scripts/lab/lab.sh ARGS; run without arguments (or with help) for the usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"gpuaccept/scripts/lab"
)

func main() {
	// the script and its children share our terminal's process group and see ^C themselves
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	cmd, err := lab.Command(context.Background(), os.Args[1:]...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "labctl:", err)
		os.Exit(1)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() >= 0 {
			os.Exit(ee.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "labctl:", err)
		os.Exit(1)
	}
}
