package kube

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"gpuaccept/remote"
)

// Access asks one SelfSubjectAccessReview per thing a window needs: its
// pods and their exec in the window's namespace (create, else get: either
// execs), the nodes and every namespace's pods cluster-wide; it reads the
// authorizer's answer and reason, in remote.KubeNeeds' order.
func TestAccessAsksForEveryNeed(t *testing.T) {
	cs := fake.NewClientset()
	var asked []authorizationv1.ResourceAttributes
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		attr := *r.Spec.ResourceAttributes
		asked = append(asked, attr)
		// A namespace admin: everything in "gpu" but exec by SPDY (create),
		// exec by WebSocket (get) only; nothing cluster-wide.
		r.Status.Allowed = attr.Namespace == "gpu" && (attr.Subresource != "exec" || attr.Verb == "get")
		if !r.Status.Allowed {
			r.Status.Reason = "RBAC: no ClusterRole grants " + attr.Verb + " " + attr.Resource
		}
		return true, r, nil
	})
	got, err := Access(t.Context(), cs, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	// The exec asked twice: create, refused, then get.
	if len(got) != len(remote.KubeNeeds) || len(asked) != len(remote.KubeNeeds)+1 {
		t.Fatalf("%d answers, %d asked, want %d and %d", len(got), len(asked), len(remote.KubeNeeds), len(remote.KubeNeeds)+1)
	}
	j := 0
	for _, a := range got {
		q := asked[j]
		if q.Verb != a.Verb || q.Resource != a.Resource || q.Subresource != a.Subresource || (q.Namespace == "") != a.Cluster {
			t.Errorf("asked %+v for %+v", q, a.KubeNeed)
		}
		if j++; a.OrVerb != "" {
			if asked[j].Verb != a.OrVerb {
				t.Errorf("then asked %+v for %+v", asked[j], a.KubeNeed)
			}
			j++
		}
		if a.Allowed == a.Cluster || (a.Cluster && a.Reason == "") {
			t.Errorf("%s: allowed %v, reason %q", a.What(), a.Allowed, a.Reason)
		}
	}
	whats := map[string]bool{}
	for _, a := range got {
		whats[a.What()] = true
	}
	for _, w := range []string{"create pods", "create (or get) pods/exec", "delete pods", "list nodes", "list pods in every namespace"} {
		if !whats[w] {
			t.Errorf("never asked %q: %v", w, whats)
		}
	}
}
