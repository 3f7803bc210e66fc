package child

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultAccessTTL is how long Access remembers an answer: a grant added by an upgrade of
// the operator's bundle (or by hand) is seen within a minute, without a restart.
const DefaultAccessTTL = time.Minute

// Access tells which verbs on one kind of object the operator's own identity may not use in
// a namespace, by asking the API server (SelfSubjectAccessReview, which every authenticated
// user may create: it needs no grant of the operator's role). A controller asks before it
// touches a kind that an older RBAC of the operator lacks, such as the RBAC of an older OLM
// bundle running the new binary during an upgrade, and then skips that kind and says so
// instead of failing, or waiting on an informer that can never sync.
type Access struct {
	// Client creates the reviews.
	Client client.Client
	// Group and Resource name the kind ("" for the core group), for example
	// networking.k8s.io and networkpolicies.
	Group, Resource string
	// Verbs are the verbs the controller uses.
	Verbs []string
	// TTL is how long an answer is kept (DefaultAccessTTL when 0).
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu      sync.Mutex
	answers map[string]accessAnswer
}

type accessAnswer struct {
	missing []string
	at      time.Time
}

// Missing returns the verbs of a.Verbs the operator may not use in namespace, in a.Verbs'
// order (none: it may use all), from an answer at most TTL old.
func (a *Access) Missing(ctx context.Context, namespace string) ([]string, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	ttl := a.TTL
	if ttl <= 0 {
		ttl = DefaultAccessTTL
	}
	a.mu.Lock()
	answer, ok := a.answers[namespace]
	a.mu.Unlock()
	if ok && now().Sub(answer.at) < ttl {
		return answer.missing, nil
	}
	var missing []string
	for _, verb := range a.Verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: a.Group, Resource: a.Resource},
		}}
		if err := a.Client.Create(ctx, review); err != nil {
			return nil, fmt.Errorf("while asking the API server whether the operator may %s %s: %w", verb, a.resource(), err)
		}
		if !review.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	a.mu.Lock()
	if a.answers == nil {
		a.answers = map[string]accessAnswer{}
	}
	a.answers[namespace] = accessAnswer{missing: missing, at: now()}
	a.mu.Unlock()
	return missing, nil
}

// Describe says which grant is missing and how to get it, for a condition and an event.
func (a *Access) Describe(namespace string, missing []string) string {
	return fmt.Sprintf("the operator may not %s %s in namespace %s: upgrade the operator to a bundle whose RBAC grants them (its ClusterRole lists %s), "+
		"or grant its ServiceAccount these verbs with a Role or ClusterRole", strings.Join(missing, ", "), a.resource(), namespace, a.resource())
}

// resource is the kind as RBAC names it: resource.group.
func (a *Access) resource() string {
	if a.Group == "" {
		return a.Resource
	}
	return a.Resource + "." + a.Group
}
