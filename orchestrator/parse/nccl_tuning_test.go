package parse

import (
	"slices"
	"testing"
)

func TestNCCLChoices(t *testing.T) {
	n := NCCL{Algorithms: []string{
		"gpu-01:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring",
		"gpu-01:1:1 [0] NCCL INFO 67108864 Bytes -> Algo 1 proto 2 time 725.272014",
		"gpu-01:1:1 [0] NCCL INFO 8589934592 Bytes -> Algo 1 proto 2 time 92811.088058",
		"gpu-01:1:1 [0] NCCL INFO 1024 Bytes -> Algo 0 proto 0 time 12.000000",
		"node1:1:1 [0] NCCL INFO Best tuning, algorithm, NVLS, protocol, SIMPLE",
		"node1:1:1 [0] NCCL INFO NCCL_PROTO set by environment to LL128",
		"node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0 Ring/Simple",
	}}
	var got []string
	for _, c := range n.Choices() {
		got = append(got, c.String())
	}
	want := []string{"NCCL_ALGO=Ring (environment)", "Ring/Simple (64MiB..8GiB)", "Tree/LL (1KiB..1KiB)", "NVLS/Simple", "NCCL_PROTO=LL128 (environment)"}
	if !slices.Equal(got, want) {
		t.Errorf("choices\n got %q\nwant %q", got, want)
	}
	if len((NCCL{}).Choices()) != 0 {
		t.Error("choices from nothing")
	}
}
