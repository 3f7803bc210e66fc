package apps_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

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
		p := corev1.ServicePort{Port: pickInt(0, 1, 80, 80, 8080, 8080, 65535, 70000)}
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
	if r.IntN(4) == 0 {
		app.Spec.PodLabels = map[string]string{pick("app.kubernetes.io/name", "team", "bad key!"): pick("x", "", "bad value!")}
	}
	return app
}

// TestAppServiceRandomSpecsAreRejectedOrReconciled is the property: every spec, valid or
// not, is either rejected at admission naming a spec field, or reconciled to a status for
// its generation with a Degraded condition saying whether (and why) a child was refused; no
// reconcile panics.
func TestAppServiceRandomSpecsAreRejectedOrReconciled(t *testing.T) {
	t.Parallel()
	panicsBefore := reconcilePanics(t, "appservice")
	keys, rejected := admitRandom(t, 60, 7, nil, func(r *rand.Rand, ns string, i int) client.Object { return randomAppService(r, ns, i) })
	accepted, degraded := len(keys), 0
	for _, key := range keys {
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			app := &appsv1api.AppService{}
			if err := env.Client.Get(ctx, key, app); err != nil {
				return false, err.Error()
			}
			d := meta.FindStatusCondition(app.Status.Conditions, appsv1api.ConditionDegraded)
			return app.Status.ObservedGeneration == app.Generation && d != nil && d.ObservedGeneration == app.Generation,
				fmt.Sprintf("%s: observedGeneration %d of %d, Degraded %+v (spec %+v)", key.Name, app.Status.ObservedGeneration, app.Generation, d, app.Spec)
		})
		app := &appsv1api.AppService{}
		if err := env.Client.Get(t.Context(), key, app); err != nil {
			t.Fatal(err)
		}
		if len(app.Spec.Ports) == 0 {
			if err := env.Client.Get(t.Context(), key, &corev1.Service{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s has no ports, but a Service (or an error reading it): %v", key.Name, err)
			}
		}
		if meta.IsStatusConditionTrue(app.Status.Conditions, appsv1api.ConditionDegraded) {
			degraded++
			t.Logf("%s accepted but Degraded: %s", key.Name, meta.FindStatusCondition(app.Status.Conditions, appsv1api.ConditionDegraded).Message)
		}
	}
	if panics := reconcilePanics(t, "appservice") - panicsBefore; panics > 0 {
		t.Errorf("%.0f reconciles panicked", panics)
	}
	t.Logf("60 random specs: %d rejected at admission, %d accepted (%d of them Degraded with a reason)", rejected, accepted, degraded)
	if rejected == 0 || accepted == 0 {
		t.Errorf("the generator drew only one kind of spec (%d rejected, %d accepted): the property was not exercised", rejected, accepted)
	}
}

// reconcilePanics is controller-runtime's count of panicked reconciles of a controller.
func reconcilePanics(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_panics_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// admitRandom creates n objects drawn by gen (a random source seeded from the clock, with
// salt) in a new namespace, after setup (if any) prepared it, and returns the keys of those
// the API server accepted and how many it rejected; a rejection must name a spec or metadata
// field. The namespace is capped at 10 pods: valid sizes go up to 1000, and a few such
// objects would fill the shared cluster's nodes and starve every other test of this
// package (a CI run saw pods of parallel tests stay Pending for minutes). The properties
// are about admission and status, not pods.
func admitRandom(t *testing.T, n int, salt uint64, setup func(ns string), gen func(r *rand.Rand, ns string, i int) client.Object) (keys []client.ObjectKey, rejected int) {
	t.Helper()
	ns := env.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
	}
	if err := env.Client.Create(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(ns)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), salt)) //nolint:gosec // test data, not secrets
	for i := range n {
		obj := gen(r, ns, i)
		err := env.Client.Create(t.Context(), obj)
		switch {
		case apierrors.IsInvalid(err):
			rejected++
			if !strings.Contains(err.Error(), "spec.") && !strings.Contains(err.Error(), "metadata.") {
				t.Errorf("%s rejected without naming a field: %v", obj.GetName(), err)
			}
		case err != nil:
			t.Fatalf("%s: %v", obj.GetName(), err)
		default:
			keys = append(keys, client.ObjectKeyFromObject(obj))
		}
	}
	return keys, rejected
}
