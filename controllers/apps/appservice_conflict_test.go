package apps

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestAppServiceConflictWritesNoStatus: a Deployment update refused with a conflict (the
// cache was behind the Deployment controller's own write) is retried without a word: no
// Degraded status, no event, the reconcile's error asking for the retry; the retry, once
// the update goes through, writes the status as usual.
func TestAppServiceConflictWritesNoStatus(t *testing.T) {
	scheme := testenv.Scheme()
	app := &appsv1api.AppService{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "app-uid", Generation: 2},
		Spec:       appsv1api.AppServiceSpec{Size: ptr.To[int32](1), Image: "nginx:1.28"},
		Status:     appsv1api.AppServiceStatus{ObservedGeneration: 1},
	}
	running := app.DeepCopy()
	running.Spec.Image = "nginx:1.27"
	d := resources.AppServiceDeployment(running)
	if err := controllerutil.SetControllerReference(app, d, scheme); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	d.Generation = 1

	conflicts, statusWrites := 1, 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app, d).WithStatusSubresource(app).
		WithInterceptorFuncs(interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if _, ok := obj.(*appsv1.Deployment); ok && conflicts > 0 {
					conflicts--
					return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, obj.GetName(),
						errors.New("the object has been modified; please apply your changes to the latest version and try again"))
				}
				return c.Update(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				statusWrites++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &AppServiceReconciler{Client: c, Scheme: scheme, Recorder: recorder}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(app)}

	_, err := r.Reconcile(t.Context(), req)
	if !apierrors.IsConflict(err) {
		t.Fatalf("reconcile on a conflict returned %v, want the conflict (a retry)", err)
	}
	if statusWrites != 0 || len(recorder.Events) != 0 {
		t.Errorf("a conflict made %d status writes and %d events, want none", statusWrites, len(recorder.Events))
	}

	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	got := &appsv1api.AppService{}
	if err := c.Get(t.Context(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if statusWrites != 1 || got.Status.ObservedGeneration != 2 {
		t.Errorf("the retry made %d status writes, observedGeneration %d; want 1 and 2", statusWrites, got.Status.ObservedGeneration)
	}
	if meta.IsStatusConditionTrue(got.Status.Conditions, appsv1api.ConditionDegraded) {
		t.Errorf("Degraded after a conflict and its retry: %v", meta.FindStatusCondition(got.Status.Conditions, appsv1api.ConditionDegraded))
	}
	live := &appsv1.Deployment{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(d), live); err != nil {
		t.Fatal(err)
	}
	if img := live.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.28" {
		t.Errorf("the Deployment runs %s after the retry, want nginx:1.28", img)
	}
}
