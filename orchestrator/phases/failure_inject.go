package phases

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// The failure test's kill: the victim failed as the inventory says.

// injectWithin bounds the command that kills the victim.
const injectWithin = time.Minute

// cutPause is how long failure.sh waits between saying it cuts and
// cutting (so that its line leaves first).
const cutPause = 500 * time.Millisecond

// inject fails the victim and sets InjectedAt to when it took effect, as
// near as the coordinator can tell: a kill when its command returns, a cut
// when the node says it is about to go (plus the pause it makes first).
func (j *failureJob) inject(ctx context.Context, victim, rdzv *orchestrator.Node) error {
	f := j.f
	switch f.Inject {
	case "kill-worker", "kill-node", "reboot":
		// The kill happens as the node says it: its first line's arrival,
		// not the command's return (a loaded node takes seconds to end
		// the session). So a long deadline costs the figure nothing, and a
		// loaded node gets the time to find the job: at 1,000 simulated
		// nodes on two cores the kill command outlasted 20 s.
		var at float64
		out, err := j.nodeLines(ctx, victim, injectWithin, func(line string) {
			if at == 0 && (strings.HasPrefix(line, "killed ") || strings.HasPrefix(line, "rebooting ")) {
				at = j.now()
			}
		}, f.Inject)
		if at == 0 {
			at = j.now()
		}
		j.res.InjectedAt = at
		j.act(victim.Name, f.Inject, out)
		if err != nil && f.Inject != "reboot" {
			return fmt.Errorf("%s: %s: %w: %s", victim.Name, f.Inject, err, strings.TrimSpace(out))
		}
	case "delete-pod":
		pd, ok := victim.Exec().(remote.PodDeleter)
		if !ok {
			return fmt.Errorf("%s: delete-pod: the node is not reached through a pod of the window (transport kubernetes)", victim.Name)
		}
		dctx, cancel := context.WithTimeout(ctx, injectWithin)
		pod, err := pd.DeletePod(dctx)
		cancel()
		// From the API's word: the pod's processes end within its grace
		// period after it, which is part of what the failure costs.
		j.res.InjectedAt = j.now()
		if err != nil {
			j.act(victim.Name, f.Inject, err.Error())
			return fmt.Errorf("%s: delete-pod: %w", victim.Name, err)
		}
		j.mu.Lock()
		j.deleted = pd
		j.mu.Unlock()
		j.act(victim.Name, f.Inject, "pod "+pod+" deleted through the Kubernetes API")
	case "cut":
		secs := strconv.Itoa(int(f.CutFor.Seconds()))
		// The session dies with the link: the line before the cut is the
		// proof that it happened.
		var at float64
		out, _ := j.nodeLines(ctx, victim, 5*time.Second, func(line string) {
			if strings.HasPrefix(line, "cut dev=") {
				at = j.now() + cutPause.Seconds()
			}
		}, "cut", secs, remote.Quote(j.w.FabricHost(rdzv)))
		j.res.InjectedAt = at
		j.act(victim.Name, "cut for "+f.CutFor.String(), out)
		if !strings.Contains(out, "cut dev=") {
			return fmt.Errorf("%s: the cut did not happen: %s", victim.Name, strings.TrimSpace(out))
		}
	}
	return nil
}
