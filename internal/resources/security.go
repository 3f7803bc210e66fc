package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

// PodSecurityContext is the user's pod security context with an unset seccompProfile set to
// the runtime's default.
func PodSecurityContext(s appsv1api.Security) *corev1.PodSecurityContext {
	out := &corev1.PodSecurityContext{}
	if s.PodSecurityContext != nil {
		out = s.PodSecurityContext.DeepCopy()
	}
	if out.SeccompProfile == nil {
		out.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	return out
}

// ContainerSecurityContext is the user's container security context with an unset
// allowPrivilegeEscalation set to false.
func ContainerSecurityContext(s appsv1api.Security) *corev1.SecurityContext {
	out := &corev1.SecurityContext{}
	if s.SecurityContext != nil {
		out = s.SecurityContext.DeepCopy()
	}
	if out.AllowPrivilegeEscalation == nil {
		out.AllowPrivilegeEscalation = ptr.To(false)
	}
	return out
}
