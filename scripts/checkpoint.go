package scripts

import _ "embed"

// Checkpoint saves a checkpoint on a node as a training job does (one
// shard per GPU rank, fsync, a manifest of sha256s last), or restores one
// and hashes what it read; see node/checkpoint.sh.
//
//go:embed node/checkpoint.sh
var checkpointSource string

// Checkpoint is the script with gpuaccept_private defined in it (withPrivate).
var Checkpoint = withPrivate(checkpointSource)
