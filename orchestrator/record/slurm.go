package record

import "time"

// SlurmAllocation is the job a window held for its whole length
// (slurm.allocate): what it asked for, what Slurm granted, and when it
// was given back.
type SlurmAllocation struct {
	// Command is the salloc line run on the login node.
	Command string `json:"command"`
	JobID   string `json:"job_id,omitempty"`
	// NodeList is the granted nodes as Slurm compresses them; Nodes each
	// of them as scontrol showed it when granted.
	NodeList  string      `json:"nodelist,omitempty"`
	Nodes     []SlurmNode `json:"nodes,omitempty"`
	Requested time.Time   `json:"requested"`
	Granted   time.Time   `json:"granted,omitzero"`
	// NotGranted says why the window got no allocation within
	// slurm.allocate_timeout (squeue's reason), or why salloc failed.
	NotGranted string `json:"not_granted,omitempty"`
	// Cancelled is when the window gave the job back (scancel, until
	// squeue no longer listed it); CancelError why it could not.
	Cancelled   time.Time `json:"cancelled,omitzero"`
	CancelError string    `json:"cancel_error,omitempty"`
	// EndReadError says why the nodes' states could not be read again
	// at the window's end (SlurmNode.StateAtEnd).
	EndReadError string `json:"end_read_error,omitempty"`
}

// SlurmNode is one node of the allocation as scontrol showed it.
type SlurmNode struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	GRES     string `json:"gres,omitempty"`
	Features string `json:"features,omitempty"`
	// StateAtEnd and ReasonAtEnd are the node as scontrol showed it
	// again at the window's end, before the job was given back: a node
	// Slurm drained while the window held it.
	StateAtEnd  string `json:"state_at_end,omitempty"`
	ReasonAtEnd string `json:"reason_at_end,omitempty"`
}
