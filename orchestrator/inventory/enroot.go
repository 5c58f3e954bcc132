package inventory

import (
	"fmt"
	"strings"
)

// EnrootURI is a pinned image reference (REGISTRY/IMAGE[:TAG]@sha256:HEX)
// as Pyxis's --container-image takes it: enroot's URI,
// [REGISTRY#]IMAGE:sha256:HEX. enroot reads the registry only before a
// '#' (without one it asks Docker Hub), and passes the tag to the
// registry as the manifest's reference, so a tag of sha256:HEX pulls
// the manifest by its digest: the pin, not a tag that may move. The tag
// of the docker reference is dropped (the digest names the image).
// enroot's grammar allows lowercase letters, digits and ./_- in IMAGE.
func EnrootURI(ref string) (string, error) {
	name, digest, ok := strings.Cut(ref, "@")
	if !ok || !strings.HasPrefix(digest, "sha256:") {
		return "", fmt.Errorf("%q has no @sha256: digest for Pyxis to pull by", short(ref))
	}
	registry := ""
	if first, rest, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		registry, name = first, rest
	}
	// a tag after the last '/' is dropped: the digest pins the image
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789/._-") != "" {
		return "", fmt.Errorf("%q: enroot takes an image name of lowercase letters, digits and ./_- only, got %q", short(ref), short(name))
	}
	// Pyxis takes an image that starts with . or / for a squashfs file on
	// the node: the node's file, not the pinned image.
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "/") || strings.HasPrefix(registry, ".") {
		return "", fmt.Errorf("%q: Pyxis would take %q for a file on the node: name the image in its registry", short(ref), short(name))
	}
	if registry != "" {
		return registry + "#" + name + ":" + digest, nil
	}
	return name + ":" + digest, nil
}
