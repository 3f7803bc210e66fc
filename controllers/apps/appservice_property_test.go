package apps_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// randomAppService draws a spec from values at and around every boundary the API knows of:
// sizes, images, port numbers and names, node ports, protocols, service types, env names,
// pod labels (including ones that try to override the operator's selector labels).
func randomAppService(r *rand.Rand, ns string, i int) *appsv1api.AppService {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	pickInt := func(xs ...int32) int32 { return xs[r.IntN(len(xs))] }
	app := &appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prop-%03d", i), Namespace: ns}}
	if r.IntN(4) > 0 {
		app.Spec.Size = ptr.To(pickInt(-1, 0, 1, 2, 3, 1000, 1001))
	}
	app.Spec.Image = pick("nginx:1.27", "nginx:1.27", "nginx:1.27", "", "nginx 1.27", "registry.example.com:5000/team/app@sha256:"+strings.Repeat("a", 64), strings.Repeat("x", 600))
	for range r.IntN(4) {
		p := appsv1api.AppServicePort{Port: pickInt(0, 1, 80, 80, 8080, 8080, 65535, 70000)}
		if r.IntN(3) > 0 {
			p.Name = pick("web", "web", "metrics", "", "UPPER", "a-b", strings.Repeat("n", 70))
		}
		if r.IntN(4) == 0 {
			p.NodePort = pickInt(80, 30000, 30000+int32(r.IntN(2767)), 32767, 32768)
		}
		if r.IntN(4) == 0 {
			p.Protocol = corev1.Protocol(pick("TCP", "UDP", "SCTP", "HTTP"))
		}
		if r.IntN(3) == 0 {
			p.TargetPort = intstr.FromInt32(pickInt(0, 80, 70000))
		} else if r.IntN(3) == 0 {
			p.TargetPort = intstr.FromString(pick("http", "", "BAD NAME"))
		}
		app.Spec.Ports = append(app.Spec.Ports, p)
	}
	if r.IntN(3) == 0 {
		app.Spec.ServiceType = corev1.ServiceType(pick("ClusterIP", "NodePort", "LoadBalancer", "ExternalName", "bogus"))
	}
	for range r.IntN(3) {
		app.Spec.Envs = append(app.Spec.Envs, corev1.EnvVar{Name: pick("A", "LOG_LEVEL", "A", "LOG_LEVEL", "", "has space", "x=y"), Value: "v"})
	}
	if r.IntN(3) > 0 { // the test namespace enforces "restricted": without this, pods are refused
		app.Spec.Security = testenv.RestrictedSecurity()
	}
	if r.IntN(4) == 0 {
		app.Spec.PodLabels = map[string]string{pick("app.kubernetes.io/name", "team", "bad key!"): pick("x", "", "bad value!")}
	}
	return app
}

// TestAppServiceRandomSpecsAreRejectedOrReconciled is the property of testenv.RandomSpecs
// for AppServices; an accepted AppService without ports also has no Service.
func TestAppServiceRandomSpecsAreRejectedOrReconciled(t *testing.T) {
	t.Parallel()
	testenv.RandomSpecs[*appsv1api.AppService]{
		Controller: "appservice", N: 60, Salt: 7, Pods: 10,
		Draw: randomAppService,
		New:  func() *appsv1api.AppService { return &appsv1api.AppService{} },
		Status: func(a *appsv1api.AppService) (int64, []metav1.Condition) {
			return a.Status.ObservedGeneration, a.Status.Conditions
		},
		Check: func(t *testing.T, app *appsv1api.AppService) {
			if len(app.Spec.Ports) > 0 {
				return
			}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(app), &corev1.Service{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s has no ports, but a Service (or an error reading it): %v", app.Name, err)
			}
		},
	}.Run(t, env)
}

// TestAppServiceInvalidStringsAreRejected: the image, the env names and the port names refuse random invalid values naming the field.
func TestAppServiceInvalidStringsAreRejected(t *testing.T) {
	t.Parallel()
	app := func(o client.Object) *appsv1api.AppService { return o.(*appsv1api.AppService) } //nolint:forcetypeassert // only AppServices
	type field = testenv.StringField[client.Object]
	env.RejectInvalidStrings(t, 12, 31, func(ns string) client.Object {
		a := seedAppService(ns, 30021)
		a.Name = "strings"
		return a
	}, []field{
		{Path: "spec.image", Kind: "image", Valid: "registry.example.com:5000/team/app:1.27", Set: func(o client.Object, v string) { app(o).Spec.Image = v }},
		{Path: "spec.envs", Kind: "env", Valid: "LOG_LEVEL", Set: func(o client.Object, v string) { app(o).Spec.Envs = []corev1.EnvVar{{Name: v, Value: "debug"}} }},
		{Path: "spec.ports[0].name", Kind: "name", Valid: "web", Set: func(o client.Object, v string) { app(o).Spec.Ports[0].Name = v }},
	})
}
