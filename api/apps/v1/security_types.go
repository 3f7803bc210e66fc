package v1

import corev1 "k8s.io/api/core/v1"

// Security holds the security contexts of a workload's pods and of its container. Left
// unset, the operator applies what every image tolerates: the container runtime's default
// seccomp profile and no privilege escalation. To pass the Pod Security "restricted" level,
// also set runAsNonRoot and drop ALL capabilities, with an image that runs as a non-root
// user (for example nginxinc/nginx-unprivileged).
type Security struct {
	// PodSecurityContext is the pods' security context; an unset seccompProfile is
	// RuntimeDefault.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Security Context"
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// SecurityContext is the container's security context; an unset
	// allowPrivilegeEscalation is false.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Security Context"
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}
