package record

import (
	"fmt"
	"slices"
	"testing"
)

func TestTimelineNodesDrawsTheRendezvousTheVictimAndTheFirstOthers(t *testing.T) {
	var nodes []string
	for i := 1; i <= 1000; i++ {
		nodes = append(nodes, fmt.Sprintf("gpu-%04d", i))
	}
	got := TimelineNodes(nodes, "gpu-0500")
	want := []string{"gpu-0001", "gpu-0500", "gpu-0002", "gpu-0003", "gpu-0004", "gpu-0005", "gpu-0006", "gpu-0007"}
	if !slices.Equal(got, want) {
		t.Errorf("1,000 nodes: %v, want %v", got, want)
	}
	if got := TimelineNodes(nodes[:3], "gpu-0002"); !slices.Equal(got, nodes[:3]) {
		t.Errorf("3 nodes: %v", got)
	}
	if got := TimelineNodes(nodes[:20], "gpu-0003"); len(got) != TimelineRows || got[1] != "gpu-0003" || slices.Index(got[2:], "gpu-0003") >= 0 {
		t.Errorf("20 nodes, victim among the first: %v", got)
	}
}
