package apps_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

func seedAppService(ns string, nodePort int32) *appsv1api.AppService {
	return &appsv1api.AppService{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-app", Namespace: ns},
		Spec: appsv1api.AppServiceSpec{
			Size:     ptr.To[int32](2),
			Image:    "nginx:1.7.9",
			Ports:    []appsv1api.AppServicePort{{Port: 80, TargetPort: intstr.FromInt32(80), NodePort: nodePort}},
			Security: testenv.RestrictedSecurity(), // the test namespaces enforce "restricted"
		},
	}
}

func getApp(ctx context.Context, key client.ObjectKey) (*appsv1api.AppService, error) {
	app := &appsv1api.AppService{}
	return app, env.Client.Get(ctx, key, app)
}

func condition(app *appsv1api.AppService, typ string) string {
	c := meta.FindStatusCondition(app.Status.Conditions, typ)
	if c == nil {
		return "missing"
	}
	return string(c.Status) + "/" + c.Reason
}

func waitAvailable(t *testing.T, key client.ObjectKey, ready int32) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		app, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		ok := app.Status.ReadyReplicas == ready && condition(app, "Available") == "True/MinimumReplicasAvailable" &&
			app.Status.ObservedGeneration == app.Generation && condition(app, "Progressing") == "False/RolloutComplete"
		return ok, fmt.Sprintf("status %+v", app.Status)
	})
}

func TestAppServiceSeedSampleBecomesAvailable(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	app := seedAppService(ns, 30002)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	waitAvailable(t, key, 2)

	d := &appsv1.Deployment{}
	if err := env.Client.Get(t.Context(), key, d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.7.9" {
		t.Errorf("Deployment replicas %d image %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
	if !metav1.IsControlledBy(d, app) {
		t.Error("the Deployment is not controlled by the AppService")
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(t.Context(), key, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30002 || svc.Spec.Ports[0].TargetPort.IntValue() != 80 {
		t.Errorf("Service type %s ports %+v, want NodePort 30002 -> 80", svc.Spec.Type, svc.Spec.Ports)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "nginx-app"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("got %d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
			t.Errorf("pod %s is %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
	if got := condition(mustGet(t, key), "Degraded"); got != "False/Reconciled" {
		t.Errorf("Degraded = %s", got)
	}
}

func mustGet(t *testing.T, key client.ObjectKey) *appsv1api.AppService {
	t.Helper()
	app, err := getApp(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// updateApp re-reads the AppService and applies change, retrying on conflicts.
func updateApp(t *testing.T, key client.ObjectKey, change func(*appsv1api.AppService)) {
	t.Helper()
	testenv.Update(t, env.Client, key, &appsv1api.AppService{}, change)
}

func waitDeployment(t *testing.T, key client.ObjectKey, what string, ok func(*appsv1.Deployment) bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, d); err != nil {
			return false, err.Error()
		}
		return ok(d), fmt.Sprintf("Deployment never had %s: spec %+v", what, d.Spec.Template.Spec.Containers[0])
	})
}

func TestAppServiceEnforcesTheWholeSpec(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	app := seedAppService(ns, 30010)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	waitAvailable(t, key, 2)

	updateApp(t, key, func(a *appsv1api.AppService) { a.Spec.Image = "nginx:1.27" })
	waitDeployment(t, key, "the new image", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" && d.Status.UpdatedReplicas == 2
	})

	updateApp(t, key, func(a *appsv1api.AppService) { a.Spec.Size = ptr.To[int32](4) })
	waitAvailable(t, key, 4)

	updateApp(t, key, func(a *appsv1api.AppService) {
		a.Spec.Envs = []corev1.EnvVar{{Name: "MODE", Value: "production"}}
	})
	waitDeployment(t, key, "the env var", func(d *appsv1.Deployment) bool {
		return reflect.DeepEqual(d.Spec.Template.Spec.Containers[0].Env, []corev1.EnvVar{{Name: "MODE", Value: "production"}})
	})
	updateApp(t, key, func(a *appsv1api.AppService) { a.Spec.Envs = nil })
	waitDeployment(t, key, "the env var removed", func(d *appsv1.Deployment) bool {
		return len(d.Spec.Template.Spec.Containers[0].Env) == 0
	})

	// A manual scale of the Deployment is reverted. Patches, like kubectl's, carry no
	// resourceVersion, so the Deployment controller's own writes cannot make them conflict.
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	if err := env.Client.Patch(t.Context(), d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 1 {
		t.Fatalf("the manual scale did not apply: replicas %d", *d.Spec.Replicas)
	}
	waitDeployment(t, key, "its replicas restored to 4", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 4 })

	// A manual edit of the Service is reverted too.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	if err := env.Client.Patch(t.Context(), svc, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"ports":[{"port":80,"targetPort":80,"protocol":"TCP","nodePort":30099}]}}`))); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].NodePort != 30099 {
		t.Fatalf("the manual edit did not apply: nodePort %d", svc.Spec.Ports[0].NodePort)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		s := &corev1.Service{}
		if err := env.Client.Get(ctx, key, s); err != nil {
			return false, err.Error()
		}
		return s.Spec.Ports[0].NodePort == 30010, fmt.Sprintf("nodePort %d", s.Spec.Ports[0].NodePort)
	})

	// Without ports there is nothing to expose: the Service goes, the Deployment stays.
	updateApp(t, key, func(a *appsv1api.AppService) { a.Spec.Ports = nil })
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		err := env.Client.Get(ctx, key, &corev1.Service{})
		return apierrors.IsNotFound(err), fmt.Sprintf("the Service: %v", err)
	})
	waitAvailable(t, key, 4)
}

func TestAppServiceNeverTouchesAnUnownedDeployment(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-app", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if err := env.Client.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	// Let the Deployment controller settle so only our operator could still change it.
	time.Sleep(time.Second)
	before := &appsv1.Deployment{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), before); err != nil {
		t.Fatal(err)
	}
	app := seedAppService(ns, 30011)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		a, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(a.Status.Conditions, "Degraded")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "ChildNotControlled" &&
			strings.Contains(c.Message, `Deployment "nginx-app" already exists`), fmt.Sprintf("conditions %+v", a.Status.Conditions)
	})
	time.Sleep(2 * time.Second) // give any (wrong) write time to happen
	after := &appsv1.Deployment{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || !reflect.DeepEqual(after.Spec, before.Spec) ||
		!reflect.DeepEqual(after.OwnerReferences, before.OwnerReferences) {
		t.Errorf("the unowned Deployment was modified: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
	warnings := &corev1.EventList{}
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		if err := env.Client.List(ctx, warnings, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range warnings.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "ChildNotControlled" && e.InvolvedObject.Name == "nginx-app" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no ChildNotControlled Warning among %d events", len(warnings.Items))
	})
}

func TestAppServiceDeletionCascades(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	app := seedAppService(ns, 30012)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	waitAvailable(t, key, 2)
	if err := env.Client.Delete(t.Context(), app, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		dErr := env.Client.Get(ctx, key, &appsv1.Deployment{})
		sErr := env.Client.Get(ctx, key, &corev1.Service{})
		pods := &corev1.PodList{}
		_ = env.Client.List(ctx, pods, client.InNamespace(ns))
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() {
				running++
			}
		}
		return apierrors.IsNotFound(dErr) && apierrors.IsNotFound(sErr) && running == 0,
			fmt.Sprintf("deployment: %v, service: %v, pods not terminating: %d", dErr, sErr, running)
	})
}

