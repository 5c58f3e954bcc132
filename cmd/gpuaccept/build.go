package main

import (
	"runtime/debug"

	"gpuaccept/orchestrator/record"
)

// buildInfo is what the toolchain stamped into this binary: the module
// version (a tag, a pseudo-version, or "(devel)"), the commit and whether
// the tree had uncommitted changes. -ldflags "-X main.version=..." wins
// over the version.
func buildInfo() *record.Build {
	b := &record.Build{Version: version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go = bi.GoVersion
	if version == "dev" && bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// toolName is the version line a record carries: "gpuaccept v1.2.0
// (commit 0123456789ab, modified)".
func toolName() string {
	b := buildInfo()
	s := "gpuaccept " + b.Version
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (commit " + c
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}
