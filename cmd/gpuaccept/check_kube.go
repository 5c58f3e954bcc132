package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// kubeAccessWithin bounds the access reviews: a handful of small
// requests to the API.
const kubeAccessWithin = 30 * time.Second

// kubeAccessJSON is one thing the window asks of the Kubernetes API and
// whether the credential may do it (check --connect -o json).
type kubeAccessJSON struct {
	What     string `json:"what"`
	Allowed  bool   `json:"allowed"`
	Required bool   `json:"required"`
	Without  string `json:"without,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// kubeAccessed is what the cluster said the credential may do (list), or
// why it could not be asked (err); neither where no node is a pod.
type kubeAccessed struct {
	list []remote.KubeAccess
	err  error
}

// kubeAccess asks the cluster what the inventory's credential may do of
// what a window asks (remote.KubeNeeds), when some node is a pod. What it
// may not do costs either the whole window (no pod, no exec) or the facts
// of KUBE-001/002: said before the window, not found out in it. With
// kubernetes.node_selector the nodes themselves come from listing them.
func kubeAccess(ctx context.Context, inv *inventory.Inventory) kubeAccessed {
	pods := inv.Kubernetes.NodeSelector != ""
	for _, n := range inv.Nodes {
		pods = pods || inv.TransportOf(n) == inventory.TransportKubernetes
	}
	if !pods {
		return kubeAccessed{}
	}
	ctx, cancel := context.WithTimeout(ctx, kubeAccessWithin)
	defer cancel()
	list, err := remote.KubeAccessOf(ctx, *inv.KubeConfig(inventory.Node{}, nil))
	for i := range list {
		if list[i].Resource == "nodes" && inv.Kubernetes.NodeSelector != "" {
			list[i].Required = true
		}
	}
	return kubeAccessed{list: list, err: err}
}

// printKubeAccess says what the credential may not do, and what that
// costs, one line each; or that it may do all the window asks. It says
// nothing, false, where no node is a pod.
func printKubeAccess(w io.Writer, inv *inventory.Inventory, a kubeAccessed) bool {
	if a.list == nil && a.err == nil {
		return false
	}
	ns := inv.KubeConfig(inventory.Node{}, nil).Namespace
	if ns == "" {
		ns = "the context's"
	}
	if a.err != nil {
		fmt.Fprintf(w, "kubernetes access: not asked: %s\n", oneLine(a.err.Error()))
		return true
	}
	var denied []remote.KubeAccess
	for _, k := range a.list {
		if !k.Allowed {
			denied = append(denied, k)
		}
	}
	if len(denied) == 0 {
		fmt.Fprintf(w, "kubernetes access: all a window asks (pods and their exec in %s, nodes, every namespace's pods)\n", ns)
		return true
	}
	fmt.Fprintf(w, "kubernetes access (namespace %s):\n", ns)
	for _, k := range denied {
		cost := k.Without
		if k.Required {
			cost = "no window can run"
		}
		line := fmt.Sprintf("  may not %s: %s", k.What(), cost)
		if k.Reason != "" {
			line += " (" + shown(k.Reason) + ")"
		}
		fmt.Fprintln(w, line)
	}
	return true
}

// kubeAccessOf is access as check --connect -o json gives it.
func kubeAccessOf(access []remote.KubeAccess) []kubeAccessJSON {
	var out []kubeAccessJSON
	for _, a := range access {
		out = append(out, kubeAccessJSON{What: a.What(), Allowed: a.Allowed, Required: a.Required, Without: a.Without, Reason: shown(a.Reason)})
	}
	return out
}

// kubeDenied says which things no window can run without the credential
// may not do, "" when it may do them all.
func kubeDenied(access []remote.KubeAccess) string {
	var no []string
	for _, a := range access {
		if a.Required && !a.Allowed {
			no = append(no, a.What())
		}
	}
	return strings.Join(no, ", ")
}
