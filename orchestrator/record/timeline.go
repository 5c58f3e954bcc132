package record

import "slices"

// TimelineRows is how many nodes a timeline draws: the rendezvous node,
// the victim and the first others. A row per node of a 1,000-node job is
// a thousand lines nobody reads, and the job's ranks step together.
const TimelineRows = 8

// TimelineNodes are the nodes a timeline draws (of nodes, the job's in
// order, the rendezvous first): the rendezvous, the victim, then the next
// ones, TimelineRows at most.
func TimelineNodes(nodes []string, victim string) []string {
	if len(nodes) <= TimelineRows {
		return nodes
	}
	out := []string{nodes[0]}
	if victim != nodes[0] && slices.Contains(nodes, victim) {
		out = append(out, victim)
	}
	for _, n := range nodes[1:] {
		if len(out) == TimelineRows {
			break
		}
		if n != victim {
			out = append(out, n)
		}
	}
	return out
}
