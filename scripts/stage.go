package scripts

import _ "embed"

// Stage copies one staging source (a path on shared storage, an http(s)
// or object-store URL) to a node's local disk, hashing it as it is
// written, and reports bytes, seconds and sha256; see node/stage.sh.
//
//go:embed node/stage.sh
var stageSource string

// Stage is the script with gpuaccept_private defined in it (withPrivate).
var Stage = withPrivate(stageSource)
