// Package scripts holds what runs on the nodes, embedded in the gpuaccept
// binary so a window needs nothing but SSH and bash on a node.
package scripts

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

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

// PodSSHD starts the window's own SSH server in a pod (transport
// kubernetes), for mpirun between pods.
//
//go:embed node/podsshd.sh
var PodSSHD string

// Security reads a node's access, isolation and residue before the window
// writes (see node/security.sh).
//
//go:embed node/security.sh
var Security string

// Left lists what of a window is still on a node after teardown; like
// teardown it travels inline (the pushed scripts are gone by then).
//
//go:embed node/left.sh
var Left string

// Relay receives a file and passes it on along a chain of nodes.
//
//go:embed node/relay.sh
var relaySource string

// Relay is the script with gpuaccept_private defined in it (withPrivate).
var Relay = withPrivate(relaySource)

// File is one script the window pushes to every node.
type File struct {
	Name string
	Body string
}

// Pushed is every script the phases run from the node's copy, pushed once
// at the start of the window and checked by sha256 before each run.
// Teardown is not among them: it must work on a node where the push never
// happened (a resumed window, a node lost before it), so it travels inline.
func Pushed() []File {
	return []File{
		{"preflight.sh", Preflight},
		{"security.sh", Security},
		{"windowkey.sh", WindowKey},
		{"podsshd.sh", PodSSHD},
		{"relay.sh", Relay},
		{"stage.sh", Stage},
		{"checkpoint.sh", Checkpoint},
		{"failure.sh", Failure},
		{"ddp_train.py", DDPTrain},
		{"telemetry.sh", Telemetry},
		{"gemm.py", Gemm},
	}
}

// SHA256 is the hex sha256 of a script's body.
func SHA256(body string) string {
	s := sha256.Sum256([]byte(body))
	return hex.EncodeToString(s[:])
}

// Failure is the failure test's actions on a node (kill, cut with the
// restore scheduled first, reboot).
//
//go:embed node/failure.sh
var Failure string

// DDPTrain is the failure test's workload: a small DistributedDataParallel
// job with a log line per step and atomic checkpoints (see its header for
// the log contract).
//
//go:embed ddp_train.py
var DDPTrain string
