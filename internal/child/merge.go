package child

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
