package reports

import (
	"slices"

	"gpuaccept/orchestrator/record"
)

// spread is how much a run's own repeats of a figure differ: (max - min)
// over the median, for the verdict's figure, from the phase data that
// holds its repeats (the all-reduce's sweeps, a node's intra-node sweeps,
// a checkpoint's shards). 0 when the run measured it once. A change
// between two runs within what either run's repeats spread over is noise,
// not a regression.
func spread(r *record.Run, v record.Verdict) float64 {
	var xs []float64
	sweeps := func(phase, node string) {
		var d struct {
			Repeats []struct {
				Judgement *struct {
					BusBW struct {
						Median float64 `json:"median"`
					} `json:"busbw_gbs"`
				} `json:"judgement"`
			} `json:"repeats"`
		}
		if hasData(r, phase, node, &d) {
			for _, rep := range d.Repeats {
				if rep.Judgement != nil && rep.Judgement.BusBW.Median > 0 {
					xs = append(xs, rep.Judgement.BusBW.Median)
				}
			}
		}
	}
	shards := func(phase string) {
		var d struct {
			Shards []struct {
				Bytes   float64 `json:"bytes"`
				Seconds float64 `json:"seconds"`
			} `json:"shards"`
		}
		if hasData(r, phase, v.Node, &d) {
			for _, s := range d.Shards {
				if s.Seconds > 0 {
					xs = append(xs, s.Bytes/s.Seconds)
				}
			}
		}
	}
	switch v.ID {
	case "NCCL-002":
		sweeps("allreduce", "")
	case "NCCL-003":
		sweeps("intranode", v.Node)
	case "CKPT-002":
		shards("checkpoint-write")
	case "CKPT-003":
		shards("checkpoint-restore")
	case "CKPT-004":
		// The cluster's idle time is the slowest save and restore: as
		// noisy as the noisiest node's shards.
		var most float64
		for _, n := range r.Nodes {
			for _, id := range []string{"CKPT-002", "CKPT-003"} {
				most = max(most, spread(r, record.Verdict{ID: id, Node: n.Name}))
			}
		}
		return most
	}
	if len(xs) < 2 {
		return 0
	}
	slices.Sort(xs)
	med := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	if med <= 0 {
		return 0
	}
	return (xs[len(xs)-1] - xs[0]) / med
}

// checkpointEvery is the failure test's checkpoint interval in steps, for
// its steps-lost verdict (RECOV-002); 0 when not recorded.
func checkpointEvery(r *record.Run, v record.Verdict) int {
	if v.ID != "RECOV-002" {
		return 0
	}
	var d struct {
		Every int `json:"checkpoint_every"`
	}
	if hasData(r, "failure", v.Node, &d) {
		return d.Every
	}
	return 0
}

// timedOver is the seconds a node's throughput figure was timed over (its
// whole save, restore or staging: a checkpoint's shards go at once, so
// theirs would add up to more); 0 when the run does not say, and for the
// cluster's figures, which sum the nodes'.
func timedOver(r *record.Run, v record.Verdict) float64 {
	phase := map[string]string{"CKPT-002": "checkpoint-write", "CKPT-003": "checkpoint-restore", "STAGE-002": "staging"}[v.ID]
	if phase == "" || v.Node == "" {
		return 0
	}
	var d struct {
		Seconds float64 `json:"seconds"`
	}
	if hasData(r, phase, v.Node, &d) {
		return d.Seconds
	}
	return 0
}
