package standins

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// wrapperMark starts the second line of every wrapper Install writes; Install only ever removes files that carry it.
const wrapperMark = "# gpuaccept stand-in"

// ProfileFile is the file Install writes into dir naming the profile (one line), as evidence of what was installed.
const ProfileFile = "PROFILE"

// Install makes dir (mkdir -p) a directory of executable wrappers, one per tool the profile's node has, each
//
//	#!/bin/sh
//	# gpuaccept stand-in for TOOL (simulated node, profile PROFILE)
//	exec 'ARGV0[0]' 'ARGV0[1]' ... '--profile' 'PROFILE' 'TOOL' "$@"
//
// so that with dir on PATH, `nvidia-smi -L` runs argv0 (e.g. ["/path/gpuaccept", "standin"] or ["/path/standin"])
// which must end in Command. Every word is single-quoted for sh. It also writes dir/PROFILE. A wrapper for a tool
// the profile lacks, left by an earlier Install, is removed, so the shell answers "command not found" for it.
// Files are written under a temporary name and renamed, so a concurrent reader never sees half a wrapper.
func Install(dir, profileName string, argv0 []string) error {
	p, err := lookup(profileName)
	if err != nil {
		return err
	}
	if err := checkArgv0(argv0); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("standins: Install: %w", err)
	}
	for _, tool := range allTools {
		path := filepath.Join(dir, tool)
		if !p.has(tool) {
			if b, err := os.ReadFile(path); err == nil && isWrapper(b) {
				if err := os.Remove(path); err != nil {
					return fmt.Errorf("standins: Install: %w", err)
				}
			}
			continue
		}
		words := append(append([]string{}, argv0...), "--profile", p.name, tool)
		if err := writeWrapper(path, fmt.Sprintf("%s (simulated node, profile %s)", tool, p.name), words); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, ProfileFile), []byte(p.name+"\n"), 0o644)
}

// InstallFabric adds to dir (mkdir -p) wrappers for the fabric model's tools (FabricTools: mpirun and the
// nccl-tests binaries), each
//
//	#!/bin/sh
//	# gpuaccept stand-in for TOOL (simulated fabric model, demo only)
//	exec 'ARGV0[0]' 'ARGV0[1]' ... 'TOOL' "$@"
//
// where argv0 ends in Command (or gpuaccept's `standin` subcommand). It is for the demo only: with dir on PATH,
// mpirun and all_reduce_perf are the model, not Open MPI and nccl-tests. The lab installs the real mpirun and
// the MPI stand-in of nccl/ instead, so Install never writes these. The node's environment must carry FabricEnv
// and FabricNodeEnv (see FabricMain).
func InstallFabric(dir string, argv0 []string) error {
	if err := checkArgv0(argv0); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("standins: InstallFabric: %w", err)
	}
	for _, tool := range FabricTools() {
		words := append(append([]string{}, argv0...), tool)
		if err := writeWrapper(filepath.Join(dir, tool), tool+" (simulated fabric model, demo only)", words); err != nil {
			return err
		}
	}
	return nil
}

// StandinCommand is the name of the stand-ins' own program on a simulated node's PATH.
const StandinCommand = "standin"

// InstallStandin writes into dir (mkdir -p) a wrapper named standin that runs argv0 (this program's standin
// command) with its arguments: what a simulated container runs, `standin openai-server ...`, as the lab's test
// image carries /usr/local/bin/standin.
func InstallStandin(dir string, argv0 []string) error {
	if err := checkArgv0(argv0); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("standins: InstallStandin: %w", err)
	}
	return writeWrapper(filepath.Join(dir, StandinCommand), "standin (simulated node's own program)", argv0)
}

func checkArgv0(argv0 []string) error {
	if len(argv0) == 0 || argv0[0] == "" {
		return errors.New("standins: Install: empty argv0")
	}
	for _, a := range argv0 {
		if strings.ContainsAny(a, "\x00\n") {
			return fmt.Errorf("standins: Install: argv0 word %q has a NUL or newline", a)
		}
	}
	return nil
}

// writeWrapper writes an executable sh script that execs words (each single-quoted) with the script's arguments.
func writeWrapper(path, what string, words []string) error {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	script := fmt.Sprintf("#!/bin/sh\n%s for %s\nexec %s \"$@\"\n", wrapperMark, what, strings.Join(quoted, " "))
	return writeFile(path, []byte(script), 0o755)
}

func isWrapper(b []byte) bool {
	_, rest, ok := bytes.Cut(b, []byte("\n"))
	return ok && bytes.HasPrefix(rest, []byte(wrapperMark+" "))
}

// shellQuote single-quotes s as one sh word; a quote inside s ends the quoting, is escaped, and reopens it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("standins: Install: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, mode)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("standins: Install: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("standins: Install: %w", err)
	}
	return nil
}
