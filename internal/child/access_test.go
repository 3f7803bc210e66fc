package child_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/middleware-operator/middleware-operator/internal/child"
)

// reviewer answers SelfSubjectAccessReviews: allowed for the verbs in allowed, failing
// with err when set; it counts the reviews.
type reviewer struct {
	allowed []string
	err     error
	reviews int
}

func (r *reviewer) client() client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			review, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
			if !ok {
				return errors.New("not a SelfSubjectAccessReview")
			}
			r.reviews++
			if r.err != nil {
				return r.err
			}
			a := review.Spec.ResourceAttributes
			review.Status.Allowed = a.Group == "networking.k8s.io" && a.Resource == "networkpolicies" && a.Namespace == "ns" && slices.Contains(r.allowed, a.Verb)
			return nil
		},
	}).Build()
}

func TestAccessMissing(t *testing.T) {
	verbs := []string{"get", "create", "update", "delete"}
	for name, tc := range map[string]struct {
		allowed []string
		want    []string
	}{
		"every verb granted":        {allowed: verbs},
		"none granted (old bundle)": {want: verbs},
		"read only":                 {allowed: []string{"get"}, want: []string{"create", "update", "delete"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &reviewer{allowed: tc.allowed}
			a := &child.Access{Client: r.client(), Group: "networking.k8s.io", Resource: "networkpolicies", Verbs: verbs}
			missing, err := a.Missing(t.Context(), "ns")
			if err != nil || !slices.Equal(missing, tc.want) {
				t.Fatalf("Missing = %v, %v; want %v", missing, err, tc.want)
			}
		})
	}
}

// TestAccessRemembersForTTL: one review per verb and namespace per TTL, so a reconcile every
// few seconds does not ask every time, and a grant added later is seen after the TTL.
func TestAccessRemembersForTTL(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	r := &reviewer{}
	a := &child.Access{Client: r.client(), Group: "networking.k8s.io", Resource: "networkpolicies", Verbs: []string{"get", "create"},
		Now: func() time.Time { return now }}
	for range 3 {
		if _, err := a.Missing(t.Context(), "ns"); err != nil {
			t.Fatal(err)
		}
	}
	if r.reviews != 2 {
		t.Errorf("%d reviews for 3 checks within the TTL, want 2 (one per verb)", r.reviews)
	}
	r.allowed = []string{"get", "create"} // granted meanwhile
	now = now.Add(child.DefaultAccessTTL)
	if missing, err := a.Missing(t.Context(), "ns"); err != nil || len(missing) != 0 {
		t.Errorf("after the TTL: missing %v, %v; want none", missing, err)
	}
	if r.reviews != 4 {
		t.Errorf("%d reviews after the TTL, want 4", r.reviews)
	}
}

func TestAccessFailure(t *testing.T) {
	r := &reviewer{err: errors.New("connection refused")}
	a := &child.Access{Client: r.client(), Group: "networking.k8s.io", Resource: "networkpolicies", Verbs: []string{"get"}}
	_, err := a.Missing(t.Context(), "ns")
	if err == nil || !strings.Contains(err.Error(), "get networkpolicies.networking.k8s.io") {
		t.Errorf("Missing = %v, want an error naming the verb and the resource", err)
	}
	// A failed check is not remembered.
	r.err = nil
	if _, err := a.Missing(t.Context(), "ns"); err != nil {
		t.Errorf("after the API server came back: %v", err)
	}
}

func TestAccessDescribe(t *testing.T) {
	a := &child.Access{Group: "networking.k8s.io", Resource: "networkpolicies"}
	msg := a.Describe("shop", []string{"get", "create"})
	for _, part := range []string{"may not get, create networkpolicies.networking.k8s.io in namespace shop", "upgrade the operator", "Role or ClusterRole"} {
		if !strings.Contains(msg, part) {
			t.Errorf("%q does not say %q", msg, part)
		}
	}
}
