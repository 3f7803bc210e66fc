package resources

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
)

// AppServiceContainer is the name of the application container.
const AppServiceContainer = "app"

// AppServiceSize is the desired number of pods (1 when unset).
func AppServiceSize(app *appsv1api.AppService) int32 {
	return ptr.Deref(app.Spec.Size, 1)
}

// AppServiceDeployment is the Deployment that runs an AppService's pods.
func AppServiceDeployment(app *appsv1api.AppService) *appsv1.Deployment {
	selector := objectlabels.SelectorLabels(objectlabels.AppServiceKind, app.Name)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace, Labels: objectlabels.ObjectLabels(objectlabels.AppServiceKind, app.Name)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(AppServiceSize(app)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      merge(app.Spec.PodLabels, objectlabels.ObjectLabels(objectlabels.AppServiceKind, app.Name)),
					Annotations: app.Spec.PodAnnotations,
				},
				Spec: corev1.PodSpec{
					SecurityContext: PodSecurityContext(app.Spec.Security),
					Containers: []corev1.Container{{
						Name:            AppServiceContainer,
						Image:           app.Spec.Image,
						ImagePullPolicy: app.Spec.ImagePullPolicy,
						Env:             app.Spec.Envs,
						Resources:       app.Spec.Resources,
						Ports:           containerPorts(app.Spec.Ports),
						LivenessProbe:   app.Spec.LivenessProbe,
						ReadinessProbe:  app.Spec.ReadinessProbe,
						SecurityContext: ContainerSecurityContext(app.Spec.Security),
					}},
				},
			},
		},
	}
}

// AppServiceService is the Service that exposes an AppService's pods.
func AppServiceService(app *appsv1api.AppService) *corev1.Service {
	ports := make([]corev1.ServicePort, len(app.Spec.Ports))
	for i, p := range app.Spec.Ports {
		ports[i] = p.ServicePort()
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace, Labels: objectlabels.ObjectLabels(objectlabels.AppServiceKind, app.Name)},
		Spec: corev1.ServiceSpec{
			Type:     AppServiceServiceType(app),
			Selector: objectlabels.SelectorLabels(objectlabels.AppServiceKind, app.Name),
			Ports:    ports,
		},
	}
}

// AppServiceServiceType is spec.serviceType, else NodePort when any port names a nodePort,
// else ClusterIP.
func AppServiceServiceType(app *appsv1api.AppService) corev1.ServiceType {
	if app.Spec.ServiceType != "" {
		return app.Spec.ServiceType
	}
	for _, p := range app.Spec.Ports {
		if p.NodePort != 0 {
			return corev1.ServiceTypeNodePort
		}
	}
	return corev1.ServiceTypeClusterIP
}

// containerPorts are the ports the container listens on: each Service port's targetPort
// (its port when targetPort is unset). A named targetPort names the container port.
func containerPorts(ports []appsv1api.AppServicePort) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	seen := map[int32]bool{}
	for _, p := range ports {
		cp := corev1.ContainerPort{ContainerPort: p.Port, Protocol: p.Protocol}
		if cp.Protocol == "" {
			cp.Protocol = corev1.ProtocolTCP
		}
		switch {
		case p.TargetPort.Type == intstr.String && p.TargetPort.StrVal != "":
			cp.Name = p.TargetPort.StrVal
		case p.TargetPort.IntValue() != 0:
			cp.ContainerPort = int32(p.TargetPort.IntValue()) //nolint:gosec // validated port numbers
		}
		if seen[cp.ContainerPort] {
			continue
		}
		seen[cp.ContainerPort] = true
		out = append(out, cp)
	}
	return out
}
