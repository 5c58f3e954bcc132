package scripts

import _ "embed"

// Gemm is the burn-in's per-GPU compute rate: dense bf16 matrix products
// on every GPU of a node at once (see its header for the output contract).
//
//go:embed node/gemm.py
var Gemm string
