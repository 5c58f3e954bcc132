package phases

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/remote/fake"
)

// podNode is a fake host's executor as the Kubernetes transport's would
// be: its commands run in a pod whose image the API reports.
type podNode struct {
	remote.Executor
	img remote.PodImage
	err error
	ip  string
}

func (p podNode) PodImage(context.Context) (remote.PodImage, error) { return p.img, p.err }
func (p podNode) PodIP() string                                     { return p.ip }

// On nodes that are pods the image phase pulls and loads nothing: IMG-001
// holds the pod's imageID to the pin (a repo digest or the config digest,
// the pod's start its figure), IMG-002 runs the smoke command in the pod;
// a pod running another image fails and leaves the window, one whose
// status the API would not give is NOT MEASURED; no podman or docker is
// asked for on any of them.
func TestImageOfPods(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	inv := fakeInventory(t, 5, "image: {reference: \"registry.example/train@sha256:"+pin+"\"}\n")
	f := fakeFleet(inv)
	for _, n := range inv.Nodes {
		f.Host(n.Name).Reply(`^nvidia-smi -L 2>&1$`, fake.Reply{Stdout: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"})
	}
	created := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	images := map[string]podNode{
		"h1": {img: remote.PodImage{Image: "registry.example/train@sha256:" + pin, ImageID: "registry.example/train@sha256:" + pin, Created: created, Started: created.Add(41 * time.Second)}},
		"h2": {img: remote.PodImage{Image: "localhost/train:1", ImageID: "sha256:" + pin, Created: created, Started: created.Add(time.Hour), Restarts: 2}},
		"h3": {img: remote.PodImage{Image: "registry.example/train:latest", ImageID: "registry.example/train@sha256:" + other, Created: created, Started: created}},
		"h5": {img: remote.PodImage{Image: "localhost/train:1", ImageID: "sha256:" + other, Created: created, Started: created}},
		"h4": {err: errors.New("h4: kubernetes: pod gpuaccept-h4-1: the server was unable to return a response in the time allotted")},
	}
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		e, err := f.Dial(ctx, c)
		if err != nil {
			return nil, err
		}
		p := images[c.Name]
		p.Executor = e
		return p, nil
	}
	rec, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, Image, Teardown},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: dial, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node, id string
		want     record.Status
		measured string
	}{
		{"h1", "IMG-001", record.Pass, "the pod's imageID sha256:abababababab (pod started in 41 s)"},
		{"h1", "IMG-002", record.Pass, "GPU 0: NVIDIA H100 80GB HBM3"},
		{"h2", "IMG-001", record.Pass, "the pod's imageID sha256:abababababab"},
		{"h5", "IMG-001", record.Skip, ""},
		{"h3", "IMG-001", record.Fail, "sha256:cdcdcdcdcdcd"},
		{"h4", "IMG-001", record.Skip, ""},
		{"h4", "IMG-002", record.Skip, ""},
	} {
		v := verdictOf(t, rec, c.id, c.node)
		if v.Status != c.want || !strings.Contains(v.Measured, c.measured) {
			t.Errorf("%s %s: %s %q | %s, want %s %q", c.node, c.id, v.Status, v.Measured, v.Detail, c.want, c.measured)
		}
	}
	if v := verdictOf(t, rec, "IMG-001", "h3"); !strings.Contains(v.Detail, "not the pin sha256:abababababab") {
		t.Errorf("h3: %s", v.Detail)
	}
	if v := verdictOf(t, rec, "IMG-001", "h4"); v.Incomplete == "" || !strings.Contains(v.Detail, "not read from the API") {
		t.Errorf("h4: %+v", v)
	}
	// A restarted container's start is no figure of the pod's.
	if v := verdictOf(t, rec, "IMG-001", "h2"); v.Value != nil || !strings.Contains(v.Detail, "restarted 2 time(s)") {
		t.Errorf("h2: %+v", v)
	}
	// A bare config digest says nothing of a manifest's pin: not measured,
	// and the node stays.
	if v := verdictOf(t, rec, "IMG-001", "h5"); v.Incomplete == "" || !strings.Contains(v.Detail, "only the image's config digest") || rec.Nodes[4].Quarantined {
		t.Errorf("h5: %+v (quarantined %v)", v, rec.Nodes[4].Quarantined)
	}
	if v := verdictOf(t, rec, "IMG-001", "h1"); v.Value == nil || *v.Value != 41 {
		t.Errorf("h1's figure: %+v", v.Value)
	}
	for _, n := range inv.Nodes {
		for _, c := range f.Host(n.Name).Calls() {
			if teardown := strings.Contains(c.Command, "# gpuaccept teardown"); !teardown &&
				(strings.Contains(c.Command, "podman") || strings.Contains(c.Command, "docker")) {
				t.Errorf("%s: a container runtime was asked: %s", n.Name, c.Command)
			}
		}
	}
	if q := rec.Nodes[2]; q.Quarantined == false {
		t.Errorf("h3, running another image, stayed in the window")
	}
}
