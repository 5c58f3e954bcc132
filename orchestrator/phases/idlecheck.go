package phases

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// IdleCheck holds one node idle past quote.terms.idle_shutdown_after, at
// the end of the window, and records whether the provider stopped it (it
// no longer answers) or signalled it (idle.provider_check.signal) as
// the quote promises: IDLE-002. The node is lost to the window, so it
// runs last before teardown, on a quarantined node where there is one.
var IdleCheck = orchestrator.Phase{
	Name:     idleCheckPhase,
	Enabled:  idleCheckOn,
	Own:      idleCheckOn,
	Deadline: idleCheckDeadline,
	Cluster:  runIdleCheck,
	Judge:    judgeIdleCheck,
}

const idleCheckPhase = "idle-check"

func idleCheckOn(inv *inventory.Inventory) bool { return inv.Idle.ProviderCheck.Enabled }

// idleCheckHold is how long the node is held: the quoted time and the
// grace.
func idleCheckHold(inv *inventory.Inventory) time.Duration {
	return inv.Quote.Terms.IdleShutdownAfter + inv.Idle.ProviderCheck.Grace
}

func idleCheckDeadline(inv *inventory.Inventory) time.Duration {
	return idleCheckHold(inv) + 2*time.Minute
}

// IdleCheckResult is what the provider did with the node held idle.
type IdleCheckResult struct {
	Node    string  `json:"node"`
	QuotedS float64 `json:"quoted_s"`
	GraceS  float64 `json:"grace_s"`
	// HeldS: how long it was watched; Polls: how many times it was asked.
	HeldS float64 `json:"held_s"`
	Polls int     `json:"polls"`
	// StoppedS: when, after the hold began, it stopped answering (a poll
	// failed, and the one asked again a moment later); SignalledS: when the signal
	// command first said the provider signalled it. Nil: it did not.
	StoppedS   *float64 `json:"stopped_s,omitempty"`
	SignalledS *float64 `json:"signalled_s,omitempty"`
	// LastAnswerS: the last poll it answered.
	LastAnswerS float64 `json:"last_answer_s"`
	// SignalError: the signal command could not run (not its exit 1).
	SignalError string `json:"signal_error,omitempty"`
}

// idlePollEvery is the time between two polls: 30 s, or a twentieth of
// a short hold.
func idlePollEvery(hold time.Duration) time.Duration {
	return min(max(hold/20, 2*time.Second), 30*time.Second)
}

func runIdleCheck(ctx context.Context, w *orchestrator.Window) (any, error) {
	inv := w.Inv
	hold := idleCheckHold(inv)
	n := idleCheckNode(ctx, w, idlePollEvery(hold))
	if n == nil {
		return nil, orchestrator.Unmeasured("idle-check", "no node left that answers, to hold idle")
	}
	res := &IdleCheckResult{Node: n.Name, QuotedS: inv.Quote.Terms.IdleShutdownAfter.Seconds(),
		GraceS: inv.Idle.ProviderCheck.Grace.Seconds()}
	w.IdleHold(n)
	w.Progress.Node(n.Name, "held idle for the provider's idle shutdown (%s quoted, %s grace)",
		inv.Quote.Terms.IdleShutdownAfter, inv.Idle.ProviderCheck.Grace)
	start := time.Now()
	every := idlePollEvery(hold)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			res.HeldS = time.Since(start).Seconds()
			return res, ctx.Err()
		case <-tick.C:
		}
		el := time.Since(start)
		res.Polls++
		if res.SignalledS == nil && inv.Idle.ProviderCheck.Signal != "" {
			ok, err := idleSignalled(ctx, w, n, inv.Idle.ProviderCheck.Signal, every)
			switch {
			case err != nil:
				res.SignalError = firstLine(err.Error())
			case ok:
				s := el.Seconds()
				res.SignalledS = &s
				w.Progress.Node(n.Name, "the provider signalled it after %s idle", el.Round(time.Second))
			}
		}
		if idleAnswers(ctx, w, n, every) {
			res.LastAnswerS = el.Seconds()
		} else if idleConfirmGone(ctx, w, n, every) {
			// Asked again at once: one lost answer is not a stopped node.
			s := el.Seconds()
			res.StoppedS = &s
			w.Progress.Node(n.Name, "stopped answering after %s idle", el.Round(time.Second))
		}
		if res.StoppedS != nil || el >= hold {
			res.HeldS = el.Seconds()
			return res, nil
		}
	}
}