// TestAppServiceInARestrictedNamespace: pods the namespace's Pod Security level refuses make
// the AppService Degraded (ReplicaFailure, with the admission's message naming what to
// change); once spec.podSecurityContext and spec.securityContext ask for a non-root user
// without capabilities, the pods are admitted. Unset, the operator still adds the seccomp
// profile and allowPrivilegeEscalation false.
func TestAppServiceInARestrictedNamespace(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	app := seedAppService(ns, 30012)
	app.Spec.Security = appsv1api.Security{} // nginx as it comes: root, every default capability
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, "Degraded")
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == "ReplicaFailure" &&
			strings.Contains(d.Message, "PodSecurity") && strings.Contains(d.Message, "runAsNonRoot"), fmt.Sprintf("Degraded %+v", d)
	})
	d := &appsv1.Deployment{}
	if err := env.Client.Get(t.Context(), key, d); err != nil {
		t.Fatal(err)
	}
	pod, c := d.Spec.Template.Spec.SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext
	if pod == nil || pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		c == nil || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Errorf("pod security %+v, container security %+v: want seccomp RuntimeDefault and allowPrivilegeEscalation false", pod, c)
	}

	testenv.Update(t, env.Client, key, &appsv1api.AppService{}, func(a *appsv1api.AppService) {
		a.Spec.Security = testenv.RestrictedSecurity()
	})
	waitAvailable(t, key, 2)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur, err := getApp(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		return condition(cur, "Degraded") == "False/Reconciled", "Degraded " + condition(cur, "Degraded") + " after the pods were admitted"
	})
}
