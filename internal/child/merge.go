package child

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// MergeDeployment replaces the whole spec.
func MergeDeployment(live, desired *appsv1.Deployment) { live.Spec = desired.Spec }

// MergeService replaces the spec but keeps the addresses the server allocated: the cluster
// IPs, their families, and any node port the desired spec leaves to the server.
func MergeService(live, desired *corev1.Service) {
	allocated := map[int32]int32{}
	for _, p := range live.Spec.Ports {
		allocated[p.Port] = p.NodePort
	}
	spec := desired.Spec.DeepCopy()
	if spec.ClusterIP == "" {
		spec.ClusterIP, spec.ClusterIPs = live.Spec.ClusterIP, live.Spec.ClusterIPs
	}
	if spec.IPFamilies == nil {
		spec.IPFamilies, spec.IPFamilyPolicy = live.Spec.IPFamilies, live.Spec.IPFamilyPolicy
	}
	if spec.Type != corev1.ServiceTypeClusterIP {
		for i := range spec.Ports {
			if spec.Ports[i].NodePort == 0 {
				spec.Ports[i].NodePort = allocated[spec.Ports[i].Port]
			}
		}
		if spec.HealthCheckNodePort == 0 {
			spec.HealthCheckNodePort = live.Spec.HealthCheckNodePort
		}
	}
	live.Spec = *spec
}

// MergeStatefulSet replaces the spec but keeps the fields the API server does not let
// change: the selector, the volumeClaimTemplates, the serviceName and the
// podManagementPolicy. A desired change of those needs a new StatefulSet.
func MergeStatefulSet(live, desired *appsv1.StatefulSet) {
	spec := desired.Spec.DeepCopy()
	spec.Selector = live.Spec.Selector
	spec.VolumeClaimTemplates = live.Spec.VolumeClaimTemplates
	spec.ServiceName = live.Spec.ServiceName
	spec.PodManagementPolicy = live.Spec.PodManagementPolicy
	live.Spec = *spec
}

// MergeSecret replaces the data but keeps the type, which is immutable.
func MergeSecret(live, desired *corev1.Secret) {
	live.Data = desired.Data
	live.StringData = nil
}

// MergeConfigMap replaces the data.
func MergeConfigMap(live, desired *corev1.ConfigMap) {
	live.Data, live.BinaryData = desired.Data, desired.BinaryData
}

// MergePodDisruptionBudget replaces the spec.
func MergePodDisruptionBudget(live, desired *policyv1.PodDisruptionBudget) { live.Spec = desired.Spec }

// MergeNetworkPolicy replaces the spec.
func MergeNetworkPolicy(live, desired *networkingv1.NetworkPolicy) { live.Spec = desired.Spec }