// idleCheckNode is the node to hold: a quarantined one the window still
// reaches (its loss costs nothing), else the last active one.
func idleCheckNode(ctx context.Context, w *orchestrator.Window, every time.Duration) *orchestrator.Node {
	var candidates []*orchestrator.Node
	for _, n := range w.Nodes {
		// Not one the idle guard let go: it may have been given back,
		// and its stopping would be the buyer's doing.
		if q, _ := n.Quarantined(); q && !n.Released() && n.Exec() != nil {
			candidates = append(candidates, n)
		}
	}
	if a := w.Active(); len(a) > 0 {
		candidates = append(candidates, a[len(a)-1])
	}
	for _, n := range candidates {
		// It must answer when the hold begins: a node that does not
		// (quarantined for a lost connection) would pass at once.
		if idleAnswers(ctx, w, n, every) {
			return n
		}
	}
	return nil
}

// idleConfirmGone asks a node that did not answer once more, a moment
// later: true when it again does not.
func idleConfirmGone(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, every time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(min(every/2, 5*time.Second)):
	}
	return !idleAnswers(ctx, w, n, every)
}

// idleAnswers asks the node for nothing (`true`), over its connection or
// a new one.
func idleAnswers(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, within time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	e, err := w.Reconnect(ctx, n)
	if err != nil {
		return false
	}
	return e.Run(ctx, remote.Cmd{Command: "true"}) == nil
}

// idleSignalled runs idle.provider_check.signal on the coordinator: exit 0
// is "signalled", another exit "not yet"; a command that cannot run is an
// error.
func idleSignalled(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string, within time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), "GPUACCEPT_RUN="+w.RunID(), "GPUACCEPT_IDLE_NODE="+n.Name,
		"GPUACCEPT_IDLE_ADDRESS="+n.Config.Address())
	cmd.WaitDelay = 2 * time.Second
	if w.Inv.Path != "" {
		cmd.Dir = filepath.Dir(w.Inv.Path) // as every path in the inventory
	}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ctx.Err() == nil:
		return false, nil
	}
	return false, fmt.Errorf("idle.provider_check.signal: %w", err)
}

// judgeIdleCheck is IDLE-002.
func judgeIdleCheck(w *orchestrator.Window) []record.Verdict {
	if !idleCheckOn(w.Inv) {
		return nil
	}
	const id = "IDLE-002"
	title := record.TitleOf(id, id)
	var res IdleCheckResult
	pr, ok := w.Result(idleCheckPhase, -1, &res)
	switch {
	case !ok:
		return []record.Verdict{{ID: id, Title: title, Status: record.Skip, Detail: "not run"}}
	case pr.Outcome == record.NotMeasured || res.Node == "":
		return []record.Verdict{{ID: id, Title: title, Status: record.Skip, Detail: firstNonBlank(pr.Error, "not measured")}}
	}
	quoted := time.Duration(res.QuotedS * float64(time.Second))
	limit := time.Duration((res.QuotedS + res.GraceS) * float64(time.Second))
	at := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Second) }
	v := record.Verdict{ID: id, Title: title, Node: res.Node}
	switch {
	case res.StoppedS != nil && at(*res.StoppedS) <= limit:
		v.Status, v.Detail = record.Pass, fmt.Sprintf("stopped answering %s into the hold (quote.terms.idle_shutdown_after %s)", at(*res.StoppedS), quoted)
	case res.SignalledS != nil && at(*res.SignalledS) <= limit:
		v.Status, v.Detail = record.Pass, fmt.Sprintf("signalled %s into the hold (quote.terms.idle_shutdown_after %s)", at(*res.SignalledS), quoted)
	case pr.Outcome == record.Interrupted || (pr.Outcome == record.Failed && at(res.HeldS) < limit):
		v.Status, v.Detail = record.Skip, fmt.Sprintf("the hold ended after %s of %s: %s", at(res.HeldS), limit, firstLine(pr.Error))
	default:
		v.Status, v.Detail = record.Fail, fmt.Sprintf("still answering %s into the hold, not signalled: quote.terms.idle_shutdown_after says %s (%s grace)",
			at(res.LastAnswerS), quoted, at(res.GraceS))
		if res.SignalError != "" {
			v.Detail += "; " + res.SignalError
		}
	}
	return []record.Verdict{v}
}

func firstNonBlank(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
