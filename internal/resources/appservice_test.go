package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
)

func app(spec appsv1api.AppServiceSpec) *appsv1api.AppService {
	return &appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: spec}
}

func TestAppServiceDeployment(t *testing.T) {
	cases := map[string]struct {
		spec         appsv1api.AppServiceSpec
		wantReplicas int32
		wantPorts    []corev1.ContainerPort
		wantLabel    map[string]string
	}{
		"seed sample": {
			spec:         appsv1api.AppServiceSpec{Size: ptr.To[int32](2), Image: "nginx:1.7.9", Ports: []appsv1api.AppServicePort{{Port: 80, TargetPort: intstr.FromInt32(80), NodePort: 30002}}},
			wantReplicas: 2,
			wantPorts:    []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
		},
		"size defaults to 1, targetPort defaults to port": {
			spec:         appsv1api.AppServiceSpec{Image: "nginx", Ports: []appsv1api.AppServicePort{{Port: 8080}}},
			wantReplicas: 1,
			wantPorts:    []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		},
		"named targetPort names the container port; duplicates collapse": {
			spec: appsv1api.AppServiceSpec{Image: "nginx", Ports: []appsv1api.AppServicePort{
				{Name: "a", Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "b", Port: 81, TargetPort: intstr.FromInt32(8080)},
				{Name: "c", Port: 9000, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolUDP},
			}},
			wantReplicas: 1,
			wantPorts: []corev1.ContainerPort{
				{ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9000, Protocol: corev1.ProtocolUDP},
			},
		},
		"pod labels cannot override the selector": {
			spec:         appsv1api.AppServiceSpec{Image: "nginx", PodLabels: map[string]string{objectlabels.LabelInstance: "other", "team": "web"}},
			wantReplicas: 1,
			wantLabel:    map[string]string{objectlabels.LabelInstance: "web", "team": "web"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := AppServiceDeployment(app(tc.spec))
			if *d.Spec.Replicas != tc.wantReplicas {
				t.Errorf("replicas %d, want %d", *d.Spec.Replicas, tc.wantReplicas)
			}
			c := d.Spec.Template.Spec.Containers[0]
			if c.Image != tc.spec.Image {
				t.Errorf("image %q, want %q", c.Image, tc.spec.Image)
			}
			if tc.wantPorts != nil && !equalPorts(c.Ports, tc.wantPorts) {
				t.Errorf("ports %+v, want %+v", c.Ports, tc.wantPorts)
			}
			for k, v := range tc.wantLabel {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("pod label %s=%q, want %q", k, d.Spec.Template.Labels[k], v)
				}
			}
			for k, v := range d.Spec.Selector.MatchLabels {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("the selector %s=%s does not match the pod template", k, v)
				}
			}
		})
	}
}

func equalPorts(a, b []corev1.ContainerPort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAppServiceService(t *testing.T) {
	cases := map[string]struct {
		spec       appsv1api.AppServiceSpec
		wantType   corev1.ServiceType
		wantTarget []intstr.IntOrString
	}{
		"nodePort makes it NodePort": {
			spec:       appsv1api.AppServiceSpec{Ports: []appsv1api.AppServicePort{{Port: 80, NodePort: 30002}}},
			wantType:   corev1.ServiceTypeNodePort,
			wantTarget: []intstr.IntOrString{intstr.FromInt32(80)},
		},
		"no nodePort is ClusterIP": {
			spec:       appsv1api.AppServiceSpec{Ports: []appsv1api.AppServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
			wantType:   corev1.ServiceTypeClusterIP,
			wantTarget: []intstr.IntOrString{intstr.FromInt32(8080)},
		},
		"serviceType overrides": {
			spec:       appsv1api.AppServiceSpec{ServiceType: corev1.ServiceTypeLoadBalancer, Ports: []appsv1api.AppServicePort{{Port: 443, TargetPort: intstr.FromString("https")}}},
			wantType:   corev1.ServiceTypeLoadBalancer,
			wantTarget: []intstr.IntOrString{intstr.FromString("https")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := AppServiceService(app(tc.spec))
			if s.Spec.Type != tc.wantType {
				t.Errorf("type %s, want %s", s.Spec.Type, tc.wantType)
			}
			for i, want := range tc.wantTarget {
				if s.Spec.Ports[i].TargetPort != want {
					t.Errorf("port %d targetPort %v, want %v", i, s.Spec.Ports[i].TargetPort, want)
				}
				if s.Spec.Ports[i].Protocol != corev1.ProtocolTCP {
					t.Errorf("port %d protocol %q, want TCP", i, s.Spec.Ports[i].Protocol)
				}
			}
			if s.Spec.Selector[objectlabels.LabelInstance] != "web" {
				t.Errorf("selector %v", s.Spec.Selector)
			}
		})
	}
}
