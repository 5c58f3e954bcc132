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

// kubeAccess asks the cluster what the inventory's credential may do of
// what a window asks (remote.KubeNeeds), when some node is a pod; nil,
// nil when none is. What it may not do costs either the whole window (no
// pod, no exec) or the facts of KUBE-001/002: said before the window, not
// found out in it.
func kubeAccess(ctx context.Context, inv *inventory.Inventory) ([]remote.KubeAccess, error) {
	pods := inv.Kubernetes.NodeSelector != ""
	for _, n := range inv.Nodes {
		pods = pods || inv.TransportOf(n) == inventory.TransportKubernetes
	}
	if !pods {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, kubeAccessWithin)
	defer cancel()
	return remote.KubeAccessOf(ctx, *inv.KubeConfig(inventory.Node{}, nil))
}

// printKubeAccess says what the credential may not do, and what that
// costs, one line each; or that it may do all the window asks.
func printKubeAccess(w io.Writer, inv *inventory.Inventory, access []remote.KubeAccess, err error) {
	ns := inv.KubeConfig(inventory.Node{}, nil).Namespace
	if ns == "" {
		ns = "the context's"
	}
	if err != nil {
		fmt.Fprintf(w, "kubernetes access: not asked: %s\n", oneLine(err.Error()))
		return
	}
	var denied []remote.KubeAccess
	for _, a := range access {
		if !a.Allowed {
			denied = append(denied, a)
		}
	}
	if len(denied) == 0 {
		fmt.Fprintf(w, "kubernetes access: all the window asks (pods and pods/exec in namespace %s, list nodes, list pods in every namespace)\n", ns)
		return
	}
	fmt.Fprintf(w, "kubernetes access (namespace %s):\n", ns)
	for _, a := range denied {
		cost := a.Without
		if a.Required {
			cost = "no window can run"
		}
		line := fmt.Sprintf("  may not %s: %s", a.What(), cost)
		if a.Reason != "" {
			line += " (" + shown(a.Reason) + ")"
		}
		fmt.Fprintln(w, line)
	}
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
