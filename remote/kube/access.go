package kube

import (
	"cmp"
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"gpuaccept/remote"
)

// Access is remote.KubeAccessOf through cs, the window's namespace ns:
// one SelfSubjectAccessReview per need, which any authenticated user may
// create (system:basic-user), so no right is needed to ask.
func Access(ctx context.Context, cs kubernetes.Interface, ns string) ([]remote.KubeAccess, error) {
	var out []remote.KubeAccess
	for _, need := range remote.KubeNeeds {
		a := remote.KubeAccess{KubeNeed: need}
		for _, verb := range []string{need.Verb, need.OrVerb} {
			if verb == "" || a.Allowed {
				continue
			}
			attr := &authorizationv1.ResourceAttributes{Verb: verb, Resource: need.Resource, Subresource: need.Subresource}
			if !need.Cluster {
				attr.Namespace = ns
			}
			r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attr},
			}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("kubernetes: may it %s: %w", need.What(), err)
			}
			a.Allowed = r.Status.Allowed
			if a.Reason == "" {
				a.Reason = remote.Clip(cmp.Or(r.Status.Reason, r.Status.EvaluationError), 200)
			}
		}
		if a.Allowed {
			a.Reason = ""
		}
		out = append(out, a)
	}
	return out, nil
}
