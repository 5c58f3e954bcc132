package phases

import (
	"fmt"
	"strings"
)

// missingTool reads stage.sh's "missing NAME (SOURCE): why" line: the
// node lacks the tool the source needs (the aws CLI, gcloud or gsutil,
// azcopy, curl or wget). known is the prefix the caller names itself.
func missingTool(out []byte, known string) (string, bool) {
	for _, line := range strings.Split(string(out), "\n") {
		if msg, ok := strings.CutPrefix(line, "missing "); ok {
			return strings.TrimPrefix(msg, known), true
		}
	}
	return "", false
}

// unstaged names each source not staged for a tool the node lacks.
func unstaged(sources []StagedSource) []string {
	var out []string
	for _, s := range sources {
		if s.Missing != "" {
			out = append(out, fmt.Sprintf("%s (%s): %s", s.Name, s.From, s.Missing))
		}
	}
	return out
}
