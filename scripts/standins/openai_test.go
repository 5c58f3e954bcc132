package standins

import (
	"bytes"
	"strings"
	"testing"
)

// TestCommandOpenAIServer: `standin openai-server` reaches the server stand-in's command line (its own flags,
// exit 2 on a usage error, --help on stdout), not the GPU tools' profiles.
func TestCommandOpenAIServer(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := Command([]string{OpenAIServer, "--capacity", "0"}, &out, &errb); rc != 2 ||
		!strings.Contains(errb.String(), "usage: standin openai-server") || !strings.Contains(errb.String(), "capacity 0") {
		t.Errorf("openai-server --capacity 0: exit %d, %q; want 2 and its usage", rc, errb.String())
	}
	out.Reset()
	errb.Reset()
	if rc := Command([]string{OpenAIServer, "--help"}, &out, &errb); rc != 0 ||
		!strings.Contains(out.String(), "--token-delay") {
		t.Errorf("openai-server --help: exit %d, stdout %q, stderr %q", rc, out.String(), errb.String())
	}
}
