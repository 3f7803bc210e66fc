package resources

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
)

// namespaceNameLabel is the label the API server puts on every namespace with its name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// RedisRestoring reports whether rc restores a backup (spec.restore) that is not fully
// loaded yet.
func RedisRestoring(rc *redisv1alpha1.RedisCluster) bool {
	return rc.Spec.Restore != nil && (rc.Status.Restore == nil || rc.Status.Restore.CompletedAt == nil)
}

// RedisClientsHeldOff reports whether the NetworkPolicy keeps clients off port 6379: while a
// restore loads, so that no client reads a partial data set or writes a key the load then
// replaces. Only the cluster's own pods and the operator's pods may connect then, so an
// operator outside the cluster (no operatorNamespace) holds nobody off, or it would lock
// itself out where policies are enforced.
func RedisClientsHeldOff(rc *redisv1alpha1.RedisCluster, operatorNamespace string) bool {
	return RedisRestoring(rc) && operatorNamespace != ""
}

// RedisNetworkPolicyEnabled is spec.networkPolicy.enabled, true when unset.
func RedisNetworkPolicyEnabled(rc *redisv1alpha1.RedisCluster) bool {
	np := rc.Spec.NetworkPolicy
	return np == nil || np.Enabled == nil || *np.Enabled
}

// RedisNetworkPolicyName is the NetworkPolicy of a RedisCluster's pods.
func RedisNetworkPolicyName(rc *redisv1alpha1.RedisCluster) string { return rc.Name }

// OperatorPodLabels are the labels of the operator's own pods (config/manager, and so the
// CSV's Deployment): a RedisCluster's NetworkPolicy admits the operator by them.
func OperatorPodLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "middleware-operator", "control-plane": "controller-manager"}
}

// dnsPort is the port of the cluster's DNS service.
const dnsPort = 53

// RedisNetworkPolicy isolates a RedisCluster's pods for ingress and egress and then allows,
// rule by rule (NetworkPolicy rules add up):
//   - ingress to the client port 6379 from spec.networkPolicy.clients, or when none are
//     listed from every pod of the cluster's own namespace (RedisDefaultClients); none while
//     a restore loads (RedisClientsHeldOff);
//   - ingress to the client port and the cluster bus port 16379 from the cluster's own pods
//     (the bus, and replication, which uses the client port); nothing else reaches the bus;
//   - ingress to the client port from the operator's pods (OperatorPodLabels) in
//     operatorNamespace, where the operator runs its admin commands; other pods of that
//     namespace are not admitted (no rule when it is empty: an operator outside the
//     cluster, as with make run);
//   - with an exporter, ingress to its port 9121 from spec.networkPolicy.metricsNamespace
//     only (no rule, so no source, when that is empty);
//   - egress to the cluster's own pods on 6379 and 16379 (replication and the bus) and to
//     port 53 (DNS, UDP and TCP) anywhere: all a Redis node opens itself. Answers to the
//     connections admitted above need no rule.
func RedisNetworkPolicy(rc *redisv1alpha1.RedisCluster, operatorNamespace string) *networkingv1.NetworkPolicy {
	var spec redisv1alpha1.NetworkPolicySpec
	if rc.Spec.NetworkPolicy != nil {
		spec = *rc.Spec.NetworkPolicy
	}
	own := &metav1.LabelSelector{MatchLabels: objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name)}
	ownPods := []networkingv1.NetworkPolicyPeer{{PodSelector: own}}
	var rules []networkingv1.NetworkPolicyIngressRule
	if !RedisClientsHeldOff(rc, operatorNamespace) {
		clients := spec.Clients
		if len(clients) == 0 {
			clients = RedisDefaultClients(rc)
		}
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: redisClientPolicyPorts(rc), From: clients})
	}
	rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: redisPeerPolicyPorts(rc), From: ownPods})
	if operatorNamespace != "" {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: redisClientPolicyPorts(rc), From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: namespaceNamed(operatorNamespace)[0].NamespaceSelector,
			PodSelector:       &metav1.LabelSelector{MatchLabels: OperatorPodLabels()},
		}}})
	}
	if RedisPodSpec(rc).MonitorImage != "" && spec.MetricsNamespace != "" {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: tcpPorts(RedisExporterPort), From: namespaceNamed(spec.MetricsNamespace)})
	}
	udp, tcp, dns := corev1.ProtocolUDP, corev1.ProtocolTCP, intstr.FromInt32(dnsPort)
	egress := []networkingv1.NetworkPolicyEgressRule{
		{Ports: redisPeerPolicyPorts(rc), To: ownPods},
		{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}}},
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: redisMeta(rc, RedisNetworkPolicyName(rc)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *own,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     rules,
			Egress:      egress,
		},
	}
}

// RedisDefaultClients are the peers admitted to the client port when
// spec.networkPolicy.clients is empty: every pod of the cluster's own namespace, and nothing
// outside it. A user opens the port further by listing clients (a namespaceSelector for
// other namespaces, an ipBlock for addresses outside the cluster).
func RedisDefaultClients(rc *redisv1alpha1.RedisCluster) []networkingv1.NetworkPolicyPeer {
	return namespaceNamed(rc.Namespace)
}

// tcpPorts are NetworkPolicy ports for TCP port numbers.
func tcpPorts(ports ...int32) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		port := intstr.FromInt32(p)
		protocol := corev1.ProtocolTCP
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &port})
	}
	return out
}

// namespaceNamed is a peer of every pod of the namespace name.
func namespaceNamed(name string) []networkingv1.NetworkPolicyPeer {
	return []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: name}}}}
}
