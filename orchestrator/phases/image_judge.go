package phases

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// judgeImage: per node, whether its image is the pin (IMG-001) and starts
// with the GPUs (IMG-002); for a pushed archive, how it reached the nodes
// (IMG-003).
func judgeImage(w *orchestrator.Window) []record.Verdict {
	var res Imaged
	pr, ok := w.Result("image", -1, &res)
	if !ok || w.Inv.Image.Reference == "" {
		return nil
	}
	var out []record.Verdict
	if px := res.Pyxis; px != nil && px.Skip != "" {
		return skippedImage(w, res, px.Skip)
	}
	if px := res.Pyxis; px != nil {
		out = append(out, pyxisReach(res))
	}
	if res.Archive != nil {
		v := record.NewVerdict("IMG-003", "")
		v.Status = record.Pass
		got, sent, via := 0, 0, map[string]int{}
		for _, ni := range res.Nodes {
			if ni.Pod != "" {
				continue // a pod's image is the cluster's to pull, not the archive's
			}
			sent++
			if ni.Via != "" {
				got++
				via[ni.Via]++
			}
		}
		// How the copies went, where not all the relay's way (a chain or
		// sbcast that fell back to direct uploads).
		how := res.Relay
		if len(via) > 1 || len(via) == 1 && via[res.Relay] == 0 {
			var parts []string
			for _, r := range slices.Sorted(maps.Keys(via)) {
				parts = append(parts, fmt.Sprintf("%s %d", r, via[r]))
			}
			how = strings.Join(parts, ", ")
		}
		v.Measured = fmt.Sprintf("%s to %d of %d node(s) in %.1f s (%s)", humanSize(res.Archive.Bytes), got, sent, res.DistributionSecs, how)
		if res.DistributionSecs > 0 {
			v.Measure(res.DistributionSecs, record.UnitSeconds)
		}
		if got < sent {
			v.Status = record.Fail
		}
		out = append(out, v)
	}
	for _, n := range w.Nodes {
		ni, ok := res.Nodes[n.Name]
		if !ok {
			continue
		}
		match := record.NewVerdict("IMG-001", n.Name)
		match.Quoted = "sha256:" + shortHex(res.Pin)
		if ni.NotMeasured != "" {
			started := record.NewVerdict("IMG-002", n.Name)
			notMeasured(&match, ni.NotMeasured)
			notMeasured(&started, ni.NotMeasured)
			out = append(out, match, started)
			continue
		}
		switch {
		case ni.Unverified != "":
			notMeasured(&match, ni.Unverified)
		case ni.Match && res.Pyxis != nil:
			// enroot pulled by the pin's digest and checked the layers
			// against that manifest; it does not hash the manifest.
			match.Status, match.Measured = record.Pass, fmt.Sprintf("enroot pulled sha256:%s by digest (srun step of %.1f s: import, start, smoke)", shortHex(ni.ID), ni.LoadSecs)
			if ni.LoadSecs > 0 {
				match.Measure(ni.LoadSecs, record.UnitSeconds)
			}
		case ni.Match && ni.Pod != "":
			// The cluster's word on the container the window's commands
			// ran in; the pod's start holds the pull, in whole seconds.
			match.Status, match.Measured = record.Pass, fmt.Sprintf("the pod's imageID sha256:%s (pod started in %.0f s)", shortHex(ni.ID), ni.LoadSecs)
			if ni.PodStart != "" {
				match.Measured = fmt.Sprintf("the pod's imageID sha256:%s", shortHex(ni.ID))
				match.Detail = ni.PodStart
			} else if ni.LoadSecs > 0 {
				match.Measure(ni.LoadSecs, record.UnitSeconds)
			}
		case ni.Match:
			match.Status, match.Measured = record.Pass, fmt.Sprintf("image ID sha256:%s (%s %.1f s)", shortHex(ni.ID), loadVerb(res.Mode), ni.LoadSecs)
			if ni.LoadSecs > 0 {
				match.Measure(ni.LoadSecs, record.UnitSeconds)
			}
		default:
			match.Status, match.Measured, match.Detail = record.Fail, "sha256:"+shortHex(ni.ID), firstNonEmpty(ni.Error, pr.Error)
		}
		out = append(out, match)
		if ni.Unverified != "" {
			// Which image ran is not known: its start says nothing of the pin.
			started := record.NewVerdict("IMG-002", n.Name)
			notMeasured(&started, ni.Unverified)
			out = append(out, started)
			continue
		}
		if ni.Smoke != nil {
			sv := record.NewVerdict("IMG-002", n.Name)
			sv.Measured = fmt.Sprintf("%.2f s: %s", ni.Smoke.Secs, firstLine(ni.Smoke.Output))
			sv.Status = record.Pass
			if ni.Smoke.Error != "" {
				sv.Status, sv.Detail = record.Fail, ni.Smoke.Error
			} else if ni.Smoke.Secs > 0 {
				sv.Measure(ni.Smoke.Secs, record.UnitSeconds)
			}
			out = append(out, sv)
		}
	}
	return out
}

