package parse

import (
	"os"
	"testing"
)

// TestNCCLJSONGenuine: the -J report of nccl-tests 2.19.6 on one H200
// (JSON_FILE_VERSION 3), the run beside the text sample of the same
// command. ncclSampleWants covers the text samples (*.txt) only.
func TestNCCLJSONGenuine(t *testing.T) {
	b, err := os.ReadFile(ncclSamplesDir + "/h200x1-nccl2.28.9-nccltests2.19.6-all-reduce-b8-e4G-g1-J.json")
	if err != nil {
		t.Fatalf("want the shared samples next to the module (/work/shared/samples): %v", err)
	}
	n, err := NCCLTests(string(b))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "ok", n.OK, true)
	eq(t, "collective (from args[0])", n.Collective, "all_reduce")
	eq(t, "nccl-tests version (the JSON has none)", n.Version, "")
	eq(t, "nccl version (22809)", n.NCCLVersion, "2.28.9")
	eq(t, "ranks", n.Ranks, []NCCLRank{{Rank: 0, Host: "vm", Device: 0, Name: "NVIDIA H200", PID: 2210}})
	eq(t, "avg busbw", n.AvgBusBW, 0.0)
	eq(t, "out of bounds", n.OutOfBounds, 0)
	eq(t, "errors", n.Errors, []NCCLError{})
	eq(t, "params", n.Params, map[string]string{"nThread": "1", "nGpus": "1", "minBytes": "8", "maxBytes": "4294967296",
		"step": "2(factor)", "warmup iters": "1", "iters": "20", "agg iters": "1", "validation": "1", "graph": "0"})
	if len(n.Rows) != 30 {
		t.Fatalf("%d rows, want 30", len(n.Rows))
	}
	eq(t, "row 0", n.Rows[0], NCCLRow{Size: 8, Count: 2, Type: "float", Redop: "sum", Root: iptr(-1),
		OOP: NCCLResult{TimeUS: 7.92495, AlgBW: 0.001009, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 0.4539, AlgBW: 0.017625, Wrong: i64(0)}})
	eq(t, "row 29", n.Rows[29], NCCLRow{Size: 4294967296, Count: 1073741824, Type: "float", Redop: "sum", Root: iptr(-1),
		OOP: NCCLResult{TimeUS: 2006.7388, AlgBW: 2140.272215, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 1.19105, AlgBW: 3606034.42005, Wrong: i64(0)}})
	checkOneRankBusBW(t, n)
	// The text run of the same command swept the same sizes.
	txt, err := NCCLTests(ncclSample(t, "h200x1-nccl2.28.9-nccltests2.19.6-all-reduce-b8-e4G-g1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range n.Rows {
		if r.Size != txt.Rows[i].Size || r.Count != txt.Rows[i].Count {
			t.Errorf("row %d: -J %d B (%d), text %d B (%d)", i, r.Size, r.Count, txt.Rows[i].Size, txt.Rows[i].Count)
		}
	}
}
