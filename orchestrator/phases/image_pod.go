package phases

import (
	"context"
	"fmt"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// A node reached through a cluster's API (transport kubernetes) runs the
// window's commands in a container the cluster started from the pinned
// reference: nothing is pulled or loaded on it. IMG-001 holds the image
// the runtime reports it ran (the pod's imageID) to the pin, and IMG-002
// is the smoke command run in that container, which already holds the
// node's GPUs.

// podImager is n's executor as a pod's, nil for any other.
func podImager(n *orchestrator.Node) remote.PodImager {
	if pi, ok := n.Exec().(remote.PodImager); ok {
		return pi
	}
	return nil
}

// podImages checks the pods' images of the nodes that are pods, all at
// once, and returns the others: the nodes the image is pulled or pushed to.
func podImages(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, res *Imaged) []*orchestrator.Node {
	var pods, rest []*orchestrator.Node
	var imagers []remote.PodImager
	for _, n := range nodes {
		if pi := podImager(n); pi != nil {
			pods, imagers = append(pods, n), append(imagers, pi)
		} else {
			rest = append(rest, n)
		}
	}
	remote.Each(ctx, len(pods), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		podImage(ctx, w, pods[i], imagers[i], res, res.Nodes[pods[i].Name])
		return nil, nil
	})
	return rest
}

// podImage checks the image of n's pod against the pin and runs the smoke
// command in it.
func podImage(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, pi remote.PodImager, res *Imaged, ni *NodeImage) {
	img, err := pi.PodImage(ctx)
	if err != nil {
		ni.NotMeasured = "the pod's image not read from the API: " + firstLine(err.Error())
		return
	}
	// The runtime's words are the node's: bounded.
	img.Image, img.ImageID = remote.Shorten(img.Image, 200), remote.Shorten(img.ImageID, 300)
	ni.Pod = img.ImageID
	switch {
	case img.Restarts > 0:
		ni.PodStart = fmt.Sprintf("the container restarted %d time(s): its start is not the pod's", img.Restarts)
	case img.Started.IsZero() || img.Created.IsZero() || img.Started.Before(img.Created):
		ni.PodStart = "the pod's start not reported"
	default:
		// The API's whole seconds: scheduling, the pull (if any), the start.
		ni.LoadSecs = img.Started.Sub(img.Created).Seconds()
	}
	ni.ID = podDigest(img.ImageID)
	repo, _, digested := strings.Cut(img.ImageID, "@sha256:")
	digested = digested && repo != ""
	if digested {
		ni.RepoDigests = []string{img.ImageID}
	}
	switch {
	case ni.ID == "":
		ni.NotMeasured = fmt.Sprintf("the runtime reports no image ID for the pod's container (image %q): the pin not checked", img.Image)
		return
	case ni.ID != res.Pin && !digested:
		// A bare sha256: is the image's config digest, what a runtime
		// reports of an image it holds by no registry's name; the pin is
		// a manifest's digest, which that says nothing about.
		ni.NotMeasured = fmt.Sprintf("the runtime reports only the image's config digest for the pod's container (%s, image %q): the pin sha256:%s, a manifest's digest, not checked",
			img.ImageID, img.Image, shortHex(res.Pin))
		return
	case ni.ID != res.Pin:
		ni.Error = fmt.Sprintf("the pod runs %s (imageID %s), not the pin sha256:%s", img.Image, img.ImageID, shortHex(res.Pin))
		return
	}
	ni.Match = true
	// The pod is the container: the smoke command runs in it as it is.
	words := make([]string, len(w.Inv.Image.Smoke))
	for i, a := range w.Inv.Image.Smoke {
		words[i] = remote.Quote(a)
	}
	ni.Smoke = runSmoke(ctx, w, n, strings.Join(words, " "))
}

// podDigest is the 64 hex digits of a container status's imageID:
// REPO@sha256:HEX, sha256:HEX, or docker-pullable://REPO@sha256:HEX as
// dockershim wrote it; "" when it names none.
func podDigest(imageID string) string {
	i := strings.LastIndex(imageID, "sha256:")
	if i < 0 {
		return ""
	}
	h := imageID[i+len("sha256:"):]
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return ""
	}
	return h
}
