package phases

import (
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/telemetry"
)

// TelemetrySpans are the phases as they ran on node in rec, for readers of
// a run directory that judge its telemetry without the window (`gpuaccept
// status` while it runs): the same spans the window's own judge uses.
func TelemetrySpans(rec *record.Run, node string) []telemetry.Span { return telemetrySpans(rec, node) }
