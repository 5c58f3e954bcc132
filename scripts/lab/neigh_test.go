package lab_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gpuaccept/scripts/lab"
)

// This test owns lab name "neigh" and subnet 10.249.0; other tests that run labs must pick others.
const (
	neighName   = "neigh"
	neighSubnet = "10.249.0"
)

// TestStaticNeighbours: with StaticNeigh every host holds a permanent
// neighbour entry for each other host, with that host's own MAC, and the
// hosts still reach each other; without it none is permanent.
func TestStaticNeighbours(t *testing.T) {
	if why, err := lab.TestSkip(); err != nil {
		t.Fatalf("root on Linux, yet the lab cannot run: %v", err)
	} else if why != "" {
		t.Skipf("lab not supported here: %s (run as root on Linux: sudo go test ./scripts/lab/)", why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, static := range []bool{true, false} {
		l, err := lab.Up(ctx, lab.Options{Name: neighName, Hosts: 3, Subnet: neighSubnet, StaticNeigh: static})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lab.Down(context.Background(), neighName) })
		macs := map[string]string{}
		for _, h := range l.Hosts {
			// ip, not /sys: exec's mounts keep the first namespace's sysfs.
			out, err := lab.Command(ctx, "exec", "--name", neighName, h.Name, "--", "bash", "-c", "ip -o link show eth0 | grep -o 'link/ether [^ ]*' | cut -d' ' -f2")
			if err != nil {
				t.Fatal(err)
			}
			b, err := out.Output()
			if err != nil {
				t.Fatalf("%s: eth0's MAC: %v", h.Name, err)
			}
			macs[h.Addr] = strings.TrimSpace(string(b))
		}
		for _, h := range l.Hosts {
			c, err := lab.Command(ctx, "exec", "--name", neighName, h.Name, "--", "ip", "neigh", "show", "nud", "permanent")
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Output()
			if err != nil {
				t.Fatalf("%s: ip neigh: %v", h.Name, err)
			}
			got := string(b)
			for _, o := range l.Hosts {
				want := o.Addr + " dev eth0 lladdr " + macs[o.Addr] + " PERMANENT"
				if has := strings.Contains(got, want); o != h && has != static {
					t.Errorf("static %v: %s's permanent entries %q: %q there is %v", static, h.Name, got, want, has)
				}
			}
		}
		// h3's sshd answers h1 over the bridge.
		ping, err := lab.Command(ctx, "exec", "--name", neighName, "h1", "--", "bash", "-c", "exec 3<>/dev/tcp/"+l.Hosts[2].Addr+"/22")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := ping.CombinedOutput(); err != nil {
			t.Errorf("static %v: h1 cannot reach h3: %v\n%s", static, err, out)
		}
		if err := l.Down(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
