package phases

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

const idleCheckInv = `quote:
  terms:
    idle_shutdown_after: 4s
idle:
  provider_check:
    enabled: true
    grace: 2s
`

// A provider that stops the idle node as quoted: it stops answering
// after 3 s, the check says so and passes; the last node is the one held
// (none is quarantined), the other is never asked.
func TestIdleCheckPassesWhenTheProviderStopsTheNode(t *testing.T) {
	inv := fakeInventory(t, 2, idleCheckInv)
	f := fakeFleet(inv)
	h2 := f.Host("h2")
	var first atomic.Int64
	h2.On(`^true$`, func(c *fake.Call) fake.Reply {
		first.CompareAndSwap(0, time.Now().UnixNano())
		if time.Since(time.Unix(0, first.Load())) > 3*time.Second {
			f.Unreachable("h2", errors.New("connection refused"))
			h2.Drop("the provider stopped it")
			return fake.Reply{Exit: 255}
		}
		return fake.Reply{}
	})
	r := runFake(t, inv, f, IdleCheck)
	v := verdictOf(t, r, "IDLE-002", "h2")
	if v.Status != record.Pass || !strings.Contains(v.Detail, "stopped answering") {
		t.Errorf("IDLE-002: %s %s", v.Status, v.Detail)
	}
	if n := f.Host("h1").Ran(`^true$`); n != 0 {
		t.Errorf("h1 was polled %d times", n)
	}
}

// A provider that lets the idle node run on: FAIL, naming the quoted
// time; a signal command that says "not yet" changes nothing.
func TestIdleCheckFailsWhenTheNodeRunsOn(t *testing.T) {
	inv := fakeInventory(t, 2, idleCheckInv+"    signal: exit 1\n")
	f := fakeFleet(inv)
	f.Host("h2").Reply(`^true$`, fake.Reply{})
	r := runFake(t, inv, f, IdleCheck)
	v := verdictOf(t, r, "IDLE-002", "h2")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "quote.terms.idle_shutdown_after says 4s") {
		t.Errorf("IDLE-002: %s %s", v.Status, v.Detail)
	}
}

// The provider signals instead of stopping: the signal command's exit 0.
func TestIdleCheckPassesOnTheProvidersSignal(t *testing.T) {
	inv := fakeInventory(t, 2, idleCheckInv+`    signal: 'test "$GPUACCEPT_IDLE_NODE" = h2'`+"\n")
	f := fakeFleet(inv)
	f.Host("h2").Reply(`^true$`, fake.Reply{})
	r := runFake(t, inv, f, IdleCheck)
	if v := verdictOf(t, r, "IDLE-002", "h2"); v.Status != record.Pass || !strings.Contains(v.Detail, "signalled") {
		t.Errorf("IDLE-002: %s %s", v.Status, v.Detail)
	}
}
