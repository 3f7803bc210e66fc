package apps_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

func TestAppServiceInvalidSpecsAreRejectedNamingTheField(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cases := map[string]struct {
		change func(*appsv1api.AppService)
		want   []string // every fragment must be in the API server's message
	}{
		"no image": {
			change: func(a *appsv1api.AppService) { a.Spec.Image = "" },
			want:   []string{"spec.image"},
		},
		"negative size": {
			change: func(a *appsv1api.AppService) { a.Spec.Size = ptr.To[int32](-1) },
			want:   []string{"spec.size", "greater than or equal to 0"},
		},
		"size above 1000": {
			change: func(a *appsv1api.AppService) { a.Spec.Size = ptr.To[int32](1001) },
			want:   []string{"spec.size", "less than or equal to 1000"},
		},
		"nodePort outside the node port range": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].NodePort = 80 },
			want:   []string{"spec.ports", "nodePort must be between 30000 and 32767"},
		},
		"nodePort with a ClusterIP Service": {
			change: func(a *appsv1api.AppService) { a.Spec.ServiceType = corev1.ServiceTypeClusterIP },
			want:   []string{"spec.ports", "nodePort needs spec.serviceType NodePort"},
		},
		"duplicate port": {
			change: func(a *appsv1api.AppService) {
				a.Spec.Ports = []appsv1api.AppServicePort{
					{Name: "a", Port: 80, TargetPort: intstr.FromInt32(80)},
					{Name: "b", Port: 80, TargetPort: intstr.FromInt32(8080)},
				}
			},
			want: []string{"spec.ports[1]", "Duplicate value"},
		},
		"several unnamed ports": {
			change: func(a *appsv1api.AppService) {
				a.Spec.Ports = []appsv1api.AppServicePort{{Port: 80}, {Port: 81}}
			},
			want: []string{"spec.ports", "name is required when there is more than one port"},
		},
		"port 0": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].Port = 0 },
			want:   []string{"spec.ports", "port must be between 1 and 65535"},
		},
		"port 70000": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].Port = 70000 },
			want:   []string{"spec.ports", "port must be between 1 and 65535"},
		},
		"two ports with the same name": {
			change: func(a *appsv1api.AppService) {
				a.Spec.Ports = []appsv1api.AppServicePort{{Name: "web", Port: 80}, {Name: "web", Port: 81}}
			},
			want: []string{"spec.ports", "name must be unique"},
		},
		"a port name that is not a DNS label": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].Name = "Web_Port" },
			want:   []string{"spec.ports[0].name", "lowercase DNS label"},
		},
		"a port name over 63 characters": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].Name = strings.Repeat("n", 64) },
			want:   []string{"spec.ports[0].name", "63"},
		},
		"an unknown protocol": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].Protocol = "HTTP" },
			want:   []string{"spec.ports[0].protocol", "Unsupported value"},
		},
		"targetPort 70000": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].TargetPort = intstr.FromInt32(70000) },
			want:   []string{"spec.ports[0].targetPort", "between 1 and 65535"},
		},
		"targetPort -1": {
			change: func(a *appsv1api.AppService) { a.Spec.Ports[0].TargetPort = intstr.FromInt32(-1) },
			want:   []string{"spec.ports[0].targetPort", "between 1 and 65535"},
		},
		"an image with a space": {
			change: func(a *appsv1api.AppService) { a.Spec.Image = "nginx 1.7.9" },
			want:   []string{"spec.image", "must be an image reference"},
		},
		"an image with a control character": {
			change: func(a *appsv1api.AppService) { a.Spec.Image = "nginx:1.7.9\x1b" },
			want:   []string{"spec.image", "must be an image reference"},
		},
		"an environment variable without a name": {
			change: func(a *appsv1api.AppService) { a.Spec.Envs = []corev1.EnvVar{{Name: "", Value: "x"}} },
			want:   []string{"spec.envs", "name must be set"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			app := seedAppService(ns, 30020)
			app.Name = "invalid"
			tc.change(app)
			err := env.Client.Create(t.Context(), app)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not contain %q", err.Error(), w)
				}
			}
		})
	}
}

// TestAppServiceTargetPortZeroIsRejected: targetPort: 0 as a user writes it in YAML (the Go
// type omits a zero targetPort, so it is sent as unstructured) is refused naming the field.
func TestAppServiceTargetPortZeroIsRejected(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	app := seedAppService(ns, 30022)
	app.Name = "target-port-zero"
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(app)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(appsv1api.GroupVersion.WithKind("AppService"))
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	ports[0].(map[string]any)["targetPort"] = int64(0) //nolint:forcetypeassert // a port is an object
	if err := unstructured.SetNestedSlice(u.Object, ports, "spec", "ports"); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Create(t.Context(), u, client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ports[0].targetPort") || !strings.Contains(err.Error(), "between 1 and 65535") {
		t.Fatalf("targetPort: 0: %v; want Invalid naming spec.ports[0].targetPort", err)
	}
}
