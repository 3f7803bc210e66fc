package guard_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestOperatorNetworkPolicySelectsTheOperatorAndItsPeers checks the operator's own
// NetworkPolicy (config/components/egress) against what it must let through: it selects the
// operator's pods as config/manager labels them, lets them reach DNS, the API server, the
// Redis client port of every RedisCluster's pods (as the builders label them) and HTTPS
// object stores, and the API server accepts it. The local cluster enforces no
// NetworkPolicy, so what it blocks is not shown here.
func TestOperatorNetworkPolicySelectsTheOperatorAndItsPeers(t *testing.T) {
	root := testenv.RepoRoot()
	policy := &networkingv1.NetworkPolicy{}
	readYAML(t, filepath.Join(root, "config", "components", "egress", "networkpolicy.yaml"), policy)
	docs, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manager *appsv1.Deployment
	for _, doc := range splitYAML(docs) {
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal(doc, d); err == nil && d.Kind == "Deployment" {
			manager = d
		}
	}
	if manager == nil {
		t.Fatal("config/manager/manager.yaml has no Deployment")
	}
	sel, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(manager.Spec.Template.Labels)) {
		t.Errorf("the policy's podSelector %v does not select the operator's pods %v", policy.Spec.PodSelector, manager.Spec.Template.Labels)
	}
	redisPod := labels.Set(objectlabels.ObjectLabels(objectlabels.RedisClusterKind, "cache"))
	reaches := func(port int32, pod labels.Set) bool {
		for _, rule := range policy.Spec.Egress {
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				portOK = portOK || (p.Port != nil && p.Port.IntVal == port)
			}
			peerOK := len(rule.To) == 0
			for _, peer := range rule.To {
				if peer.PodSelector == nil || peer.NamespaceSelector == nil {
					continue
				}
				s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
				peerOK = peerOK || (err == nil && pod != nil && s.Matches(pod))
			}
			if portOK && peerOK {
				return true
			}
		}
		return false
	}
	for what, ok := range map[string]bool{
		"DNS (53)":                            reaches(53, nil),
		"the API server (443)":                reaches(443, nil),
		"the API server's endpoints (6443)":   reaches(6443, nil),
		"a RedisCluster pod (6379)":           reaches(resources.RedisPort, redisPod),
		"an HTTPS object store (443)":         reaches(443, labels.Set{}),
		"nothing on 80 (plain HTTP anywhere)": !reaches(80, labels.Set{}),
	} {
		if !ok {
			t.Errorf("the operator's NetworkPolicy: %s is wrong", what)
		}
	}
	policy.Namespace = env.Namespace(t)
	if err := env.Client.Create(t.Context(), policy, client.DryRunAll); err != nil {
		t.Errorf("the API server refuses the operator's NetworkPolicy: %v", err)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// splitYAML splits a multi-document YAML file.
func splitYAML(data []byte) [][]byte {
	return bytes.Split(data, []byte("\n---"))
}
