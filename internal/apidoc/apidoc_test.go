package apidoc

import (
	"os"
	"strings"
	"testing"
)

// TestReferenceIsCurrent fails when docs/reference/api.md differs from what the CRDs render.
func TestReferenceIsCurrent(t *testing.T) {
	want, err := FromDir("../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/reference/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Error("docs/reference/api.md is stale: run go run ./hack/apidoc > docs/reference/api.md")
	}
}

// TestEveryFieldIsListed checks the reference names every field of every CRD: a field the
// walk missed (an array of objects, a map of objects) would be a hole in the reference.
func TestEveryFieldIsListed(t *testing.T) {
	doc, err := FromDir("../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{
		"`spec.size`", "`spec.ports[].nodePort`", "`status.selector`", "`spec.envs[].valueFrom.secretKeyRef.name`",
		"`spec.db.statefulSet.storage.size`", "`spec.db.rootPasswordSecretRef.key`",
		"`spec.updateStrategy.assignStrategies[].fromReplicas`", "`spec.pod[].volumes.type`",
		"`spec.networkPolicy.clients[].ipBlock.cidr`", "`status.nodes[].slots`", "`status.conditions[].reason`",
	} {
		if !strings.Contains(doc, field) {
			t.Errorf("the reference lacks %s", field)
		}
	}
	for _, rule := range []string{"spec.replicas is too small", "spec.acl.enabled cannot change"} {
		if !strings.Contains(doc, rule) {
			t.Errorf("the reference lacks the rule %q", rule)
		}
	}
}
