package phases

import (
	"bytes"
	"strings"
	"testing"
)

func TestCaptureKeepsHeadAndTailAndSaysWhatWasCut(t *testing.T) {
	var c capture
	c.Write([]byte("short\n"))
	if got := string(c.Bytes()); got != "short\n" {
		t.Fatalf("%q", got)
	}
	c = capture{}
	head := bytes.Repeat([]byte("h"), captureHead)
	c.Write(head)
	for i := 0; i < 5; i++ {
		c.Write(bytes.Repeat([]byte("m"), captureTail))
	}
	c.Write([]byte("THE END\n"))
	got := c.Bytes()
	if len(got) > captureHead+captureTail+100 {
		t.Fatalf("kept %d bytes", len(got))
	}
	if !bytes.HasPrefix(got, head) || !bytes.HasSuffix(got, []byte("mmmTHE END\n")) {
		t.Errorf("head or tail lost: %q...%q", got[:10], got[len(got)-20:])
	}
	if !strings.Contains(string(got), "[gpuaccept: 4194312 bytes of output cut here]") {
		t.Errorf("the cut is not said (total %d)", c.total)
	}
}
