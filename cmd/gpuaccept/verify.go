package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"gpuaccept/remote"
	"gpuaccept/reports"
)

func newVerifyCmd() *cobra.Command {
	var allowed string
	var signers []string
	cmd := &cobra.Command{
		Use:   "verify RUN_DIR",
		Short: "Check an evidence bundle against its MANIFEST.sha256 (and its signatures)",
		Long: `Check every file of an evidence bundle against its manifest (the reports too, whichever
gpuaccept made it), and, for a run this build made, report.md and report.html against what
run.json renders to; names each changed, missing or unlisted file.
Then every signature of the manifest (MANIFEST.sha256.<key>.sig, one per signer, and the
MANIFEST.sha256.sig of earlier versions): each must verify, and each is listed with its key.
--allowed-signers FILE checks them against FILE, in ssh-keygen's allowed-signers format, and
names who signed; --signer NAME, repeated, requires a signature of each NAME (say, whoever
prepared and whoever approved), NAME a principal or a key's fingerprint (SHA256:...).
Exit 0 when intact (and signed, when asked), 1 when not, 2 when the manifest is missing or
unreadable.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			out := cmd.OutOrStdout()
			if len(signers) > 0 && allowed == "" {
				return exitWith(exitBadInput, fmt.Errorf("--signer needs --allowed-signers FILE"))
			}
			manifest, err := intactManifest(dir, out, "")
			if err != nil {
				return err
			}
			sum := sha256.Sum256(manifest)
			fmt.Fprintf(out, "%s: intact (bundle digest %s)\n%s: the reports show evidence digest %s\n", dir,
				hex.EncodeToString(sum[:]), dir, reports.EvidenceDigest(manifest))
			var list []byte
			if allowed != "" {
				if list, err = os.ReadFile(allowed); err != nil {
					return exitWith(exitBadInput, fmt.Errorf("--allowed-signers: %w", err))
				}
			}
			return verifySignatures(out, dir, manifest, allowed, string(list), signers)
		},
	}
	cmd.Flags().StringVar(&allowed, "allowed-signers", "", "check the bundle's signatures against this allowed-signers file (ssh-keygen -Y verify -f)")
	cmd.Flags().StringArrayVar(&signers, "signer", nil, "a signature must be this principal's (ssh-keygen -Y verify -I), or this key's (SHA256:...), allowed by --allowed-signers; repeat it for each signer required")
	return cmd
}

// maxSignature bounds what verify reads as a signature: an armored SSH
// signature is under 2 KiB; a bundle is often someone else's.
const maxSignature = 64 << 10

// verifySignatures checks each signature of dir's manifest, a line each
// (by whom, with list, the allowed-signers file named allowed, when
// given), and that every one of signers signed: an exit 1 error naming
// each signature that does not verify and each signer missing.
func verifySignatures(out io.Writer, dir string, manifest []byte, allowed, list string, signers []string) error {
	sigs, err := reports.Signatures(dir)
	if err != nil {
		return exitWith(exitBadInput, fmt.Errorf("%s: %w", dir, err))
	}
	if len(sigs) == 0 {
		if allowed != "" {
			return exitWith(exitNotAccepted, fmt.Errorf("%s: not signed: gpuaccept sign %s", dir, dir))
		}
		return nil
	}
	now := time.Now()
	var bad []string
	good := map[string][]byte{} // file → its signature, for --signer
	keys := map[string]bool{}   // the fingerprints of those allowed
	for _, name := range sigs {
		sig, err := readBounded(filepath.Join(dir, name), maxSignature)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if allowed == "" {
			fp, err := remote.SignatureKey(manifest, sig)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			fmt.Fprintf(out, "%s: signed by key %s (%s)\n", dir, fp, name)
			good[name] = sig
			continue
		}
		who, err := remote.VerifySignature(manifest, sig, list, allowed, "", now)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		fmt.Fprintf(out, "%s: signed by %s (%s, %s)\n", dir, strings.Join(who.Principals, ","), who.Fingerprint, name)
		good[name], keys[who.Fingerprint] = sig, true
	}
	var missing []string
	for _, want := range signers {
		// A key's fingerprint names its signer as well as a principal.
		signed := keys[want]
		for _, sig := range good {
			if _, err := remote.VerifySignature(manifest, sig, list, allowed, want, now); err == nil {
				signed = true
				break
			}
		}
		if !signed {
			missing = append(missing, want)
		}
	}
	if allowed == "" {
		fmt.Fprintf(out, "%s: give --allowed-signers FILE to check whose keys these are\n", dir)
	}
	var why []string
	if len(bad) > 0 {
		why = append(why, fmt.Sprintf("%d of %d signature(s) do not verify: %s", len(bad), len(sigs), strings.Join(bad, "; ")))
	}
	if len(missing) > 0 {
		why = append(why, "not signed by "+strings.Join(missing, ", "))
	}
	if len(why) > 0 {
		return exitWith(exitNotAccepted, fmt.Errorf("%s: %s", dir, strings.Join(why, "; ")))
	}
	return nil
}

// readBounded reads path if it is a regular file of at most limit bytes,
// never following a link.
func readBounded(path string, limit int64) ([]byte, error) {
	st, err := os.Lstat(path)
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	case st.Size() > limit:
		return nil, fmt.Errorf("%d bytes, more than a signature can be (%d)", st.Size(), limit)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("grew past %d bytes while read", limit)
	}
	return b, err
}

func newSignCmd() *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "sign RUN_DIR",
		Short: "Sign an evidence bundle's manifest with your SSH key",
		Long: `Sign RUN_DIR/MANIFEST.sha256 with an SSH key, in the SSH signature format of ssh-keygen -Y
sign and git's ssh signing (namespace gpuaccept), into RUN_DIR/MANIFEST.sha256.<key>.sig: one
file per key, so that whoever approves signs beside whoever prepared, and both signatures
stay valid (the same key signing again replaces its own). The bundle is verified first: a
changed bundle is not signed. --key is a private key file, or the .pub of a key ssh-agent
holds; without it, ssh-agent's only key signs.

Anyone can check them: gpuaccept verify RUN_DIR --allowed-signers FILE [--signer NAME]..., or
ssh-keygen -Y verify -f FILE -I NAME -n gpuaccept -s RUN_DIR/MANIFEST.sha256.<key>.sig < RUN_DIR/MANIFEST.sha256`,
		Args: exactArgs(1),
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
			path := filepath.Join(dir, reports.SignerSignatureName(fp))
			// Never through a link planted in the bundle's place of it.
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
			if err == nil {
				_, err = f.Write(sig)
				err = errors.Join(err, f.Close())
			}
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			sum := sha256.Sum256(manifest)
			sigs, _ := reports.Signatures(dir)
			fmt.Fprintf(cmd.OutOrStdout(), "%s: bundle digest %s signed by %s (%d signature(s) in all)\n", path,
				hex.EncodeToString(sum[:]), fp, len(sigs))
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
