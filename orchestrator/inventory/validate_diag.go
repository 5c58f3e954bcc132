package inventory

import "regexp"

// diagImageRef is a container reference as docker and podman read one
// (an optional registry host and port, lowercase path components, an
// optional tag), pinned by digest. It is run on every node: nothing in it
// may be read by a shell or a runtime as anything but one reference (no
// spaces, quotes, $, ;, and no leading "-" to pass for an option).
var diagImageRef = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]{1,5})?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}$`)

// diagImage checks phases.diag.image: a reference pinned by digest, as
// image.reference is (a tag can be moved to another image between runs),
// and nothing else.
func (v *validator) diagImage(ref string) {
	const key = "phases.diag.image"
	switch {
	case ref == "":
	case !pinnedImage.MatchString(ref):
		v.problem(key, "%s", imageMessage(ref))
	case !diagImageRef.MatchString(ref):
		v.problem(key, "%q is not a container reference: expected [REGISTRY[:PORT]/]NAME[:TAG]@sha256:<64 hex digits> "+
			"(lowercase name, no spaces, quotes or shell characters), e.g. nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04@sha256:...",
			short(ref))
	}
}
