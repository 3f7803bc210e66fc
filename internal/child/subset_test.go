package child

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func deployment(replicas int32, image string, env ...corev1.EnvVar) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Labels: map[string]string{"a": "b"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image, Env: env}}}},
		},
	}
}

func TestSubset(t *testing.T) {
	live := deployment(2, "nginx:1", corev1.EnvVar{Name: "A", Value: "1"})
	// Server defaults the live object; they must not count as drift.
	live.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	live.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	live.Labels["added-by-someone"] = "x"
	cases := map[string]struct {
		desired *appsv1.Deployment
		want    bool
	}{
		"same fields, server defaults ignored": {deployment(2, "nginx:1", corev1.EnvVar{Name: "A", Value: "1"}), true},
		"replicas differ":                      {deployment(3, "nginx:1", corev1.EnvVar{Name: "A", Value: "1"}), false},
		"image differs":                        {deployment(2, "nginx:2", corev1.EnvVar{Name: "A", Value: "1"}), false},
		"env value differs":                    {deployment(2, "nginx:1", corev1.EnvVar{Name: "A", Value: "2"}), false},
		"env var list shortened":               {deployment(2, "nginx:1", corev1.EnvVar{Name: "A", Value: "1"}, corev1.EnvVar{Name: "B"}), false},
		// A field the desired state leaves out is the server's to default; a removal from the
		// desired state is caught by the hash annotation instead (see Ensure).
		"env list left out": {deployment(2, "nginx:1"), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Subset(tc.desired, live); got != tc.want {
				t.Errorf("Subset = %v, want %v", got, tc.want)
			}
		})
	}
	changedLabel := deployment(2, "nginx:1", corev1.EnvVar{Name: "A", Value: "1"})
	changedLabel.Labels["a"] = "c"
	if Subset(changedLabel, live) {
		t.Error("a changed label must count as drift")
	}
}

func TestMergeServiceKeepsAllocatedAddresses(t *testing.T) {
	live := &corev1.Service{Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.7", ClusterIPs: []string{"10.0.0.7"},
		Ports: []corev1.ServicePort{{Port: 80, NodePort: 31234}, {Port: 81, NodePort: 31235}},
	}}
	desired := &corev1.Service{Spec: corev1.ServiceSpec{
		Type:  corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Port: 80}, {Port: 81, NodePort: 30002}},
	}}
	MergeService(live, desired)
	if live.Spec.ClusterIP != "10.0.0.7" || live.Spec.Ports[0].NodePort != 31234 || live.Spec.Ports[1].NodePort != 30002 {
		t.Errorf("merged spec %+v", live.Spec)
	}
}
