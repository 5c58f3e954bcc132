package phases

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// behindInventory judges rate:8 against a TTFT, a throughput and an
// error rate (of 1 %).
func behindInventory() *inventory.Inventory {
	inv := &inventory.Inventory{}
	inv.Phases.Workload.Inference.Levels = []string{"rate:2", "rate:8"}
	w := &inv.Acceptance.Workload
	w.TTFT, w.OutputTokensPerSec = 800*time.Millisecond, 1000
	rate := 0.01
	w.ErrorRate = &rate
	return inv
}

// behindNode is one node whose server measured rate:8 as level (JSON,
// what loadgen run prints) says, every figure within its target.
func behindNode(t *testing.T, level string) infNodeResult {
	t.Helper()
	base := `{"name":"rate:8","rate":8,"seconds":60,"requests":200,"completed":200,"failed":0,"timed_out":0,"retried":0,
		"requests_per_s":8,"output_tokens_per_s":1500,"input_tokens_per_s":4000,
		"ttft_ms":{"n":200,"mean":100,"min":50,"p50":100,"p90":150,"p95":200,"p99":250,"max":300},
		"tpot_ms":{"n":200,"mean":20,"min":10,"p50":20,"p90":25,"p95":28,"p99":30,"max":35},
		"itl_ms":{"n":200,"mean":20,"min":10,"p50":20,"p90":25,"p95":28,"p99":30,"max":35},
		"e2el_ms":{"n":200,"mean":2000,"min":1000,"p50":2000,"p90":2500,"p95":2800,"p99":3000,"max":3500},
		"output_tokens":{"n":200,"mean":128,"min":128,"p50":128,"p90":128,"p95":128,"p99":128,"max":128}}`
	var lv workload.Level
	if err := json.Unmarshal([]byte(base), &lv); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(level), &lv); err != nil {
		t.Fatal(err)
	}
	ready := 13.0
	return infNodeResult{name: "h1", res: &workload.Inference{Servers: []workload.Server{{Port: 8000, ReadySecs: &ready,
		Levels: []workload.Level{lv}}}}}
}

func TestSendLagBound(t *testing.T) {
	for rate, want := range map[float64]float64{8: 12.5, 1000: 10, 0.5: 100, 1: 100, 4: 25} {
		if got := sendLagBound(rate); got != want {
			t.Errorf("rate %v: bound %v ms, want %v", rate, got, want)
		}
	}
}

