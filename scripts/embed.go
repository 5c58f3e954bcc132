// Package scripts holds what runs on the nodes, embedded in the gpuaccept
// binary so a window needs nothing but SSH and bash on a node.
package scripts

import _ "embed"

// Preflight collects a node's identity and GPU facts in one pass; see
// node/preflight.sh for the output format.
//
//go:embed node/preflight.sh
var Preflight string

// Teardown ends every process of a window and removes its files.
//
//go:embed node/teardown.sh
var Teardown string

// WindowKey installs the window's own ssh key pair on a node, for the
// launchers that ssh between nodes.
//
//go:embed node/windowkey.sh
var WindowKey string

// Relay receives a file and passes it on along a chain of nodes.
//
//go:embed node/relay.sh
var Relay string
