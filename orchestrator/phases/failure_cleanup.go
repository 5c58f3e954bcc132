package phases

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
)

// The failure test's end: the job stopped everywhere, a pending cut
// restored, what is left counted, the time billed.

// Each step of the cleanup has its own time, as teardown's phases do: at
// 1,000 loaded nodes stopping the job spent the one budget they shared,
// and the leftover count then asked no node (every node "did not answer",
// a RECOV-004 FAIL that measured nothing).
var (
	cleanupStop  = 2 * time.Minute
	cleanupCount = time.Minute
)

// cleanup stops the job everywhere, restores a cut that is still pending
// and counts what is left.
func (j *failureJob) cleanup(nodes []*orchestrator.Node, victim *orchestrator.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupStop)
	defer cancel()
	if j.f.Inject == "cut" {
		// Reachable again (the restore on the node fired): then nothing is
		// pending; otherwise say so.
		if _, err := j.node(ctx, victim, 10*time.Second, "restore"); err != nil {
			j.act(victim.Name, "not reachable at cleanup; its restore is scheduled on the node", err.Error())
		}
	}
	j.endPodAgain()
	j.mu.Lock()
	deleted := j.deleted
	if j.podBack {
		deleted = nil
	}
	j.mu.Unlock()
	if deleted != nil {
		// Its pod was deleted and none made again. Counting in it would
		// make a pod there only to count nothing: the window's processes
		// went with the deleted one, once the API no longer has it.
		gctx, gcancel := context.WithTimeout(ctx, 15*time.Second)
		gone, err := deleted.PodGone(gctx)
		gcancel()
		left, said := 0, "its pod was deleted and none made again; the API has it no more, nor its processes"
		switch {
		case err != nil:
			left, said = -1, "its deleted pod could not be looked for: "+err.Error()
		case !gone:
			left, said = -1, "its deleted pod is still there (terminating): its processes not counted"
		}
		j.mu.Lock()
		j.res.Left[victim.Name] = left
		j.mu.Unlock()
		j.act(victim.Name, "not counted", said)
		nodes = slices.DeleteFunc(slices.Clone(nodes), func(n *orchestrator.Node) bool { return n == victim })
	}
	j.each(ctx, nodes, func(ctx context.Context, n *orchestrator.Node) {
		out, err := j.node(ctx, n, 20*time.Second, "kill-node")
		if err == nil && strings.TrimSpace(out) != "" {
			j.act(n.Name, "job stopped", out)
		}
	})
	if !j.torch.stop(ctx) {
		j.act("", "cleanup", fmt.Sprintf("stopping the job outlasted its %v; counting what is left", cleanupStop))
	}
	cctx, ccancel := context.WithTimeout(context.Background(), cleanupCount)
	defer ccancel()
	j.each(cctx, nodes, func(ctx context.Context, n *orchestrator.Node) {
		out, err := j.node(ctx, n, 10*time.Second, "count")
		c, perr := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || perr != nil {
			c = -1
		}
		j.mu.Lock()
		j.res.Left[n.Name] = c
		j.mu.Unlock()
	})
}

// bill prices the time the job made no progress.
func (j *failureJob) bill(nodes int) {
	end := j.res.EndedAt
	if j.res.ResumedAt != nil {
		end = *j.res.ResumedAt
	}
	secs := max(end-j.res.InjectedAt, 0)
	j.res.BilledNodeSecs = secs * float64(nodes)
	j.res.BilledGPUHours = j.res.BilledNodeSecs * float64(max(j.w.Inv.Quote.GPUsPerNode, 1)) / 3600
	if p := j.w.Inv.Quote.PricePerGPUHr; p > 0 {
		c := j.res.BilledGPUHours * p
		j.res.BilledCost = &c
	}
}
