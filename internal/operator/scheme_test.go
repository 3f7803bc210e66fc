package operator

import (
	"os"
	"path/filepath"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/internal/caching"
)

// TestSchemeHasEveryGroupTheOperatorUses fails when a kind the operator caches, or a group
// its role grants, is missing from the trimmed scheme: the manager's client would refuse it
// at run time ("no kind is registered").
func TestSchemeHasEveryGroupTheOperatorUses(t *testing.T) {
	s := Scheme()
	for obj := range caching.Owned() {
		if _, _, err := s.ObjectKinds(obj); err != nil {
			t.Errorf("%T, a kind the operator caches: %v", obj, err)
		}
	}
	if _, _, err := s.ObjectKinds(&coordinationv1.Lease{}); err != nil {
		t.Errorf("the Lease the operator fences on: %v", err)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) == 0 {
		t.Fatal("config/rbac/role.yaml has no rules")
	}
	// Events go through the recorder's own client, which has client-go's scheme; cert-manager's
	// Certificates are unstructured objects (its Go module is no dependency), which the client
	// maps through the API server's discovery, not the scheme.
	exempt := map[string]bool{"events.k8s.io": true, "cert-manager.io": true}
	for _, rule := range role.Rules {
		for _, g := range rule.APIGroups {
			if !exempt[g] && !s.IsGroupRegistered(g) {
				t.Errorf("the operator's role grants %v in group %q, which the scheme does not register: add it to schemeGroups", rule.Resources, g)
			}
		}
	}
}
