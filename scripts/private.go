package scripts

import (
	"strings"

	"gpuaccept/remote"
)

// privateMarker is the line of a node script that stands for the
// definition of gpuaccept_private (remote/private.sh): one definition,
// the same one the uploads run, in every script that makes a directory
// the window writes in.
const privateMarker = "# @include remote/private.sh\n"

// withPrivate is a node script with gpuaccept_private in place of its
// marker line.
func withPrivate(src string) string {
	if !strings.Contains(src, privateMarker) {
		panic("scripts: no " + strings.TrimSpace(privateMarker) + " line")
	}
	return strings.Replace(src, privateMarker, remote.PrivateDirScript, 1)
}
