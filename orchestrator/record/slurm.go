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
	// Partition is the partition the job asked for, as scontrol showed
	// it before the window asked (nil in records made before it was
	// read).
	Partition *SlurmPartition `json:"partition,omitempty"`
	// Named: the inventory named its nodes, and no job is the window's;
	// Nodes are those of them Slurm lists, as scontrol showed them at the
	// window's start (Command), Unlisted those it lists by no name, host
	// name or address of theirs, ReadError why scontrol could not be
	// asked.
	Named     bool     `json:"named,omitempty"`
	Unlisted  []string `json:"unlisted,omitempty"`
	ReadError string   `json:"read_error,omitempty"`
}

// SlurmPartition is a partition's limits in Slurm's words ("UNLIMITED",
// "1-00:00:00"), what the window asked of it, and what of the ask the
// limits would cut.
type SlurmPartition struct {
	Name          string `json:"name"`
	State         string `json:"state,omitempty"`
	MaxTime       string `json:"max_time,omitempty"`
	DefaultTime   string `json:"default_time,omitempty"`
	MaxNodes      string `json:"max_nodes,omitempty"`
	MinNodes      string `json:"min_nodes,omitempty"`
	TotalNodes    string `json:"total_nodes,omitempty"`
	AllowAccounts string `json:"allow_accounts,omitempty"`
	DenyAccounts  string `json:"deny_accounts,omitempty"`
	AllowQOS      string `json:"allow_qos,omitempty"`
	DenyQOS       string `json:"deny_qos,omitempty"`
	QOS           string `json:"qos,omitempty"`
	// AskedMinutes and AskedNodes are the job's time limit (Slurm's
	// whole minutes) and node count the window asked for.
	AskedMinutes int `json:"asked_minutes,omitempty"`
	AskedNodes   int `json:"asked_nodes,omitempty"`
	// Cuts are the limits that would stop the window running as
	// planned, each naming the limit and its value; Unread the limits
	// stated in words that could not be read (not judged).
	Cuts   []string `json:"cuts,omitempty"`
	Unread []string `json:"unread,omitempty"`
	// ReadError is scontrol's words when it could not show the
	// partition (then nothing else is set but Name).
	ReadError string `json:"read_error,omitempty"`
}

// SlurmNode is one node of the allocation as scontrol showed it.
type SlurmNode struct {
	Name string `json:"name"`
	// SlurmName is Slurm's name for the node where the inventory named
	// it otherwise (Named); empty when it is Name.
	SlurmName string `json:"slurm_name,omitempty"`
	Addr      string `json:"addr"`
	State     string `json:"state"`
	Reason    string `json:"reason,omitempty"`
	GRES      string `json:"gres,omitempty"`
	Features  string `json:"features,omitempty"`
	// StateAtEnd and ReasonAtEnd are the node as scontrol showed it
	// again at the window's end, before the job was given back: a node
	// Slurm drained while the window held it.
	StateAtEnd  string `json:"state_at_end,omitempty"`
	ReasonAtEnd string `json:"reason_at_end,omitempty"`
}
