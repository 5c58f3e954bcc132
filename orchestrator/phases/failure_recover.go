package phases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gpuaccept/orchestrator"
)

// The failure test's recovery: the victim brought back as the policy
// says (a new pod after delete-pod), the job relaunched where it must be.

// recover brings the victim back as the policy says; true once done.
func (j *failureJob) recover(ctx context.Context, nodes []*orchestrator.Node, victim *orchestrator.Node) bool {
	f := j.f
	// The victim answers again: at once after a kill, after the cut ends,
	// after a reboot (bounded by the phase's deadline).
	if f.Inject == "cut" && j.now() < j.res.InjectedAt+f.CutFor.Seconds() {
		return false
	}
	if err := j.answers(ctx, victim); err != nil {
		// Gone for good, as far as this test can wait: a relaunch goes on
		// without it.
		if f.Recovery == "relaunch" && j.now() > j.res.InjectedAt+f.CutFor.Seconds()+60 {
			var survivors []*orchestrator.Node
			for _, n := range nodes {
				if n != victim {
					survivors = append(survivors, n)
				}
			}
			j.stopAll(ctx, survivors)
			j.act(victim.Name, "relaunching without it", err.Error())
			j.startAll(ctx, survivors, len(survivors))
			return true
		}
		return false
	}
	switch f.Recovery {
	case "elastic":
		// The victim's launcher rejoins the same elastic job (kill-worker:
		// torchrun restarted the worker itself). Its old launcher may not
		// have returned yet when the survivors already noticed (found with
		// the fake job, whose survivors notice at once): then not yet, and
		// again at the next event, or the victim would never rejoin.
		if f.Inject != "kill-worker" {
			if done, _ := j.ended(victim); !done {
				return false
			}
			j.mu.Lock()
			gen := j.gen
			j.mu.Unlock()
			j.start(ctx, victim, len(nodes), gen)
		}
	case "relaunch":
		// Stop what is left of the job everywhere, then start it again on
		// every node (the victim answers again).
		j.stopAll(ctx, nodes)
		j.startAll(ctx, nodes, len(nodes))
	}
	return true
}

// answers is nil once the victim answers again: its processes counted,
// in a new pod on its node after delete-pod.
func (j *failureJob) answers(ctx context.Context, victim *orchestrator.Node) error {
	if j.f.Inject == "delete-pod" {
		if err := j.podAgain(ctx, victim); err != nil {
			return err
		}
	}
	_, err := j.node(ctx, victim, 10*time.Second, "count")
	return err
}

// podAgain brings the victim of delete-pod back as the cluster would
// bring back a job's pod: a new pod of the window on the same node (as a
// resumed window makes one), the window's scripts pushed there again and
// its private directory made anew (the old pod's went with it). The pod
// is made in the background, bounded by the time the job has to resume:
// a node that takes no new pod (cordoned, NotReady) must not hold up the
// recovery loop, whose relaunch goes on without the victim after a
// minute. nil once the pod is there; the error until then.
func (j *failureJob) podAgain(ctx context.Context, victim *orchestrator.Node) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.podBack {
		return nil
	}
	if j.podWait == nil {
		wait := make(chan struct{})
		pctx, cancel := context.WithTimeout(ctx, j.f.ResumeWithin)
		j.podWait, j.podCancel = wait, cancel
		go func() {
			defer close(wait)
			defer cancel()
			// The window's Reconnect makes the pod and runs the tools
			// phase in it (Phase.Provisions) before it returns.
			e, err := j.w.Reconnect(pctx, victim)
			if err != nil {
				j.act(victim.Name, "no new pod ready", err.Error())
			} else {
				j.act(victim.Name, "new pod", fmt.Sprintf("%s: the window's scripts pushed again, private directory %s", e.Addr(), stateDir(victim)))
			}
			j.mu.Lock()
			j.podErr, j.podBack = err, err == nil
			j.mu.Unlock()
			j.log.poke()
		}()
	}
	select {
	case <-j.podWait:
		// Failed: tried again at the next call.
		err := j.podErr
		j.podWait = nil
		return fmt.Errorf("no new pod: %w", err)
	default:
		return errors.New("its new pod is not ready yet")
	}
}

// endPodAgain ends an attempt at a new pod still under way and waits for
// it: nothing of the test may run past it.
func (j *failureJob) endPodAgain() {
	j.mu.Lock()
	wait, cancel := j.podWait, j.podCancel
	j.mu.Unlock()
	if wait != nil {
		cancel()
		<-wait
	}
}

// stopAll stops the job on nodes for a relaunch.
func (j *failureJob) stopAll(ctx context.Context, nodes []*orchestrator.Node) {
	j.each(ctx, nodes, func(ctx context.Context, n *orchestrator.Node) {
		out, _ := j.node(ctx, n, 20*time.Second, "kill-node")
		j.act(n.Name, "stopped for the relaunch", out)
	})
}
