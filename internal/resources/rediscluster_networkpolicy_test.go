package resources_test

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// The rules below are written "ports <- sources", one per ingress rule, in order.
const (
	ownNamespace = "TCP/6379 <- namespace kubernetes.io/metadata.name=ns"
	ownPods      = "TCP/6379,TCP/16379 <- pods app.kubernetes.io/instance=cache,app.kubernetes.io/name=rediscluster"
	operatorNS   = "TCP/6379 <- pods app.kubernetes.io/name=middleware-operator,control-plane=controller-manager in namespace kubernetes.io/metadata.name=ops"
)

func TestRedisNetworkPolicy(t *testing.T) {
	cases := map[string]struct {
		policy     *redisv1alpha1.NetworkPolicySpec
		exporter   bool
		operatorNS string
		restore    *redisv1alpha1.RestoreStatus // with spec.restore set, when not nil
		want       []string
	}{
		"restoring: no client until every shard is loaded": {
			operatorNS: "ops", restore: &redisv1alpha1.RestoreStatus{},
			want: []string{ownPods, operatorNS},
		},
		"restore loaded: clients again": {
			operatorNS: "ops", restore: &redisv1alpha1.RestoreStatus{CompletedAt: &metav1.Time{}},
			want: []string{ownNamespace, ownPods, operatorNS},
		},
		"restoring with the operator outside the cluster: clients stay, or it would lock itself out": {
			restore: &redisv1alpha1.RestoreStatus{},
			want:    []string{ownNamespace, ownPods},
		},
		"default: clients from the cluster's own namespace only, bus from own pods, admin from the operator's pods": {
			operatorNS: "ops",
			want:       []string{ownNamespace, ownPods, operatorNS},
		},
		"operator outside the cluster: no operator rule": {
			want: []string{ownNamespace, ownPods},
		},
		"exporter without a metrics namespace: its port stays closed": {
			exporter: true, operatorNS: "ops",
			want: []string{ownNamespace, ownPods, operatorNS},
		},
		"exporter with a metrics namespace": {
			exporter: true, operatorNS: "ops", policy: &redisv1alpha1.NetworkPolicySpec{MetricsNamespace: "monitoring"},
			want: []string{ownNamespace, ownPods, operatorNS, "TCP/9121 <- namespace kubernetes.io/metadata.name=monitoring"},
		},
		"a metrics namespace without an exporter opens nothing": {
			operatorNS: "ops", policy: &redisv1alpha1.NetworkPolicySpec{MetricsNamespace: "monitoring"},
			want: []string{ownNamespace, ownPods, operatorNS},
		},
		"clients limited to the app's pods": {
			operatorNS: "ops", policy: &redisv1alpha1.NetworkPolicySpec{Clients: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
			}},
			want: []string{"TCP/6379 <- pods app=shop", ownPods, operatorNS},
		},
		"opened to every namespace by a user, as docs/rediscluster.md shows": {
			operatorNS: "ops", policy: &redisv1alpha1.NetworkPolicySpec{Clients: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{}},
			}},
			want: []string{"TCP/6379 <- namespace ", ownPods, operatorNS},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rc := redisCluster(nil)
			rc.Spec.NetworkPolicy = tc.policy
			if tc.restore != nil {
				rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: "nightly"}
				rc.Status.Restore = tc.restore
			}
			if tc.exporter {
				rc.Spec.Pod[0].MonitorImage = "oliver006/redis_exporter:v1.62.0"
			}
			np := resources.RedisNetworkPolicy(rc, tc.operatorNS)
			if np.Name != "cache" || np.Namespace != "ns" || np.Labels[objectlabels.LabelManagedBy] != objectlabels.ManagedBy {
				t.Errorf("name %s/%s labels %v", np.Namespace, np.Name, np.Labels)
			}
			if want := objectlabels.SelectorLabels(objectlabels.RedisClusterKind, "cache"); !reflect.DeepEqual(np.Spec.PodSelector.MatchLabels, want) {
				t.Errorf("selects %v, want the cluster's pods %v", np.Spec.PodSelector.MatchLabels, want)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
				t.Errorf("policy types %v: want ingress and egress", np.Spec.PolicyTypes)
			}
			wantEgress := []string{
				"TCP/6379,TCP/16379 -> pods app.kubernetes.io/instance=cache,app.kubernetes.io/name=rediscluster",
				"UDP/53,TCP/53 -> any destination",
			}
			if got := describeEgress(np.Spec.Egress); !slices.Equal(got, wantEgress) {
				t.Errorf("egress\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantEgress, "\n  "))
			}
			if got := describeRules(np.Spec.Ingress); !slices.Equal(got, tc.want) {
				t.Errorf("rules\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestRedisNetworkPolicyEnabled(t *testing.T) {
	for name, tc := range map[string]struct {
		policy *redisv1alpha1.NetworkPolicySpec
		want   bool
	}{
		"unset":         {nil, true},
		"enabled unset": {&redisv1alpha1.NetworkPolicySpec{MetricsNamespace: "monitoring"}, true},
		"enabled":       {&redisv1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}, true},
		"disabled":      {&redisv1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)}, false},
	} {
		rc := redisCluster(nil)
		rc.Spec.NetworkPolicy = tc.policy
		if got := resources.RedisNetworkPolicyEnabled(rc); got != tc.want {
			t.Errorf("%s: enabled %v, want %v", name, got, tc.want)
		}
	}
}

// describeRules writes each ingress rule as "ports <- sources".
func describeRules(rules []networkingv1.NetworkPolicyIngressRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, describeRule(r.Ports, r.From, " <- ", "any source"))
	}
	return out
}

// describeEgress writes each egress rule as "ports -> destinations".
func describeEgress(rules []networkingv1.NetworkPolicyEgressRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, describeRule(r.Ports, r.To, " -> ", "any destination"))
	}
	return out
}

func describeRule(ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer, arrow, anyPeer string) string {
	var portList, from []string
	for _, p := range ports {
		portList = append(portList, fmt.Sprintf("%s/%s", ptr.Deref(p.Protocol, "TCP"), p.Port))
	}
	for _, f := range peers {
		switch {
		case f.NamespaceSelector != nil && f.PodSelector == nil:
			from = append(from, "namespace "+labelString(f.NamespaceSelector))
		case f.PodSelector != nil && f.NamespaceSelector == nil:
			from = append(from, "pods "+labelString(f.PodSelector))
		case f.PodSelector != nil && f.NamespaceSelector != nil:
			from = append(from, "pods "+labelString(f.PodSelector)+" in namespace "+labelString(f.NamespaceSelector))
		default:
			from = append(from, fmt.Sprintf("peer %+v", f))
		}
	}
	if len(from) == 0 {
		from = []string{anyPeer}
	}
	return strings.Join(portList, ",") + arrow + strings.Join(from, "; ")
}

func labelString(s *metav1.LabelSelector) string {
	var kv []string
	for k, v := range s.MatchLabels {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