// TestInferenceBehindSchedule: a level the generator kept (a lag under
// the bound) is judged; one cut short, with arrivals never sent, or sent
// too late is NOT MEASURED on the load figures (SKIP, INCOMPLETE naming
// why), never PASS; unsent arrivals count as failures in WORK-006, which
// may still fail on them.
func TestInferenceBehindSchedule(t *testing.T) {
	inv := behindInventory()
	ids := []string{"WORK-002", "WORK-005", "WORK-006"}
	for _, c := range []struct {
		name, level string
		want        map[string]record.Status // status by id; SKIP means NOT MEASURED with why
		why         string
		work006     string // WORK-006's Measured, when it is measured
	}{
		{"kept", `{"send_lag_p99_ms":12}`, map[string]record.Status{"WORK-002": record.Pass, "WORK-005": record.Pass, "WORK-006": record.Pass},
			"", "0% failed (0 of 200)"},
		{"cut short", `{"partial":true,"seconds":21.5,"send_lag_p99_ms":1}`,
			map[string]record.Status{"WORK-002": record.Skip, "WORK-005": record.Skip, "WORK-006": record.Skip},
			"the level was cut short (the load generator was stopped) after 21.5 s", ""},
		{"late", `{"send_lag_p99_ms":40}`,
			map[string]record.Status{"WORK-002": record.Skip, "WORK-005": record.Skip, "WORK-006": record.Skip},
			"the load generator fell behind its schedule at rate:8: requests sent up to 40 ms late at p99, over the 12.5 ms bound", ""},
		{"one unsent", `{"send_lag_p99_ms":2,"unsent":1}`,
			map[string]record.Status{"WORK-002": record.Skip, "WORK-005": record.Skip, "WORK-006": record.Skip},
			"the load generator fell behind its schedule at rate:8: 1 arrivals of the measured time never sent", ""},
		{"stalled", `{"send_lag_p99_ms":2,"unsent":50}`,
			map[string]record.Status{"WORK-002": record.Skip, "WORK-005": record.Skip, "WORK-006": record.Fail},
			"the load generator fell behind its schedule at rate:8: 50 arrivals of the measured time never sent",
			"20% failed (50 of 250, 50 of them never sent)"},
		{"late and failing", `{"send_lag_p99_ms":400,"failed":10,"completed":190,"errors":{"http 500":10}}`,
			map[string]record.Status{"WORK-002": record.Skip, "WORK-005": record.Skip, "WORK-006": record.Fail},
			"requests sent up to 400 ms late at p99", "5% failed (10 of 200)"},
	} {
		r := behindNode(t, c.level)
		for _, id := range ids {
			v := inferenceVerdict(inv, id, r)
			if v.Status != c.want[id] {
				t.Errorf("%s: %s %s, want %s: %+v", c.name, id, v.Status, c.want[id], v)
				continue
			}
			switch {
			case v.Status == record.Skip:
				if !strings.Contains(v.Incomplete, c.why) || v.Measured != "not measured" || v.Value != nil || v.Quoted == "" {
					t.Errorf("%s: %s not measured with %q: %+v", c.name, id, c.why, v)
				}
			case c.why != "" && id != "WORK-006":
				t.Errorf("%s: %s judged on a level behind its schedule: %+v", c.name, id, v)
			case id == "WORK-006" && v.Measured != c.work006:
				t.Errorf("%s: WORK-006 measured %q, want %q", c.name, v.Measured, c.work006)
			case id == "WORK-006" && v.Status == record.Fail && c.why != "" && !strings.Contains(v.Detail, c.why):
				t.Errorf("%s: WORK-006's detail %q does not say %q", c.name, v.Detail, c.why)
			}
		}
		// A behind level earns no retest: its figures did not fail.
		if got := infFails(inv, r.res.Servers); (got != "") != (c.want["WORK-006"] == record.Fail) {
			t.Errorf("%s: infFails %q", c.name, got)
		}
	}
}

// TestInferenceBehindOnOneServer: of a node's two servers, one whose
// generator fell behind leaves the node's load figures NOT MEASURED,
// naming the server.
func TestInferenceBehindOnOneServer(t *testing.T) {
	inv := behindInventory()
	r := behindNode(t, `{"send_lag_p99_ms":2}`)
	late := behindNode(t, `{"send_lag_p99_ms":2,"unsent":3}`).res.Servers[0]
	late.Index, late.Port = 1, 8001
	r.res.Servers = append(r.res.Servers, late)
	v := inferenceVerdict(inv, "WORK-005", r)
	if v.Status != record.Skip || !strings.Contains(v.Incomplete, "server 1: the load generator fell behind its schedule") || v.Value != nil {
		t.Errorf("WORK-005: %+v", v)
	}
	if v := inferenceVerdict(inv, "WORK-006", r); v.Status != record.Skip || !strings.HasPrefix(v.Incomplete, "server 1: ") {
		t.Errorf("WORK-006 (3 of 403 failed, under 1%%, on a level behind): %+v", v)
	}
}

// The server's start on the node's clock is read from the start command's
// first line; a date without %N (busybox's prints it as is) or another
// first line gives none, and the coordinator's clock serves.
func TestNodeStarted(t *testing.T) {
	for out, want := range map[string]string{
		"gpuaccept-started 1765000000.250000000\n4f3c2b1a\n": "1765000000.250000000",
		"gpuaccept-started 1765000000.%N\n4f3c2b1a\n":        "",
		"gpuaccept-started 1765000000\n4f3c2b1a\n":           "",
		"4f3c2b1a\n": "",
		"":           "",
	} {
		since, rest := nodeStarted([]byte(out))
		if since != want {
			t.Errorf("%q: since %q, want %q", out, since, want)
		}
		if strings.Contains(string(rest), "gpuaccept-started") {
			t.Errorf("%q: the mark is left in %q", out, rest)
		}
	}
}
