// Package inventories holds example inventories; the demo's is embedded in
// the binary so `gpuaccept demo` needs no file.
package inventories

import _ "embed"

// Demo is demo.yaml: four simulated nodes; the demo fills in their
// addresses.
//
//go:embed demo.yaml
var Demo []byte
