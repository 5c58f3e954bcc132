package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
	"gpuaccept/reports"
)

func newParseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "parse TOOL FILE",
		Short: "Parse a tool's saved output and print it as JSON",
		Long: `Parse saved output of a GPU, fabric or storage tool (dcgmi, nccl-tests, nvidia-smi, ibstat,
fio) and print the result as JSON. Exit 0 when parsed (a failed or truncated run is parsed too:
its JSON says "ok": false and stderr says why), 2 when the file is not that tool's output.`,
	}
	add := func(tool, short string, fn func(string) (any, error)) *cobra.Command {
		sub := &cobra.Command{
			Use:   tool + " FILE",
			Short: short,
			Args:  exactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				data, err := readParsed(args[0])
				if err != nil {
					return exitWith(exitBadInput, err)
				}
				v, err := fn(string(data))
				if errors.Is(err, parse.ErrNotRecognized) {
					return exitWith(exitBadInput, fmt.Errorf("%s: not %s output: %w", args[0], tool, err))
				}
				// A run that failed or was cut short is still parsed: what it
				// did say is printed (with "ok": false where the format has
				// it), and the problem goes to stderr.
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "gpuaccept: %s: %v\n", args[0], err)
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(v); err != nil {
					return err
				}
				if j, ok := v.(judged); ok && failed(j.Judgement.Verdicts) {
					return exitWith(exitNotAccepted, nil)
				}
				return nil
			},
		}
		cmd.AddCommand(sub)
		return sub
	}
	add("dcgmi", "dcgmi diag output (text tables or -j JSON)", func(s string) (any, error) { return parse.DCGMDiag(s) })
	var quote string
	nccl := add("nccl-tests", "nccl-tests output (any version's text, mpirun/srun prefixes, -J JSON)", func(s string) (any, error) {
		r, err := parse.NCCLTests(s)
		if quote == "" || errors.Is(err, parse.ErrNotRecognized) {
			return r, err
		}
		// A provider's own log, judged by our rules against their quote.
		inv, lerr := inventory.Load(quote)
		if lerr != nil {
			return nil, lerr
		}
		return judged{NCCL: r, Judgement: fabric.Judge(r, inv, "")}, err
	})
	nccl.Flags().StringVar(&quote, "quote", "", "judge the log against this inventory's quote (exit 1 when a verdict fails)")
	add("nvidia-smi-q", "nvidia-smi -q", func(s string) (any, error) { return parse.NvidiaSmiQ(s) })
	add("nvidia-smi-L", "nvidia-smi -L", func(s string) (any, error) { return parse.NvidiaSmiList(s) })
	add("nvidia-smi-topo", "nvidia-smi topo -m", func(s string) (any, error) { return parse.NvidiaSmiTopo(s) })
	add("ibstat", "ibstat", func(s string) (any, error) { return parse.IBStat(s) })
	add("fio", "fio --output-format=json or json+ (warnings before the JSON, --client runs)", func(s string) (any, error) { return parse.Fio(s) })
	return cmd
}

// judged is a parsed log with its verdicts against a quote.
type judged struct {
	parse.NCCL
	Judgement fabric.Judgement `json:"judgement"`
}

// maxParsed bounds what parse reads of a file (a gzip bomb included).
const maxParsed = 256 << 20

// readParsed is the file's text, a bundle's raw log (.log.gz) unpacked.
func readParsed(path string) ([]byte, error) {
	r, err := reports.OpenLog(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxParsed+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxParsed {
		return nil, fmt.Errorf("%s: more than %d MiB", path, maxParsed>>20)
	}
	return data, nil
}

func failed(vs []record.Verdict) bool {
	for _, v := range vs {
		if v.Status == record.Fail {
			return true
		}
	}
	return false
}
