package phases

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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
	if res.Archive != nil {
		v := record.NewVerdict("IMG-003", "")
		v.Status = record.Pass
		got, via := 0, map[string]int{}
		for _, ni := range res.Nodes {
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
		v.Measured = fmt.Sprintf("%s to %d of %d node(s) in %.1f s (%s)", humanSize(res.Archive.Bytes), got, len(res.Nodes), res.DistributionSecs, how)
		if res.DistributionSecs > 0 {
			v.Measure(res.DistributionSecs, record.UnitSeconds)
		}
		if got < len(res.Nodes) {
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
		case ni.Match:
			match.Status, match.Measured = record.Pass, fmt.Sprintf("image ID sha256:%s (%s %.1f s)", shortHex(ni.ID), loadVerb(res.Mode), ni.LoadSecs)
			if ni.LoadSecs > 0 {
				match.Measure(ni.LoadSecs, record.UnitSeconds)
			}
		default:
			match.Status, match.Measured, match.Detail = record.Fail, "sha256:"+shortHex(ni.ID), firstNonEmpty(ni.Error, pr.Error)
		}
		out = append(out, match)
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
