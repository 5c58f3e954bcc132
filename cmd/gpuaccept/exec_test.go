package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestExecGroupsIdenticalOutputs(t *testing.T) {
	inv, hw, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	servers, err := demoNodes(t.TempDir(), binary, inv, demoFabric(inv.Nodes, hw, 0))
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// Every node prints its stand-in profile; gpu-04's differs, and it
	// fails.
	err = execAll(t.Context(), &out, inv, `cat "$HOME/bin/PROFILE"; grep -q fail "$HOME/bin/PROFILE" && exit 4; true`)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitNotAccepted {
		t.Fatalf("want exit 1, got %v", err)
	}
	got := out.String()
	for _, want := range []string{
		"gpu-[01-03]\n----------------\nh100\n",
		"gpu-04\n----------------\nh100-diag-fail\n",
		"gpu-[01-03]: exit 0\n",
		"gpu-04: exit 4\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
