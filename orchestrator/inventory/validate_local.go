package inventory

import (
	"os"
	"os/user"
	"strconv"

	"gpuaccept/remote"
)

// Local says whether the node is the coordinator's own machine (address:
// local): its side runs here, without SSH.
func (n Node) Local() bool { return n.Address == remote.LocalAddress }

// localNodes checks the nodes at address local. The machine gpuaccept
// runs on is one node: a second local node would count its GPUs twice.
// SSH settings mean nothing for it: a port is a mistake, and its user is
// whoever runs gpuaccept (filled in, so that the record names the
// account; another user is a mistake, since nothing logs in as one).
func (v *validator) localNodes() {
	first := -1
	me := coordinatorUser()
	for i := range v.inv.Nodes {
		n := &v.inv.Nodes[i]
		if !n.Local() {
			continue
		}
		key, who := v.keyOf(i), v.who(i)
		if first >= 0 {
			v.problem(key+".address", "%slocal is also %s (%q): the machine gpuaccept runs on is one node, give it once",
				who, v.keyOf(first), v.inv.Nodes[first].Name)
		} else {
			first = i
		}
		if len(v.inv.Nodes) > 1 && n.FabricAddress == "" {
			// The other nodes reach it (mpirun, the image relay): "local"
			// names a different machine on each of them.
			v.problem(key+".address", "%sa local node among %d nodes needs fabric_address: the address the other nodes reach this machine at",
				who, len(v.inv.Nodes))
		}
		if v.given(key + ".port") {
			v.problem(key+".port", "%sa local node is reached without SSH: remove port", who)
		}
		if n.User != "" && n.User != me {
			v.problem(key+".user", "%sa local node runs as the user running gpuaccept, not as %q: remove user", who, short(n.User))
		}
		n.User = me
	}
}

// coordinatorUser is the account gpuaccept runs as.
func coordinatorUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}

// localVictim: the failure test's cut and reboot act on the victim's
// machine; on the machine gpuaccept runs on they would end the window
// itself (its coordinator cut off, or rebooted), and measure nothing.
func (v *validator) localVictim() {
	f := v.inv.Phases.Failure
	if !f.Enabled || (f.Inject != "cut" && f.Inject != "reboot") || len(v.inv.Nodes) == 0 {
		return
	}
	victim := f.Victim
	if victim == "" {
		victim = v.inv.Nodes[len(v.inv.Nodes)-1].Name
	}
	for _, n := range v.inv.Nodes {
		if n.Name == victim && n.Local() {
			v.problem("phases.failure.inject", "%s of %s, the machine gpuaccept runs on (address: local), would end the window itself: set phases.failure.victim to another node",
				f.Inject, victim)
		}
	}
}
