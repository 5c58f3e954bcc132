package orchestrator

import "gpuaccept/remote"

// Local says whether the node is the machine gpuaccept runs on (inventory
// address local), reached without SSH: what only an SSH login has (sshd's
// settings, a host key, an authorized_keys line of the window) does not
// apply to it, and its verdicts say so.
func (n *Node) Local() bool { return n.Config.Address() == remote.LocalAddress }

// localFabricHost is how mpirun names the machine it runs on when nothing
// else names it: Open MPI starts ranks on "localhost" without ssh.
const localFabricHost = "localhost"
