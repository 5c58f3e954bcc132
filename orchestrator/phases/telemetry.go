package phases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/telemetry"
	"gpuaccept/remote"
)

// TelemetryStart is what the telemetry phase recorded on a node: the
// sampler runs, every Interval, from the sources it found.
type TelemetryStart struct {
	Interval time.Duration `json:"interval_ns"`
	// Sources: which of nvidia-smi, dmesg or journal, ib the node's
	// sampler found; Missing: why it lacks the others.
	Sources []string `json:"sources"`
	Missing []string `json:"missing,omitempty"`
	// File is the series in the bundle, raw/<node>/telemetry.txt.gz.
	File string `json:"file"`
}

// Telemetry starts the window's sampler on every node and returns: the
// stream runs in the window's background until teardown begins, into
// raw/<node>/telemetry.txt.gz. It runs again on --resume (no connection
// survives the coordinator), appending a gzip member to the file.
var Telemetry = orchestrator.Phase{
	Name:      "telemetry",
	AlwaysRun: true,
	Enabled:   func(inv *inventory.Inventory) bool { return inv.Telemetry.On() },
	Deadline:  func(*inventory.Inventory) time.Duration { return time.Minute },
	PerNode:   startTelemetry,
	Judge:     judgeTelemetry,
}

// telemetryInterval is the inventory's, or the default.
func telemetryInterval(inv *inventory.Inventory) time.Duration {
	if iv := inv.Telemetry.Interval; iv > 0 {
		return iv
	}
	return telemetry.DefaultInterval
}

// telemetryLimit is what the coordinator keeps of one node's stream.
func telemetryLimit(inv *inventory.Inventory) int64 {
	mib := inv.Telemetry.MaxMiBPerNode
	if mib <= 0 {
		mib = inventory.DefaultTelemetryMaxMiB
	}
	return int64(mib) << 20
}

func startTelemetry(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
	iv := telemetryInterval(w.Inv)
	rel := filepath.Join("raw", n.Name, telemetry.FileName)
	res := TelemetryStart{Interval: iv, File: rel}
	e, err := execOf(n)
	if err != nil {
		return res, err
	}
	sink, err := openTelemetrySink(filepath.Join(w.Dir, rel), iv, len(telemetry.Fields), telemetryLimit(w.Inv), time.Now)
	if err != nil {
		return res, fmt.Errorf("%s: the telemetry file: %w", n.Name, err)
	}
	if w.IdleOn() {
		sink.onGPU = func(at time.Time, row string) {
			if g, err := telemetry.ParseGPURow(row, at); err == nil {
				w.IdleSample(n, at, g.UtilPct)
			}
		}
	}
	// The sampler's own complaints (stderr) go to the phase's raw log.
	log, _, err := w.LogFile(n, "telemetry")
	if err != nil {
		sink.Close()
		return res, err
	}
	args := []string{strconv.FormatInt(iv.Milliseconds(), 10)}
	for _, a := range telemetry.QueryArgs(iv) {
		args = append(args, remote.Quote(a))
	}
	command := toolCmd(w.RunID(), n.Name, "telemetry.sh", args...)
	fmt.Fprintf(log, "$ %s\n", firstLine(command))
	ended := make(chan error, 1)
	abort := make(chan struct{})
	err = w.Background(n, "telemetry", func(bctx context.Context) error {
		defer log.Close()
		rctx, cancel := context.WithCancel(bctx)
		defer cancel()
		err := streamTelemetry(rctx, abort, e, nodeEnv(w, n), command, sink, log)
		if cerr := sink.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("%s: the telemetry file: %w", n.Name, cerr)
		}
		if err != nil && bctx.Err() == nil {
			fmt.Fprintf(log, "# %v\n", err)
		}
		ended <- err
		if bctx.Err() != nil {
			return nil // stopped by the window: the end it was meant to have
		}
		return err
	})
	if err != nil {
		log.Close()
		sink.Close()
		return res, err
	}
	select {
	case <-sink.Ready():
	case err := <-ended:
		if err == nil {
			err = errors.New("it ended without a word")
		}
		return res, fmt.Errorf("the sampler did not start: %w", err)
	case <-ctx.Done():
		close(abort)
		return res, fmt.Errorf("the sampler did not start: %w", ctx.Err())
	}
	res.Sources, res.Missing = sink.Sources()
	if !slices.Contains(res.Sources, "nvidia-smi") {
		// The kernel and IB sources go on: an Xid is still worth seeing.
		why := "nvidia-smi not found on the node"
		for _, m := range res.Missing {
			if strings.HasPrefix(m, "nvidia-smi") {
				why = m
			}
		}
		return res, orchestrator.Unmeasured("nvidia-smi", "no telemetry: %s", why)
	}
	return res, nil
}

// streamTelemetry runs the sampler on the node until ctx ends (or abort is
// closed, or the node ends it), its stdout into sink. Cancelling ctx ends
// the remote command's process group (the executor's guard), as does a
// lost connection: nothing of the sampler outlives the session.
func streamTelemetry(ctx context.Context, abort <-chan struct{}, e remote.Executor, env map[string]string, command string, sink *telemetrySink, log io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		tick := time.NewTicker(telemetryFlushEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-abort:
				cancel()
				return
			case <-tick.C:
				// A quiet stream (a long interval) is readable too.
				sink.Flush()
			}
		}
	}()
	return e.Run(ctx, remote.Cmd{
		Command: command,
		Env:     env,
		Stdout:  sink,
		Stderr:  log,
		Grace:   3 * time.Second,
	})
}
