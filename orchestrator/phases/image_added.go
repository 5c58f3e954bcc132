package phases

import (
	"context"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// addedList is the file that lists, one "RUNTIME sha256:ID" a line, the
// images this window put in the node's runtime; teardown.sh removes them.
// It is in the window's private directory on the node's own disk (a home
// may be shared by every node, and no other user may add a line that
// makes teardown remove their pick), and written before the load, so a
// window resumed after a crash still knows the image is its own.
func addedList(n *orchestrator.Node) string { return stateDir(n) + "/images" }

// held is what the node's runtime had before the window loaded or pulled
// the image, and what the window has listed as its own.
type held struct {
	runtime string
	known   bool            // the runtime listed its images
	before  map[string]bool // image IDs, "sha256:<hex>"
	ours    map[string]bool // IDs in the node's added list
	file    string
	keep    bool
}

// imagesHeld lists the runtime's images and the window's added list
// before the load, and lists the pin as the window's when the node does
// not have it. Where the runtime cannot list its images nothing is
// listed: an image is never removed on a guess.
func imagesHeld(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, res *Imaged) *held {
	h := &held{runtime: res.Runtime, before: map[string]bool{}, ours: map[string]bool{},
		file: addedList(n), keep: w.Inv.Image.Keep}
	if stateDir(n) == "" {
		return h // no private directory to list in: nothing is removed
	}
	q := remote.Quote(h.file)
	out, err := runOn(ctx, w, n, remote.Quote(res.Runtime)+" images -q --no-trunc && echo '-- added' && { cat "+q+" 2>/dev/null; true; }")
	if err != nil {
		return h
	}
	images, added, ok := strings.Cut(string(out), "-- added\n")
	if !ok {
		return h
	}
	h.known = true
	for _, id := range strings.Fields(images) {
		if id := imageID(id); isImageID(id) {
			h.before[id] = true
		}
	}
	for _, line := range strings.Split(added, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == res.Runtime {
			h.ours[f[1]] = true
		}
	}
	if pin := "sha256:" + res.Pin; !h.keep && !h.before[pin] {
		h.add(ctx, w, n, pin)
	}
	return h
}

// settle records whether the image the node now has (ni.ID) is the
// window's or was there before, listing it when it is new (an archive
// that is not the pin loads another image).
func (h *held) settle(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, ni *NodeImage) {
	if !h.known || ni.ID == "" {
		return
	}
	id := "sha256:" + ni.ID
	switch {
	case h.ours[id]:
		ni.Added = true
	case h.before[id]:
		ni.Before = true
	default:
		ni.Added = true
		if !h.keep {
			h.add(ctx, w, n, id)
		}
	}
}

func (h *held) add(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, id string) {
	if h.ours[id] {
		return
	}
	if _, err := runOn(ctx, w, n, "echo "+remote.Quote(h.runtime+" "+id)+" >> "+remote.Quote(h.file)); err == nil {
		h.ours[id] = true
	}
}

// isImageID: "sha256:" and 64 lowercase hex digits, the only shape an ID
// read from a node is used in (a node may print anything).
func isImageID(id string) bool {
	h, ok := strings.CutPrefix(id, "sha256:")
	return ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == ""
}

// imageID is an image ID as "sha256:<hex>" (docker and podman print it
// so with --no-trunc; some versions print the bare hex).
func imageID(s string) string {
	if strings.HasPrefix(s, "sha256:") {
		return s
	}
	return "sha256:" + s
}
