package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"gpuaccept/reports"
)

func newVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify RUN_DIR",
		Short: "Check an evidence bundle against its MANIFEST.sha256",
		Long:  "Check every file of an evidence bundle against its manifest; names each changed, missing or unlisted file. Exit 0 when intact, 1 when not, 2 when the manifest is missing or unreadable.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			problems, err := reports.Verify(args[0])
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			out := cmd.OutOrStdout()
			for _, p := range problems {
				fmt.Fprintf(out, "%s: %s\n", p.Kind, p.Path)
			}
			if len(problems) > 0 {
				return exitWith(exitNotAccepted, fmt.Errorf("%s: %d file(s) do not match the manifest", args[0], len(problems)))
			}
			fmt.Fprintf(out, "%s: intact\n", args[0])
			return nil
		},
	}
}