func loadVerb(mode string) string {
	if mode == "push" {
		return "loaded in"
	}
	return "pulled in"
}

func shortHex(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// skippedImage: the image phase imported nothing (the cluster has no
// Pyxis): every node's IMG-001 and IMG-002, and IMG-003, are SKIP with the
// reason, neither a failure of the nodes nor a pass. NOT MEASURED: the
// inventory asked for the pinned image under Pyxis, and no node's image was
// checked, so the window is INCOMPLETE, not accepted without it.
func skippedImage(w *orchestrator.Window, res Imaged, why string) []record.Verdict {
	reach := record.NewVerdict("IMG-003", "")
	notMeasured(&reach, why)
	out := []record.Verdict{reach}
	for _, n := range w.Nodes {
		if _, ok := res.Nodes[n.Name]; !ok {
			continue
		}
		for _, id := range []string{"IMG-001", "IMG-002"} {
			v := record.NewVerdict(id, n.Name)
			notMeasured(&v, why)
			if id == "IMG-001" {
				v.Quoted = "sha256:" + shortHex(res.Pin)
			}
			out = append(out, v)
		}
	}
	return out
}

// pyxisReach is IMG-003 under Pyxis: every node imported the pin from its
// registry, timed from the first step's start to the last one's end. Only
// a node whose Pyxis named the pin counts as reached: one whose Pyxis named
// no image (Unverified) or whose step Slurm never ran (NotMeasured) is not
// known to hold the pin, so IMG-003 is NOT MEASURED for it, never a PASS
// over it; a node whose import failed makes it FAIL, those not measured
// named beside.
func pyxisReach(res Imaged) record.Verdict {
	v := record.NewVerdict("IMG-003", "")
	got, failed := 0, 0
	// The same reason on many nodes is one line with a host range.
	unmeasured := map[string][]string{}
	for name, ni := range res.Nodes {
		switch {
		case ni.Match:
			got++
		case ni.Unverified != "":
			unmeasured[ni.Unverified] = append(unmeasured[ni.Unverified], name)
		case ni.NotMeasured != "":
			unmeasured[ni.NotMeasured] = append(unmeasured[ni.NotMeasured], name)
		default:
			failed++
		}
	}
	var why []string
	for _, r := range slices.Sorted(maps.Keys(unmeasured)) {
		why = append(why, hostlist.Compress(unmeasured[r])+": "+r)
	}
	v.Measured = fmt.Sprintf("imported through Pyxis by %d of %d node(s) in %.1f s", got, len(res.Nodes), res.Pyxis.Secs)
	if res.Pyxis.Secs > 0 {
		v.Measure(res.Pyxis.Secs, record.UnitSeconds)
	}
	switch {
	case failed > 0:
		v.Status = record.Fail
		if len(why) > 0 {
			v.Detail = "not measured on " + strings.Join(why, "; ")
		}
	case len(why) > 0:
		measured := v.Measured
		notMeasured(&v, strings.Join(why, "; "))
		v.Measured = measured + ", the rest not measured"
	default:
		v.Status = record.Pass
	}
	return v
}
