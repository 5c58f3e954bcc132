package phases

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// pyxisStepCmd matches the image phase's step on the fake login node.
var pyxisStepCmd = regexp.MustCompile(`^srun --jobid=7 --overlap --nodes=1 --ntasks=1 --nodelist=(\S+) --job-name=gpuaccept-\S+-image --container-image=(\S+) --container-name=(gpuaccept-\S+) nvidia-smi -L 2>&1$`)

// pyxisWindow runs the image phase in the window's own allocation of
// h1, h2 (slurmLogin), the login node's srun answering help as help says
// and each step as step does for its node.
func pyxisWindow(t *testing.T, help string, step func(node, uri string) fake.Reply) (*record.Run, *fake.Host) {
	t.Helper()
	return pyxisWindowWith(t, help, step, "", nil)
}

// pyxisWindowWith is pyxisWindow with more inventory, the phases after
// the image phase, and the fleet and its login node scripted further by
// script.
func pyxisWindowWith(t *testing.T, help string, step func(node, uri string) fake.Reply, more string, script func(*fake.Fleet, *fake.Host), after ...orchestrator.Phase) (*record.Run, *fake.Host) {
	t.Helper()
	named := fakeInventory(t, 2, "")
	f := fakeFleet(named)
	login := slurmLogin(f, false)
	login.Reply(`^srun --help 2>&1$`, fake.Reply{Stdout: help})
	login.On(`^srun --jobid=7 `, func(c *fake.Call) fake.Reply {
		m := pyxisStepCmd.FindStringSubmatch(c.Command)
		if m == nil {
			return fake.Reply{Exit: 1, Stderr: "fake: unscripted srun: " + c.Command}
		}
		return step(m[1], strings.Trim(m[2], "'"))
	})
	if script != nil {
		script(f, login)
	}
	pin := strings.Repeat("5d", 32)
	inv := slurmInventory(t, "image:\n  reference: \"10.231.0.2:5000/gpuaccept-lab:1@sha256:"+pin+"\"\n  runtime: pyxis\n  gpus: none\n"+more)
	return runFake(t, inv, f, append([]orchestrator.Phase{Image}, after...)...), login
}

