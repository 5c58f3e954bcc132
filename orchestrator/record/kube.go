package record

import "time"

// KubeCluster is what the Kubernetes API said of the window's nodes when
// the window started (or resumed) and what became of its pods: the
// preflight facts of a managed cluster, read by the coordinator, not on
// the nodes (KUBE-001..003 judge them).
type KubeCluster struct {
	// Read is when the API was asked; ReadError why it could not say
	// (then Nodes is empty and KUBE-001/002 are NOT MEASURED).
	Read      time.Time `json:"read,omitzero"`
	ReadError string    `json:"read_error,omitempty"`
	// GPUResource is the extended resource the GPUs are counted as, and
	// PodGPUs how many of it each of the window's pods asks for.
	GPUResource string     `json:"gpu_resource"`
	PodGPUs     int        `json:"pod_gpus"`
	Nodes       []KubeNode `json:"nodes,omitempty"`
	// Operator is the NVIDIA GPU Operator's images running anywhere in
	// the cluster; SoftwareError why the cluster's pods could not be
	// listed (a namespaced credential), so no device plugin was seen.
	Operator      []string `json:"gpu_operator,omitempty"`
	SoftwareError string   `json:"software_error,omitempty"`
	// Label is the label every pod of the window carries (KEY=VALUE),
	// Delete the kubectl line that deletes them (its kubeconfig, context
	// and namespace);
	// PodsDeleted the pods deleted at the window's end, DeleteError why
	// the API still listed some (or could not say), Deleted when the API
	// listed none.
	Label       string   `json:"label"`
	Delete      string   `json:"delete_command"`
	PodsDeleted []string `json:"pods_deleted,omitempty"`
	DeleteError string   `json:"delete_error,omitempty"`
	// NotLookedFor: why the window's pods were not looked for at its end
	// (a kubeconfig that could not be used, with which no pod was made
	// either).
	NotLookedFor string    `json:"not_looked_for,omitempty"`
	Deleted      time.Time `json:"deleted,omitzero"`
}

// KubeNode is one node of the window as the API described it.
type KubeNode struct {
	// Name is the window's name of the node, APIName the API's.
	Name    string `json:"name"`
	APIName string `json:"api_name"`
	// Missing: the API listed no such node.
	Missing       bool     `json:"missing,omitempty"`
	Ready         bool     `json:"ready"`
	NotReady      string   `json:"not_ready,omitempty"`
	Unschedulable bool     `json:"unschedulable,omitempty"`
	Pressure      []string `json:"pressure,omitempty"`
	Taints        []string `json:"taints,omitempty"`
	// Allocatable and Capacity are the GPU resource as the node's status
	// counts it: what pods can ask for, and what the device plugin found.
	Allocatable int64  `json:"gpus_allocatable"`
	Capacity    int64  `json:"gpus_capacity"`
	Kubelet     string `json:"kubelet,omitempty"`
	Runtime     string `json:"container_runtime,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
	OS          string `json:"os_image,omitempty"`
	// DevicePlugin is the images of the device plugin's pods on the node
	// (a phase after one that is not running).
	DevicePlugin []string `json:"device_plugin,omitempty"`
}
