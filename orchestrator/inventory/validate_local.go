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

// localNodes checks the nodes the local transport reaches (address
// local, or transport local). The machine gpuaccept
// runs on is one node: a second local node would count its GPUs twice.
// SSH settings mean nothing for it: a port is a mistake, and its user is
// whoever runs gpuaccept (filled in, so that the record names the
// account; another user is a mistake, since nothing logs in as one).
func (v *validator) localNodes() {
	first := -1
	me := coordinatorUser()
	for i := range v.inv.Nodes {
		n := &v.inv.Nodes[i]
		if v.inv.TransportOf(*n) != TransportLocal {
			continue
		}
		key, who := v.keyOf(i), v.who(i)
		if first >= 0 {
			v.problem(key+".address", "%slocal is also %s (%q): the machine gpuaccept runs on is one node, give it once",
				who, v.keyOf(first), v.inv.Nodes[first].Name)
		} else {
			first = i
		}
		if len(v.inv.Nodes) > 1 {
			// Among SSH nodes it would have to take the window's key into
			// this machine's authorized_keys (the rented nodes, and so
			// their provider, could then log in here), and the failure
			// test could pick it as the victim once the others are
			// quarantined or narrowed away: it is a window of its own.
			v.problem(key+".address", "%sa local node is a window of its own, not one of %d nodes: the others would log in to this machine with the window's key (mpirun, the image relay); run the machine gpuaccept runs on in an inventory of its own",
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