// TestImageThroughPyxis: each node imports the pin with its own step of
// the window's job under srun --container-image (enroot's URI of the
// pin); the digest Pyxis names is checked against the pin; a node whose
// import failed is named with enroot's error, and left out.
func TestImageThroughPyxis(t *testing.T) {
	pin := strings.Repeat("5d", 32)
	uri := "10.231.0.2:5000#gpuaccept-lab:sha256:" + pin
	rec, login := pyxisWindow(t, srunHelpPyxis, func(node, got string) fake.Reply {
		if got != uri {
			return fake.Reply{Exit: 1, Stdout: "slurmstepd: error: pyxis:     [ERROR] Invalid image reference: docker://" + got + "\n"}
		}
		if node == "h2" {
			return fake.Reply{Exit: 1, Stdout: strings.ReplaceAll(pyxisImportFailed, "nosuch:1", got)}
		}
		return fake.Reply{Stdout: "pyxis: importing docker image: " + uri + "\npyxis: imported docker image: " + uri + "\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"}
	})
	if login.Ran(`--container-image=`) != 2 {
		t.Errorf("%d import steps, want one per node", login.Ran(`--container-image=`))
	}
	if v := verdictOf(t, rec, "IMG-001", "h1"); v.Status != record.Pass || !strings.Contains(v.Measured, "enroot pulled sha256:5d5d5d5d5d5d by digest") {
		t.Errorf("IMG-001 h1: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "IMG-002", "h1"); v.Status != record.Pass || !strings.Contains(v.Measured, "GPU 0: NVIDIA H100") {
		t.Errorf("IMG-002 h1: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "IMG-001", "h2"); v.Status != record.Fail || !strings.Contains(v.Detail, "initializing source docker://registry-1.docker.io") {
		t.Errorf("IMG-001 h2: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "IMG-003", ""); v.Status != record.Fail || !strings.Contains(v.Measured, "by 1 of 2 node(s)") {
		t.Errorf("IMG-003: %s %q", v.Status, v.Measured)
	}
	if r := resultOf(t, rec, "image", -1); !strings.Contains(string(r.Data), `"uri":"`+uri+`"`) {
		t.Errorf("image data: %s", r.Data)
	}
}

// TestImagePyxisOtherDigest: Pyxis imported an image whose digest is not
// the pin: FAIL, naming both.
func TestImagePyxisOtherDigest(t *testing.T) {
	other := "10.231.0.2:5000#gpuaccept-lab:sha256:" + strings.Repeat("ee", 32)
	rec, _ := pyxisWindow(t, srunHelpPyxis, func(node, uri string) fake.Reply {
		return fake.Reply{Stdout: "pyxis: imported docker image: " + other + "\nok\n"}
	})
	if v := verdictOf(t, rec, "IMG-001", "h1"); v.Status != record.Fail || !strings.Contains(v.Detail, "Pyxis imported "+other+", not the pin's ") || !strings.Contains(v.Detail, ":sha256:5d5d") {
		t.Errorf("IMG-001 h1: %s %q %q", v.Status, v.Measured, v.Detail)
	}
}

// TestImageWithoutPyxis: the login node's srun has no --container-image:
// no step is run, every image verdict is SKIP with the reason, NOT
// MEASURED (never a FAIL, never a PASS: the window is INCOMPLETE), and the
// window goes on.
func TestImageWithoutPyxis(t *testing.T) {
	help := strings.Split(srunHelpPyxis, "Options provided by plugins:")[0]
	rec, login := pyxisWindow(t, help, func(string, string) fake.Reply {
		t.Error("a step ran with --container-image on a cluster without Pyxis")
		return fake.Reply{Exit: 1}
	})
	if login.Ran(`--container-image`) != 0 {
		t.Error("srun was given --container-image")
	}
	for _, c := range []struct{ id, node string }{{"IMG-001", "h1"}, {"IMG-002", "h1"}, {"IMG-001", "h2"}, {"IMG-002", "h2"}, {"IMG-003", ""}} {
		v := verdictOf(t, rec, c.id, c.node)
		if v.Status != record.Skip || v.Detail != pyxisNoOption || v.Incomplete != pyxisNoOption {
			t.Errorf("%s %s: %s %q %q (incomplete %q)", c.id, c.node, v.Status, v.Measured, v.Detail, v.Incomplete)
		}
	}
	if r := resultOf(t, rec, "image", -1); r.Outcome != record.OK {
		t.Errorf("image phase: %s %s", r.Outcome, r.Error)
	}
	if r := resultOf(t, rec, "teardown", 1); r.Outcome != record.OK {
		t.Errorf("the window did not go on to h2's teardown: %s %s", r.Outcome, r.Error)
	}
}

// TestImageArgsOf: the collectives get --container-image (quoted: enroot's
// URI has a '#') only where the image phase imported through Pyxis.
func TestImageArgsOf(t *testing.T) {
	uri := "10.231.0.2:5000#lab:sha256:" + strings.Repeat("5d", 32)
	ok := &Imaged{Pyxis: &PyxisImport{URI: uri}, Nodes: map[string]*NodeImage{"h1": {Match: true}, "h2": {Error: "x"}}}
	if got := imageArgsOf("pyxis", "R1", ok); len(got) != 2 || got[0] != "--container-image='"+uri+"'" || got[1] != "--container-name=gpuaccept-R1" {
		t.Errorf("imported: %q", got)
	}
	for name, c := range map[string]struct {
		rt  string
		res *Imaged
	}{
		"podman":       {"podman", ok},
		"no Pyxis":     {"pyxis", &Imaged{Pyxis: &PyxisImport{URI: uri, Skip: pyxisNoOption}, Nodes: ok.Nodes}},
		"none took":    {"pyxis", &Imaged{Pyxis: &PyxisImport{URI: uri}, Nodes: map[string]*NodeImage{"h1": {Error: "x"}}}},
		"no phase ran": {"pyxis", &Imaged{}},
	} {
		if got := imageArgsOf(c.rt, "R1", c.res); got != nil {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// A step Slurm never ran says so in srun's words: nothing imported.
func TestPyxisStepNotStarted(t *testing.T) {
	w := parsePyxis("srun: error: Unable to create step for job 7: Requested node configuration is not available\n")
	if w.notStarted() == "" || len(w.Imported) != 0 {
		t.Errorf("a step that never ran: %+v", w)
	}
}

// TestImagePyxisUnverifiedNotCounted: a node whose Pyxis named no image
// is not known to hold the pin: IMG-003 counts only h1 and is NOT MEASURED
// for h2 with the reason (never a PASS over it); where another node's
// import failed, IMG-003 FAILs and still names the node not measured.
func TestImagePyxisUnverifiedNotCounted(t *testing.T) {
	pin := strings.Repeat("5d", 32)
	uri := "10.231.0.2:5000#gpuaccept-lab:sha256:" + pin
	imported := fake.Reply{Stdout: "pyxis: imported docker image: " + uri + "\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"}
	const why = "Pyxis did not say which image it imported: the pin is not checked"
	rec, _ := pyxisWindow(t, srunHelpPyxis, func(node, _ string) fake.Reply {
		if node == "h2" {
			return fake.Reply{Stdout: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n"}
		}
		return imported
	})
	v := verdictOf(t, rec, "IMG-003", "")
	if v.Status != record.Skip || v.Incomplete != "h2: "+why || !strings.Contains(v.Measured, "by 1 of 2 node(s)") {
		t.Errorf("IMG-003 with h2 unverified: %s %q %q (incomplete %q)", v.Status, v.Measured, v.Detail, v.Incomplete)
	}
	if v := verdictOf(t, rec, "IMG-001", "h2"); v.Status != record.Skip || v.Incomplete != why {
		t.Errorf("IMG-001 h2: %s %q (incomplete %q)", v.Status, v.Detail, v.Incomplete)
	}
	if res := rec.Result(); slices.Contains(res.Failed, "IMG-003") || !slices.Contains(res.Incomplete, "cluster: h2: "+why) {
		t.Errorf("window: failed %v, incomplete %q", res.Failed, res.Incomplete)
	}

	rec, _ = pyxisWindow(t, srunHelpPyxis, func(node, got string) fake.Reply {
		if node == "h2" {
			return fake.Reply{Exit: 1, Stdout: strings.ReplaceAll(pyxisImportFailed, "nosuch:1", got)}
		}
		return fake.Reply{Stdout: "ok\n"}
	})
	if v := verdictOf(t, rec, "IMG-003", ""); v.Status != record.Fail || v.Detail != "not measured on h1: "+why || !strings.Contains(v.Measured, "by 0 of 2 node(s)") {
		t.Errorf("IMG-003 with h1 unverified, h2 failed: %s %q %q", v.Status, v.Measured, v.Detail)
	}
}

// TestPyxisReachGroupsReasons: many nodes with the same reason are one
// host range; each reason once.
func TestPyxisReachGroupsReasons(t *testing.T) {
	const unv, ns = "Pyxis did not say which image it imported", "srun did not run the import step: x"
	res := Imaged{Pyxis: &PyxisImport{URI: "u", Secs: 2}, Nodes: map[string]*NodeImage{
		"gpu-01": {Match: true}, "gpu-02": {Unverified: unv}, "gpu-03": {Unverified: unv}, "gpu-04": {Unverified: unv},
		"gpu-05": {NotMeasured: ns},
	}}
	v := pyxisReach(res)
	want := "gpu-[02-04]: " + unv + "; gpu-05: " + ns
	if v.Status != record.Skip || v.Incomplete != want {
		t.Errorf("%s %q, want SKIP %q", v.Status, v.Incomplete, want)
	}
}

// allReducePerfMissing is what the lab's Slurm 22.05 printed of an
// all-reduce step whose image had no all_reduce_perf (srun --label).
const allReducePerfMissing = `0: slurmstepd-h1: error: execve(): all_reduce_perf: No such file or directory
1: slurmstepd-h2: error: execve(): all_reduce_perf: No such file or directory
srun: error: h1: task 0: Exited with exit code 2
srun: error: h2: task 1: Exited with exit code 2
`

// TestPyxisBenchmarkMissingInTheImage: the all-reduce runs in the pinned
// image, and the image has no all_reduce_perf: a tool missing, NOT
// MEASURED (the window INCOMPLETE, naming what and where), never a FAIL;
// the sweep is not repeated or retested, the nodes not left out.
func TestPyxisBenchmarkMissingInTheImage(t *testing.T) {
	pin := strings.Repeat("5d", 32)
	uri := "10.231.0.2:5000#gpuaccept-lab:sha256:" + pin
	const more = "phases:\n  allreduce:\n    enabled: true\n    launcher: srun\n    repeats: 3\nacceptance:\n  retest: 2\n"
	var fleet *fake.Fleet
	rec, login := pyxisWindowWith(t, srunHelpPyxis, func(node, _ string) fake.Reply {
		return fake.Reply{Stdout: "pyxis: imported docker image: " + uri + "\nok\n"}
	}, more, func(f *fake.Fleet, login *fake.Host) {
		fleet = f
		login.On(`srun --nodes=2 `, func(c *fake.Call) fake.Reply {
			return fake.Reply{Exit: 2, Stderr: allReducePerfMissing}
		})
	}, AllReduce)
	if n := login.Ran(`srun --nodes=2 `); n != 1 {
		t.Errorf("%d all-reduce steps, want 1 (no repeat or retest finds the binary)", n)
	}
	// Every step runs in the window's one named container on each node:
	// the import step creates it, the all-reduce's reuses it.
	name := "--container-name=gpuaccept-" + rec.ID + " "
	if n, all := login.Ran(`--container-image=`), login.Ran(regexp.QuoteMeta(name)); n != 3 || all != 3 {
		t.Errorf("%d steps in the image, %d of them naming the container %q:\n%s", n, all, name, strings.Join(login.Commands(), "\n"))
	}
	// Pyxis keeps a named container: teardown removes it on each node.
	for i, h := range []string{"h1", "h2"} {
		if fleet.Host(h).Ran(`^GPUACCEPT_TEARDOWN_ENROOT=gpuaccept-`+regexp.QuoteMeta(rec.ID)+` .*bash -c `) != 1 {
			t.Errorf("%s: teardown not told the window's container:\n%s", h, strings.Join(fleet.Host(h).Commands(), "\n"))
		}
		if r := resultOf(t, rec, "teardown", i); r.Outcome != record.OK {
			t.Errorf("%s: teardown %s %q", h, r.Outcome, r.Error)
		}
	}
	for _, v := range rec.Verdicts {
		if v.Status == record.Fail && (strings.HasPrefix(v.ID, "NCCL-") || v.ID == "WIN-001") {
			t.Errorf("%s %s: FAIL %q %q", v.ID, v.Node, v.Measured, v.Detail)
		}
	}
	const why = "all_reduce_perf not in the pinned image (image.reference) on h[1-2]: all_reduce_perf not measured"
	for _, id := range []string{"NCCL-001", "NCCL-002"} {
		if v := verdictOf(t, rec, id, ""); v.Status != record.Skip || v.Incomplete != why {
			t.Errorf("%s: %s %q %q (incomplete %q)", id, v.Status, v.Measured, v.Detail, v.Incomplete)
		}
	}
	if r := resultOf(t, rec, "allreduce", -1); r.Outcome != record.NotMeasured {
		t.Errorf("allreduce phase: %s %q", r.Outcome, r.Error)
	}
}

// TestMissingInImage: slurmstepd's words for the benchmark, with or
// without srun's label, and only for the benchmark.
func TestMissingInImage(t *testing.T) {
	inv := fakeInventory(t, 3, "")
	w := &orchestrator.Window{Inv: inv}
	var nodes []*orchestrator.Node
	for i, n := range inv.Nodes {
		nodes = append(nodes, &orchestrator.Node{Name: n.Name, Index: i})
	}
	for out, want := range map[string]string{
		allReducePerfMissing: "all_reduce_perf not in the pinned image (image.reference) on h[1-2]: all_reduce_perf not measured",
		"slurmstepd: error: execve(): /opt/nccl-tests/all_reduce_perf: No such file or directory\n": "all_reduce_perf not in the pinned image (image.reference): all_reduce_perf not measured",
		"slurmstepd-h3: error: execve(): all_gather_perf: No such file or directory\n":              "",
		"srun: error: h1: task 0: Exited with exit code 2\n":                                        "",
		"all_reduce_perf: error: execve(): all_reduce_perf: No such file or directory\n":            "",
	} {
		if got := missingInImage(out, "all_reduce_perf", w, nodes); got != want {
			t.Errorf("%q:\n got %q\nwant %q", out, got, want)
		}
	}
}

// TestCollectiveMissingInTheImage: a collective whose benchmark the image
// lacks leaves NCCL-005 NOT MEASURED; beside one that failed, FAIL naming
// both.
func TestCollectiveMissingInTheImage(t *testing.T) {
	const why = "all_gather_perf not in the pinned image (image.reference): all_gather_perf not measured"
	missing := Sweep{Error: why, NotMeasured: why}
	v := collectivesVerdict(Sweeps{Collectives: map[string]Sweep{"all_gather": missing}})
	if v.Status != record.Skip || v.Incomplete != why {
		t.Errorf("NCCL-005: %s %q (incomplete %q)", v.Status, v.Detail, v.Incomplete)
	}
	// Nothing failed that pairs of nodes could find (the lab ran 6 pairs
	// for it, then called the fabric fine).
	if unnamedFailure(Sweeps{Repeats: []Sweep{{}}, Collectives: map[string]Sweep{"all_gather": missing}}) {
		t.Error("a collective the image lacks sent the window looking for a fault with pairs of nodes")
	}
	v = collectivesVerdict(Sweeps{Collectives: map[string]Sweep{"all_gather": missing, "sendrecv": {Error: "exit 1"}}})
	if v.Status != record.Fail || v.Detail != "sendrecv: exit 1; "+why {
		t.Errorf("NCCL-005 beside a failure: %s %q", v.Status, v.Detail)
	}
}
