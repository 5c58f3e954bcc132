package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gpuaccept/remote"
	"gpuaccept/reports"
)

func newVerifyCmd() *cobra.Command {
	var allowed, signer string
	cmd := &cobra.Command{
		Use:   "verify RUN_DIR",
		Short: "Check an evidence bundle against its MANIFEST.sha256 (and its signature)",
		Long: `Check every file of an evidence bundle against its manifest (the reports too, whichever
gpuaccept made it), and, for a run this build made, report.md and report.html against what
run.json renders to; names each changed, missing or unlisted file.
--allowed-signers FILE also checks MANIFEST.sha256.sig (gpuaccept sign) against FILE, in
ssh-keygen's allowed-signers format; --signer NAME requires it to be NAME's.
Exit 0 when intact (and signed, when asked), 1 when not, 2 when the manifest is missing or
unreadable.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			out := cmd.OutOrStdout()
			manifest, err := intactManifest(dir, out, "")
			if err != nil {
				return err
			}
			sum := sha256.Sum256(manifest)
			fmt.Fprintf(out, "%s: intact (bundle digest %s; the reports show evidence digest %s)\n", dir,
				hex.EncodeToString(sum[:]), reports.EvidenceDigest(manifest))
			sigPath := filepath.Join(dir, reports.SignatureName)
			sig, sigErr := os.ReadFile(sigPath)
			if allowed == "" {
				if signer != "" {
					return exitWith(exitBadInput, fmt.Errorf("--signer needs --allowed-signers FILE"))
				}
				if sigErr == nil {
					fmt.Fprintf(out, "%s: signed; give --allowed-signers FILE to check by whom\n", dir)
				}
				return nil
			}
			if sigErr != nil {
				return exitWith(exitNotAccepted, fmt.Errorf("%s: not signed (%v): gpuaccept sign %s", dir, sigErr, dir))
			}
			list, err := os.ReadFile(allowed)
			if err != nil {
				return exitWith(exitBadInput, fmt.Errorf("--allowed-signers: %w", err))
			}
			who, err := remote.VerifySignature(manifest, sig, string(list), allowed, signer, time.Now())
			if err != nil {
				return exitWith(exitNotAccepted, fmt.Errorf("%s: %w", sigPath, err))
			}
			fmt.Fprintf(out, "%s: signed by %s (%s)\n", dir, strings.Join(who.Principals, ","), who.Fingerprint)
			return nil
		},
	}
	cmd.Flags().StringVar(&allowed, "allowed-signers", "", "check the bundle's signature against this allowed-signers file (ssh-keygen -Y verify -f)")
	cmd.Flags().StringVar(&signer, "signer", "", "the signature must be this principal's (ssh-keygen -Y verify -I)")
	return cmd
}

func newSignCmd() *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "sign RUN_DIR",
		Short: "Sign an evidence bundle's manifest with your SSH key",
		Long: `Sign RUN_DIR/MANIFEST.sha256 with an SSH key, in the SSH signature format of ssh-keygen -Y
sign and git's ssh signing (namespace gpuaccept), into RUN_DIR/MANIFEST.sha256.sig. The
bundle is verified first: a changed bundle is not signed. --key is a private key file, or
the .pub of a key ssh-agent holds; without it, ssh-agent's only key signs.

Anyone can check it: gpuaccept verify RUN_DIR --allowed-signers FILE, or
ssh-keygen -Y verify -f FILE -I YOU -n gpuaccept -s RUN_DIR/MANIFEST.sha256.sig < RUN_DIR/MANIFEST.sha256`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			manifest, err := intactManifest(dir, cmd.ErrOrStderr(), "not signed: ")
			if err != nil {
				return err
			}
			sig, fp, err := remote.Sign(manifest, remote.SignOptions{KeyFile: key})
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			path := filepath.Join(dir, reports.SignatureName)
			if err := os.WriteFile(path, sig, 0o644); err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			sum := sha256.Sum256(manifest)
			fmt.Fprintf(cmd.OutOrStdout(), "%s: bundle digest %s signed by %s\n", path, hex.EncodeToString(sum[:]), fp)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "private key file, or the .pub of a key in ssh-agent (default: ssh-agent's only key)")
	return cmd
}

// intactManifest checks dir against its manifest (each problem a line on
// w; an exit 1 error, its words after prefix) and returns the manifest.
func intactManifest(dir string, w io.Writer, prefix string) ([]byte, error) {
	problems, err := reports.VerifyAs(dir, toolName())
	if err != nil {
		return nil, exitWith(exitBadInput, err)
	}
	for _, p := range problems {
		fmt.Fprintln(w, p.String())
	}
	if len(problems) > 0 {
		return nil, exitWith(exitNotAccepted, fmt.Errorf("%s: %s%d file(s) do not match the manifest", dir, prefix, len(problems)))
	}
	manifest, err := os.ReadFile(filepath.Join(dir, reports.ManifestName))
	if err != nil {
		return nil, exitWith(exitBadInput, err)
	}
	return manifest, nil
}
